package ha

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"sync"
	"time"

	"github.com/golang/snappy"
	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
)

// Errors that end a slave's session (Status.LastError holds the latest).
var (
	// ErrDiverged means the slave's commitlog holds data its master does
	// not: a master that lost an unflushed tail and came back, or a slave
	// that followed another master. The slave refuses to follow rather
	// than truncate: its tail may be the only copy of acknowledged messages.
	// It retries with backoff; an operator moves its store aside (or cuts
	// it at the master's offset) to let it follow this master.
	ErrDiverged = errors.New("ha: slave holds commitlog data its master does not")
	// ErrCompressionMismatch means haTransferCompress is on at one side
	// only (a RocketMQ master never compresses).
	ErrCompressionMismatch = errors.New("ha: haTransferCompress differs between master and slave")
	// ErrBehindMaster means the master has deleted the commitlog files the
	// slave needs next: it cannot catch up.
	ErrBehindMaster = errors.New("ha: master no longer holds the commitlog the slave needs")
	// ErrProtocol means the master sent a frame that cannot be right: an
	// offset where the slave does not end, a frame across a file, a size
	// out of bounds.
	ErrProtocol = errors.New("ha: protocol error")
)

// SlaveState says what a slave is doing.
type SlaveState string

// Slave states.
const (
	SlaveIdle       SlaveState = "idle"       // no master address
	SlaveConnecting SlaveState = "connecting" // dialling and handshaking
	SlaveFollowing  SlaveState = "following"  // receiving the master's commitlog
	SlaveRetrying   SlaveState = "retrying"   // waiting to reconnect after a failure
	SlaveRefused    SlaveState = "refused"    // the master or its data was refused; retrying with backoff
)

// SlaveStatus is what tools show about a slave.
type SlaveStatus struct {
	MasterAddr string
	State      SlaveState
	// Since is when State began (for SlaveFollowing: connected since).
	Since time.Time
	// MaxOffset is the slave's commitlog max offset: what it reports.
	MaxOffset int64
	// MasterMaxOffset is the master's max offset as last learned (its
	// answer, or the end of its last frame), -1 when unknown.
	MasterMaxOffset int64
	// Compressed says the session's frames are snappy-compressed.
	Compressed bool
	// Diverged says the last session ended with ErrDiverged.
	Diverged bool
	// LastError is why the last session ended ("" before any).
	LastError string
	// NextRetry is when the slave reconnects (zero unless retrying).
	NextRetry time.Time
}

// Slave follows a master's commitlog into its store (RocketMQ's HAClient).
// One goroutine, slaveLoop, owns the connection: it connects, sends its
// hello, applies frames and reports its offset after them; a second one per
// session, reportLoop, reports every haSendHeartbeatInterval.
type Slave struct {
	st  *store.Store
	cl  *store.CommitLog
	cfg Config
	log logrus.FieldLogger

	mu      sync.Mutex
	addr    string      // guarded by mu
	conn    net.Conn    // the session's connection; guarded by mu
	status  SlaveStatus // guarded by mu
	started bool        // guarded by mu
	closed  bool        // guarded by mu

	changed chan struct{} // the master address changed; buffered 1
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewSlave returns a slave for st; Start runs it and SetMasterAddress
// points it at a master.
func NewSlave(st *store.Store, cfg Config, log logrus.FieldLogger) (*Slave, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		log = l
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Slave{
		st: st, cl: st.CommitLog(), cfg: cfg,
		log:     log.WithFields(logrus.Fields{"component": "ha", "role": "slave"}),
		status:  SlaveStatus{State: SlaveIdle, MasterMaxOffset: -1},
		changed: make(chan struct{}, 1),
		ctx:     ctx, cancel: cancel,
	}, nil
}

// Start runs the slave; it connects once it has a master address.
func (sl *Slave) Start() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.started || sl.closed {
		return
	}
	sl.started = true
	sl.wg.Add(1)
	go sl.slaveLoop()
}

