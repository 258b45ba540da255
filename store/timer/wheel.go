package timer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// Defaults of Config.
const (
	DefaultPrecision  = time.Second
	DefaultRollWindow = 24 * time.Hour
	// DefaultFileSize holds 131,072 units (7 MiB).
	DefaultFileSize = UnitSize << 17
)

// Config configures a Wheel.
type Config struct {
	// Dir holds timerlog/ and timercheck (with timercheck.bak, its previous
	// version).
	Dir string
	// Precision is the width of a wheel slot (default 1 s). Delivery is
	// not rounded to it; it only sets how work is grouped.
	Precision time.Duration
	// RollWindow is the furthest ahead a unit fires (default 24 h); later
	// delivery times roll. The wheel has 2*RollWindow/Precision slots.
	RollWindow time.Duration
	// FileSize is the size of a timerlog file (a multiple of UnitSize).
	FileSize int
	// Roll, when set, is called for a roll unit whose delivery time is
	// still ahead, before the wheel appends it again. Returning true means
	// the caller stored the message anew (it comes back through Add) and
	// the unit is done; an error stops Fire as a delivery error does. The
	// broker re-puts the message there so that commitlog retention never
	// deletes a message waiting longer than fileReservedTime.
	Roll func(Entry) (bool, error)
	// Log receives warnings about the wheel's files (a damaged timercheck
	// replaced by its .bak); nil discards them.
	Log logrus.FieldLogger
}

// Entry is one pending message: where it is in the commitlog and when it is due.
type Entry struct {
	DeliverMs       int64
	CommitLogOffset int64
	Size            int32
	// QueueOffset is the message's offset in the timer topic's queue; it
	// lets Open recognise messages already added before a crash.
	QueueOffset int64
	// Cancel marks a cancel marker: persisted with the unit, handed over
	// after the other entries of the same millisecond, and reported by
	// RecoveredCancels while pending at Open.
	Cancel bool
}

// slot is one wheel slot: the newest unit of the slot's chain.
type slot struct {
	timeMs int64 // start of the interval this chain belongs to
	last   int64 // position of the newest unit, -1 none
}

// item is a unit waiting in the batch of due slots.
type item struct {
	fireMs int64
	pos    int64
	cancel bool // a cancel marker: after the other units of its fireMs
}

// checkpoint is the timercheck file.
type checkpoint struct {
	EnqueueOffset int64 `json:"enqueueOffset"`
}

// Wheel holds pending timer entries (see the package doc). Not safe for
// concurrent use.
type Wheel struct {
	cfg       Config
	logDir    string
	checkPath string
	precMs    int64

	segs     map[int64]*segment // by start position
	order    []int64            // starts, ascending
	writePos int64

	slots  []slot
	cur    int64  // start of the next slot to load (ms)
	batch  []item // units of loaded slots, sorted by fireMs
	sorted bool

	pending       int
	cancels       []Entry // cancel markers pending at Open (RecoveredCancels)
	enqueueOffset int64
	savedOffset   int64 // enqueueOffset as the checkpoint file holds it, -1 unknown
	closed        bool
}

// Open opens (creating) the wheel in cfg.Dir at time now: the timerlog is
// walked and every pending unit linked back (package doc, Restart).
func Open(cfg Config, now time.Time) (*Wheel, error) {
	if cfg.Precision <= 0 {
		cfg.Precision = DefaultPrecision
	}
	if cfg.RollWindow <= 0 {
		cfg.RollWindow = DefaultRollWindow
	}
	if cfg.RollWindow < cfg.Precision {
		cfg.RollWindow = cfg.Precision
	}
	if cfg.FileSize == 0 {
		cfg.FileSize = DefaultFileSize
	}
	if cfg.FileSize <= 0 || cfg.FileSize%UnitSize != 0 {
		return nil, fmt.Errorf("%w: %d", ErrBadFileSize, cfg.FileSize)
	}
	w := &Wheel{
		cfg:         cfg,
		logDir:      filepath.Join(cfg.Dir, "timerlog"),
		checkPath:   filepath.Join(cfg.Dir, "timercheck"),
		precMs:      cfg.Precision.Milliseconds(),
		segs:        make(map[int64]*segment),
		savedOffset: -1,
	}
	if w.precMs < 1 {
		w.precMs = 1
	}
	nslots := 2 * (cfg.RollWindow.Milliseconds()/w.precMs + 1)
	w.slots = make([]slot, nslots)
	for i := range w.slots {
		w.slots[i].last = -1
	}
	nowMs := now.UnixMilli()
	w.cur = nowMs - nowMs%w.precMs
	if err := os.MkdirAll(w.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("timer: create %s: %w", w.logDir, err)
	}
	if err := w.loadCheckpoint(); err != nil {
		return nil, err
	}
	if err := w.recover(nowMs); err != nil {
		_ = w.closeSegments()
		return nil, err
	}
	return w, nil
}

