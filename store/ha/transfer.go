package ha

import (
	"container/heap"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorocketmq/gorocketmq/store"
)

// Errors a replication wait ends with.
var (
	// ErrSlaveNotAvailable means no slave is connected, or the slaves are
	// more than haSlaveFallbehindMax behind: the message is stored on the
	// master only (SLAVE_NOT_AVAILABLE).
	ErrSlaveNotAvailable = errors.New("ha: no slave available")
	// ErrSlaveTimeout means no slave acknowledged the message within
	// slaveTimeout; it stays stored on the master and may still reach a
	// slave (FLUSH_SLAVE_TIMEOUT).
	ErrSlaveTimeout = errors.New("ha: slave did not acknowledge in time")
	// ErrShutdown means the master was shut down while the send waited.
	ErrShutdown = errors.New("ha: shut down")
)

// Result is the outcome of a replication wait: PutOK, FlushSlaveTimeout or
// SlaveNotAvailable, and why when not PutOK. It is the store's type, so
// Master.WaitReplicated is a store.ReplicaWaiter as it stands:
// st.SetReplicaWaiter(m.WaitReplicated) makes a SYNC_MASTER.
type Result = store.ReplicaResult

// waiter is one send waiting for a slave's ack.
type waiter struct {
	next     int64 // the ack that releases it: the end of its records
	deadline time.Time
	done     func(Result)
	index    int  // position in the offset heap, -1 when out of it
	settled  bool // taken to be answered; guarded by transferService.mu
}

// waiterHeap orders waiters by offset, so one ack releases a prefix.
type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].next < h[j].next }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// transferService answers SYNC_MASTER sends once a slave acked their
// offset or their slaveTimeout passed (RocketMQ's GroupTransferService),
// without a goroutine or a timer per send. A sender queues a waiter and
// returns. Waiters are kept in a heap by offset, so the goroutine that reads
// an ack answers the whole prefix it covers, in offset order, at once; and
// in arrival order, which is deadline order since every waiter gets the same
// timeout, so one goroutine, expireLoop, sleeps until the oldest deadline.
// Answering on the reader saves a goroutine hop per ack: measured, each hop
// adds scheduling delay to the lag a SYNC_MASTER send waits out.
type transferService struct {
	acked   *atomic.Int64 // push2SlaveMaxOffset, owned by the master
	timeout time.Duration

	// answerMu is held while answers are taken and given, so they come
	// out in offset order even when two slaves ack at once. Never held by
	// wait, so a done callback may call WaitReplicated again.
	answerMu sync.Mutex
	batch    []*waiter // guarded by answerMu

	mu         sync.Mutex
	byOffset   waiterHeap // guarded by mu
	byDeadline []*waiter  // guarded by mu; settled ones are dropped lazily
	stopped    bool       // guarded by mu
	// pending counts waiters not yet answered, so acks look only when
	// someone waits.
	pending atomic.Int64

	wake chan struct{} // a first waiter arrived: expireLoop arms its timer
	stop chan struct{}
	done chan struct{}
}

