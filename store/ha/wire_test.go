package ha

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

// These tests speak the HA protocol by hand, from the byte layouts of
// RocketMQ 4.x (HAService.HAClient, HAConnection), so the format cannot drift
// along with this package's own encoder.

// rawConn is one end of an HA connection driven byte by byte.
type rawConn struct {
	t testing.TB
	c net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitFor)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	require.NoError(r.t, r.c.SetWriteDeadline(time.Now().Add(waitFor)))
	_, err := r.c.Write(b)
	require.NoError(r.t, err)
}

// report sends a RocketMQ slave's report: a bare big-endian int64.
func (r *rawConn) report(offset int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(offset))
	r.write(b[:])
}

func (r *rawConn) readFull(n int) []byte {
	r.t.Helper()
	require.NoError(r.t, r.c.SetReadDeadline(time.Now().Add(waitFor)))
	b := make([]byte, n)
	_, err := io.ReadFull(r.c, b)
	require.NoError(r.t, err)
	return b
}

// frame reads one master frame: phyOffset int64, bodySize int32, body.
func (r *rawConn) frame() (int64, []byte) {
	r.t.Helper()
	h := r.readFull(12)
	off := int64(binary.BigEndian.Uint64(h))
	size := int(int32(binary.BigEndian.Uint32(h[8:])))
	require.GreaterOrEqual(r.t, size, 0)
	require.LessOrEqual(r.t, size, 1<<20)
	return off, r.readFull(size)
}

// sendFrame sends a master frame.
func (r *rawConn) sendFrame(off int64, body []byte) {
	b := binary.BigEndian.AppendUint64(nil, uint64(off))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	r.write(append(b, body...))
}

// sendFrameRefused sends a master frame that the peer may refuse from its
// header alone: it may close the connection before the body is written, so
// a write failing with a reset or a broken pipe is what is expected then.
func (r *rawConn) sendFrameRefused(off int64, body []byte) {
	r.t.Helper()
	b := binary.BigEndian.AppendUint64(nil, uint64(off))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	require.NoError(r.t, r.c.SetWriteDeadline(time.Now().Add(waitFor)))
	if _, err := r.c.Write(append(b, body...)); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		require.NoError(r.t, err)
	}
}

// readReport reads one slave report.
func (r *rawConn) readReport() int64 {
	return int64(binary.BigEndian.Uint64(r.readFull(8)))
}

// waitReport reads reports until one equals want.
func (r *rawConn) waitReport(want int64) {
	r.t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		if r.readReport() == want {
			return
		}
	}
	r.t.Fatalf("no report of %d", want)
}

// expectClosed reads until the peer closes (EOF or reset), ignoring data.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	require.NoError(r.t, r.c.SetReadDeadline(time.Now().Add(waitFor)))
	_, err := io.Copy(io.Discard, r.c)
	var ne net.Error
	require.False(r.t, errors.As(err, &ne) && ne.Timeout(), "the peer did not close: %v", err)
}

// masterBytes returns the master's commitlog bytes [off, off+n).
func masterBytes(t testing.TB, st *store.Store, off int64, n int) []byte {
	t.Helper()
	res, ok := st.CommitLog().GetMessage(off, int32(n))
	require.True(t, ok, "master bytes at %d+%d", off, n)
	defer res.Release()
	return append([]byte(nil), res.Bytes...)
}

func TestWireMasterPushesFramesFromItsNewestFile(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 900, 2000) // ~2.6 MiB: three files
	m := startMaster(t, st, haConfig(), nil)
	fs := int64(st.CommitLog().FileSize())
	require.Greater(t, end, 2*fs)

	s := dialRaw(t, m.Addr().String())
	s.report(0) // a new slave
	next := end - end%fs
	for next < end {
		off, body := s.frame()
		if len(body) == 0 {
			continue // a heartbeat
		}
		require.Equal(t, next, off, "frames follow each other from the start of the newest file")
		assert.LessOrEqual(t, len(body), 32<<10, "haTransferBatchSize")
		assert.Equal(t, off/fs, (off+int64(len(body))-1)/fs, "a frame never crosses a file")
		assert.Equal(t, masterBytes(t, st, off, len(body)), body)
		next += int64(len(body))
	}
	// Idle: heartbeat frames at the master's end.
	for range 3 {
		off, body := s.frame()
		assert.Equal(t, end, off)
		assert.Empty(t, body)
	}
	// New data is pushed as it is written.
	end2 := putN(t, st, 900, 1, 500)
	for {
		off, body := s.frame()
		if len(body) > 0 {
			assert.Equal(t, end, off)
			assert.Equal(t, masterBytes(t, st, end, int(end2-end)), body)
			break
		}
	}
	s.report(end2)
	require.Eventually(t, func() bool {
		sl := m.Status().Slaves
		return len(sl) == 1 && sl[0].AckOffset == end2 && sl[0].LagBytes == 0
	}, waitFor, time.Millisecond)
	assert.Equal(t, end2, m.Status().Push2SlaveMaxOffset)
}