// loadCheckpoint reads timercheck, or its .bak when it is damaged
// (fsutil.LoadWithBackup); with neither the enqueue offset starts at 0 and
// recover raises it past every unit in the timerlog.
func (w *Wheel) loadCheckpoint() error {
	c, _, err := fsutil.LoadWithBackup(w.checkPath, w.cfg.Log, func(data []byte) (checkpoint, error) {
		var c checkpoint
		if err := fsutil.DecodeJSONObject(data, &c); err != nil {
			return checkpoint{}, fmt.Errorf("not a timer checkpoint: %w", err)
		}
		if c.EnqueueOffset < 0 {
			return checkpoint{}, fmt.Errorf("enqueueOffset %d is negative", c.EnqueueOffset)
		}
		return c, nil
	})
	if err != nil {
		return fmt.Errorf("timer: load checkpoint: %w", err)
	}
	w.enqueueOffset = c.EnqueueOffset
	return nil
}

// recover maps every timerlog file, finds the write position, relinks the
// pending units and deletes files with none.
func (w *Wheel) recover(nowMs int64) error {
	starts, err := listSegments(w.logDir)
	if err != nil {
		return err
	}
	size := int64(w.cfg.FileSize)
	for i, start := range starts {
		if start%size != 0 {
			return fmt.Errorf("timer: timerlog file %s does not start at a multiple of the file size %d", segmentName(start), size)
		}
		seg, err := openSegment(w.logDir, start, w.cfg.FileSize, false)
		if err != nil {
			return err
		}
		w.segs[start] = seg
		w.order = append(w.order, start)
		end := start
		for off := 0; off+UnitSize <= len(seg.data); off += UnitSize {
			u, ok := readUnit(seg.data[off:])
			if !ok {
				break
			}
			end = start + int64(off) + UnitSize
			w.enqueueOffset = max(w.enqueueOffset, u.queueOffset+1)
			if u.flags&flagDone != 0 {
				continue
			}
			seg.pending++
			w.pending++
			w.place(start+int64(off), u, nowMs)
			if u.flags&flagCancel != 0 {
				w.cancels = append(w.cancels, u.entry())
			}
		}
		if i == len(starts)-1 {
			w.writePos = end
		}
	}
	// Files with nothing pending are deleted by the first Flush, once the
	// checkpoint covers their queue offsets (see dropDone).
	return nil
}

func (w *Wheel) activeStart() int64 {
	size := int64(w.cfg.FileSize)
	return w.writePos - w.writePos%size
}

// EnqueueOffset is the timer-topic queue offset to read from: the
// checkpoint, or past the last message already in the timerlog.
func (w *Wheel) EnqueueOffset() int64 { return w.enqueueOffset }

// SetEnqueueOffset records that every timer-topic message below off was
// added; it is persisted by the next Flush.
func (w *Wheel) SetEnqueueOffset(off int64) { w.enqueueOffset = max(w.enqueueOffset, off) }

// RecoveredCancels returns the cancel markers that were pending when Open
// ran (oldest first), for the caller to rebuild what it keeps of them; a
// second call returns nil.
func (w *Wheel) RecoveredCancels() []Entry {
	c := w.cancels
	w.cancels = nil
	return c
}

// entry is the Entry a unit holds.
func (u *unit) entry() Entry {
	return Entry{DeliverMs: u.deliverMs, CommitLogOffset: u.commitLog, Size: u.size, QueueOffset: u.queueOffset, Cancel: u.flags&flagCancel != 0}
}

// Pending returns the number of entries not handed over yet.
func (w *Wheel) Pending() int { return w.pending }

