package store

import (
	"fmt"
	"math"
	"sort"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/message"
)

// cqVerifier checks consume-queue entries against the recovered commitlog:
// the commitlog is the source of truth, and an entry that does not describe
// its record exactly is cut so that dispatch writes it again. Recovery runs
// before any other goroutine, so it reads the mappings without holds.
type cqVerifier struct {
	files    []*MappedFile // the commitlog's, oldest first, contiguous
	fileSize int64
	min, max int64 // the commitlog's min and (recovered) max offset
	lost     []LostRange
}

func newCQVerifier(cl *CommitLog) *cqVerifier {
	return &cqVerifier{
		files:    cl.mfq.Files(),
		fileSize: int64(cl.mfq.FileSize()),
		min:      cl.MinOffset(),
		max:      cl.MaxOffset(),
		lost:     cl.LostRanges(),
	}
}

// entryVerdict is what checking one consume-queue entry found.
type entryVerdict int

const (
	entryGood       entryVerdict = iota // its record is there and matches
	entryUnverified                     // its record was deleted (below the commitlog min): only its place is checked
	entryLost                           // it points into a lost range: the record is damaged
	entryBad                            // cut the queue here
)

// Why an entry is cut. Constants, so checking an entry allocates nothing.
const (
	whyEntrySize     = "entry size is not a plausible record size"
	whyEntryOrder    = "entry points below the end of the previous entry's message"
	whyEntryBeyond   = "entry points beyond the commitlog end"
	whyEntryNoFile   = "no commitlog file holds the entry's offset"
	whyEntryNoRecord = "no record of the entry's size starts at the entry's offset"
	whyEntryQueue    = "the record has another queue id or queue offset"
	whyEntryTopic    = "the record has another topic"
	whyEntryTrans    = "the record is a prepared or rolled-back transaction message"
	whyEntryTags     = "the entry's tags code is not the record's"
)

// check verifies entry e, the entry at queueOffset of topic/queueID, whose
// predecessor's message ends at prevEnd (-1: unknown).
//
// Structure: a size a record can have, an offset at or after prevEnd
// (entries of a queue point at increasing, non-overlapping records) and a
// record that ends within the commitlog. Then, unless the record was deleted
// or is in a lost range, the record itself: parsed in place (magic, sizes),
// TOTALSIZE equal to the entry's size, PHYSICALOFFSET equal to the entry's
// offset, QUEUEID and QUEUEOFFSET equal to the queue and the entry's index,
// the topic, a transaction type that gets queue entries, and the tags code
// dispatch derives from it (queueTagsCode: the delivery time for scheduled
// topics). Nothing is allocated unless the entry is bad.
//
// Cost: less than dispatching the record, on the same bytes. Warm, a check
// takes about 60-140 ns (BenchmarkConsumeQueueRecover: 1,000,000 entries of
// one queue in 65-140 ms on a shared 2-core VM, where building them by
// dispatch took 470-810 ms and the scan without checks 7-17 ms). On a cold
// page cache it reads the commitlog pages holding each record's header and
// properties, which for records under a page or two is the commitlog range
// the scanned entries (the last three files of every queue) cover: the read
// a re-dispatch of those messages would make, sequential within a queue and
// helped by the kernel's readahead; queues over the same range share it.
// (The benchmark's cold case, 1,000,000 records of 200 bytes after
// posix_fadvise DONTNEED, took about 215-345 ms on a virtual disk the host
// may cache; a real disk reads the 200 MB at its sequential speed.)
func (v *cqVerifier) check(e CQEntry, topic string, queueID int32, queueOffset, prevEnd int64) (entryVerdict, string) {
	off, size := e.CommitLogOffset, int64(e.Size)
	switch {
	case size < message.MinRecordLength || size+message.BlankRecordLength > v.fileSize:
		return entryBad, whyEntrySize
	case off < prevEnd:
		return entryBad, whyEntryOrder
	case off > v.max-size:
		return entryBad, whyEntryBeyond
	case off < v.min:
		return entryUnverified, ""
	}
	if len(v.lost) > 0 && inLostRanges(v.lost, off) {
		return entryLost, ""
	}
	mf := v.file(off)
	if mf == nil {
		return entryBad, whyEntryNoFile
	}
	pos := off - mf.FileFromOffset()
	if pos+size > v.fileSize {
		return entryBad, whyEntryNoRecord
	}
	r, err := message.ParseRecord(mf.Buffer()[pos : pos+size])
	if err != nil || int64(r.Size()) != size || r.PhysicalOffset() != off {
		return entryBad, whyEntryNoRecord
	}
	if r.QueueID() != queueID || r.QueueOffset() != queueOffset {
		return entryBad, whyEntryQueue
	}
	if string(r.Topic()) != topic {
		return entryBad, whyEntryTopic
	}
	if tt := message.TransactionType(r.SysFlag()); tt != message.TransactionNotType && tt != message.TransactionCommitType {
		return entryBad, whyEntryTrans
	}
	_, _, tags, timerOut := dispatchProperties(r.Properties())
	if queueTagsCode(topic, tags, timerOut) != e.TagsCode {
		return entryBad, whyEntryTags
	}
	return entryGood, ""
}

