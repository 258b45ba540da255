package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/sirupsen/logrus"
)

// dispatchIdleWait bounds how long the dispatch loop sleeps between its
// fallback passes; appenders dispatch their own records (dispatchNow) and
// wake the loop only when they hand work over.
const dispatchIdleWait = 10 * time.Millisecond

// dispatchRetries and dispatchRetryWait bound how long one consume-queue
// write is retried (RocketMQ retries 30 times, 1 s apart). Only the dispatch
// loop retries: an appender hands a failed write over to it.
const (
	dispatchRetries   = 30
	dispatchRetryWait = 100 * time.Millisecond
)

// dispatchNoSpaceMaxWait caps the backoff between attempts to write a
// record's entries while the disk is full.
const dispatchNoSpaceMaxWait = time.Second

// inlineDispatchMaxRecords bounds how many records one appender dispatches
// in one dispatchNow call (its own and those of appenders that lost the
// race for the dispatch lock), so a send on the broker's event loop never
// pays for a long backlog; the rest goes to the dispatch loop.
const inlineDispatchMaxRecords = 256

// ArrivingListener is told of every message that got a consume-queue entry:
// its topic, queue, the queue's new max offset (the entry's offset + 1, as
// RocketMQ's reput passes it), tags code and store time. Calls come one at a
// time in commitlog order, from whichever goroutine dispatches: usually the
// one that appended the message (a broker's event loop), so it must not block
// (long polling only signals).
type ArrivingListener func(topic string, queueID int32, logicOffset int64, tagsCode int64, storeTimestamp int64)

// reputService follows the commitlog end and builds consume-queue and index
// entries (RocketMQ's ReputMessageService).
//
// Dispatch is combining: after each append the appender calls dispatchNow,
// which takes mu with TryLock and, if it wins, dispatches everything up to
// the commitlog's written end as of the pass. An appender that loses leaves its record to
// the holder: every append sets pending, a holder clears it before a pass
// and looks at it again after unlocking, so a record appended during a pass
// is dispatched by that holder or by a later one, never left for the next
// idle tick. dispatchLoop is the fallback (idle passes, catching up after
// recovery, retrying failed consume-queue writes, the backlog an appender
// would not take) and takes the same lock. The lock makes dispatch strictly
// ordered and exactly once.
//
// Dispatching inline can still create a consume-queue or index file on the
// appender (once per file, rare); a failed consume-queue write is never
// retried there.
type reputService struct {
	s   *Store
	log logrus.FieldLogger

	// mu is held by whoever dispatches; reputFrom only moves under it.
	// Readers (behind, the catch-up wait) load reputFrom without it.
	mu        sync.Mutex
	reputFrom atomic.Int64
	// closed is set under mu by shutdown's final pass: nothing dispatches
	// after it (the consume queues are about to be unmapped).
	closed bool
	// pending says an append happened that no pass has covered yet.
	pending atomic.Bool
	// inlineOff makes appenders leave dispatch to the loop: an inline
	// consume-queue write failed and the loop retries it with waits. The
	// loop clears it after a pass that reached the end.
	inlineOff atomic.Bool
	// inlineMax is inlineDispatchMaxRecords (tests change it).
	inlineMax int

	wake     chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
	listener atomic.Pointer[ArrivingListener]

	// bitmap is the scratch filter bitmap (used under mu); unitErrs counts
	// filter units that could not be written, for rate-limited logs.
	bitmap   []byte
	unitErrs atomic.Int64
}

// reputStatus says why a dispatch pass ended.
type reputStatus int

const (
	reputCaughtUp reputStatus = iota // reached the commitlog's written end
	reputStopped                     // the loop's stop channel closed
	reputBudget                      // an inline pass used its record budget
	reputDeferred                    // an inline consume-queue write failed; reputFrom is at its record
)

// reputPass is what one pass may do: inline passes count records against a
// budget and never retry; loop passes return early on stop.
type reputPass struct {
	inline    bool
	stoppable bool
	left      int // records an inline pass may still dispatch
}

func newReputService(s *Store, log logrus.FieldLogger) *reputService {
	return &reputService{
		s: s, log: log, inlineMax: inlineDispatchMaxRecords,
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
		bitmap: make([]byte, s.unitLayout.bitmapBytes),
	}
}

// start launches dispatchLoop from offset from.
func (r *reputService) start(from int64) {
	r.reputFrom.Store(from)
	r.wg.Add(1)
	go r.dispatchLoop()
}

// shutdown stops the loop and makes a final pass under the lock, so
// everything written before is dispatched and no appender dispatches after.
func (r *reputService) shutdown() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	// Puts that were under way when the store refused new ones may still
	// append; they set pending but no longer dispatch.
	r.pending.Store(false)
	r.reputLocked(&reputPass{})
	for r.pending.Swap(false) {
		r.reputLocked(&reputPass{})
	}
}