// SetMasterAddress points the slave at the master's HA address
// (brokerIP2:haListenPort; updateHaMasterAddress). A change ends the current
// session and connects to the new address at once; the same address again
// changes nothing. "" stops following.
func (sl *Slave) SetMasterAddress(addr string) {
	sl.mu.Lock()
	if addr == sl.addr {
		sl.mu.Unlock()
		return
	}
	old := sl.addr
	sl.addr = addr
	if sl.conn != nil {
		sl.conn.Close()
	}
	sl.mu.Unlock()
	sl.log.WithFields(logrus.Fields{"old": old, "new": addr}).Info("HA master address changed")
	select {
	case sl.changed <- struct{}{}:
	default:
	}
}

// MasterAddress returns the address the slave follows.
func (sl *Slave) MasterAddress() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.addr
}

// Status returns the slave's replication state.
func (sl *Slave) Status() SlaveStatus {
	sl.mu.Lock()
	st := sl.status
	st.MasterAddr = sl.addr
	sl.mu.Unlock()
	st.MaxOffset = sl.cl.MaxOffset()
	return st
}

// Shutdown stops following and waits for the slave's goroutines. Safe to
// call twice and before Start. Call it before the store's Shutdown.
func (sl *Slave) Shutdown(ctx context.Context) error {
	sl.mu.Lock()
	sl.closed = true
	if sl.conn != nil {
		sl.conn.Close()
	}
	sl.mu.Unlock()
	sl.cancel()
	sl.wg.Wait()
	_ = ctx // the session ends as soon as its connection is closed
	return nil
}

func (sl *Slave) setState(f func(st *SlaveStatus)) {
	sl.mu.Lock()
	f(&sl.status)
	sl.mu.Unlock()
}

// slaveLoop connects to the master and follows it until Shutdown, waiting
// ReconnectMin after a failed session, doubling up to ReconnectMax while
// sessions keep failing without progress: a session that appended nothing
// (refused, or failing to apply what it got: a full disk, data it rejects)
// does not reset the wait, so a persistent failure is retried ever more
// slowly instead of as a reconnect storm, each of whose sessions would
// briefly count as a connected slave at the master.
func (sl *Slave) slaveLoop() {
	defer sl.wg.Done()
	backoff := sl.cfg.ReconnectMin
	for {
		// Take a change signal before reading the address: a change after
		// this read signals again. One left over from before would cut the
		// next wait short.
		select {
		case <-sl.changed:
		default:
		}
		addr := sl.MasterAddress()
		if addr == "" {
			sl.setState(func(st *SlaveStatus) { *st = SlaveStatus{State: SlaveIdle, Since: time.Now(), MasterMaxOffset: -1} })
			select {
			case <-sl.ctx.Done():
				return
			case <-sl.changed:
				continue
			}
		}
		progressed, err := sl.session(addr)
		if sl.ctx.Err() != nil {
			return
		}
		if progressed {
			backoff = sl.cfg.ReconnectMin
		}
		refused := errors.Is(err, ErrDiverged) || errors.Is(err, ErrCompressionMismatch) || errors.Is(err, ErrBehindMaster)
		retry := time.Now().Add(backoff)
		sl.setState(func(st *SlaveStatus) {
			st.State, st.Since, st.NextRetry = SlaveRetrying, time.Now(), retry
			if refused {
				st.State = SlaveRefused
			}
			st.Diverged = errors.Is(err, ErrDiverged)
			st.LastError = err.Error()
		})
		fields := logrus.Fields{"master": addr, "retryIn": backoff}
		switch {
		case sl.MasterAddress() != addr:
			sl.log.WithFields(fields).WithError(err).Info("HA session ended: the master address changed")
		case refused:
			sl.log.WithFields(fields).WithError(err).Error("HA slave refused to follow its master")
		default:
			sl.log.WithFields(fields).WithError(err).Warn("HA session ended")
		}
		if sl.MasterAddress() == addr {
			t := time.NewTimer(backoff)
		wait:
			for {
				select {
				case <-sl.ctx.Done():
					t.Stop()
					return
				case <-sl.changed:
					// A signal of a change this session already saw (set
					// between the drain above and its address read) is no
					// reason to cut the wait short or to reset it.
					if sl.MasterAddress() == addr {
						continue
					}
					backoff = sl.cfg.ReconnectMin
				case <-t.C:
					backoff = min(2*backoff, sl.cfg.ReconnectMax)
				}
				break wait
			}
			t.Stop()
		}
	}
}

