package ha

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

// faultEnv is a slave following a fake master, and a real store whose
// commitlog the fake master serves.
type faultEnv struct {
	src *store.Store
	dst *store.Store
	sl  *Slave
	f   *fakeMaster
	fs  int64
}

func newFaultEnv(t *testing.T) *faultEnv {
	src := openStore(t, t.TempDir())
	putN(t, src, 0, 600, 2000) // two files
	f := newFakeMaster(t)
	dst := openStore(t, t.TempDir())
	sl := startSlave(t, dst, haConfig(), nil, f.ln.Addr().String())
	return &faultEnv{src: src, dst: dst, sl: sl, f: f, fs: int64(src.CommitLog().FileSize())}
}

// session accepts the slave's next connection and checks its hello offset.
func (e *faultEnv) session(t *testing.T, wantOffset int64) *rawConn {
	t.Helper()
	c, hello := e.f.accept(t)
	require.Equal(t, wantOffset, int64(binary.BigEndian.Uint64(hello[len(hello)-8:])), "the slave resumes from what it holds")
	return c
}

// refused checks the slave closed the connection and says why.
func (e *faultEnv) refused(t *testing.T, c *rawConn, why string) {
	t.Helper()
	c.expectClosed()
	require.Eventually(t, func() bool { return strings.Contains(e.sl.Status().LastError, why) }, waitFor, time.Millisecond,
		"last error %q, want %q", e.sl.Status().LastError, why)
}

func (e *faultEnv) data(t *testing.T, off int64, n int) []byte {
	return masterBytes(t, e.src, off, n)
}

func firstRecordLen(b []byte) int { return int(binary.BigEndian.Uint32(b)) }

func TestFaultFramesThatLie(t *testing.T) {
	t.Run("first offset not at a file", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		c.sendFrame(100, e.data(t, 0, 500))
		e.refused(t, c, "expects 0")
		assert.Equal(t, int64(0), e.dst.CommitLog().MaxOffset())
		e.session(t, 0) // it retries
	})
	t.Run("offset beyond the slave's end", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		d := e.data(t, 0, 20000)
		n := firstRecordLen(d)
		c.sendFrame(0, d[:n])
		c.waitReport(int64(n))
		c.sendFrame(int64(n)+50, d[n+50:n+5000])
		e.refused(t, c, "expects")
		assert.Equal(t, int64(n), e.dst.CommitLog().MaxOffset())
		e.session(t, int64(n))
	})
	t.Run("offset below the slave's end", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		d := e.data(t, 0, 20000)
		n := firstRecordLen(d)
		c.sendFrame(0, d[:n])
		c.waitReport(int64(n))
		c.sendFrame(0, d[:n])
		e.refused(t, c, "the master is behind it")
		assert.True(t, e.sl.Status().Diverged)
		assert.Equal(t, int64(n), e.dst.CommitLog().MaxOffset())
	})
	t.Run("frame across a file", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		c.sendFrameRefused(0, append(e.data(t, 0, int(e.fs)), make([]byte, 100)...))
		e.refused(t, c, "crosses a commitlog file")
		assert.Equal(t, int64(0), e.dst.CommitLog().MaxOffset())
	})
	t.Run("negative size", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		h := binary.BigEndian.AppendUint64(nil, 0)
		c.write(binary.BigEndian.AppendUint32(h, 0xFFFFFFF0))
		e.refused(t, c, "crosses a commitlog file")
	})
	t.Run("garbage body", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		junk := make([]byte, 5000)
		r := rand.New(rand.NewPCG(7, 8))
		for i := range junk {
			junk[i] = byte(r.Uint32())
		}
		c.sendFrame(0, junk)
		e.refused(t, c, "not a valid commitlog record")
		assert.Equal(t, int64(0), e.dst.CommitLog().MaxOffset())
	})
	t.Run("record claiming too much", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		d := e.data(t, 0, 20000)
		n := firstRecordLen(d)
		bad := append([]byte(nil), d[n:n+3000]...)
		binary.BigEndian.PutUint32(bad, 100<<20)
		c.sendFrame(0, append(append([]byte(nil), d[:n]...), bad...))
		e.refused(t, c, "claims 104857600 bytes")
		assert.Equal(t, int64(n), e.dst.CommitLog().MaxOffset(), "the whole record before it is kept")
	})
	t.Run("record claiming too much, header cut", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		d := e.data(t, 0, 20000)
		n := firstRecordLen(d)
		bad := append([]byte(nil), d[n:n+8]...)
		binary.BigEndian.PutUint32(bad, 100<<20)
		c.sendFrame(0, append(append([]byte(nil), d[:n]...), bad[:3]...))
		c.waitReport(int64(n))
		c.sendFrame(int64(n)+3, bad[3:])
		e.refused(t, c, "claims 104857600 bytes")
	})
	t.Run("physical offset lies", func(t *testing.T) {
		e := newFaultEnv(t)
		c := e.session(t, 0)
		d := append([]byte(nil), e.data(t, 0, 20000)...)
		n := firstRecordLen(d)
		binary.BigEndian.PutUint64(d[n+28:], 12345) // PHYSICALOFFSET of the second record
		c.sendFrame(0, d)
		e.refused(t, c, "says it is at 12345")
		assert.Equal(t, int64(n), e.dst.CommitLog().MaxOffset())
	})
}

