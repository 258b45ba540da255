package store

import (
	"sort"

	"github.com/sirupsen/logrus"
)

// LostRange is a commitlog byte range [From, To) that recovery (or dispatch)
// found damaged and skipped: To is where intact records go on. No record in
// it is dispatched or served.
type LostRange struct{ From, To int64 }

// LostRanges returns the lost ranges found since the last Recover, sorted
// (not a copy: do not modify).
func (cl *CommitLog) LostRanges() []LostRange {
	if p := cl.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// lostRangeAt returns the lost range holding offset. Without damage it is
// one atomic load.
func (cl *CommitLog) lostRangeAt(offset int64) (LostRange, bool) {
	r, ok := cl.LostRangeAfter(offset)
	return r, ok && r.From <= offset
}

// LostRangeAfter returns the first lost range that ends after offset (it
// may hold offset): the first damage a reader going on from offset meets.
// An HA master uses it to announce the ranges it pushes to its slaves.
// Without damage it is one atomic load.
func (cl *CommitLog) LostRangeAfter(offset int64) (LostRange, bool) {
	ranges := cl.LostRanges()
	if len(ranges) == 0 {
		return LostRange{}, false
	}
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].To > offset })
	if i < len(ranges) {
		return ranges[i], true
	}
	return LostRange{}, false
}

func (cl *CommitLog) setLostRanges(ranges []LostRange) {
	cl.lostMu.Lock()
	defer cl.lostMu.Unlock()
	if len(ranges) == 0 {
		cl.lost.Store(nil)
		return
	}
	cl.lost.Store(&ranges)
}

// addLostRange records a range found after recovery (by dispatch). The
// slice is replaced, never changed, so readers need no lock.
func (cl *CommitLog) addLostRange(r LostRange) {
	cl.lostMu.Lock()
	defer cl.lostMu.Unlock()
	var ranges []LostRange
	if p := cl.lost.Load(); p != nil {
		ranges = append(ranges, *p...)
	}
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].From >= r.From })
	if i < len(ranges) && ranges[i].From == r.From {
		return
	}
	ranges = append(ranges, LostRange{})
	copy(ranges[i+1:], ranges[i:])
	ranges[i] = r
	cl.lost.Store(&ranges)
}

// addReplicaLost records [from, to), bytes a master announced as lost and a
// replica append copied. A range arrives a frame at a time, so a piece that
// starts where a range ends extends it: recorded whole, the range is the
// master's, and the one this store's recovery finds in the same bytes.
func (cl *CommitLog) addReplicaLost(from, to int64) {
	cl.lostMu.Lock()
	var ranges []LostRange
	if p := cl.lost.Load(); p != nil {
		ranges = append(ranges, *p...)
	}
	for i := range ranges {
		if ranges[i].To == from {
			ranges[i].To = to
			cl.lost.Store(&ranges)
			cl.lostMu.Unlock()
			return
		}
	}
	cl.lostMu.Unlock()
	cl.addLostRange(LostRange{From: from, To: to})
}

// skipDamaged returns where dispatch goes on after the record at pos of res
// does not parse and is in no known lost range (damage in a file recovery
// did not walk): the next record boundary in the file's written data
// (resyncIn), else the end of that data. The skipped range is logged and
// added to the lost ranges.
func (r *reputService) skipDamaged(res *SelectResult, pos int, cause error) int64 {
	cl := r.s.commitLog
	offset := res.StartOffset + int64(pos)
	fileSize := int64(cl.mfq.FileSize())
	fileRest := int(fileSize - res.StartOffset%fileSize)
	lr := LostRange{From: offset, To: res.StartOffset + int64(len(res.Bytes))}
	if p := resyncIn(res.Bytes, res.StartOffset, pos+1, fileRest); p >= 0 {
		lr.To = res.StartOffset + int64(p)
	}
	cl.addLostRange(lr)
	r.log.WithFields(logrus.Fields{
		"file": fileName(offset - offset%fileSize), "from": lr.From, "to": lr.To, "lostBytes": lr.To - lr.From,
	}).WithError(cause).Error("dispatch: damaged commitlog records skipped; the records after them are dispatched")
	return lr.To
}