// session runs one connection to addr until it fails. progressed reports
// whether it appended the master's bytes or was caught up with its master
// (a heartbeat frame at its offset): a healthy session, after which the
// reconnect wait starts over at ReconnectMin. A long idle session that ended
// with the master's restart must not wait what failures before it built up.
func (sl *Slave) session(addr string) (progressed bool, err error) {
	sl.setState(func(st *SlaveStatus) { st.State, st.Since, st.NextRetry = SlaveConnecting, time.Now(), time.Time{} })
	d := net.Dialer{Timeout: sl.cfg.DialTimeout}
	nc, err := d.DialContext(sl.ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("ha: connect to master %s: %w", addr, err)
	}
	sl.mu.Lock()
	if sl.closed || sl.addr != addr {
		sl.mu.Unlock()
		nc.Close()
		return false, fmt.Errorf("ha: master %s no longer followed", addr)
	}
	sl.conn = nc
	sl.mu.Unlock()
	ss := sl.newSession(nc, addr)
	defer func() {
		sl.mu.Lock()
		sl.conn = nil
		sl.mu.Unlock()
		ss.close()
	}()
	err = ss.run()
	return ss.progressed, err
}

func (sl *Slave) newSession(nc net.Conn, addr string) *slaveSession {
	return &slaveSession{
		sl: sl, nc: nc, addr: addr, log: sl.log.WithField("master", addr),
		cr:        newConnReader(nc, 1<<20, sl.cfg.HousekeepingInterval),
		fileSize:  int64(sl.cl.FileSize()),
		maxRecord: sl.cl.MaxRecordSize(),
		stop:      make(chan struct{}),
	}
}

// close closes the connection and stops reportLoop.
func (ss *slaveSession) close() {
	ss.nc.Close()
	close(ss.stop)
	ss.wg.Wait()
}

// slaveSession is one connection to the master.
type slaveSession struct {
	sl        *Slave
	nc        net.Conn
	addr      string
	log       logrus.FieldLogger
	cr        *connReader
	fileSize  int64
	maxRecord int

	// expect is the offset of the next byte the master sends.
	expect int64
	// fresh: the store was empty at connect and nothing has arrived yet,
	// so the master's first offset is taken (it starts a new slave at its
	// newest file).
	fresh bool
	// pending holds the beginning of a record a frame cut, at offsets
	// [expect-len(pending), expect).
	pending []byte
	// skipTo is the end of the file whose blank end-of-file marker the
	// store took: the master's filler bytes before it are dropped.
	skipTo int64
	// lost is the last lost range the master announced: its bytes are
	// appended as they are (Store.AppendReplicaLost).
	lost      store.LostRange
	compress  bool
	raw, comp []byte
	// progressed: the store appended bytes of this session, or the master
	// sent a heartbeat at the slave's offset (see Slave.session).
	progressed bool
	lastReport time.Time // owned by the reader

	wmu      sync.Mutex // serialises reports between run and reportLoop
	reported int64      // guarded by wmu
	rbuf     [reportSize]byte

	stop chan struct{}
	wg   sync.WaitGroup
}

// reportEvery bounds how much a slave applies before it reports even
// while more frames are buffered (catch-up), and reportEveryTime how long.
const (
	reportEvery     = 256 << 10
	reportEveryTime = time.Millisecond
)

