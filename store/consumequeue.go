package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// CQStoreUnitSize is the size of one consume-queue entry: commitlog offset
// (8), message size (4), tags code (8). Part of the on-disk format.
const CQStoreUnitSize = 20

// blankEntrySize marks a pre-blank entry (offset 0, size MaxInt32, tags 0),
// written before the first real entry of a queue whose first file starts at
// a non-zero offset. Part of the on-disk format (RocketMQ's fillPreBlank).
const blankEntrySize = math.MaxInt32

// ErrCQOrder is returned by ConsumeQueue.Put when an entry's logical offset
// is below the queue's end (a duplicate that is not idempotently skippable).
var ErrCQOrder = errors.New("store: consume queue offset out of order")

// ErrCQDestroyed is returned by ConsumeQueue.Put after Destroy (the topic
// was deleted while a message of it was being dispatched).
var ErrCQDestroyed = errors.New("store: consume queue destroyed")

// CQEntry is one decoded consume-queue entry.
type CQEntry struct {
	CommitLogOffset int64
	Size            int32
	TagsCode        int64
}

// Valid reports whether the entry points at a message: RocketMQ's rule
// offset >= 0 && size > 0 (zero-filled space is invalid).
func (e CQEntry) Valid() bool { return e.CommitLogOffset >= 0 && e.Size > 0 }

// Blank reports whether the entry is a pre-blank filler.
func (e CQEntry) Blank() bool { return e.CommitLogOffset == 0 && e.Size == blankEntrySize }

func decodeCQEntry(b []byte) CQEntry {
	return CQEntry{
		CommitLogOffset: int64(binary.BigEndian.Uint64(b)),
		Size:            int32(binary.BigEndian.Uint32(b[8:])),
		TagsCode:        int64(binary.BigEndian.Uint64(b[12:])),
	}
}

// putCQEntry stores the size last. An entry can straddle two pages, and a
// process killed while the second faults in leaves only part of it; with
// the size still zero, recovery stops there (Valid) and dispatch writes the
// entry again from the commitlog, where a kept size would keep a cut tags
// code that tag filtering then trusts.
func putCQEntry(b []byte, e CQEntry) {
	binary.BigEndian.PutUint64(b, uint64(e.CommitLogOffset))
	binary.BigEndian.PutUint64(b[12:], uint64(e.TagsCode))
	binary.BigEndian.PutUint32(b[8:], uint32(e.Size))
}

// ConsumeQueue is the index of one topic-queue into the commitlog: entry n is
// the message with queue offset n. Files live in
// <root>/consumequeue/<topic>/<queueId>/ and are named by the byte offset of
// their first entry (n*20).
//
// Put is called by one dispatcher at a time (under the dispatch lock);
// reads run concurrently and see only published (wrote-position) entries. putMu also serialises
// truncation and min-offset correction against Put.
type ConsumeQueue struct {
	topic   string
	queueID int32
	q       *MappedFileQueue
	log     logrus.FieldLogger

	putMu     sync.Mutex
	destroyed bool // guarded by putMu
	// maxPhysicOffset is the commitlog end (offset+size) of the newest entry,
	// used to skip entries that a re-dispatch writes again.
	maxPhysicOffset atomic.Int64
	// minLogicOffset is the byte offset of the first entry still pointing at
	// a live message.
	minLogicOffset atomic.Int64
	// units is the queue's filter-bitmap sidecar (filterbitmap.go), nil
	// when filter bitmaps are off. Its files follow the queue's: cut with
	// it, deleted with it, flushed with it.
	units *filterUnits
}

// NewConsumeQueue returns the queue for topic/queueID under rootDir (the
// consumequeue directory); call Load and Recover before use.
func NewConsumeQueue(rootDir, topic string, queueID int32, fileSize int, log logrus.FieldLogger) *ConsumeQueue {
	if log == nil {
		log = NewMappedFileQueue("", 0, nil).log
	}
	log = log.WithFields(logrus.Fields{"topic": topic, "queueId": queueID})
	dir := filepath.Join(rootDir, topic, strconv.Itoa(int(queueID)))
	cq := &ConsumeQueue{
		topic:   topic,
		queueID: queueID,
		q:       NewMappedFileQueue(dir, fileSize-fileSize%CQStoreUnitSize, log),
		log:     log,
	}
	// Consume-queue files get their blocks reserved but not synced: a
	// queue's first message should not wait for a sync of 6 MB by the
	// dispatcher, and their flushes are in the background. The reservation
	// is what keeps a full disk from killing the broker with SIGBUS when an
	// entry is written through the mapping.
	cq.q.SetAllocator(func(dir string, offset int64, fileSize int) (*MappedFile, error) {
		return createMappedFile(filepath.Join(dir, fileName(offset)), offset, fileSize, fileSize, false)
	})
	cq.maxPhysicOffset.Store(-1)
	return cq
}