// file returns the commitlog file holding off, nil if none does.
func (v *cqVerifier) file(off int64) *MappedFile {
	start := off - off%v.fileSize
	if i := (start - v.files[0].FileFromOffset()) / v.fileSize; i >= 0 && i < int64(len(v.files)) &&
		v.files[i].FileFromOffset() == start {
		return v.files[i]
	}
	// Files missing in the middle (MappedFileQueue.Load warns of it).
	i := sort.Search(len(v.files), func(i int) bool { return v.files[i].FileFromOffset() >= start })
	if i < len(v.files) && v.files[i].FileFromOffset() == start {
		return v.files[i]
	}
	return nil
}

// inLostRanges reports whether off lies in one of the sorted ranges.
func inLostRanges(ranges []LostRange, off int64) bool {
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].To > off })
	return i < len(ranges) && ranges[i].From <= off
}

// claimedEnd returns the highest commitlog end claimed by the entries
// recovery scans (-1 if none), read as Recover reads them and before the
// commitlog is recovered: zeros the commitlog walk meets below it are not
// the end of the log.
func (cq *ConsumeQueue) claimedEnd() int64 {
	files := cq.q.Files()
	end := int64(-1)
	for _, mf := range files[max(0, len(files)-cqRecoverFiles):] {
		buf := mf.Buffer()
		for pos := 0; pos+CQStoreUnitSize <= mf.FileSize(); pos += CQStoreUnitSize {
			e := decodeCQEntry(buf[pos:])
			if !e.Valid() {
				return end
			}
			if !e.Blank() && e.CommitLogOffset <= math.MaxInt64-int64(e.Size) {
				end = max(end, e.CommitLogOffset+int64(e.Size))
			}
		}
	}
	return end
}

// cqRecoverFiles is how many trailing files of a consume queue recovery
// scans (ConsumeQueue.recover starts at the 3rd-last file).
const cqRecoverFiles = 3

// RecoverVerified is Recover checking every entry it scans against the
// commitlog cl has just recovered (see cqVerifier.check). At the first
// entry that fails, the queue is cut there as at its end (the rest zeroed,
// later files deleted), and rebuildFrom is where dispatch must start to
// write the cut entries again with their original queue offsets: the end
// of the previous good entry's message, where the cut entry's message must
// lie (the commitlog min when no entry before it can be trusted). Entries
// pointing into lost ranges are kept for BlankLost. rebuildFrom is -1 when
// nothing was cut.
func (cq *ConsumeQueue) RecoverVerified(cl *CommitLog) (rebuildFrom int64, err error) {
	return cq.recover(newCQVerifier(cl))
}

