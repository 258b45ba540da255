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

// Result is the outcome of a replication wait.
type Result struct {
	// Status is PutOK, FlushSlaveTimeout or SlaveNotAvailable, for the
	// broker to combine with the flush result (any non-OK status wins).
	Status store.PutStatus
	// Err says why when Status is not PutOK.
	Err error
}

// waiter is one send waiting for a slave's ack.
type waiter struct {
	next     int64 // the ack that releases it: the end of its records
	deadline time.Time
	done     func(Result)
	index    int  // position in the offset heap, -1 when out of it
	settled  bool // answered; owned by transferLoop
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
// without a goroutine or a timer per send: senders queue a waiter and
// return; one goroutine, transferLoop, owns every waiter. It takes the
// queued ones in a batch, keeps them in a heap by offset (an ack answers the
// whole prefix it covers, in offset order) and in arrival order, which is
// deadline order since every waiter gets the same timeout, and sleeps until
// the next ack or the oldest deadline.
type transferService struct {
	acked   *atomic.Int64 // push2SlaveMaxOffset, owned by the master
	timeout time.Duration

	mu       sync.Mutex
	incoming []*waiter // guarded by mu
	stopped  bool      // guarded by mu
	// pending counts waiters not yet answered, so acks wake the loop only
	// when someone waits.
	pending atomic.Int64

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// Owned by transferLoop.
	byOffset   waiterHeap
	byDeadline []*waiter
	spare      []*waiter
}

func newTransferService(acked *atomic.Int64, timeout time.Duration) *transferService {
	return &transferService{
		acked: acked, timeout: timeout,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

func (ts *transferService) start() { go ts.transferLoop() }

// signal wakes the loop without blocking.
func (ts *transferService) signal() {
	select {
	case ts.wake <- struct{}{}:
	default:
	}
}

// acknowledged is called after push2SlaveMaxOffset grew.
func (ts *transferService) acknowledged() {
	if ts.pending.Load() > 0 {
		ts.signal()
	}
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
	first := len(ts.incoming) == 0
	ts.incoming = append(ts.incoming, w)
	ts.pending.Add(1)
	ts.mu.Unlock()
	// The loop takes every queued waiter at once: only the first of a batch
	// needs to wake it (and an ack that came before it was queued is seen
	// by the pass this wake-up causes).
	if first {
		ts.signal()
	}
}

// shutdown stops the loop, which answers every waiter left with ErrShutdown.
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

func (ts *transferService) transferLoop() {
	defer close(ts.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ts.stop:
			ts.take()
			ts.answerAll(Result{Status: store.FlushSlaveTimeout, Err: ErrShutdown})
			return
		case <-ts.wake:
		case <-timer.C:
		}
		ts.take()
		ts.release(ts.acked.Load())
		if d, ok := ts.expire(time.Now()); ok {
			timer.Reset(d)
		}
	}
}

// take moves the queued waiters into the loop's structures.
func (ts *transferService) take() {
	ts.mu.Lock()
	batch := ts.incoming
	ts.incoming = ts.spare[:0]
	ts.mu.Unlock()
	for _, w := range batch {
		heap.Push(&ts.byOffset, w)
		ts.byDeadline = append(ts.byDeadline, w)
	}
	clear(batch)
	ts.spare = batch[:0]
}

// release answers, in offset order, every waiter the ack covers. Those stay
// in byDeadline, settled, until they reach its head.
func (ts *transferService) release(acked int64) {
	for len(ts.byOffset) > 0 && ts.byOffset[0].next <= acked {
		w := heap.Pop(&ts.byOffset).(*waiter)
		ts.settle(w, Result{Status: store.PutOK})
	}
}

// expire answers the waiters whose deadline passed and returns how long
// until the next deadline (false when none is left).
func (ts *transferService) expire(now time.Time) (time.Duration, bool) {
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
		ts.settle(w, Result{Status: store.FlushSlaveTimeout,
			Err: fmt.Errorf("%w: no ack for offset %d within %v (acked %d)", ErrSlaveTimeout, w.next, ts.timeout, ts.acked.Load())})
	}
	// Drop the answered head. Settled (acked) waiters further back wait
	// until they reach it; the head is now the oldest unanswered waiter.
	clear(ts.byDeadline[:i])
	ts.byDeadline = ts.byDeadline[i:]
	if len(ts.byDeadline) == 0 {
		ts.byDeadline = nil // let the array go
		return 0, false
	}
	return ts.byDeadline[0].deadline.Sub(now), true
}

func (ts *transferService) settle(w *waiter, r Result) {
	w.settled = true
	ts.pending.Add(-1)
	w.done(r)
}

func (ts *transferService) answerAll(r Result) {
	for len(ts.byOffset) > 0 {
		ts.settle(heap.Pop(&ts.byOffset).(*waiter), r)
	}
	ts.byDeadline = nil
}