// Topic returns the queue's topic.
func (cq *ConsumeQueue) Topic() string { return cq.topic }

// QueueID returns the queue's id.
func (cq *ConsumeQueue) QueueID() int32 { return cq.queueID }

// Files exposes the underlying mapped files (flush, retention).
func (cq *ConsumeQueue) Files() *MappedFileQueue { return cq.q }

// Load maps the queue's files.
func (cq *ConsumeQueue) Load() error {
	if cq.units != nil {
		cq.units.load()
	}
	return cq.q.Load()
}

// Recover finds the last valid entry, scanning from the third-newest file
// forward, sets the write and flush positions after it and deletes or cuts
// whatever follows. What is cut is also zeroed: the next recovery scans to
// the first invalid entry, and would take old entries left behind the
// newer ones for live.
func (cq *ConsumeQueue) Recover() error {
	_, err := cq.recover(nil)
	return err
}

// MaxPhysicOffset returns the commitlog end of the newest entry, -1 if none.
func (cq *ConsumeQueue) MaxPhysicOffset() int64 { return cq.maxPhysicOffset.Load() }

// MinOffsetInQueue returns the first queue offset still readable.
func (cq *ConsumeQueue) MinOffsetInQueue() int64 { return cq.minLogicOffset.Load() / CQStoreUnitSize }

// MaxOffsetInQueue returns the queue offset the next entry will get.
func (cq *ConsumeQueue) MaxOffsetInQueue() int64 { return cq.q.MaxOffset() / CQStoreUnitSize }

// Put appends the entry for queue offset cqOffset. It is idempotent for a
// re-dispatch: an entry whose message ends at or below MaxPhysicOffset, or
// whose cqOffset is already written, is skipped. A gap (cqOffset beyond the
// end) is filled with blank entries and logged, so offsets stay aligned.
func (cq *ConsumeQueue) Put(e CQEntry, cqOffset int64) error {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	if cq.destroyed {
		return ErrCQDestroyed
	}
	if e.CommitLogOffset+int64(e.Size) <= cq.maxPhysicOffset.Load() {
		return nil
	}
	expect := cqOffset * CQStoreUnitSize
	mf, err := cq.q.LastMappedFileOrCreate(expect)
	if err != nil {
		return err
	}
	if cq.q.Len() == 1 && mf.WrotePosition() == 0 && mf.FileFromOffset() == cq.q.MinOffset() && expect != mf.FileFromOffset() {
		// The queue starts at a non-zero offset (its earlier entries are gone
		// or never existed here): pad the first file up to it.
		if expect < mf.FileFromOffset() {
			return fmt.Errorf("%w: %s-%d offset %d below first file %d", ErrCQOrder, cq.topic, cq.queueID, cqOffset, mf.FileFromOffset())
		}
		if err := cq.fillBlank(mf, int(expect-mf.FileFromOffset())); err != nil {
			return err
		}
		cq.minLogicOffset.Store(expect)
		cq.q.SetFlushedWhere(expect)
		cq.log.WithField("offset", cqOffset).Info("consume queue starts at a non-zero offset, filled pre-blank entries")
	}
	current := mf.FileFromOffset() + int64(mf.WrotePosition())
	switch {
	case expect < current:
		// Already built (e.g. re-dispatch after the maxPhysicOffset was reset).
		return nil
	case expect > current:
		cq.log.WithFields(logrus.Fields{"offset": cqOffset, "expected": current / CQStoreUnitSize}).
			Error("consume queue gap, filling with blank entries")
		for current < expect {
			mf, err = cq.q.LastMappedFileOrCreate(current)
			if err != nil {
				return err
			}
			n := int(min(expect-current, int64(mf.FileSize()-mf.WrotePosition())))
			if err := cq.fillBlank(mf, mf.WrotePosition()+n); err != nil {
				return err
			}
			current += int64(n)
		}
		if mf, err = cq.q.LastMappedFileOrCreate(current); err != nil {
			return err
		}
	}
	pos := mf.WrotePosition()
	if err := mf.ensureBacked(pos+CQStoreUnitSize, 0); err != nil {
		return err
	}
	putCQEntry(mf.Buffer()[pos:], e)
	mf.SetWrotePosition(pos + CQStoreUnitSize)
	cq.maxPhysicOffset.Store(e.CommitLogOffset + int64(e.Size))
	return nil
}

