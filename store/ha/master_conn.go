package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/store"
)

// maxFramesPerWrite bounds how many frames one writev carries while a slave
// catches up (16 x 32 KiB by default).
const maxFramesPerWrite = 16

// refuseLinger bounds how long a master keeps a refused connection open
// after its answer, so the slave reads the answer before the close.
const refuseLinger = 2 * time.Second

// masterConn is one slave connection (HAConnection). readLoop owns the
// handshake and the acks and starts writeLoop, which owns every write after
// the handshake. Either closes the connection when it ends; close makes the
// other end too.
type masterConn struct {
	m     *Master
	nc    net.Conn
	addr  string
	since time.Time
	log   logrus.FieldLogger

	// ack is the slave's last report, -1 before its handshake.
	ack atomic.Int64
	// replicaID is the slave's id from its hello (0: none sent); set
	// before the connection is counted.
	replicaID int64
	// pushedMax is the master's max offset when the last frame (data or
	// heartbeat) went out; an ack reaching it means the slave had caught
	// up as of that moment, pushedAt (unix ns), which caughtUp records
	// (RocketMQ 5's lastMasterMaxOffset, lastTransferTimeMs and
	// lastCaughtUpTimeMs).
	pushedMax atomic.Int64
	pushedAt  atomic.Int64
	caughtUp  atomic.Int64
	// compress is set by the handshake before ack is first stored.
	compress bool
	// hello says the slave sent a hello (this package's): it is told of
	// lost ranges. Set before writeLoop starts.
	hello bool
	// counted says the connection is in Master.slaves; guarded by the
	// master's mu.
	counted bool
	// sent counts the bytes written (status).
	sent atomic.Int64

	wake      chan struct{} // the notifier's wake-up, buffered 1
	done      chan struct{} // closed by close
	closeOnce sync.Once

	// Owned by writeLoop: reused for every write.
	hdrs [maxFramesPerWrite][compressedHeaderSize]byte
	bufs [2*maxFramesPerWrite + 1][]byte // the frames and a lost range's announcement
	lost [compressedHeaderSize + lostSize]byte
	wv   net.Buffers
	comp []byte
	// lostTo is the end of the last lost range announced: the push is in
	// it while below.
	lostTo int64
}

func newMasterConn(m *Master, nc net.Conn) *masterConn {
	addr := nc.RemoteAddr().String()
	c := &masterConn{
		m: m, nc: nc, addr: addr, since: time.Now(),
		log:  m.log.WithField("slave", addr),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	c.ack.Store(-1)
	return c
}

// close closes the connection once and forgets it.
func (c *masterConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
		c.m.removeConn(c)
	})
}

// readLoop reads the slave's first report (or hello), answers it, starts
// writeLoop, then reads acks until the connection fails.
func (c *masterConn) readLoop() {
	defer c.m.wg.Done()
	defer c.close()
	cr := newConnReader(c.nc, 4096, c.m.cfg.HousekeepingInterval)
	first, err := cr.need(reportSize)
	if err != nil {
		c.log.WithError(err).Warn("HA connection closed before its first report")
		return
	}
	var h hello
	isHello := binary.BigEndian.Uint32(first) == helloMagic
	if isHello {
		var f [8]byte
		copy(f[:], first)
		rest, err := cr.need(helloRest(binary.BigEndian.Uint32(f[4:])))
		if err != nil {
			c.log.WithError(err).Warn("HA connection closed in the middle of its hello")
			return
		}
		h = decodeHello(f[:], rest)
	} else {
		h.offset = int64(binary.BigEndian.Uint64(first))
		h.windowEnd = h.offset
	}
	c.hello = isHello
	start, ans := c.handshake(isHello, &h)
	if ans.status != answerOK {
		c.refuse(isHello, ans, cr)
		return
	}
	if isHello {
		c.wv = append(c.bufs[:0], ans.encode(nil))
		if err := c.write(); err != nil {
			c.log.WithError(err).Warn("HA answer to the slave's hello failed")
			return
		}
	}
	c.replicaID = h.replicaID
	c.pushedMax.Store(c.m.cl.MaxOffset())
	c.pushedAt.Store(time.Now().UnixNano())
	c.ack.Store(h.offset)
	if !c.m.countSlave(c) {
		return // closed meanwhile (shutdown)
	}
	c.m.acked(c, h.offset)
	c.m.wg.Add(1)
	go c.writeLoop(start)
	c.readAcks(cr)
}