func TestWireMasterPushesFromAnOldFileAcrossBoundaries(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 900, 2000)
	m := startMaster(t, st, haConfig(), nil)
	fs := int64(st.CommitLog().FileSize())
	// Report the end of the first record: the push starts there and runs
	// through every file, each frame within one.
	first := int64(binary.BigEndian.Uint32(masterBytes(t, st, 0, 4)))
	s := dialRaw(t, m.Addr().String())
	s.report(first)
	next := first
	for next < end {
		off, body := s.frame()
		if len(body) == 0 {
			continue
		}
		require.Equal(t, next, off)
		require.LessOrEqual(t, len(body), 32<<10)
		require.Equal(t, off/fs, (off+int64(len(body))-1)/fs, "frame at %d of %d bytes crosses a file", off, len(body))
		next += int64(len(body))
	}
	assert.Equal(t, end, next)
}

func TestWireMasterClosesOnReportAboveItsMax(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 10, 1000)
	log, hook := testLog()
	m := startMaster(t, st, haConfig(), log)

	t.Run("first report", func(t *testing.T) {
		// A slave that holds more than the master: told the master's max in
		// a heartbeat frame (a RocketMQ slave sees an offset mismatch and
		// closes), then closed.
		s := dialRaw(t, m.Addr().String())
		s.report(end + 100)
		off, body := s.frame()
		assert.Equal(t, end, off)
		assert.Empty(t, body)
		s.expectClosed()
		assert.True(t, logged(hook, "beyond this master's commitlog"))
	})
	t.Run("later report", func(t *testing.T) {
		s := dialRaw(t, m.Addr().String())
		s.report(end)
		off, body := s.frame() // a heartbeat at end
		assert.Equal(t, end, off)
		assert.Empty(t, body)
		s.report(end + 1)
		s.expectClosed()
	})
	// The connection is forgotten just after it is closed.
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 0 }, waitFor, time.Millisecond)
}

func TestWireMasterTakesTheLastWholeReport(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 10, 1000)
	m := startMaster(t, st, haConfig(), nil)
	s := dialRaw(t, m.Addr().String())
	s.report(end)
	// Two reports and half of a third in one write: the second is the ack.
	b := binary.BigEndian.AppendUint64(nil, 5)
	b = binary.BigEndian.AppendUint64(b, uint64(end-7))
	b = append(b, 0, 0, 0)
	s.write(b)
	require.Eventually(t, func() bool {
		sl := m.Status().Slaves
		return len(sl) == 1 && sl[0].AckOffset == end-7
	}, waitFor, time.Millisecond)
	s.write([]byte{0, 0, 0, 0, 9}) // completes the third: 9
	require.Eventually(t, func() bool {
		sl := m.Status().Slaves
		return len(sl) == 1 && sl[0].AckOffset == 9
	}, waitFor, time.Millisecond)
}

func TestWireMasterDropsPeersThatAreNotSlaves(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 10, 1000)
	m := startMaster(t, st, haConfig(), nil)

	neg := dialRaw(t, m.Addr().String())
	neg.write([]byte{0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9}) // a negative "offset"
	neg.expectClosed()

	http := dialRaw(t, m.Addr().String())
	http.write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // "GET / HT" is far beyond the end
	http.expectClosed()

	// The master still serves a slave.
	s := dialRaw(t, m.Addr().String())
	s.report(0)
	off, body := s.frame()
	assert.Equal(t, int64(0), off)
	assert.Equal(t, masterBytes(t, st, 0, int(end)), body)
}