func (ss *slaveSession) run() error {
	cl := ss.sl.cl
	start := cl.MaxOffset()
	ss.expect, ss.fresh = start, start == 0
	h := hello{offset: start, replicaID: ss.sl.cfg.ReplicaID}
	if ss.sl.cfg.Compress {
		h.flags |= helloCompress
	}
	h.windowLen, h.windowCRC, h.windowEnd = ss.window(start)
	// The hello and the offset go out in one write: a RocketMQ master takes
	// the last 8-byte group of what it reads, which is the offset.
	if err := ss.send(h.encode(make([]byte, 0, helloMaxSize)), start); err != nil {
		return fmt.Errorf("ha: send hello: %w", err)
	}
	// Heartbeat reports from now on, also while a first frame streams in.
	ss.wg.Add(1)
	go ss.reportLoop()
	hdr, err := ss.cr.need(headerSize)
	if err != nil {
		return fmt.Errorf("ha: read the master's first frame: %w", err)
	}
	off, size := int64(binary.BigEndian.Uint64(hdr)), int(int32(binary.BigEndian.Uint32(hdr[8:])))
	// Only a master that answered the hello announces lost ranges.
	answered := off == answerOffset
	if answered {
		if err := ss.answer(size, start); err != nil {
			return err
		}
	} else {
		// A RocketMQ 4.x master ignores the hello and pushes at once.
		if ss.sl.cfg.Compress {
			return fmt.Errorf("%w: the master does not answer hellos (a RocketMQ master?), so it cannot compress: turn haTransferCompress off here",
				ErrCompressionMismatch)
		}
		ss.log.Info("HA master does not answer hellos (a RocketMQ master?): following with plain frames, no content check")
		ss.following(-1)
		if err := ss.frame(off, size); err != nil {
			return err
		}
	}
	h2 := compressedHeaderSize
	if !ss.compress {
		h2 = headerSize
	}
	for {
		hdr, err := ss.cr.need(h2)
		if err != nil {
			return err
		}
		off, size := int64(binary.BigEndian.Uint64(hdr)), int(int32(binary.BigEndian.Uint32(hdr[8:])))
		switch {
		case off == lostOffset && answered:
			csize := size
			if ss.compress {
				csize = int(int32(binary.BigEndian.Uint32(hdr[12:])))
			}
			if err := ss.lostFrame(size, csize); err != nil {
				return err
			}
		case ss.compress:
			if err := ss.compressedFrame(off, size, int(int32(binary.BigEndian.Uint32(hdr[12:])))); err != nil {
				return err
			}
		default:
			if err := ss.frame(off, size); err != nil {
				return err
			}
		}
	}
}

// window fingerprints the slave's last bytes for the master to compare
// with its own: windowLen bytes (up to windowMax) ending at windowEnd, and
// their CRC-32C; windowLen 0: nothing to compare.
//
// The window ends at offset, within offset's file. At a file boundary (the
// marker closing the file before was just appended, or recovery cut the
// first record of a new file) it ends at the blank marker that closes the
// file before instead: the filler after the marker is never copied, and
// without a window there a master that lost its tail and wrote past the
// boundary, or another master with a larger log, would go unnoticed.
// Bytes in this store's own lost ranges are left out of it: a slave's
// damaged copy cannot match its master's.
func (ss *slaveSession) window(offset int64) (n, crc uint32, end int64) {
	cl := ss.sl.cl
	end = offset
	fileStart := offset - offset%ss.fileSize
	if offset == fileStart {
		fileStart = offset - ss.fileSize
		if fileStart < cl.MinOffset() {
			return 0, 0, offset // no file before: a new slave's start
		}
		end = ss.markerEnd(fileStart)
	}
	from := max(end-windowMax, fileStart, cl.MinOffset())
	for range 64 { // bounded: each lost range moves from past it
		r, ok := cl.LostRangeAfter(from)
		if !ok || r.From >= end {
			break
		}
		from = r.To
	}
	if from >= end {
		return 0, 0, offset
	}
	res, ok := cl.GetMessage(from, int32(end-from))
	if !ok {
		return 0, 0, offset
	}
	defer res.Release()
	return uint32(end - from), crc32.Checksum(res.Bytes, crcTable), end
}

