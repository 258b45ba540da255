package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/sirupsen/logrus"
)

// dispatchIdleWait bounds how long the dispatch loop sleeps when it has
// caught up; a put wakes it at once through the wake channel.
const dispatchIdleWait = 10 * time.Millisecond

// dispatchRetries and dispatchRetryWait bound how long one consume-queue
// write is retried (RocketMQ retries 30 times, 1 s apart).
const (
	dispatchRetries   = 30
	dispatchRetryWait = 100 * time.Millisecond
)

// ArrivingListener is told of every message that got a consume-queue entry:
// its topic, queue, the queue's new max offset (the entry's offset + 1, as
// RocketMQ's reput passes it), tags code and store time. It runs on the
// dispatch goroutine and must not block (long polling only signals).
type ArrivingListener func(topic string, queueID int32, logicOffset int64, tagsCode int64, storeTimestamp int64)

// reputService follows the commitlog end and builds consume-queue and index
// entries (RocketMQ's ReputMessageService). One goroutine, dispatchLoop,
// owns reputFrom while running.
type reputService struct {
	s         *Store
	log       logrus.FieldLogger
	reputFrom atomic.Int64
	wake      chan struct{}
	stop      chan struct{}
	wg        sync.WaitGroup
	listener  atomic.Pointer[ArrivingListener]
}

func newReputService(s *Store, log logrus.FieldLogger) *reputService {
	return &reputService{s: s, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// start launches dispatchLoop from offset from.
func (r *reputService) start(from int64) {
	r.reputFrom.Store(from)
	r.wg.Add(1)
	go r.dispatchLoop()
}

// shutdown stops the loop after a final pass, so everything written before
// is dispatched.
func (r *reputService) shutdown() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	r.wg.Wait()
	r.doReput(false)
}

// signal wakes the loop without blocking: a pending signal already covers
// this put.
func (r *reputService) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
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
		r.doReput(true)
		timer.Reset(dispatchIdleWait)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// doReput dispatches every complete record between reputFrom and the
// commitlog's written end; stoppable returns early once stop is closed.
func (r *reputService) doReput(stoppable bool) {
	cl := r.s.commitLog
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
		if from >= cl.MaxOffset() {
			return
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
			return
		}
		r.dispatchBuffer(&res)
		res.Release()
		if stoppable {
			select {
			case <-r.stop:
				return
			default:
			}
		}
	}
}

// dispatchBuffer walks the records of one GetData result.
func (r *reputService) dispatchBuffer(res *SelectResult) {
	cl := r.s.commitLog
	b := res.Bytes
	pos := 0
	for pos < len(b) {
		req, err := cl.CheckRecord(b[pos:], false)
		offset := res.StartOffset + int64(pos)
		if err != nil {
			// A record the recovery accepted cannot be parsed: skip the rest
			// of this file's written data as RocketMQ's master does.
			r.log.WithFields(logrus.Fields{"offset": offset, "file": fileName(offset - offset%int64(r.s.cfg.MappedFileSizeCommitLog))}).
				WithError(err).Error("dispatch: unreadable commitlog record, skipping the rest of the file")
			r.reputFrom.Store(res.StartOffset + int64(len(b)))
			return
		}
		if req.BlankRecord {
			r.reputFrom.Store(cl.RollNextFile(offset))
			return
		}
		if req.MsgSize <= 0 {
			r.log.WithField("offset", offset).Error("dispatch: record of size 0")
			r.reputFrom.Store(res.StartOffset + int64(len(b)))
			return
		}
		queued := r.dispatch(&req)
		pos += int(req.MsgSize)
		r.reputFrom.Store(offset + int64(req.MsgSize))
		if queued {
			if l := r.listener.Load(); l != nil {
				(*l)(req.Topic, req.QueueID, req.ConsumeQueueOffset+1, req.TagsCode, req.StoreTimestamp)
			}
		}
	}
}

// dispatch writes the consume-queue entry (not for prepared or rolled-back
// transaction records, nor records of a since deleted topic) and the index
// entries of one record. It reports whether the record got a queue entry.
func (r *reputService) dispatch(req *DispatchRequest) bool {
	s := r.s
	if s.wasDeleted(req.Topic, req.CommitLogOffset) {
		return false
	}
	queued := false
	if tt := message.TransactionType(req.SysFlag); tt == message.TransactionNotType || tt == message.TransactionCommitType {
		cq, err := s.consumeQueueOrCreate(req.Topic, req.QueueID)
		if err == nil {
			e := CQEntry{CommitLogOffset: req.CommitLogOffset, Size: req.MsgSize, TagsCode: req.TagsCode}
			for try := 0; ; try++ {
				if err = cq.Put(e, req.ConsumeQueueOffset); err == nil || errors.Is(err, ErrCQOrder) ||
					errors.Is(err, ErrCQDestroyed) || try >= dispatchRetries {
					break
				}
				select {
				case <-r.stop:
					try = dispatchRetries
				case <-time.After(dispatchRetryWait):
				}
			}
		}
		switch {
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
			r.log.WithFields(logrus.Fields{"topic": req.Topic, "offset": req.CommitLogOffset}).
				WithError(err).Error("dispatch: index write failed")
		}
	}
	return queued
}