// fillBlank writes blank entries from the wrote position up to until; it
// writes nothing when the file's blocks cannot be reserved.
func (cq *ConsumeQueue) fillBlank(mf *MappedFile, until int) error {
	if err := mf.ensureBacked(until, 0); err != nil {
		return err
	}
	buf := mf.Buffer()
	pos := mf.WrotePosition()
	for ; pos+CQStoreUnitSize <= until; pos += CQStoreUnitSize {
		putCQEntry(buf[pos:], CQEntry{CommitLogOffset: 0, Size: blankEntrySize})
	}
	mf.SetWrotePosition(pos)
	return nil
}

// Entry returns the entry at queue offset idx.
func (cq *ConsumeQueue) Entry(idx int64) (CQEntry, bool) {
	r, ok := cq.EntriesFrom(idx)
	if !ok {
		return CQEntry{}, false
	}
	defer r.Release()
	return decodeCQEntry(r.Bytes), true
}

// EntriesFrom holds and returns the published entries from queue offset idx
// to the end of the file holding it. False if idx is below the min offset or
// at/after the end.
func (cq *ConsumeQueue) EntriesFrom(idx int64) (SelectResult, bool) {
	off := idx * CQStoreUnitSize
	if idx < 0 || off < cq.minLogicOffset.Load() {
		return SelectResult{}, false
	}
	mf := cq.q.FindMappedFileByOffset(off, false)
	if mf == nil {
		return SelectResult{}, false
	}
	return mf.SelectFrom(int(off - mf.FileFromOffset()))
}

// residentEntry returns the entry at index idx if its page is in memory,
// read without waiting for the disk (mincore first). ok is false for an
// entry not written yet; resident is false when reading it would fault.
func (cq *ConsumeQueue) residentEntry(idx int64) (e CQEntry, resident, ok bool) {
	off := idx * CQStoreUnitSize
	if idx < 0 || off < cq.minLogicOffset.Load() {
		return e, false, false
	}
	mf := cq.q.FindMappedFileByOffset(off, false)
	if mf == nil || !mf.Hold() {
		return e, false, false
	}
	defer mf.Release()
	pos := int(off - mf.FileFromOffset())
	if pos+CQStoreUnitSize > mf.WrotePosition() {
		return e, false, false
	}
	if !mf.resident(pos) {
		return e, false, true
	}
	return decodeCQEntry(mf.Buffer()[pos:]), true, true
}

// TruncateDirty drops every trailing entry whose message does not end at or
// below phyOffset (the commitlog's valid end), deleting files whose first
// entry is already beyond it.
func (cq *ConsumeQueue) TruncateDirty(phyOffset int64) error {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	maxPhy := int64(-1)
	for {
		mf := cq.q.LastMappedFile()
		if mf == nil {
			break
		}
		buf := mf.Buffer()
		wrote := mf.WrotePosition()
		pos := 0
		for ; pos+CQStoreUnitSize <= wrote; pos += CQStoreUnitSize {
			e := decodeCQEntry(buf[pos:])
			if !e.Valid() {
				break
			}
			if e.Blank() {
				continue
			}
			if e.CommitLogOffset+int64(e.Size) > phyOffset {
				break
			}
			maxPhy = e.CommitLogOffset + int64(e.Size)
		}
		// A file without a single surviving entry goes, except an only file
		// at offset 0, which is kept empty.
		if pos == 0 && (mf.FileFromOffset() > 0 || cq.q.Len() > 1) {
			if wrote > 0 {
				cq.log.WithFields(logrus.Fields{"file": mf.Path(), "phyOffset": phyOffset}).
					Warn("deleting consume queue file: its entries point beyond the commitlog end")
			}
			if err := cq.q.DeleteLastMappedFile(); err != nil {
				return err
			}
			continue
		}
		if pos < wrote {
			e := decodeCQEntry(buf[pos:])
			cq.log.WithFields(logrus.Fields{
				"file": mf.Path(), "offset": pos, "entryPhyOffset": e.CommitLogOffset, "entrySize": e.Size,
				"commitlogEnd": phyOffset,
			}).Warn("truncating consume queue: entry points beyond the commitlog end")
		}
		if err := cq.q.TruncateDirtyFiles(mf.FileFromOffset() + int64(pos)); err != nil {
			return err
		}
		if err := zeroTail(mf, pos, true); err != nil {
			return err
		}
		break
	}
	// Units of the entries cut must not meet the messages that take their
	// offsets next.
	cq.truncateUnitsLocked()
	cq.maxPhysicOffset.Store(maxPhy)
	if cq.q.Len() == 0 {
		cq.minLogicOffset.Store(0)
	}
	return nil
}