// signal wakes the loop without blocking: a pending signal already covers
// this one.
func (r *reputService) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// dispatchNow is the commitlog's append hook: the appender dispatches what
// is written (its record and any others not yet dispatched) unless another
// goroutine is dispatching, which then covers this record. It never waits
// for the lock and never sleeps.
func (r *reputService) dispatchNow() {
	r.pending.Store(true)
	if r.inlineOff.Load() {
		r.signal()
		return
	}
	p := reputPass{inline: true, left: r.inlineMax}
	for r.pending.Load() {
		if !r.mu.TryLock() {
			return // the holder looks at pending after unlocking
		}
		if r.closed {
			r.mu.Unlock()
			return
		}
		if r.inlineOff.Load() {
			r.mu.Unlock()
			r.signal()
			return
		}
		// Swap, not Store: reading the appenders' true orders their
		// appends before this pass.
		r.pending.Swap(false)
		st := r.reputLocked(&p)
		if st == reputDeferred {
			r.inlineOff.Store(true)
		}
		r.mu.Unlock()
		if st != reputCaughtUp {
			r.signal()
			return
		}
	}
}

// behind returns how many commitlog bytes are not dispatched yet.
func (r *reputService) behind() int64 {
	return r.s.commitLog.MaxOffset() - r.reputFrom.Load()
}