// recover is Recover, and with v RecoverVerified.
func (cq *ConsumeQueue) recover(v *cqVerifier) (int64, error) {
	files := cq.q.Files()
	if len(files) == 0 {
		return -1, nil
	}
	start := max(0, len(files)-cqRecoverFiles)
	processOffset := files[start].FileFromOffset()
	maxPhy := int64(-1)
	prevEnd := int64(-1) // end of the last good entry's message (v only)
	if v != nil && start > 0 {
		prevEnd = cq.seedEnd(v, files[start-1])
	}
	rebuildFrom := int64(-1)
	for i := start; i < len(files); i++ {
		mf := files[i]
		buf := mf.Buffer()
		pos := 0
	scan:
		for ; pos+CQStoreUnitSize <= mf.FileSize(); pos += CQStoreUnitSize {
			e := decodeCQEntry(buf[pos:])
			qoff := (mf.FileFromOffset() + int64(pos)) / CQStoreUnitSize
			if !e.Valid() {
				if v != nil && !isZero(buf[pos:pos+CQStoreUnitSize]) {
					// Not the end of the entries but a damaged or torn
					// one: what follows it is cut and written again.
					rebuildFrom = cq.cutLog(v, mf, pos, qoff, e, prevEnd, "entry has a negative offset or a size of 0 or less")
				}
				break
			}
			if e.Blank() {
				continue
			}
			if v != nil {
				verdict, why := v.check(e, cq.topic, cq.queueID, qoff, prevEnd)
				switch verdict {
				case entryLost:
					continue // BlankLost rewrites it
				case entryBad:
					rebuildFrom = cq.cutLog(v, mf, pos, qoff, e, prevEnd, why)
					break scan
				}
				prevEnd = e.CommitLogOffset + int64(e.Size)
			}
			maxPhy = e.CommitLogOffset + int64(e.Size)
		}
		processOffset = mf.FileFromOffset() + int64(pos)
		if pos < mf.FileSize() {
			if err := zeroTail(mf, pos, true); err != nil {
				return -1, err
			}
			break
		}
	}
	if maxPhy < 0 && start > 0 {
		// Nothing kept in the scanned files: the newest entry is the last
		// of the file before them (TruncateDirty checks it against the
		// commitlog end).
		maxPhy = lastEntryEnd(files[start-1])
	}
	if maxPhy >= 0 {
		cq.maxPhysicOffset.Store(maxPhy)
	}
	cq.minLogicOffset.Store(files[0].FileFromOffset())
	return rebuildFrom, cq.q.TruncateDirtyFiles(processOffset)
}

// lastEntryEnd returns the end of the message of the last non-blank entry
// of a full file, -1 if there is none.
func lastEntryEnd(mf *MappedFile) int64 {
	buf := mf.Buffer()
	for pos := mf.FileSize() - mf.FileSize()%CQStoreUnitSize - CQStoreUnitSize; pos >= 0; pos -= CQStoreUnitSize {
		if e := decodeCQEntry(buf[pos:]); e.Valid() && !e.Blank() && e.CommitLogOffset <= math.MaxInt64-int64(e.Size) {
			return e.CommitLogOffset + int64(e.Size)
		}
	}
	return -1
}

// cutLog logs the cut of entry e (queue offset qoff, at pos of mf) and
// returns where dispatch must start to write the entries again.
func (cq *ConsumeQueue) cutLog(v *cqVerifier, mf *MappedFile, pos int, qoff int64, e CQEntry, prevEnd int64, why string) int64 {
	from := prevEnd
	if from < 0 {
		from = v.min
	}
	cq.log.WithFields(logrus.Fields{
		"file": mf.Path(), "offset": pos, "queueOffset": qoff, "entryPhyOffset": e.CommitLogOffset,
		"entrySize": e.Size, "entryTagsCode": e.TagsCode, "commitlogEnd": v.max, "reason": why, "rebuildFrom": from,
	}).Warn("truncating consume queue: " + why + "; dispatch rebuilds the entries from the commitlog")
	return from
}