// markerEnd returns the end of the blank end-of-file marker that closes the
// file starting at fileStart, found as the last non-zero bytes of the file:
// the filler after a marker is never written, so it holds the zeros the
// file was created with. It is searched in the last MaxRecordSize+8 bytes
// only, since a file is closed when a record does not fit. Without a
// marker there (the file ends in a lost range) it returns the file's end.
func (ss *slaveSession) markerEnd(fileStart int64) int64 {
	fileEnd := fileStart + ss.fileSize
	span := min(ss.fileSize, int64(ss.maxRecord)+message.BlankRecordLength)
	res, ok := ss.sl.cl.GetMessage(fileEnd-span, int32(span))
	if !ok {
		return fileEnd
	}
	defer res.Release()
	b := res.Bytes
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:]) == 0 {
		i -= 8
	}
	for i > 0 && b[i-1] == 0 {
		i--
	}
	p := i - message.BlankRecordLength
	if p < 0 || int32(binary.BigEndian.Uint32(b[p+message.PosMagicCode:])) != message.BlankMagicCode ||
		int64(binary.BigEndian.Uint32(b[p:])) != span-int64(p) {
		return fileEnd
	}
	return fileEnd - span + int64(i)
}

// answer reads the master's answer to the hello.
func (ss *slaveSession) answer(size int, start int64) error {
	if size != answerSize {
		return fmt.Errorf("%w: answer of %d bytes, want %d", ErrProtocol, size, answerSize)
	}
	body, err := ss.cr.need(answerSize)
	if err != nil {
		return fmt.Errorf("ha: read the master's answer: %w", err)
	}
	a := decodeAnswer(body)
	ss.sl.setState(func(st *SlaveStatus) { st.MasterMaxOffset = a.masterMax })
	fields := logrus.Fields{"slaveMaxOffset": start, "masterMaxOffset": a.masterMax}
	switch a.status {
	case answerOK:
	case answerSlaveAhead:
		ss.log.WithFields(fields).Error("HA: this slave's commitlog ends beyond its master's: the master lost data this slave holds (or this slave followed another master). " +
			"Not following: truncating could delete the only copy of acknowledged messages. Move this store aside, or cut it at the master's offset, to follow this master.")
		return fmt.Errorf("%w: slave max offset %d, master max offset %d", ErrDiverged, start, a.masterMax)
	case answerContentDiffers:
		ss.log.WithFields(fields).Error("HA: this slave's commitlog differs from its master's just before the slave's end: the master lost data this slave holds and wrote other data since. " +
			"Not following: truncating could delete the only copy of acknowledged messages. Move this store aside to follow this master.")
		return fmt.Errorf("%w: the bytes before offset %d differ from the master's (master max offset %d)", ErrDiverged, start, a.masterMax)
	case answerNoCompression:
		return fmt.Errorf("%w: this slave asks for compressed frames and the master has haTransferCompress off", ErrCompressionMismatch)
	case answerBehindMin:
		ss.log.WithFields(fields).Error("HA: the master has deleted the commitlog files this slave needs next: it cannot catch up; empty this store to start over")
		return fmt.Errorf("%w: slave max offset %d", ErrBehindMaster, start)
	default:
		return fmt.Errorf("%w: unknown answer status %d", ErrProtocol, a.status)
	}
	ss.compress = a.flags&helloCompress != 0
	if ss.compress != ss.sl.cfg.Compress {
		return fmt.Errorf("%w: asked %v, master answered %v", ErrCompressionMismatch, ss.sl.cfg.Compress, ss.compress)
	}
	if ss.fresh && a.startOffset%ss.fileSize == 0 {
		ss.expect = a.startOffset
	}
	ss.following(a.masterMax)
	return nil
}