// Add appends e, due at e.DeliverMs (in the past: due now).
func (w *Wheel) Add(e Entry, now time.Time) error {
	if w.closed {
		return ErrClosed
	}
	nowMs := now.UnixMilli()
	u := unit{deliverMs: e.DeliverMs, fireMs: e.DeliverMs, commitLog: e.CommitLogOffset, queueOffset: e.QueueOffset, size: e.Size, prevPos: -1}
	if e.Cancel {
		u.flags = flagCancel
	}
	if limit := nowMs + w.cfg.RollWindow.Milliseconds(); u.fireMs > limit {
		u.fireMs, u.flags = limit, u.flags|flagRoll
	}
	pos, err := w.append(u)
	if err != nil {
		return err
	}
	w.enqueueOffset = max(w.enqueueOffset, e.QueueOffset+1)
	w.pending++
	w.segs[pos-pos%int64(w.cfg.FileSize)].pending++
	w.place(pos, u, nowMs)
	return nil
}

// append writes u at the write position, creating the next file when needed.
func (w *Wheel) append(u unit) (int64, error) {
	size := int64(w.cfg.FileSize)
	start := w.writePos - w.writePos%size
	seg := w.segs[start]
	if seg == nil {
		var err error
		if seg, err = openSegment(w.logDir, start, w.cfg.FileSize, true); err != nil {
			return 0, err
		}
		w.segs[start] = seg
		w.order = append(w.order, start)
	}
	pos := w.writePos
	writeUnit(seg.data[pos-start:], u)
	seg.dirty = true
	w.writePos += UnitSize
	return pos, nil
}

// unitAt returns the bytes of the unit at pos.
func (w *Wheel) unitAt(pos int64) ([]byte, *segment, error) {
	size := int64(w.cfg.FileSize)
	seg := w.segs[pos-pos%size]
	if seg == nil || pos < 0 || pos%UnitSize != 0 {
		return nil, nil, fmt.Errorf("%w %d", ErrNoUnit, pos)
	}
	return seg.data[pos-seg.start:], seg, nil
}

// place links the pending unit at pos into its wheel slot, or into the batch
// when its slot was already loaded.
func (w *Wheel) place(pos int64, u unit, nowMs int64) {
	slotTime := u.fireMs - u.fireMs%w.precMs
	if slotTime < w.cur {
		w.batch = append(w.batch, item{fireMs: u.fireMs, pos: pos, cancel: u.flags&flagCancel != 0})
		w.sorted = false
		return
	}
	span := int64(len(w.slots)) * w.precMs
	if slotTime-w.cur >= span-w.precMs {
		// Only after the clock went back: fire at the end of the roll
		// window from now and look again then.
		b, seg, err := w.unitAt(pos)
		if err != nil {
			return
		}
		u.fireMs = nowMs + w.cfg.RollWindow.Milliseconds()
		u.flags |= flagRoll
		// The flag first: a process killed between the two stores then
		// leaves a roll unit firing at its old time, which looks again,
		// never an earlier time without the flag, which would deliver.
		be.PutUint32(b[offFlags:], u.flags)
		be.PutUint64(b[offFireMs:], uint64(u.fireMs))
		seg.dirty = true
		slotTime = u.fireMs - u.fireMs%w.precMs
	}
	s := &w.slots[(slotTime/w.precMs)%int64(len(w.slots))]
	if s.timeMs != slotTime {
		s.timeMs, s.last = slotTime, -1
	}
	if b, seg, err := w.unitAt(pos); err == nil {
		be.PutUint64(b[offPrevPos:], uint64(s.last))
		seg.dirty = true
	}
	s.last = pos
}

// advance loads every slot whose interval has started by nowMs.
func (w *Wheel) advance(nowMs int64) {
	for w.cur <= nowMs {
		s := &w.slots[(w.cur/w.precMs)%int64(len(w.slots))]
		if s.timeMs == w.cur {
			for pos, n := s.last, 0; pos >= 0 && n <= w.pending; n++ {
				b, _, err := w.unitAt(pos)
				if err != nil {
					break
				}
				u, ok := readUnit(b)
				if !ok {
					break
				}
				if u.flags&flagDone == 0 {
					w.batch = append(w.batch, item{fireMs: u.fireMs, pos: pos, cancel: u.flags&flagCancel != 0})
					w.sorted = false
				}
				pos = u.prevPos
			}
		}
		s.timeMs, s.last = 0, -1
		w.cur += w.precMs
	}
	w.sortBatch()
}

