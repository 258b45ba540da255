package broker

import (
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// parkResult says what park did with a request.
type parkResult int

const (
	parked   parkResult = iota // held; it will be answered later
	holdFull                   // refused: too many requests held
	holdDown                   // refused: the service is shutting down
)

// holdKey names one queue.
type holdKey struct {
	topic   string
	queueID int32
}

// pullHoldService parks long-polling pulls (RocketMQ's
// PullRequestHoldService) without holding a worker. A parked request is run
// again on the pull pool as soon as the store's arriving listener reports a
// message for its queue beyond its offset that its filter accepts, or when
// its deadline passes. holdLoop owns the deadline checks and runs the
// requests the pull pool had no room for.
type pullHoldService struct {
	cs *consumeState

	mu     sync.Mutex // guards table, count, closed, overflow and the totals
	table  map[holdKey][]*pullRequest
	count  int
	closed bool
	// parkedTotal and refusedTotal count pulls parked, and refused for a
	// full table, since start (for the metrics).
	parkedTotal, refusedTotal int64
	// overflow holds woken requests the pull pool refused; holdLoop runs
	// them itself.
	overflow []*pullRequest

	kick chan struct{} // 1-buffered: overflow has work
}

func newPullHoldService(cs *consumeState) *pullHoldService {
	return &pullHoldService{cs: cs, table: make(map[holdKey][]*pullRequest), kick: make(chan struct{}, 1)}
}

// park holds pr until a message arrives or its deadline. A message that
// arrived between the store read and the parking would not wake it, so
// after parking the queue's max offset is checked once more.
func (hs *pullHoldService) park(pr *pullRequest) parkResult {
	k := holdKey{pr.h.Topic, pr.h.QueueID}
	hs.mu.Lock()
	switch {
	case hs.closed:
		hs.mu.Unlock()
		return holdDown
	case hs.count >= hs.cs.cfg.maxHeldPulls:
		hs.refusedTotal++
		hs.mu.Unlock()
		return holdFull
	}
	hs.table[k] = append(hs.table[k], pr)
	hs.count++
	hs.parkedTotal++
	hs.mu.Unlock()
	if maxOff := hs.cs.b.store.MaxOffsetInQueue(pr.h.Topic, pr.h.QueueID); maxOff > pr.h.QueueOffset {
		hs.wakeQueue(k, maxOff, 0, false)
	}
	return parked
}

// notifyMessageArriving is the store's arriving listener: it runs on the
// dispatching goroutine (usually the event loop that stored the message)
// for every new consume-queue entry, so it only takes
// the matching requests out of the table and hands them to the pull pool.
func (hs *pullHoldService) notifyMessageArriving(topic string, queueID int32, maxOffset, tagsCode, _ int64) {
	hs.wakeQueue(holdKey{topic, queueID}, maxOffset, tagsCode, true)
}

// wakeQueue runs the requests of queue k whose offset is below maxOffset
// and, when checkTags, whose filter accepts tagsCode.
func (hs *pullHoldService) wakeQueue(k holdKey, maxOffset, tagsCode int64, checkTags bool) {
	hs.mu.Lock()
	list := hs.table[k]
	if len(list) == 0 {
		hs.mu.Unlock()
		return
	}
	var woken []*pullRequest
	keep := list[:0]
	for _, pr := range list {
		if maxOffset > pr.h.QueueOffset && (!checkTags || pr.filter == nil || pr.filter.IsMatchedByConsumeQueue(tagsCode)) {
			woken = append(woken, pr)
			continue
		}
		keep = append(keep, pr)
	}
	hs.setQueueLocked(k, list, keep)
	hs.count -= len(woken)
	hs.mu.Unlock()
	for _, pr := range woken {
		hs.run(pr)
	}
}

// setQueueLocked stores the kept requests of a queue, clearing the tail of
// the old slice so answered requests can be collected. Lock should be held.
func (hs *pullHoldService) setQueueLocked(k holdKey, old, keep []*pullRequest) {
	for i := len(keep); i < len(old); i++ {
		old[i] = nil
	}
	if len(keep) == 0 {
		delete(hs.table, k)
		return
	}
	hs.table[k] = keep
}

// run answers a woken request on the pull pool, or through holdLoop when
// the pool is full or stopped.
func (hs *pullHoldService) run(pr *pullRequest) {
	if hs.cs.b.pools.Pull.Submit(func() { hs.answer(pr) }) {
		return
	}
	hs.mu.Lock()
	if hs.closed {
		// shutdown already took the overflow: answer here.
		hs.mu.Unlock()
		hs.answer(pr)
		return
	}
	hs.overflow = append(hs.overflow, pr)
	hs.mu.Unlock()
	select {
	case hs.kick <- struct{}{}:
	default:
	}
}

// answer runs the pull again (without parking) and writes its response.
func (hs *pullHoldService) answer(pr *pullRequest) {
	resp, body := hs.cs.executePull(pr, false)
	if body != nil {
		hs.cs.writePull(pr, resp, body)
		return
	}
	if resp == nil {
		return
	}
	if err := pr.conn.Reply(pr.req, resp); err != nil && !errors.Is(err, remoting.ErrConnClosed) {
		hs.cs.log.WithFields(logrus.Fields{"peer": pr.conn.RemoteAddr(), "topic": pr.h.Topic}).WithError(err).
			Debug("cannot answer a parked pull")
	}
}

// holdLoop answers requests whose deadline passed, runs overflowed
// wake-ups, and now and then compares every parked request with its
// queue's max offset in case a wake-up was missed.
func (hs *pullHoldService) holdLoop() {
	defer hs.cs.wg.Done()
	t := time.NewTicker(hs.cs.cfg.holdCheckInterval)
	defer t.Stop()
	lastRecheck := time.Now()
	for {
		select {
		case <-hs.cs.stop:
			return
		case <-hs.kick:
			hs.runOverflow()
		case now := <-t.C:
			hs.expire(now)
			if now.Sub(lastRecheck) >= hs.cs.cfg.holdRecheck {
				lastRecheck = now
				hs.recheck()
			}
			hs.runOverflow()
		}
	}
}

// runOverflow answers the wake-ups the pull pool refused, on holdLoop.
func (hs *pullHoldService) runOverflow() {
	hs.mu.Lock()
	list := hs.overflow
	hs.overflow = nil
	hs.mu.Unlock()
	for _, pr := range list {
		hs.answer(pr)
	}
}

// expire takes out every request whose deadline passed and answers it.
func (hs *pullHoldService) expire(now time.Time) {
	var due []*pullRequest
	hs.mu.Lock()
	for k, list := range hs.table {
		keep := list[:0]
		for _, pr := range list {
			if !now.Before(pr.deadline) {
				due = append(due, pr)
				continue
			}
			keep = append(keep, pr)
		}
		hs.setQueueLocked(k, list, keep)
	}
	hs.count -= len(due)
	hs.mu.Unlock()
	for _, pr := range due {
		hs.run(pr)
	}
}

// recheck wakes requests whose queue grew past them without a wake-up and
// drops requests whose connection closed.
func (hs *pullHoldService) recheck() {
	hs.mu.Lock()
	keys := make([]holdKey, 0, len(hs.table))
	for k := range hs.table {
		keys = append(keys, k)
	}
	dropped := 0
	for k, list := range hs.table {
		keep := list[:0]
		for _, pr := range list {
			if pr.conn.Closed() {
				dropped++
				continue
			}
			keep = append(keep, pr)
		}
		hs.setQueueLocked(k, list, keep)
	}
	hs.count -= dropped
	hs.mu.Unlock()
	for _, k := range keys {
		hs.wakeQueue(k, hs.cs.b.store.MaxOffsetInQueue(k.topic, k.queueID), 0, false)
	}
}

// held returns the number of parked requests.
func (hs *pullHoldService) held() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.count
}