// following marks the session as past its handshake.
func (ss *slaveSession) following(masterMax int64) {
	ss.log.WithFields(logrus.Fields{"offset": ss.expect, "compress": ss.compress}).Info("HA slave following its master")
	ss.sl.setState(func(st *SlaveStatus) {
		st.State, st.Since, st.Compressed, st.Diverged, st.LastError = SlaveFollowing, time.Now(), ss.compress, false, ""
		if masterMax >= 0 {
			st.MasterMaxOffset = masterMax
		}
	})
}

// lostFrame reads the master's announcement of a lost range: the bytes
// from the slave's offset to its end are damaged on the master and come
// next, to be copied as they are.
func (ss *slaveSession) lostFrame(size, csize int) error {
	if size != lostSize || csize != lostSize {
		return fmt.Errorf("%w: lost range announcement of %d (%d) bytes, want %d", ErrProtocol, size, csize, lostSize)
	}
	body, err := ss.cr.need(lostSize)
	if err != nil {
		return fmt.Errorf("ha: read a lost range announcement: %w", err)
	}
	r := store.LostRange{From: int64(binary.BigEndian.Uint64(body)), To: int64(binary.BigEndian.Uint64(body[8:]))}
	if r.From != ss.expect || r.To <= r.From {
		return fmt.Errorf("%w: lost range [%d,%d) announced, this slave expects offset %d", ErrProtocol, r.From, r.To, ss.expect)
	}
	if len(ss.pending) > 0 {
		return fmt.Errorf("%w: lost range [%d,%d) announced inside the record at %d", ErrProtocol, r.From, r.To, r.From-int64(len(ss.pending)))
	}
	ss.lost = r
	ss.log.WithFields(logrus.Fields{"from": r.From, "to": r.To, "lostBytes": r.To - r.From}).
		Warn("HA master's commitlog is damaged here (a lost range): copying the bytes as they are; their records are not served")
	return nil
}

// checkFrame validates a frame header against where the slave is.
func (ss *slaveSession) checkFrame(off int64, size int) error {
	if off != ss.expect {
		if ss.fresh && off >= 0 && off%ss.fileSize == 0 {
			ss.expect = off
		} else if off < ss.expect && off >= 0 {
			return fmt.Errorf("%w: the master pushes offset %d, this slave holds up to %d (the master is behind it)", ErrDiverged, off, ss.expect)
		} else {
			return fmt.Errorf("%w: the master pushes offset %d, this slave expects %d", ErrProtocol, off, ss.expect)
		}
	}
	if size < 0 || off%ss.fileSize+int64(size) > ss.fileSize {
		return fmt.Errorf("%w: frame of %d bytes at offset %d crosses a commitlog file (file size %d)", ErrProtocol, size, off, ss.fileSize)
	}
	return nil
}

// frame applies a plain frame as its body streams in.
func (ss *slaveSession) frame(off int64, size int) error {
	if err := ss.checkFrame(off, size); err != nil {
		return err
	}
	if size == 0 && len(ss.pending) == 0 {
		ss.progressed = true // caught up with the master
	}
	for left := size; left > 0; {
		b, err := ss.cr.some(left)
		if err != nil {
			return fmt.Errorf("ha: read frame at %d: %w", off, err)
		}
		if err := ss.apply(b); err != nil {
			return err
		}
		left -= len(b)
	}
	return ss.applied(off + int64(size))
}