// handshake decides where to start pushing, or why not.
func (c *masterConn) handshake(isHello bool, h *hello) (int64, answer) {
	cl := c.m.cl
	maxOff, minOff := cl.MaxOffset(), cl.MinOffset()
	ans := answer{masterMax: maxOff}
	fields := logrus.Fields{"slaveOffset": h.offset, "masterMaxOffset": maxOff, "masterMinOffset": minOff, "hello": isHello}
	switch {
	case h.offset < 0:
		// Not a report (RocketMQ would push from a negative offset and
		// never find data). Drop it.
		c.log.WithFields(fields).Error("HA peer sent no offset (not a slave?); closing")
		ans.status = answerNotASlave
		return 0, ans
	case h.offset > maxOff:
		// The slave holds data this master does not: this master lost an
		// unflushed tail, or the slave followed another master.
		c.log.WithFields(fields).Error("HA slave reports an offset beyond this master's commitlog: it holds data this master does not; refusing it (see the slave's log)")
		ans.status = answerSlaveAhead
		return 0, ans
	case isHello && !c.windowValid(h):
		c.log.WithFields(fields).WithFields(logrus.Fields{"window": h.windowLen, "windowEnd": h.windowEnd}).
			Error("HA slave's hello has a window that cannot be: closing")
		ans.status = answerNotASlave
		return 0, ans
	case isHello && h.windowLen > 0 && !c.windowMatches(h):
		c.log.WithFields(fields).WithFields(logrus.Fields{"window": h.windowLen, "windowEnd": h.windowEnd}).
			Error("HA slave's commitlog differs from this master's just before its offset: it holds data this master does not; refusing it")
		ans.status = answerContentDiffers
		return 0, ans
	case isHello && h.flags&helloCompress != 0 && !c.m.cfg.Compress:
		c.log.WithFields(fields).Error("HA slave asks for compressed frames but haTransferCompress is off here: set it alike on master and slave; refusing it")
		ans.status = answerNoCompression
		return 0, ans
	}
	start := h.offset
	if start == 0 {
		// A new slave starts at this master's newest file.
		fs := int64(cl.FileSize())
		start = maxOff - maxOff%fs
	}
	if start < minOff {
		c.log.WithFields(fields).Error("HA slave needs commitlog files this master has deleted: it cannot catch up; empty its store to start over")
		ans.status = answerBehindMin
		return 0, ans
	}
	c.compress = isHello && h.flags&helloCompress != 0
	if !isHello && c.m.cfg.Compress {
		c.log.Warn("HA slave did not ask for compressed frames (haTransferCompress off there, or a RocketMQ slave): sending them uncompressed")
	}
	ans.startOffset = start
	if c.compress {
		ans.flags = helloCompress
	}
	c.log.WithFields(fields).WithFields(logrus.Fields{"startOffset": start, "compress": c.compress}).Info("HA slave connected")
	return start, ans
}

// windowValid checks the hello's window: at most windowMax bytes within
// one file, ending at the slave's offset or, when that is a file boundary,
// in the file before it (at the blank marker that closes it).
func (c *masterConn) windowValid(h *hello) bool {
	fs := int64(c.m.cl.FileSize())
	n, end := int64(h.windowLen), h.windowEnd
	switch {
	case n > windowMax || end > h.offset || end-n < 0:
		return false
	case end < h.offset && (h.offset%fs != 0 || end <= h.offset-fs):
		return false
	}
	return n == 0 || (end-n)/fs == (end-1)/fs
}

// windowMatches compares the slave's fingerprint of the bytes before its
// window's end with this master's. Bytes the master no longer holds cannot
// be compared and count as a match, as do bytes in a lost range: damage on
// the master is not divergence, and a slave that copied them before they
// were damaged holds them intact.
func (c *masterConn) windowMatches(h *hello) bool {
	n, end := int64(h.windowLen), h.windowEnd
	if r, ok := c.m.cl.LostRangeAfter(end - n); ok && r.From < end {
		c.log.WithFields(logrus.Fields{"windowFrom": end - n, "windowEnd": end, "lostFrom": r.From, "lostTo": r.To}).
			Warn("HA slave's window overlaps a lost commitlog range here: not compared")
		return true
	}
	res, ok := c.m.cl.GetMessage(end-n, int32(n))
	if !ok {
		return true
	}
	defer res.Release()
	return crc32.Checksum(res.Bytes, crcTable) == h.windowCRC
}