// A connection cut in the middle of a frame leaves the slave with whole
// records only; it reconnects from there and completes the log.
func TestFaultConnectionCutMidFrame(t *testing.T) {
	e := newFaultEnv(t)
	c := e.session(t, 0)
	end := e.src.CommitLog().MaxOffset()
	d := e.data(t, 0, 30000)
	h := binary.BigEndian.AppendUint64(nil, 0)
	h = binary.BigEndian.AppendUint32(h, uint32(len(d)))
	c.write(append(h, d[:17777]...)) // the header says 30000
	whole := int64(0)
	for whole+int64(firstRecordLen(d[whole:])) <= 17777 {
		whole += int64(firstRecordLen(d[whole:]))
	}
	c.waitReport(whole)
	c.c.Close()
	require.Eventually(t, func() bool { return e.sl.Status().State != SlaveFollowing }, waitFor, time.Millisecond)
	assert.Equal(t, whole, e.dst.CommitLog().MaxOffset(), "only whole records")

	c = e.session(t, whole)
	for off := whole; off < end; {
		n := int(min(e.fs-off%e.fs, end-off, 32<<10))
		c.sendFrame(off, e.data(t, off, n))
		off += int64(n)
	}
	c.waitReport(end)
	assertSameCommitLog(t, e.src, e.dst)
	assertSameQueues(t, e.src, e.dst)
}

// A master cut in the middle of the slave's report, or of its hello,
// closes without harm.
func TestFaultMasterConnectionCutMidReport(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 10, 1000)
	m := startMaster(t, st, haConfig(), nil)
	a := dialRaw(t, m.Addr().String())
	a.write([]byte{0, 0, 0})
	a.c.Close()
	b := dialRaw(t, m.Addr().String())
	b.report(0)
	b.frame()
	b.write([]byte{0, 0, 0, 0, 1})
	b.c.Close()
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 0 }, waitFor, time.Millisecond)
	s := dialRaw(t, m.Addr().String())
	s.report(end)
	off, _ := s.frame()
	assert.Equal(t, end, off)
}

// A slave configured with another commitlog file size than its master
// stops at the master's first blank marker with an error that names the
// setting, keeping the records before it.
func TestFaultFileSizeMismatch(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, haConfig(), nil)
	cfg := storeConfig(t.TempDir())
	cfg.MappedFileSizeCommitLog = 2 << 20
	sst, err := store.Open(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sst.Shutdown(context.Background()) })
	sl := startSlave(t, sst, haConfig(), nil, m.Addr().String())
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 1 }, waitFor, time.Millisecond)
	putN(t, mst, 0, 600, 2000) // beyond the master's first file
	require.Eventually(t, func() bool { return strings.Contains(sl.Status().LastError, "mappedFileSizeCommitLog") },
		waitFor, time.Millisecond)
	fs := int64(mst.CommitLog().FileSize())
	assert.Less(t, sst.CommitLog().MaxOffset(), fs)
	checkWholeRecords(t, sst)
}

// A slave whose every session fails to apply what it gets (data it rejects,
// a full disk) backs off: the wait doubles up to ReconnectMax instead of
// starting over after each handshake, so a persistent failure is no
// reconnect storm. A session that appends starts the wait over.
func TestSlaveFailingEveryApplyBacksOff(t *testing.T) {
	src := openStore(t, t.TempDir())
	putN(t, src, 0, 10, 1000)
	rec := masterBytes(t, src, 0, firstRecordLen(masterBytes(t, src, 0, 4)))
	garbage := bytes.Repeat([]byte{0x5A}, 200)

	f := newFakeMaster(t)
	dst := openStore(t, t.TempDir())
	cfg := haConfig()
	cfg.ReconnectMin, cfg.ReconnectMax = 5*time.Millisecond, 80*time.Millisecond
	log, hook := testLog()
	sl := startSlave(t, dst, cfg, log, f.ln.Addr().String())

	// The waits the slave chose, in order (its log says each).
	waits := func(n int) []time.Duration {
		t.Helper()
		var out []time.Duration
		require.Eventually(t, func() bool {
			out = out[:0]
			for _, e := range hook.AllEntries() {
				if e.Message == "HA session ended" {
					out = append(out, e.Data["retryIn"].(time.Duration))
				}
			}
			return len(out) >= n
		}, waitFor, time.Millisecond)
		return out
	}
	// session answers the slave's hello as this package's master does, then
	// sends body at offset; the slave must close.
	session := func(offset int64, body []byte) {
		t.Helper()
		c, h := f.accept(t)
		require.Equal(t, offset, int64(binary.BigEndian.Uint64(h[len(h)-8:])))
		c.write((&answer{masterMax: offset + int64(len(body)), startOffset: offset}).encode(nil))
		c.write(frameBytes(offset, body))
		c.expectClosed()
	}
	ms := time.Millisecond
	for i := range 6 {
		session(0, garbage)
		if i == 0 {
			// A stale change signal (an address set between the loop's
			// drain and its read of the address, as at start) neither cuts
			// the wait short nor resets it.
			select {
			case sl.changed <- struct{}{}:
			default:
			}
		}
	}
	assert.Equal(t, []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms}, waits(6))
	assert.Zero(t, dst.CommitLog().MaxOffset())

	session(0, append(append([]byte(nil), rec...), garbage...)) // appends a record, then fails
	assert.Equal(t, 5*ms, waits(7)[6], "a session that appended starts the wait over")
	session(int64(len(rec)), garbage)
	assert.Equal(t, 10*ms, waits(8)[7])
	assert.Equal(t, int64(len(rec)), dst.CommitLog().MaxOffset())
}