// compressedFrame reads, decodes and applies a compressed frame.
func (ss *slaveSession) compressedFrame(off int64, size, csize int) error {
	if err := ss.checkFrame(off, size); err != nil {
		return err
	}
	if size > maxFrameBody || csize < 0 || csize > snappy.MaxEncodedLen(size) || (size == 0) != (csize == 0) {
		return fmt.Errorf("%w: compressed frame at %d of %d bytes claims %d uncompressed", ErrProtocol, off, csize, size)
	}
	if size == 0 {
		if len(ss.pending) == 0 {
			ss.progressed = true // caught up with the master
		}
		return ss.applied(off)
	}
	if cap(ss.comp) < csize {
		ss.comp = make([]byte, csize)
	}
	comp := ss.comp[:csize]
	if err := ss.cr.readFull(comp); err != nil {
		return fmt.Errorf("ha: read frame at %d: %w", off, err)
	}
	if n, err := snappy.DecodedLen(comp); err != nil || n != size {
		return fmt.Errorf("%w: compressed frame at %d does not decode to %d bytes (%d, %v)", ErrProtocol, off, size, n, err)
	}
	if cap(ss.raw) < size {
		ss.raw = make([]byte, size)
	}
	raw, err := snappy.Decode(ss.raw[:size], comp)
	if err != nil {
		return fmt.Errorf("%w: compressed frame at %d: %w", ErrProtocol, off, err)
	}
	if err := ss.apply(raw); err != nil {
		return err
	}
	return ss.applied(off + int64(size))
}

// applied is called after a frame ending at end: it reports the store's
// new max offset when nothing more is buffered to apply, or when enough
// bytes or time went by since the last report (so a catch-up is acked as
// it goes).
func (ss *slaveSession) applied(end int64) error {
	ss.sl.setState(func(st *SlaveStatus) { st.MasterMaxOffset = max(st.MasterMaxOffset, end) })
	cur := ss.sl.cl.MaxOffset()
	ss.wmu.Lock()
	last := ss.reported
	ss.wmu.Unlock()
	if cur <= last {
		return nil
	}
	if ss.cr.buffered() >= headerSize && cur-last < reportEvery && time.Since(ss.lastReport) < reportEveryTime {
		return nil
	}
	ss.lastReport = time.Now()
	return ss.report(cur)
}

// apply hands the next bytes of the master's commitlog to the store: the
// bytes of an announced lost range as they are, the rest as records.
func (ss *slaveSession) apply(b []byte) error {
	at := ss.expect
	ss.expect += int64(len(b))
	if len(b) > 0 {
		ss.fresh = false
	}
	for len(b) > 0 {
		r := ss.lost
		if at >= r.To || at+int64(len(b)) <= r.From {
			return ss.applyUnits(at, b)
		}
		if at < r.From {
			k := r.From - at
			if err := ss.applyUnits(at, b[:k]); err != nil {
				return err
			}
			at, b = at+k, b[k:]
		}
		if len(ss.pending) > 0 {
			return fmt.Errorf("%w: the record at %d runs into the lost range [%d,%d)",
				store.ErrReplicaData, at-int64(len(ss.pending)), r.From, r.To)
		}
		k := min(int64(len(b)), r.To-at)
		n, err := ss.sl.st.AppendReplicaLost(at, b[:k])
		if n > 0 {
			ss.progressed = true
		}
		if err != nil {
			return fmt.Errorf("ha: copy the master's lost range at %d: %w", at, err)
		}
		at, b = at+k, b[k:]
	}
	return nil
}

