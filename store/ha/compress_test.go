package ha

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func compressConfig() Config {
	cfg := haConfig()
	cfg.Compress = true
	return cfg
}

func TestCompressedReplication(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, compressConfig(), nil)
	sst := openStore(t, t.TempDir())
	sl := startSlave(t, sst, compressConfig(), nil, m.Addr().String())
	end := putN(t, mst, 0, 1000, 2000)
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
	assert.True(t, sl.Status().Compressed)
	require.Len(t, m.Status().Slaves, 1)
	assert.True(t, m.Status().Slaves[0].Compressed)
}

// The compressed framing, by hand: the hello's flag 1, the answer's flag 1,
// then frames of phyOffset, uncompressed size, compressed size and a snappy
// block.
func TestWireCompressedFrames(t *testing.T) {
	mst := openStore(t, t.TempDir())
	end := putN(t, mst, 0, 100, 2000)
	m := startMaster(t, mst, compressConfig(), nil)
	s := dialRaw(t, m.Addr().String())
	s.write([]byte{0xFF, 'H', 'A', '1', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	ans := s.readFull(12 + 24)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 1}, ans[12:20], "status ok, compression granted")
	var got []byte
	for int64(len(got)) < end {
		h := s.readFull(16)
		off := int64(binary.BigEndian.Uint64(h))
		raw := int(binary.BigEndian.Uint32(h[8:]))
		comp := int(binary.BigEndian.Uint32(h[12:]))
		require.Equal(t, int64(len(got)), off)
		require.LessOrEqual(t, raw, 32<<10)
		body, err := snappy.Decode(nil, s.readFull(comp))
		require.NoError(t, err)
		require.Len(t, body, raw)
		got = append(got, body...)
	}
	assert.Equal(t, masterBytes(t, mst, 0, int(end)), got)
	// A heartbeat has the 16-byte header too.
	h := s.readFull(16)
	assert.Equal(t, uint64(end), binary.BigEndian.Uint64(h))
	assert.Equal(t, make([]byte, 8), h[8:])
}

func TestCompressionMismatch(t *testing.T) {
	t.Run("slave asks, master off", func(t *testing.T) {
		mst := openStore(t, t.TempDir())
		log, hook := testLog()
		m := startMaster(t, mst, haConfig(), log)
		sst := openStore(t, t.TempDir())
		sl := startSlave(t, sst, compressConfig(), nil, m.Addr().String())
		putN(t, mst, 0, 10, 1000)
		require.Eventually(t, func() bool {
			s := sl.Status()
			return s.State == SlaveRefused && strings.Contains(s.LastError, "haTransferCompress")
		}, waitFor, time.Millisecond)
		assert.True(t, logged(hook, "haTransferCompress is off here"))
		assert.Equal(t, int64(0), sst.CommitLog().MaxOffset())
	})
	t.Run("slave asks, RocketMQ master", func(t *testing.T) {
		src := openStore(t, t.TempDir())
		end := putN(t, src, 0, 10, 1000)
		f := newFakeMaster(t)
		dst := openStore(t, t.TempDir())
		sl := startSlave(t, dst, compressConfig(), nil, f.ln.Addr().String())
		c, hello := f.accept(t)
		assert.Equal(t, []byte{0, 0, 0, 1}, hello[4:8], "the hello asks for compression")
		c.sendFrame(0, masterBytes(t, src, 0, int(end))) // plain, as RocketMQ sends
		c.expectClosed()
		require.Eventually(t, func() bool { return strings.Contains(sl.Status().LastError, "haTransferCompress") }, waitFor, time.Millisecond)
		assert.Equal(t, int64(0), dst.CommitLog().MaxOffset(), "nothing applied")
	})
	t.Run("master on, slave off: plain frames", func(t *testing.T) {
		mst := openStore(t, t.TempDir())
		log, hook := testLog()
		m := startMaster(t, mst, compressConfig(), log)
		sst := openStore(t, t.TempDir())
		sl := startSlave(t, sst, haConfig(), nil, m.Addr().String())
		end := putN(t, mst, 0, 100, 1000)
		waitOffset(t, sst, end)
		assertSameCommitLog(t, mst, sst)
		assert.False(t, sl.Status().Compressed)
		assert.False(t, logged(hook, "did not ask for compressed frames"), "our slave says hello")
		// A RocketMQ slave (no hello) gets plain frames, with a warning.
		s := dialRaw(t, m.Addr().String())
		s.report(0)
		off, body := s.frame()
		assert.Equal(t, int64(0), off)
		assert.Equal(t, masterBytes(t, mst, 0, len(body)), body)
		assert.True(t, logged(hook, "did not ask for compressed frames"))
	})
}