// refuse tells the slave why it is refused, then closes. A slave of this
// package gets the answer frame. A RocketMQ slave that is ahead gets a
// heartbeat frame at this master's max offset, which it sees as an offset
// mismatch (HAClient.dispatchReadRequest), so it closes too; the master
// cannot tell it more without corrupting it.
func (c *masterConn) refuse(isHello bool, ans answer, cr *connReader) {
	var frame []byte
	switch {
	case ans.status == answerNotASlave:
	case isHello:
		frame = ans.encode(nil)
	case ans.status == answerSlaveAhead && ans.masterMax >= 0:
		var hb [headerSize]byte
		putHeader(hb[:], ans.masterMax, 0)
		frame = hb[:]
	}
	if frame == nil {
		return
	}
	c.wv = append(c.bufs[:0], frame)
	if err := c.write(); err != nil {
		return
	}
	// Half-close and wait for the slave to close: closing with its reports
	// unread would reset the connection and could drop the answer.
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(min(refuseLinger, c.m.cfg.HousekeepingInterval)))
	_, _ = io.Copy(io.Discard, c.nc)
}

// readAcks reads reports until the connection fails. As RocketMQ's
// ReadSocketService, it takes the last complete 8-byte group of what
// arrived as the slave's ack.
func (c *masterConn) readAcks(cr *connReader) {
	for {
		// Reports that came with the first one are buffered already.
		if cr.buffered() < reportSize {
			if err := cr.fill(); err != nil {
				select {
				case <-c.done:
				default:
					if errors.Is(err, io.EOF) {
						c.log.Info("HA slave closed the connection")
					} else {
						c.log.WithError(err).Warn("HA connection read failed; closing")
					}
				}
				return
			}
			continue
		}
		n := cr.buffered() / reportSize
		last := cr.buf[cr.r+(n-1)*reportSize:]
		ack := int64(binary.BigEndian.Uint64(last))
		cr.r += n * reportSize
		if maxOff := c.m.cl.MaxOffset(); ack < 0 || ack > maxOff {
			c.log.WithFields(logrus.Fields{"ack": ack, "masterMaxOffset": maxOff}).
				Error("HA slave acks an offset beyond this master's commitlog; closing")
			return
		}
		c.ack.Store(ack)
		c.m.acked(c, ack)
	}
}

// write writes c.wv whole within the housekeeping interval (one writev).
// c.wv is a field so writing it allocates nothing.
func (c *masterConn) write() error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.m.cfg.HousekeepingInterval)); err != nil {
		return err
	}
	n, err := c.wv.WriteTo(c.nc)
	c.sent.Add(n)
	return err
}