// NextWake returns when the wheel next has something to do: the earliest
// batch entry, else the start of the next slot.
func (w *Wheel) NextWake() time.Time {
	w.sortBatch()
	if len(w.batch) > 0 && w.batch[0].fireMs < w.cur {
		return time.UnixMilli(w.batch[0].fireMs)
	}
	return time.UnixMilli(w.cur)
}

func (w *Wheel) sortBatch() {
	if w.sorted {
		return
	}
	sort.Slice(w.batch, func(i, j int) bool {
		a, b := &w.batch[i], &w.batch[j]
		if a.fireMs != b.fireMs {
			return a.fireMs < b.fireMs
		}
		if a.cancel != b.cancel {
			return b.cancel // markers last (package doc, Cancels)
		}
		return a.pos < b.pos
	})
	w.sorted = true
}

// Fire hands every entry due by now to deliver, in delivery order. Roll
// units due are appended again (nearer); deliver's error stops the pass,
// leaving that entry and the rest pending for the next call. An entry
// handed over is marked done.
func (w *Wheel) Fire(now time.Time, deliver func(Entry) error) error {
	if w.closed {
		return ErrClosed
	}
	nowMs := now.UnixMilli()
	w.advance(nowMs)
	i := 0
	defer func() { w.batch = append(w.batch[:0], w.batch[i:]...) }()
	for ; i < len(w.batch) && w.batch[i].fireMs <= nowMs; i++ {
		pos := w.batch[i].pos
		b, seg, err := w.unitAt(pos)
		if err != nil {
			continue
		}
		u, ok := readUnit(b)
		if !ok || u.flags&flagDone != 0 {
			continue
		}
		e := u.entry()
		if u.flags&flagRoll != 0 && u.deliverMs > nowMs {
			// Still not due: stored anew by Roll, or appended again, nearer
			// (or for real).
			moved := false
			if w.cfg.Roll != nil {
				if moved, err = w.cfg.Roll(e); err != nil {
					return err
				}
			}
			if !moved {
				if err := w.Add(e, now); err != nil {
					return err
				}
			}
		} else if err := deliver(e); err != nil {
			return err
		}
		w.markDone(b, seg)
	}
	return nil
}

// markDone flags a unit done. Its file is deleted by the next Flush once
// nothing in it is pending (dropDone).
func (w *Wheel) markDone(b []byte, seg *segment) {
	be.PutUint32(b[offFlags:], be.Uint32(b[offFlags:])|flagDone)
	seg.dirty = true
	seg.pending--
	w.pending--
}

// dropDone deletes the files with nothing pending, except the one being
// written. Only Flush calls it, after the checkpoint is durable: the units
// of a file are what tells Open the queue offsets already read, so a file
// deleted before the checkpoint covers them would, after a crash, make the
// broker read its messages again and deliver them twice.
func (w *Wheel) dropDone() {
	for _, start := range append([]int64(nil), w.order...) {
		if seg := w.segs[start]; seg.pending <= 0 && start != w.activeStart() {
			w.dropSegment(seg)
		}
	}
}

// dropSegment unmaps and removes a file with nothing pending.
func (w *Wheel) dropSegment(seg *segment) {
	_ = seg.close()
	_ = os.Remove(seg.path)
	delete(w.segs, seg.start)
	for i, s := range w.order {
		if s == seg.start {
			w.order = append(w.order[:i], w.order[i+1:]...)
			break
		}
	}
}

// Flush syncs the timerlog and then writes the checkpoint, so the
// checkpoint never names a message whose unit could be lost.
func (w *Wheel) Flush() error {
	if w.closed {
		return ErrClosed
	}
	for _, start := range w.order {
		if err := w.segs[start].sync(); err != nil {
			return err
		}
	}
	if w.enqueueOffset != w.savedOffset { // an idle wheel costs no fsync
		data, err := json.Marshal(checkpoint{EnqueueOffset: w.enqueueOffset})
		if err != nil {
			return fmt.Errorf("timer: encode checkpoint: %w", err)
		}
		if err := fsutil.WriteFileWithBackup(w.checkPath, data, 0o644); err != nil {
			return fmt.Errorf("timer: write checkpoint: %w", err)
		}
		w.savedOffset = w.enqueueOffset
	}
	w.dropDone()
	return nil
}

// Close flushes and unmaps everything. Safe to call twice.
func (w *Wheel) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	w.closed = true
	return errors.Join(err, w.closeSegments())
}

func (w *Wheel) closeSegments() error {
	var errs []error
	for _, s := range w.segs {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