func newTransferService(acked *atomic.Int64, timeout time.Duration) *transferService {
	return &transferService{
		acked: acked, timeout: timeout,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

func (ts *transferService) start() { go ts.expireLoop() }

// acknowledged answers the waiters push2SlaveMaxOffset now covers; the
// master calls it after the value grew, on the goroutine that read the ack.
func (ts *transferService) acknowledged() {
	if ts.pending.Load() == 0 {
		return
	}
	ts.answerMu.Lock()
	defer ts.answerMu.Unlock()
	ts.mu.Lock()
	acked := ts.acked.Load()
	for len(ts.byOffset) > 0 && ts.byOffset[0].next <= acked {
		w := heap.Pop(&ts.byOffset).(*waiter)
		w.settled = true
		ts.batch = append(ts.batch, w)
	}
	// Arrival order is nearly offset order: the acked ones are mostly at
	// the head of byDeadline. Drop them now rather than hold their
	// callbacks until the next deadline.
	for len(ts.byDeadline) > 0 && ts.byDeadline[0].settled {
		ts.byDeadline[0] = nil
		ts.byDeadline = ts.byDeadline[1:]
	}
	ts.mu.Unlock()
	ts.answer(Result{Status: store.PutOK})
}

// answer gives r to the taken batch. Caller holds answerMu.
func (ts *transferService) answer(r Result) {
	for i, w := range ts.batch {
		ts.pending.Add(-1)
		w.done(r)
		ts.batch[i] = nil
	}
	ts.batch = ts.batch[:0]
}

// wait queues done to be called once the ack reaches next.
func (ts *transferService) wait(next int64, now time.Time, done func(Result)) {
	w := &waiter{next: next, deadline: now.Add(ts.timeout), done: done, index: -1}
	ts.mu.Lock()
	if ts.stopped {
		ts.mu.Unlock()
		done(Result{Status: store.FlushSlaveTimeout, Err: ErrShutdown})
		return
	}
	// Count the waiter before looking at the ack. A reader raises the ack
	// and then reads pending without mu: counted first, either this look
	// sees its ack, or it sees pending > 0 and takes the heap after us.
	// (Counted after the look, an ack landing in between found no one
	// waiting, and the send waited out slaveTimeout with its data acked.)
	ts.pending.Add(1)
	// An ack that came after the caller looked, and whose reader took the
	// heap before this waiter was in it, covers it already: answer now.
	if ts.acked.Load() >= next {
		ts.pending.Add(-1)
		ts.mu.Unlock()
		done(Result{Status: store.PutOK})
		return
	}
	heap.Push(&ts.byOffset, w)
	ts.byDeadline = append(ts.byDeadline, w)
	first := len(ts.byDeadline) == 1
	ts.mu.Unlock()
	if first {
		select {
		case ts.wake <- struct{}{}:
		default:
		}
	}
}

// shutdown stops expireLoop and answers every waiter left with ErrShutdown.
func (ts *transferService) shutdown() {
	ts.mu.Lock()
	already := ts.stopped
	ts.stopped = true
	ts.mu.Unlock()
	if !already {
		close(ts.stop)
	}
	<-ts.done
}

// expireLoop answers the waiters whose slaveTimeout passed, sleeping until
// the oldest deadline.
func (ts *transferService) expireLoop() {
	defer close(ts.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ts.stop:
			ts.answerMu.Lock()
			ts.mu.Lock()
			for len(ts.byOffset) > 0 {
				w := heap.Pop(&ts.byOffset).(*waiter)
				w.settled = true
				ts.batch = append(ts.batch, w)
			}
			ts.byDeadline = nil
			ts.mu.Unlock()
			ts.answer(Result{Status: store.FlushSlaveTimeout, Err: ErrShutdown})
			ts.answerMu.Unlock()
			return
		case <-ts.wake:
		case <-timer.C:
		}
		if d, ok := ts.expire(time.Now()); ok {
			timer.Reset(d)
		}
	}
}

// expire answers the waiters whose deadline passed and returns how long
// until the next deadline (false when no waiter is left).
func (ts *transferService) expire(now time.Time) (time.Duration, bool) {
	ts.answerMu.Lock()
	defer ts.answerMu.Unlock()
	ts.mu.Lock()
	i := 0
	for ; i < len(ts.byDeadline); i++ {
		w := ts.byDeadline[i]
		if w.settled {
			continue
		}
		if w.deadline.After(now) {
			break
		}
		heap.Remove(&ts.byOffset, w.index)
		w.settled = true
		ts.batch = append(ts.batch, w)
	}
	// Drop the answered head. Settled (acked) waiters further back wait
	// until they reach it; the head is now the oldest unanswered waiter.
	clear(ts.byDeadline[:i])
	ts.byDeadline = ts.byDeadline[i:]
	next, ok := time.Duration(0), len(ts.byDeadline) > 0
	if ok {
		next = ts.byDeadline[0].deadline.Sub(now)
	} else {
		ts.byDeadline = nil // let the array go
	}
	acked := ts.acked.Load()
	ts.mu.Unlock()
	if len(ts.batch) > 0 {
		ts.answer(Result{Status: store.FlushSlaveTimeout,
			Err: fmt.Errorf("%w: no ack within %v (acked %d)", ErrSlaveTimeout, ts.timeout, acked)})
	}
	return next, ok
}