// writeLoop pushes the commitlog from start (WriteSocketService): frames of
// at most haTransferBatchSize, never across a file, read from the mapped
// files without a copy, and a heartbeat frame after haSendHeartbeatInterval
// without data.
func (c *masterConn) writeLoop(start int64) {
	defer c.m.wg.Done()
	defer c.close()
	c.m.notify.add(c.wake)
	defer c.m.notify.remove(c.wake)
	cl := c.m.cl
	hb := c.m.cfg.HeartbeatInterval
	next, lastWrite := start, time.Now()
	timer := time.NewTimer(hb)
	defer timer.Stop()
	for {
		select {
		case <-c.done:
			return
		default:
		}
		res, ok := cl.GetData(next)
		if !ok && cl.MaxOffset() > next {
			// Appended between the two looks, or next lies where no file
			// has data: look once more before calling it a hole.
			if res, ok = cl.GetData(next); !ok && cl.MaxOffset() > next {
				if next < cl.MinOffset() {
					c.log.WithFields(logrus.Fields{"offset": next, "masterMinOffset": cl.MinOffset()}).
						Error("HA slave fell behind the master's oldest commitlog file; closing")
				} else {
					c.log.WithFields(logrus.Fields{"offset": next, "masterMaxOffset": cl.MaxOffset()}).
						Error("HA push found no commitlog data at its offset; closing")
				}
				return
			}
		}
		if ok {
			c.pushedMax.Store(cl.MaxOffset())
			c.pushedAt.Store(time.Now().UnixNano())
			b, announce := c.lostCut(next, res.Bytes)
			n, err := c.push(next, b, announce)
			res.Release()
			if err != nil {
				c.writeFailed(err)
				return
			}
			next += int64(n)
			lastWrite = time.Now()
			continue
		}
		if wait := hb - time.Since(lastWrite); wait <= 0 {
			c.pushedMax.Store(next)
			c.pushedAt.Store(time.Now().UnixNano())
			if err := c.heartbeat(next); err != nil {
				c.writeFailed(err)
				return
			}
			lastWrite = time.Now()
			continue
		}
		// Park until the commitlog grows; look once more after announcing
		// (see notifier).
		c.m.notify.announce()
		if cl.MaxOffset() > next {
			continue
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(hb - time.Since(lastWrite))
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

func (c *masterConn) writeFailed(err error) {
	select {
	case <-c.done:
	default:
		c.log.WithError(err).Warn("HA push failed; closing")
	}
}

// lostCut cuts b, the commitlog from next to the end of the written part of
// next's file, at the master's lost ranges, so each push carries either
// intact records or damaged bytes of one range. A slave that sent a hello
// is told of a range before its first bytes (announce); the bytes go as
// they are either way, as a RocketMQ master would send them: a RocketMQ
// slave copies them, and its recovery finds the damage as this master's
// did. Without damage it costs one atomic load.
func (c *masterConn) lostCut(next int64, b []byte) ([]byte, *store.LostRange) {
	r, ok := c.m.cl.LostRangeAfter(next)
	if !ok || r.From >= next+int64(len(b)) {
		return b, nil
	}
	if r.From > next {
		return b[:r.From-next], nil
	}
	b = b[:min(int64(len(b)), r.To-next)]
	if !c.hello || next < c.lostTo {
		return b, nil
	}
	c.lostTo = r.To
	c.log.WithFields(logrus.Fields{"from": next, "to": r.To}).
		Warn("HA push reaches a lost commitlog range: its damaged bytes are sent as they are, announced")
	return b, &store.LostRange{From: next, To: r.To}
}

// push writes frames for b, the commitlog from next on within next's file,
// after a frame announcing the lost range at next when announce is set,
// and returns how many bytes of b they carry.
func (c *masterConn) push(next int64, b []byte, announce *store.LostRange) (int, error) {
	batch := c.m.cfg.TransferBatchSize
	c.wv = c.bufs[:0]
	if announce != nil {
		c.wv = append(c.wv, appendLost(c.lost[:0], announce.From, announce.To, c.compress))
	}
	sent := 0
	per := snappy.MaxEncodedLen(batch)
	if c.compress && len(c.comp) < maxFramesPerWrite*per {
		c.comp = make([]byte, maxFramesPerWrite*per)
	}
	for nf := 0; nf < maxFramesPerWrite && sent < len(b); nf++ {
		chunk := b[sent:min(len(b), sent+batch)]
		hdr := c.hdrs[nf][:]
		putHeader(hdr, next+int64(sent), len(chunk))
		if c.compress {
			// Each frame is encoded into its own part of comp, so all of
			// them go out in one writev as plain frames do.
			enc := snappy.Encode(c.comp[nf*per:(nf+1)*per], chunk)
			binary.BigEndian.PutUint32(hdr[headerSize:], uint32(len(enc)))
			c.wv = append(c.wv, hdr[:compressedHeaderSize], enc)
		} else {
			c.wv = append(c.wv, hdr[:headerSize], chunk)
		}
		sent += len(chunk)
	}
	if len(c.wv) > 0 {
		if err := c.write(); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// heartbeat sends an empty frame at next.
func (c *masterConn) heartbeat(next int64) error {
	hdr := c.hdrs[0][:]
	putHeader(hdr, next, 0)
	n := headerSize
	if c.compress {
		binary.BigEndian.PutUint32(hdr[headerSize:], 0)
		n = compressedHeaderSize
	}
	c.wv = append(c.bufs[:0], hdr[:n])
	return c.write()
}

// String names the connection in logs.
func (c *masterConn) String() string { return fmt.Sprintf("ha conn %s", c.addr) }