// seedEnd returns the end of the message of the last entry of mf (the file
// before the ones recovery scans) if that entry checks out, else -1.
func (cq *ConsumeQueue) seedEnd(v *cqVerifier, mf *MappedFile) int64 {
	buf := mf.Buffer()
	for pos := mf.FileSize() - mf.FileSize()%CQStoreUnitSize - CQStoreUnitSize; pos >= 0; pos -= CQStoreUnitSize {
		e := decodeCQEntry(buf[pos:])
		if e.Blank() {
			continue
		}
		if !e.Valid() {
			return -1
		}
		qoff := (mf.FileFromOffset() + int64(pos)) / CQStoreUnitSize
		if verdict, _ := v.check(e, cq.topic, cq.queueID, qoff, -1); verdict == entryGood || verdict == entryUnverified {
			return e.CommitLogOffset + int64(e.Size)
		}
		return -1
	}
	return -1
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// BlankLost rewrites every entry whose message starts in r, a lost
// commitlog range, as a blank entry (RocketMQ's filler: offset 0, size
// MaxInt32), and syncs them. Reads skip blank entries, so no damaged bytes
// are served, and the messages after them keep their queue offsets. Entries
// point at increasing offsets, so a binary search finds them in the whole
// queue, not only the files recovery scanned. It returns the first and last
// queue offsets rewritten, and how many (0: none). Recovery only.
func (cq *ConsumeQueue) BlankLost(r LostRange) (first, last int64, n int, err error) {
	files := cq.q.Files()
	if len(files) == 0 {
		return 0, 0, 0, nil
	}
	base := files[0].FileFromOffset()
	fileSize := int64(cq.q.FileSize())
	at := func(idx int64) (*MappedFile, int) {
		off := idx * CQStoreUnitSize
		i := (off - base) / fileSize
		if i < 0 || i >= int64(len(files)) {
			return nil, 0
		}
		mf := files[i]
		return mf, int(off - mf.FileFromOffset())
	}
	entry := func(idx int64) CQEntry {
		mf, pos := at(idx)
		if mf == nil {
			return CQEntry{CommitLogOffset: -1}
		}
		return decodeCQEntry(mf.Buffer()[pos:])
	}
	// The first index whose next non-blank entry points at or after r.From.
	lo, end := base/CQStoreUnitSize, cq.q.MaxOffset()/CQStoreUnitSize
	hi := end
	for lo < hi {
		mid := lo + (hi-lo)/2
		j := mid
		for j < hi && entry(j).Blank() {
			j++
		}
		if j == hi || entry(j).CommitLogOffset >= r.From {
			hi = mid
		} else {
			lo = j + 1
		}
	}
	dirty := map[*MappedFile][2]int{}
	for idx := lo; idx < end; idx++ {
		e := entry(idx)
		if !e.Valid() || e.Blank() {
			continue
		}
		if e.CommitLogOffset >= r.To {
			break
		}
		if e.CommitLogOffset < r.From {
			continue // out of order (damage elsewhere): not this range's
		}
		mf, pos := at(idx)
		putCQEntry(mf.Buffer()[pos:], CQEntry{CommitLogOffset: 0, Size: blankEntrySize})
		d, ok := dirty[mf]
		if !ok {
			d = [2]int{pos, pos + CQStoreUnitSize}
		}
		dirty[mf] = [2]int{min(d[0], pos), max(d[1], pos+CQStoreUnitSize)}
		if n == 0 {
			first = idx
		}
		last = idx
		n++
	}
	for mf, d := range dirty {
		from := d[0] &^ (osPageSize - 1)
		if serr := unix.Msync(mf.Buffer()[from:d[1]], unix.MS_SYNC); serr != nil && err == nil {
			err = fmt.Errorf("store: sync blank entries of %s: %w", mf.Path(), serr)
		}
	}
	return first, last, n, err
}