func (r *reputService) dispatchLoop() {
	defer r.wg.Done()
	timer := time.NewTimer(dispatchIdleWait)
	defer timer.Stop()
	for {
		r.drain()
		timer.Reset(dispatchIdleWait)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// drain is one wake of the loop: a pass that waits for the lock, then, like
// an appender, further passes only while appends arrived and the lock is
// free (a holder covers them otherwise).
func (r *reputService) drain() {
	if !r.pending.Load() && !r.inlineOff.Load() && r.reputFrom.Load() >= r.s.commitLog.MaxOffset() {
		return // idle: do not contend with appenders for the lock
	}
	r.mu.Lock()
	for {
		r.pending.Swap(false)
		st := r.reputLocked(&reputPass{stoppable: true})
		if st == reputCaughtUp {
			r.inlineOff.Store(false)
		}
		r.mu.Unlock()
		if st == reputStopped || !r.pending.Load() || !r.mu.TryLock() {
			return
		}
	}
}

// reputLocked dispatches every complete record between reputFrom and the
// commitlog's written end as of the call, within what p allows (it may go
// further within a file). Records appended meanwhile are left to the
// caller's look at pending: the end is read after pending was cleared, so a
// record it misses has set pending again. Lock should be held.
func (r *reputService) reputLocked(p *reputPass) reputStatus {
	cl := r.s.commitLog
	end := cl.MaxOffset()
	for {
		from := r.reputFrom.Load()
		if from < cl.MinOffset() {
			// Retention removed what we had not dispatched (only possible
			// when dispatch was far behind): resume at the oldest record.
			r.log.WithFields(logrus.Fields{"reputFrom": from, "commitlogMin": cl.MinOffset()}).
				Warn("dispatch offset below the commitlog min offset, skipping ahead")
			from = cl.MinOffset()
			r.reputFrom.Store(from)
		}
		if from >= end {
			return reputCaughtUp
		}
		if p.stoppable {
			select {
			case <-r.stop:
				return reputStopped // shutdown's final pass takes over
			default:
			}
		}
		res, ok := cl.GetData(from)
		if !ok {
			// The file holding from is fully dispatched but has no blank
			// record at its end: move on to the next file if there is one.
			next := cl.RollNextFile(from)
			if next <= cl.MaxOffset() && next > from {
				r.reputFrom.Store(next)
				continue
			}
			return reputCaughtUp
		}
		st := r.dispatchBuffer(&res, p)
		res.Release()
		if st != reputCaughtUp {
			return st
		}
	}
}

// dispatchBuffer walks the records of one GetData result; reputCaughtUp
// means it reached the result's end.
func (r *reputService) dispatchBuffer(res *SelectResult, p *reputPass) reputStatus {
	cl := r.s.commitLog
	b := res.Bytes
	pos := 0
	// Records in a lost range are damaged, even those that parse.
	lost, hasLost := cl.LostRangeAfter(res.StartOffset)
	for pos < len(b) {
		if hasLost && res.StartOffset+int64(pos) >= lost.From {
			r.log.WithFields(logrus.Fields{"from": lost.From, "to": lost.To}).Warn("dispatch: skipping a lost commitlog range")
			r.reputFrom.Store(lost.To)
			return reputCaughtUp
		}
		req, err := cl.CheckRecord(b[pos:], false)
		offset := res.StartOffset + int64(pos)
		if err != nil {
			// Damaged records: skip them, not the rest of the file (RocketMQ
			// does that): the records after them are intact messages.
			r.reputFrom.Store(r.skipDamaged(res, pos, err))
			return reputCaughtUp
		}
		if req.BlankRecord {
			r.reputFrom.Store(cl.RollNextFile(offset))
			return reputCaughtUp
		}
		if req.MsgSize <= 0 {
			r.log.WithField("offset", offset).Error("dispatch: record of size 0")
			r.reputFrom.Store(res.StartOffset + int64(len(b)))
			return reputCaughtUp
		}
		if p.inline {
			if p.left <= 0 {
				return reputBudget
			}
			p.left--
		}
		queued, st := r.dispatch(&req, p.inline)
		if st != reputCaughtUp {
			return st
		}
		pos += int(req.MsgSize)
		r.reputFrom.Store(offset + int64(req.MsgSize))
		if queued {
			if l := r.listener.Load(); l != nil {
				(*l)(req.Topic, req.QueueID, req.ConsumeQueueOffset+1, req.TagsCode, req.StoreTimestamp)
			}
		}
	}
	return reputCaughtUp
}

// dispatch writes the consume-queue entry (not for prepared or rolled-back
// transaction records, nor records of a since deleted topic) and the index
// entries of one record. queued reports whether the record got a queue
// entry; st is reputCaughtUp when the record is done with.
//
// Inline, a consume-queue write that fails with an error worth retrying is
// not retried: st is reputDeferred and the loop takes the record over.
// In the loop, a write that fails for lack of disk space is retried until
// it succeeds, however long that takes: skipping it would lose the message
// for consumers while the commitlog holds it. Meanwhile the store refuses
// writes, and retention keeps the undispatched files (SetRetentionFloor).
// Only shutdown ends the wait (reputStopped), leaving the record to the
// next start's recovery.
func (r *reputService) dispatch(req *DispatchRequest, inline bool) (queued bool, st reputStatus) {
	wait := dispatchRetryWait
	for {
		queued, err := r.dispatchOnce(req, inline)
		noSpace := errors.Is(err, ErrDiskFull)
		if noSpace {
			if r.s.refuse.Or(refuseSpaceDispatch)&refuseSpaceDispatch == 0 {
				r.log.WithFields(logrus.Fields{"topic": req.Topic, "queueId": req.QueueID, "offset": req.CommitLogOffset}).
					WithError(err).Error("disk full: dispatch waits for space, writes are refused until then")
			}
		} else if err == nil && r.s.refuse.Load()&refuseSpaceDispatch != 0 && r.s.refuse.And(^refuseSpaceDispatch)&refuseSpaceDispatch != 0 {
			r.log.WithField("offset", req.CommitLogOffset).Info("disk space available again: dispatch goes on")
		}
		switch {
		case err == nil:
			return queued, reputCaughtUp
		case inline:
			return false, reputDeferred
		}
		select {
		case <-r.stop:
			return false, reputStopped
		case <-time.After(wait):
		}
		wait = min(2*wait, dispatchNoSpaceMaxWait)
	}
}

// dispatchOnce is one attempt at dispatch's work. It returns an error only
// when the record must be tried again: a lack of disk space, or inline a
// consume-queue write worth retrying. Other failures are logged and the
// record counts as done: retried consume-queue writes (dispatchRetries in
// the loop), an index that cannot take the keys.
func (r *reputService) dispatchOnce(req *DispatchRequest, inline bool) (queued bool, retry error) {
	s := r.s
	if s.wasDeleted(req.Topic, req.CommitLogOffset) {
		return false, nil
	}
	if tt := message.TransactionType(req.SysFlag); tt == message.TransactionNotType || tt == message.TransactionCommitType {
		cq, err := s.consumeQueueOrCreate(req.Topic, req.QueueID)
		// Filter bitmaps: one atomic load when off. The calculator is asked
		// after the record was read (below the commitlog end this pass
		// read) and the unit is written before the entry is published:
		// the broker's registration relies on both (filterbitmap.go).
		if fc := s.filterCalc.Load(); fc != nil && err == nil {
			r.putFilterUnit(fc.c, cq, req)
		}
		if err == nil {
			e := CQEntry{CommitLogOffset: req.CommitLogOffset, Size: req.MsgSize, TagsCode: req.TagsCode}
			for try := 0; ; try++ {
				if err = cq.Put(e, req.ConsumeQueueOffset); err == nil || errors.Is(err, ErrCQOrder) ||
					errors.Is(err, ErrCQDestroyed) || errors.Is(err, ErrDiskFull) || try >= dispatchRetries {
					break
				}
				if inline {
					return false, err
				}
				select {
				case <-r.stop:
					try = dispatchRetries
				case <-time.After(dispatchRetryWait):
				}
			}
		}
		switch {
		case errors.Is(err, ErrDiskFull):
			return false, err
		case errors.Is(err, ErrCQDestroyed):
			// The topic was deleted under us: the message is not queued.
		case err != nil:
			r.log.WithFields(logrus.Fields{"topic": req.Topic, "queueId": req.QueueID, "offset": req.CommitLogOffset}).
				WithError(err).Error("dispatch: consume queue write failed")
		default:
			s.setLogicsMsgTimestamp(req.StoreTimestamp)
			queued = true
		}
	}
	if s.index != nil {
		if err := s.index.BuildIndex(req.Topic, req.Keys, req.UniqKey, req.SysFlag, req.CommitLogOffset, req.StoreTimestamp); err != nil {
			if errors.Is(err, ErrDiskFull) {
				// The consume-queue entry stays; writing it again is a no-op.
				return queued, err
			}
			r.log.WithFields(logrus.Fields{"topic": req.Topic, "offset": req.CommitLogOffset}).
				WithError(err).Error("dispatch: index write failed")
		}
	}
	return queued, nil
}