// CorrectMinOffset sets the min offset to the first entry whose message is
// at or above phyMinOffset (the commitlog's min offset).
func (cq *ConsumeQueue) CorrectMinOffset(phyMinOffset int64) {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	for _, mf := range cq.q.Files() {
		if !mf.Hold() {
			continue
		}
		buf := mf.Buffer()
		wrote := mf.WrotePosition()
		start := 0
		if m := cq.minLogicOffset.Load(); m > mf.FileFromOffset() {
			start = int(min(m-mf.FileFromOffset(), int64(wrote)))
		}
		for pos := start; pos+CQStoreUnitSize <= wrote; pos += CQStoreUnitSize {
			e := decodeCQEntry(buf[pos:])
			if e.Valid() && !e.Blank() && e.CommitLogOffset >= phyMinOffset {
				off := mf.FileFromOffset() + int64(pos)
				if off > cq.minLogicOffset.Load() {
					cq.minLogicOffset.Store(off)
				}
				mf.Release()
				return
			}
		}
		mf.Release()
	}
	// Every entry is below the min: the queue is empty from its end on.
	if end := cq.q.MaxOffset(); end > cq.minLogicOffset.Load() {
		cq.minLogicOffset.Store(end)
	}
}

// DeleteExpired deletes files whose last entry points below phyMinOffset
// (never the newest file), then corrects the min offset. It returns the
// number of files deleted.
func (cq *ConsumeQueue) DeleteExpired(phyMinOffset int64, forceTimeout time.Duration) int {
	n := cq.q.DeleteBeforeOffset(func(mf *MappedFile) bool {
		if !mf.Hold() {
			return false
		}
		defer mf.Release()
		// The last entry that points at a message decides: blank entries
		// (gaps, messages lost to damage) point nowhere.
		buf := mf.Buffer()
		for pos := mf.WrotePosition() - CQStoreUnitSize; pos >= 0; pos -= CQStoreUnitSize {
			if e := decodeCQEntry(buf[pos:]); !e.Blank() {
				return e.Valid() && e.CommitLogOffset < phyMinOffset
			}
		}
		return mf.WrotePosition() >= CQStoreUnitSize // blank entries only
	}, forceTimeout)
	if cq.units != nil {
		if first := cq.q.FirstMappedFile(); first != nil {
			cq.units.deleteBelow(first.FileFromOffset()/CQStoreUnitSize, forceTimeout)
		}
	}
	cq.CorrectMinOffset(phyMinOffset)
	return n
}

// OffsetByTime returns the smallest queue offset whose message was stored at
// or after ts (RocketMQ 5's lower-bound lookup), searching the whole queue by
// binary search; storeTime returns a message's store time or -1 if the
// message is gone. If every message is older, it returns MaxOffsetInQueue.
func (cq *ConsumeQueue) OffsetByTime(ts int64, storeTime func(phyOffset int64, size int32) int64) int64 {
	lo, hi := cq.MinOffsetInQueue(), cq.MaxOffsetInQueue()
	for lo < hi {
		mid := lo + (hi-lo)/2
		// A blank entry (a gap, a message lost to damage) takes the time
		// of the next message, so it does not split the order.
		j := mid
		e, ok := cq.Entry(j)
		for ok && e.Blank() && j+1 < hi {
			j++
			e, ok = cq.Entry(j)
		}
		t := int64(-1)
		switch {
		case ok && e.Blank():
			t = math.MaxInt64 // blanks up to hi: no older message in [mid, hi)
		case ok && e.Valid():
			t = storeTime(e.CommitLogOffset, e.Size)
		}
		if t < ts { // a gone message counts as older
			lo = j + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Flush persists entries (leastPages as in MappedFileQueue.Flush).
func (cq *ConsumeQueue) Flush(leastPages int) error {
	if cq.units != nil {
		// Units are not worth an error: one lost is evaluated on read.
		_, _ = cq.units.q.Flush(leastPages)
	}
	_, err := cq.q.Flush(leastPages)
	return err
}

// FlushAll persists every entry.
func (cq *ConsumeQueue) FlushAll() error {
	if cq.units != nil {
		_, _ = cq.units.q.FlushAll()
	}
	_, err := cq.q.FlushAll()
	return err
}

// Close unmaps the files.
func (cq *ConsumeQueue) Close() error {
	if cq.units != nil {
		_ = cq.units.q.Close()
	}
	return cq.q.Close()
}

// Destroy deletes the queue's files and directory; later Puts fail with
// ErrCQDestroyed.
func (cq *ConsumeQueue) Destroy() error {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	cq.destroyed = true
	cq.maxPhysicOffset.Store(-1)
	cq.minLogicOffset.Store(0)
	if cq.units != nil {
		if err := cq.units.q.Destroy(); err != nil {
			cq.log.WithError(err).Warn("delete filter bitmap files")
		}
	}
	return cq.q.Destroy()
}