// shutdown refuses new parking and answers every parked request at once
// (with what the store has, or PULL_NOT_FOUND), on the caller's goroutine.
func (hs *pullHoldService) shutdown() {
	hs.mu.Lock()
	if hs.closed {
		hs.mu.Unlock()
		return
	}
	hs.closed = true
	var all []*pullRequest
	for _, list := range hs.table {
		all = append(all, list...)
	}
	all = append(all, hs.overflow...)
	hs.table = make(map[holdKey][]*pullRequest)
	hs.overflow = nil
	hs.count = 0
	hs.mu.Unlock()
	// Parked means nothing new was there; whatever arrives now is pulled
	// after the restart (see shuttingDownPull).
	for _, pr := range all {
		if err := pr.conn.Reply(pr.req, shuttingDownPull(pr.req)); err != nil && !errors.Is(err, remoting.ErrConnClosed) {
			hs.cs.log.WithFields(logrus.Fields{"peer": pr.conn.RemoteAddr(), "topic": pr.h.Topic}).WithError(err).
				Debug("cannot answer a parked pull at shutdown")
		}
	}
}

// totals returns the pulls parked now, parked since start and refused since
// start for a full table.
func (hs *pullHoldService) totals() (held int, parked, refused int64) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.count, hs.parkedTotal, hs.refusedTotal
}