// A master drops a peer that says nothing, or stops in the middle of a
// hello, or stops reporting, after haHousekeepingInterval.
func TestWireMasterDropsSilentPeers(t *testing.T) {
	st := openStore(t, t.TempDir())
	putN(t, st, 0, 10, 1000)
	cfg := haConfig()
	cfg.HousekeepingInterval = 300 * time.Millisecond
	m := startMaster(t, st, cfg, nil)

	silent := dialRaw(t, m.Addr().String())
	half := dialRaw(t, m.Addr().String())
	half.write([]byte{0xFF, 'H', 'A', '1', 0, 0, 0, 0, 1}) // a hello cut short
	quiet := dialRaw(t, m.Addr().String())
	quiet.report(0) // then never again
	silent.expectClosed()
	half.expectClosed()
	quiet.expectClosed()
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 0 }, waitFor, time.Millisecond)
}

func TestWireHelloAnswer(t *testing.T) {
	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 10, 1000)
	m := startMaster(t, st, haConfig(), nil)
	s := dialRaw(t, m.Addr().String())
	// magic "\xffHA1", flags 0, no window, offset 0.
	s.write([]byte{0xFF, 'H', 'A', '1', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	ans := s.readFull(12 + 24)
	want := []byte{0xFF, 'H', 'A', 'K', 0, 0, 0, 0, 0, 0, 0, 24, // the answer frame's header
		0, 0, 0, 0, 0, 0, 0, 0} // status ok, flags none
	want = binary.BigEndian.AppendUint64(want, uint64(end)) // master max
	want = binary.BigEndian.AppendUint64(want, 0)           // start
	assert.Equal(t, want, ans)
	off, body := s.frame()
	assert.Equal(t, int64(0), off)
	assert.Equal(t, masterBytes(t, st, 0, int(end)), body)
	assert.Equal(t, answerOffset, int64(binary.BigEndian.Uint64(want)))
}

// fakeMaster is a RocketMQ 4.x master made of bytes: it accepts slaves and
// never answers their hello.
type fakeMaster struct {
	ln    net.Listener
	conns chan net.Conn
}

func newFakeMaster(t testing.TB) *fakeMaster {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeMaster{ln: ln, conns: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case f.conns <- c:
			default:
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for {
			select {
			case c := <-f.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return f
}

// accept returns the next slave connection and its hello (24 bytes, or 32
// with a window end).
func (f *fakeMaster) accept(t testing.TB) (*rawConn, []byte) {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { c.Close() })
		r := &rawConn{t: t, c: c}
		first := r.readFull(8)
		return r, append(first, r.readFull(helloRest(binary.BigEndian.Uint32(first[4:])))...)
	case <-time.After(waitFor):
		t.Fatal("no slave connected")
		return nil, nil
	}
}

// A slave of this package follows a RocketMQ master: its hello ends with
// its offset as the last 8-byte group (what a RocketMQ master reads), it
// takes frames that cut records anywhere and heartbeats, keeps whole
// records only and reports its offset after applying.
func TestWireSlaveFollowsARocketMQMaster(t *testing.T) {
	src := openStore(t, t.TempDir())
	end := putN(t, src, 0, 900, 2000)
	fs := int64(src.CommitLog().FileSize())
	start := end - end%fs

	f := newFakeMaster(t)
	dst := openStore(t, t.TempDir())
	sl := startSlave(t, dst, haConfig(), nil, f.ln.Addr().String())
	c, hello := f.accept(t)
	assert.Equal(t, []byte{0xFF, 'H', 'A', '1'}, hello[:4], "hello magic")
	assert.Equal(t, make([]byte, 12), hello[4:16], "no compression, no window")
	assert.Equal(t, int64(0), int64(binary.BigEndian.Uint64(hello[16:])), "the offset is the last group")

	// Frames of odd sizes cut the records; a heartbeat in the middle.
	data := masterBytes(t, src, start, int(end-start))
	c.sendFrame(start, nil)
	for pos, i := 0, 0; pos < len(data); i++ {
		n := min(len(data)-pos, 777+i*13)
		c.sendFrame(start+int64(pos), data[pos:pos+n])
		pos += n
	}
	c.waitReport(end)
	assertSameCommitLog(t, src, dst)
	assertSameQueues(t, src, dst)
	st := sl.Status()
	assert.Equal(t, SlaveFollowing, st.State)
	assert.Equal(t, end, st.MaxOffset)
	assert.Equal(t, end, st.MasterMaxOffset)

	// The slave also reports on its own every haSendHeartbeatInterval.
	assert.Equal(t, end, c.readReport())
}

// A frame may end in the middle of the 8-byte header of a record or of a
// blank marker; the slave completes it from the next frame.
func TestWireSlaveJoinsUnitsCutAnywhere(t *testing.T) {
	src := openStore(t, t.TempDir())
	end := putN(t, src, 0, 600, 2000) // crosses a file: a blank marker
	f := newFakeMaster(t)
	dst := openStore(t, t.TempDir())
	startSlave(t, dst, haConfig(), nil, f.ln.Addr().String())
	c, _ := f.accept(t)
	fs := int64(src.CommitLog().FileSize())
	for file := int64(0); file < end; file += fs {
		data := masterBytes(t, src, file, int(min(fs, end-file)))
		// Cut at every record's 3rd and 8th byte.
		var cuts []int
		for pos := 0; pos < recordsEnd(data); pos += int(binary.BigEndian.Uint32(data[pos:])) {
			cuts = append(cuts, pos+3, pos+8)
			if int32(binary.BigEndian.Uint32(data[pos+4:])) == -875286124 {
				break
			}
		}
		cuts = append(cuts, len(data))
		prev := 0
		for _, cut := range cuts {
			if cut > prev && cut <= len(data) {
				c.sendFrame(file+int64(prev), data[prev:cut])
				prev = cut
			}
		}
	}
	c.waitReport(end)
	assertSameCommitLog(t, src, dst)
}

// A hello carries windowEnd only with flags bit 1, before the offset, which
// stays the last 8-byte group; a master closes a hello whose window cannot
// be, without an answer.
func TestWireHelloWindowEnd(t *testing.T) {
	h := hello{flags: helloCompress, windowLen: 100, windowCRC: 7, windowEnd: 500, offset: 1 << 20}
	b := h.encode(nil)
	require.Len(t, b, helloEndSize)
	assert.Equal(t, []byte{0xFF, 'H', 'A', '1', 0, 0, 0, 3, 0, 0, 0, 100, 0, 0, 0, 7}, b[:16])
	assert.Equal(t, int64(500), int64(binary.BigEndian.Uint64(b[16:])))
	assert.Equal(t, int64(1<<20), int64(binary.BigEndian.Uint64(b[24:])))
	h.flags |= helloWindowEnd
	assert.Equal(t, h, decodeHello(b[:8], b[8:]))

	plain := hello{windowLen: 100, windowCRC: 7, windowEnd: 1 << 20, offset: 1 << 20}
	b = plain.encode(nil)
	require.Len(t, b, helloSize, "no window end when the window ends at the offset")
	assert.Zero(t, binary.BigEndian.Uint32(b[4:])&helloWindowEnd)
	assert.Equal(t, plain, decodeHello(b[:8], b[8:]))

	st := openStore(t, t.TempDir())
	end := putN(t, st, 0, 900, 2000)
	fs := int64(st.CommitLog().FileSize())
	require.Greater(t, end, 2*fs)
	m := startMaster(t, st, haConfig(), nil)
	for name, bad := range map[string]hello{
		"end beyond the offset":          {windowLen: 10, windowEnd: 200, offset: 100},
		"end before an offset in a file": {windowLen: 10, windowEnd: fs + 50, offset: fs + 100},
		"end two files back":             {windowLen: 10, windowEnd: fs - 100, offset: 2 * fs},
		"window across a file":           {windowLen: 200, windowEnd: fs + 100, offset: fs + 100},
		"window longer than windowMax":   {windowLen: windowMax + 1, windowEnd: fs + windowMax + 1, offset: fs + windowMax + 1},
		"window reaching before the log": {windowLen: 10, windowEnd: 5, offset: 5},
	} {
		t.Run(name, func(t *testing.T) {
			s := dialRaw(t, m.Addr().String())
			s.write(bad.encode(nil))
			require.NoError(t, s.c.SetReadDeadline(time.Now().Add(waitFor)))
			got, err := io.ReadAll(s.c)
			if err != nil {
				require.ErrorIs(t, err, syscall.ECONNRESET)
			}
			assert.Empty(t, got, "no answer")
		})
	}
}
