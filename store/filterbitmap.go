package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Filter bitmaps (RocketMQ's enableCalcFilterBitMap).
//
// A SQL92 subscription must read every record's properties from the
// commitlog, where a tag subscription rejects entries by the tags code in the
// consume queue alone. With filter bitmaps on, dispatch evaluates each SQL92
// filter registered for a topic (by the broker, through a
// FilterBitmapCalculator) on every new message of the topic and stores the
// bloom-filter bits of those that match in a unit beside the message's
// consume-queue entry. A pull whose filter is registered (a BitmapFilter)
// then skips an entry whose unit lacks the filter's bits without reading the
// record; a unit that has them (a match, or a bloom false positive) is
// evaluated on the real properties as before.
//
// RocketMQ keeps the bitmaps in ConsumeQueueExt, which changes the consume
// queue's tags-code field into a pointer to an ext unit. We keep the
// consume-queue files byte-identical instead and store the units in a
// sidecar per queue: <root>/consumequeue_filter/<topic>/<queueId>/, files
// named by their first byte offset, unit n (queue offset n) at n*stride. A
// sidecar file holds the units of exactly the entries of the consume-queue
// file of the same number, so the entries a pull scans (one consume-queue
// file) have their units in one sidecar file.
//
// Unit layout (big-endian):
//
//	[0, 8)        commitlog offset of the message the unit was computed for
//	[8, 12)       its size
//	[12, 12+n)    the bitmap, n = FilterBitmapBits/8 bytes
//	[12+n, 16+n)  check word: a hash of the bloom parameters and bytes
//	              [0, 12+n) (unitHash)
//
// and zero padding up to stride, the next power of two (a unit never
// straddles a page). Safety rests on the check at read time: a unit is
// trusted only when its offset and size are the entry's and its checksum
// holds, so a unit that is missing, zero, torn by a crash, written with
// other bloom parameters, or left by another message is evaluated as if
// there were no bitmap. Units beyond a consume queue's end are zeroed
// whenever the queue is cut (recovery, slave truncation), so a later message
// at a reused commitlog offset never meets an old unit.
//
// Whether a filter's bits in a trusted unit are authoritative is the
// broker's part: a unit computed before the filter was registered lacks its
// bits. BitmapFilter.FilterBitmap says from which commitlog offset on every
// unit was computed by a dispatch that knew the filter, and whether the
// filter is still known. Two orders make that hold:
//
//   - dispatch reads the commitlog end before it asks the calculator (the
//     records it dispatches lie below that end), so a filter registered by
//     publishing it to the calculator and then reading the commitlog end
//     covers every record at or beyond that end;
//   - a unit is written before its consume-queue entry is published and
//     never after, so a pull that sees an entry and then finds the filter
//     still known knows that the entry's unit was computed while the filter
//     was known (a filter is withdrawn from the pulls before the calculator
//     forgets it).

// filterUnitDirName is the sidecar root under the store root.
const filterUnitDirName = "consumequeue_filter"

// filterUnitHeader is the size of a unit's offset and size; the checksum
// follows the bitmap.
const filterUnitHeader = 12

// MaxFilterBitmapBits bounds Config.FilterBitmapBits (a unit of 256 bytes).
const MaxFilterBitmapBits = (256 - filterUnitHeader - 4) * 8

// filterUnitReserveChunk is how much of a sidecar file is reserved on disk
// at a time: sidecar files start as holes (a queue that gets units only
// from some offset on never writes its first ones).
const filterUnitReserveChunk = 64 << 10

// FilterBitmapCalculator computes the filter bitmap of a message at
// dispatch; the broker implements it over its registry of SQL92 filters.
// Calls come one at a time, in commitlog order, from whichever goroutine
// dispatches (often an appender on a broker event loop): it must not block
// or allocate.
type FilterBitmapCalculator interface {
	// CalcFilterBitmap sets in bitmap (Config.FilterBitmapBits/8 bytes,
	// zeroed) the bits of every filter registered for topic that matches
	// props, the record's encoded properties (valid during the call only).
	// It returns false when topic has no filters: no unit is written then.
	CalcFilterBitmap(topic string, props []byte, bitmap []byte) bool
}

// BitmapFilter is a PropertyFilter whose expression dispatch evaluates (a
// filter registered with the FilterBitmapCalculator).
type BitmapFilter interface {
	PropertyFilter
	// FilterBitmap returns the filter's bit positions in a unit's bitmap and
	// the commitlog offset from which on every message's unit was computed
	// by a dispatch that knew this filter; ok is false when the filter has
	// no bitmap (any more): every entry is evaluated. GetMessage calls it
	// once per pull, after it fixed the consume-queue entries it scans.
	FilterBitmap() (bits []uint32, from int64, ok bool)
}

// calcHolder boxes the calculator for an atomic pointer.
type calcHolder struct{ c FilterBitmapCalculator }

// SetFilterBitmapCalculator installs the calculator dispatch asks for each
// new message's bitmap; nil removes it. Without Config.FilterBitmapBits it
// does nothing: filter bitmaps are off.
func (s *Store) SetFilterBitmapCalculator(c FilterBitmapCalculator) {
	if s.cfg.FilterBitmapBits <= 0 {
		return
	}
	if c == nil {
		s.filterCalc.Store(nil)
		return
	}
	s.filterCalc.Store(&calcHolder{c: c})
}

// FilterBitmapsEnabled reports whether the store keeps filter bitmaps.
func (s *Store) FilterBitmapsEnabled() bool { return s.cfg.FilterBitmapBits > 0 }

// filterUnitLayout is the geometry and checksum seed of a store's units.
type filterUnitLayout struct {
	bitmapBytes int
	stride      int
	seed        uint64 // from the bloom parameters: units of others never check
}

func newFilterUnitLayout(bits, hashes int) filterUnitLayout {
	n := (bits + 7) / 8
	stride := 32
	for stride < filterUnitHeader+n+4 {
		stride *= 2
	}
	seed := uint64(bits)<<32 | uint64(uint32(hashes))
	return filterUnitLayout{bitmapBytes: n, stride: stride, seed: mix64(seed ^ 0x6f72626d66696c74)}
}

// check computes the check word of unit u (a whole unit, stride bytes).
func (l *filterUnitLayout) check(u []byte) uint32 {
	return unitHash(l.seed, u, filterUnitHeader+l.bitmapBytes)
}

// unitHash hashes u[:n], u being a whole unit: the 8-byte words covering
// u[:n] are read whole (the last one masked; it ends within the unit, as
// the stride is a multiple of 8 beyond the check word). Each word plus its
// index is multiplied by an odd constant, a bijection, and the products
// are xored: a change of any one word changes the sum, and a torn or
// damaged unit checks with odds of about 2^-32. The products do not depend
// on each other, so the CPU computes them side by side: a pull computes
// this for every entry it skips (a CRC-32C here took a third of a backlog
// drain's time). It guards against accidents, not an adversary.
func unitHash(seed uint64, u []byte, n int) uint32 {
	h := seed
	i := uint64(1)
	k := 0
	for ; k+8 <= n; k += 8 {
		h ^= (binary.LittleEndian.Uint64(u[k:]) + i) * 0x9e3779b97f4a7c15
		i++
	}
	if r := n - k; r > 0 {
		w := binary.LittleEndian.Uint64(u[k:]) & (1<<(8*r) - 1)
		h ^= (w + i) * 0x9e3779b97f4a7c15
	}
	h = mix64(h)
	return uint32(h ^ h>>32)
}

// mix64 is a bijective 64-bit mixer (multiply by an odd constant, then
// fold the high bits down).
func mix64(h uint64) uint64 {
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// checkAt is where a unit's checksum is.
func (l *filterUnitLayout) checkAt() int { return filterUnitHeader + l.bitmapBytes }

// filterUnits is the sidecar of one consume queue. Writes come from the
// dispatcher under the queue's putMu (which also serialises them against
// truncation and Destroy); reads hold the file they read.
type filterUnits struct {
	l filterUnitLayout
	q *MappedFileQueue
	// entriesPerFile is the number of consume-queue entries per file.
	entriesPerFile int64
	log            logrus.FieldLogger
}

func newFilterUnits(root, topic string, queueID int32, cqFileSize int, l filterUnitLayout, log logrus.FieldLogger) *filterUnits {
	per := int64(cqFileSize / CQStoreUnitSize)
	u := &filterUnits{l: l, entriesPerFile: per, log: log}
	u.q = NewMappedFileQueue(filepath.Join(root, topic, strconv.Itoa(int(queueID))), int(per)*l.stride, log)
	// Files start as holes; writes reserve blocks a chunk ahead
	// (ensureBacked), so a full disk is an error, never a SIGBUS. Nothing
	// is synced: a unit lost with the page cache is a unit not trusted.
	u.q.SetAllocator(func(dir string, offset int64, fileSize int) (*MappedFile, error) {
		return createMappedFile(filepath.Join(dir, fileName(offset)), offset, fileSize, 0, false)
	})
	return u
}

// load maps the sidecar's files. Files that do not load (another unit size
// after a change of the bloom parameters, damage) are deleted: the units
// are an optimisation, and missing ones are evaluated.
func (u *filterUnits) load() {
	if err := u.q.Load(); err != nil {
		u.log.WithError(err).Warn("filter bitmap files do not load; deleting them (their messages are evaluated on read)")
		_ = u.q.Close()
		if err := os.RemoveAll(u.q.Dir()); err != nil {
			u.log.WithError(err).Warn("delete filter bitmap files")
		}
	}
}

// put writes the unit of queue offset idx. Caller holds the queue's putMu.
// An error leaves the unit as it was: zero, or a unit for the same entry.
func (u *filterUnits) put(idx, phyOffset int64, size int32, bitmap []byte) error {
	off := idx * int64(u.l.stride)
	mf, err := u.fileFor(off)
	if err != nil {
		return err
	}
	pos := int(off - mf.FileFromOffset())
	if err := mf.ensureBacked(pos+u.l.stride, filterUnitReserveChunk); err != nil {
		return err
	}
	b := mf.Buffer()[pos : pos+u.l.stride]
	// The checksum goes first (cleared) and last (set): a reader of a unit
	// being rewritten sees a mismatch, never a mix it trusts.
	at := u.l.checkAt()
	binary.BigEndian.PutUint32(b[at:], 0)
	binary.BigEndian.PutUint64(b, uint64(phyOffset))
	binary.BigEndian.PutUint32(b[8:], uint32(size))
	copy(b[filterUnitHeader:], bitmap[:u.l.bitmapBytes])
	binary.BigEndian.PutUint32(b[at:], u.l.check(b))
	if w := pos + u.l.stride; w > mf.WrotePosition() {
		mf.SetWrotePosition(w)
	}
	return nil
}

// maxFilterUnitGapFiles bounds how many empty sidecar files a write creates
// to reach its file (a topic that had no filters for a long stretch); past
// it the sidecar starts over at the write.
const maxFilterUnitGapFiles = 16

// fileFor returns the sidecar file holding byte offset off, creating it
// (and the empty files before it) when it lies beyond the last one. An
// offset below the first file has no file: its unit is not written.
func (u *filterUnits) fileFor(off int64) (*MappedFile, error) {
	if mf := u.q.FindMappedFileByOffset(off, false); mf != nil {
		return mf, nil
	}
	last := u.q.LastMappedFile()
	if last != nil && off < last.FileFromOffset() {
		return nil, fmt.Errorf("store: filter unit at %d lies below the sidecar's first file", off)
	}
	if last != nil && (off-last.FileFromOffset())/int64(u.q.FileSize()) > maxFilterUnitGapFiles {
		// Units that far back belong to old messages; they are dropped
		// rather than bridged with empty files.
		if err := u.q.Destroy(); err != nil {
			return nil, err
		}
		last = nil
	}
	for range maxFilterUnitGapFiles + 2 {
		if last != nil {
			// Units never written read as zeros and are not trusted, so the
			// whole file counts as written: the next one may be created.
			last.SetWrotePosition(last.FileSize())
		}
		mf, err := u.q.LastMappedFileOrCreate(off)
		if err != nil {
			return nil, err
		}
		if off >= mf.FileFromOffset() && off < mf.FileFromOffset()+int64(mf.FileSize()) {
			return mf, nil
		}
		last = mf
	}
	return nil, fmt.Errorf("store: no filter unit file for offset %d", off)
}

// truncate zeroes every unit from queue offset idx on and deletes the files
// beyond it. Caller holds the queue's putMu.
func (u *filterUnits) truncate(idx int64) error {
	off := idx * int64(u.l.stride)
	first := u.q.FirstMappedFile()
	if first == nil {
		return nil
	}
	if off <= first.FileFromOffset() {
		return u.q.Destroy()
	}
	if err := u.q.TruncateDirtyFiles(off); err != nil {
		return err
	}
	if mf := u.q.FindMappedFileByOffset(off, false); mf != nil {
		pos := int(off - mf.FileFromOffset())
		if err := zeroData(mf, pos); err != nil {
			return err
		}
		mf.SetWrotePosition(pos)
	}
	return nil
}

// zeroData zeroes bytes [pos, end) of a sidecar file, reading only the
// parts of it that hold data (SEEK_DATA/SEEK_HOLE): the files are sparse,
// and reading a hole through the mapping would fill the page cache with
// zeros for every queue at every start. Where the file system cannot tell
// data from holes, the whole tail is read. Only non-zero pages are written
// (zeroTail), so no block is allocated here.
func zeroData(mf *MappedFile, pos int) error {
	fd := int(mf.file.Fd())
	size := int64(mf.FileSize())
	for p := int64(pos); p < size; {
		d, err := unix.Seek(fd, p, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data beyond p
		}
		if err != nil {
			return zeroTail(mf, int(p), false)
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return zeroTail(mf, int(p), false)
		}
		if err := zeroRange(mf, int(max(d, p)), int(min(h, size)), false); err != nil {
			return err
		}
		p = h
	}
	return nil
}

// deleteBelow deletes the sidecar files whose units all belong to queue
// offsets below idx (the consume queue's first file after retention).
func (u *filterUnits) deleteBelow(idx int64, forceTimeout time.Duration) {
	off := idx * int64(u.l.stride)
	u.q.DeleteBeforeOffset(func(mf *MappedFile) bool {
		return mf.FileFromOffset()+int64(mf.FileSize()) <= off
	}, forceTimeout)
}

// unitReader checks the units of one pull. It holds the sidecar file of
// the entries scanned (one consume-queue file); release it when done.
type unitReader struct {
	l        *filterUnitLayout
	mf       *MappedFile
	firstIdx int64 // queue offset of the file's first unit
	n        int64 // units readable (written when the pull began)
	bits     []uint32
	from     int64
}

// open prepares r for the entries from queue offset idx of cq for filter
// f; it returns false when there is nothing to check against.
func (r *unitReader) open(cq *ConsumeQueue, idx int64, f BitmapFilter) bool {
	u := cq.units
	if u == nil {
		return false
	}
	bits, from, ok := f.FilterBitmap()
	if !ok || len(bits) == 0 {
		return false
	}
	for _, b := range bits {
		if int(b>>3) >= u.l.bitmapBytes {
			return false // bits of another bitmap length: no unit is of it
		}
	}
	mf := u.q.FindMappedFileByOffset(idx*int64(u.l.stride), false)
	if mf == nil || !mf.Hold() {
		return false
	}
	r.l, r.mf, r.bits, r.from = &u.l, mf, bits, from
	r.firstIdx = mf.FileFromOffset() / int64(u.l.stride)
	r.n = int64(mf.WrotePosition() / u.l.stride)
	return true
}

func (r *unitReader) release() {
	if r.mf != nil {
		r.mf.Release()
		r.mf = nil
	}
}

// rejects reports whether the entry at queue offset idx certainly does not
// match: its unit is trusted and lacks one of the filter's bits. Any doubt
// answers false (evaluate the record).
func (r *unitReader) rejects(idx int64, e CQEntry) bool {
	u := r.unit(idx, e)
	// The checksum only when the answer would be a skip: a hit is
	// evaluated anyway.
	return u != nil && r.missing(u) && binary.BigEndian.Uint32(u[r.l.checkAt():]) == r.l.check(u)
}

// likelyRejects is rejects without the checksum: a hint (which records are
// worth prefetching), never a reason to skip one.
func (r *unitReader) likelyRejects(idx int64, e CQEntry) bool {
	u := r.unit(idx, e)
	return u != nil && r.missing(u)
}

// unit returns the unit of the entry at idx if it names the entry's
// message, else nil.
func (r *unitReader) unit(idx int64, e CQEntry) []byte {
	if r.mf == nil || e.CommitLogOffset < r.from {
		return nil
	}
	i := idx - r.firstIdx
	if i < 0 || i >= r.n {
		return nil
	}
	stride := int64(r.l.stride)
	u := r.mf.data[i*stride : (i+1)*stride]
	if int64(binary.BigEndian.Uint64(u)) != e.CommitLogOffset || int32(binary.BigEndian.Uint32(u[8:])) != e.Size {
		return nil
	}
	return u
}

// missing reports whether unit u lacks one of the filter's bits.
func (r *unitReader) missing(u []byte) bool {
	bm := u[filterUnitHeader:]
	for _, b := range r.bits {
		if bm[b>>3]&(1<<(b&7)) == 0 {
			return true
		}
	}
	return false
}

// putFilterUnit computes and writes the filter unit of a record about to
// get its consume-queue entry (before it: see the orders above). A unit that cannot be written (a full disk,
// an I/O error) is left out: reads evaluate that message, and dispatch goes
// on. Called under the dispatch lock (it uses the reput's scratch bitmap).
func (r *reputService) putFilterUnit(c FilterBitmapCalculator, cq *ConsumeQueue, req *DispatchRequest) {
	if cq.units == nil || req.props == nil {
		return
	}
	bm := r.bitmap
	clear(bm)
	if !c.CalcFilterBitmap(req.Topic, req.props, bm) {
		return
	}
	if err := cq.putUnit(req.ConsumeQueueOffset, req.CommitLogOffset, req.MsgSize, bm); err != nil {
		if r.unitErrs.Add(1)%1000 == 1 { // a full disk fails every write: log a few
			r.log.WithFields(logrus.Fields{"topic": req.Topic, "queueId": req.QueueID, "offset": req.CommitLogOffset}).
				WithError(err).Warn("filter bitmap not written; the message is evaluated on read")
		}
	}
}

// putUnit writes a filter unit under putMu, for an entry not published
// yet: a unit never changes once a pull can see its entry (a record
// dispatched again keeps the unit it had, or has none), so what a pull
// trusts was computed when the filter was known. A unit written for an
// entry that then fails lies beyond the queue's end until a later entry
// takes its place: it names another message then (and is not trusted), or
// the same one dispatched again.
func (cq *ConsumeQueue) putUnit(idx, phyOffset int64, size int32, bitmap []byte) error {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	switch {
	case cq.destroyed:
		return ErrCQDestroyed
	case idx < 0:
		return errors.New("store: filter unit at a negative queue offset")
	case idx < cq.MaxOffsetInQueue():
		return nil // its entry is published
	}
	return cq.units.put(idx, phyOffset, size, bitmap)
}

// truncateUnits zeroes the filter units from the queue's end on (after
// recovery cut it). A sidecar that cannot be cut is deleted.
func (cq *ConsumeQueue) truncateUnits() {
	cq.putMu.Lock()
	defer cq.putMu.Unlock()
	cq.truncateUnitsLocked()
}

func (cq *ConsumeQueue) truncateUnitsLocked() {
	if cq.units == nil {
		return
	}
	if err := cq.units.truncate(cq.MaxOffsetInQueue()); err != nil {
		cq.log.WithError(err).Warn("cannot cut the filter bitmap files; deleting them")
		if err := cq.units.q.Destroy(); err != nil {
			cq.log.WithError(err).Error("delete filter bitmap files")
		}
	}
}