// applyUnits hands records to the store: whole ones straight from b, and
// one a frame cut through pending.
func (ss *slaveSession) applyUnits(at int64, b []byte) error {
	st := ss.sl.st
	for len(b) > 0 {
		if len(ss.pending) == 0 {
			if at < ss.skipTo {
				// The filler after a blank marker: the store moved to the
				// next file at the marker.
				k := int(min(int64(len(b)), ss.skipTo-at))
				at, b = at+int64(k), b[k:]
				continue
			}
			n, err := st.AppendReplica(at, b)
			if n > 0 {
				ss.progressed = true
			}
			if err != nil {
				return fmt.Errorf("ha: apply the master's data at %d: %w", at+int64(n), err)
			}
			at, b = at+int64(n), b[n:]
			ss.noteSkip(at)
			if len(b) > 0 {
				// The start of a record the frame cut: keep it.
				ss.pending = append(ss.pending[:0], b...)
				at, b = at+int64(len(b)), nil
			}
			continue
		}
		need, err := ss.unitNeed(at)
		if err != nil {
			return err
		}
		take := min(need, len(b))
		ss.pending = append(ss.pending, b[:take]...)
		at, b = at+int64(take), b[take:]
		if need, err = ss.unitNeed(at); err != nil || need > 0 {
			if err != nil {
				return err
			}
			continue
		}
		from := at - int64(len(ss.pending))
		n, err := st.AppendReplica(from, ss.pending)
		if n > 0 {
			ss.progressed = true
		}
		if err != nil {
			return fmt.Errorf("ha: apply the master's data at %d: %w", from+int64(n), err)
		}
		if n != len(ss.pending) {
			return fmt.Errorf("%w: the store took %d of a whole %d-byte unit at %d", store.ErrReplicaData, n, len(ss.pending), from)
		}
		ss.pending = ss.pending[:0]
		ss.noteSkip(at)
	}
	return nil
}

// noteSkip notes, after the store consumed the bytes up to at, whether it
// took a blank marker and so ends at the next file beyond at.
func (ss *slaveSession) noteSkip(at int64) {
	if end := ss.sl.cl.MaxOffset(); end > at {
		ss.skipTo = end
	}
}

// unitNeed returns how many more bytes the pending unit needs. A header
// that claims an impossible size ends the session: waiting for it would
// buffer without bound.
func (ss *slaveSession) unitNeed(at int64) (int, error) {
	p := ss.pending
	if len(p) < message.BlankRecordLength {
		return message.BlankRecordLength - len(p), nil
	}
	switch int32(binary.BigEndian.Uint32(p[message.PosMagicCode:])) {
	case message.BlankMagicCode:
		return 0, nil
	case message.MagicCodeV1, message.MagicCodeV2:
	default:
		return 0, fmt.Errorf("%w: no record magic code at offset %d", store.ErrReplicaData, at-int64(len(p)))
	}
	size := int(int32(binary.BigEndian.Uint32(p)))
	if size < message.MinRecordLength || size > ss.maxRecord {
		return 0, fmt.Errorf("%w: record at offset %d claims %d bytes (largest accepted %d: is this slave's maxMessageSize below its master's?)",
			store.ErrReplicaData, at-int64(len(p)), size, ss.maxRecord)
	}
	return size - len(p), nil
}

// send writes the hello and, after it, reports offset.
func (ss *slaveSession) send(hello []byte, offset int64) error {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if err := ss.nc.SetWriteDeadline(time.Now().Add(ss.sl.cfg.HousekeepingInterval)); err != nil {
		return err
	}
	if _, err := ss.nc.Write(hello); err != nil {
		return err
	}
	ss.reported = offset
	return nil
}

// report sends the slave's max offset (its ack).
func (ss *slaveSession) report(offset int64) error {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	binary.BigEndian.PutUint64(ss.rbuf[:], uint64(offset))
	if err := ss.nc.SetWriteDeadline(time.Now().Add(ss.sl.cfg.HousekeepingInterval)); err != nil {
		return err
	}
	if _, err := ss.nc.Write(ss.rbuf[:]); err != nil {
		return fmt.Errorf("ha: report offset %d: %w", offset, err)
	}
	ss.reported = offset
	return nil
}

// reportLoop reports the slave's offset every haSendHeartbeatInterval, so
// an idle master knows it is alive.
func (ss *slaveSession) reportLoop() {
	defer ss.wg.Done()
	t := time.NewTicker(ss.sl.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ss.stop:
			return
		case <-t.C:
		}
		if err := ss.report(ss.sl.cl.MaxOffset()); err != nil {
			// The reader sees the broken connection too; make sure it does.
			ss.nc.Close()
			return
		}
	}
}
