package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// PullConsumer lets the caller fetch messages when it wants them: Poll
// returns the next batch, Commit stores what was consumed. Queues come from
// Subscribe (shared with the group by rebalance) or Assign (chosen by the
// caller). Background goroutines keep each queue's buffer filled with long
// polling, bounded by WithPullThresholdForQueue.
//
// With WithAutoCommit (the default) each Poll first commits what the
// previous Poll returned, so a crash redelivers at most one batch.
type PullConsumer struct {
	b      *consumerBase
	notify chan struct{}
	// closing is closed when Shutdown begins: a Poll waiting for messages
	// holds pollMu, which Shutdown needs for its last commit.
	closing chan struct{}

	pollMu sync.Mutex // serialises Poll, Commit and Seek
	next   int        // round-robin start among queues
	// polled lists the queues Poll returned messages of since the last
	// commit: only they can have anything to commit, so a commit need not
	// visit every queue.
	polled []*processQueue
	// sorted is every queue in queue order as of pqsGen sortedGen, and
	// active the unpaused ones of the current Poll: rebuilt only when the
	// assignment changes, not on every Poll.
	sorted    []*processQueue
	sortedGen uint64
	active    []*processQueue

	stateMu  sync.Mutex
	started  bool
	shutdown bool
}

// NewPullConsumer returns a pull consumer (group DEFAULT_CONSUMER unless set).
func NewPullConsumer(opts ...Option) (*PullConsumer, error) {
	o, err := buildOptions("DEFAULT_CONSUMER", opts)
	if err != nil {
		return nil, err
	}
	o.orderly = false
	pc := &PullConsumer{notify: make(chan struct{}, 1), closing: make(chan struct{})}
	pc.b = newConsumerBase(newCore(o, "pull-consumer"), protocol.ConsumeActively)
	pc.b.deliver = func(*processQueue, []*MessageExt) {
		select {
		case pc.notify <- struct{}{}:
		default:
		}
	}
	return pc, nil
}

// ClientID is the id this consumer shows brokers.
func (pc *PullConsumer) ClientID() string { return pc.b.c.clientID }

// Subscribe consumes topic's messages matching sel, sharing its queues with
// the other members of the group.
func (pc *PullConsumer) Subscribe(topic string, sel MessageSelector) error {
	if err := pc.b.addSubscription(topic, sel, nil); err != nil {
		return err
	}
	pc.b.triggerRebalance()
	return nil
}

// Assign consumes exactly queues (all of one topic), whatever the group's
// other members do. Assign again to change the set; an empty set stops
// consuming the topic.
func (pc *PullConsumer) Assign(topic string, queues ...MessageQueue) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	wrapped := pc.b.c.wrapName(topic)
	qs := make([]MessageQueue, 0, len(queues))
	for _, q := range queues {
		if q.Topic != topic {
			return fmt.Errorf("%w: queue %v is not of topic %s", ErrBadOption, q, topic)
		}
		q.Topic = wrapped
		qs = append(qs, q)
	}
	pc.b.mu.Lock()
	pc.b.assigned[wrapped] = qs
	pc.b.mu.Unlock()
	pc.b.triggerRebalance()
	return nil
}

// TopicQueues lists topic's readable queues, for Assign.
func (pc *PullConsumer) TopicQueues(ctx context.Context, topic string) ([]MessageQueue, error) {
	tr, err := pc.b.c.route(ctx, pc.b.c.wrapName(topic))
	if err != nil {
		return nil, err
	}
	out := make([]MessageQueue, len(tr.subscribe))
	for i, q := range tr.subscribe {
		q.Topic = topic
		out[i] = q
	}
	return out, nil
}

// Start reads the routes and starts filling the queues' buffers.
func (pc *PullConsumer) Start() error {
	pc.stateMu.Lock()
	defer pc.stateMu.Unlock()
	if pc.started {
		return ErrAlreadyStarted
	}
	pc.started = true
	if err := pc.b.start(); err != nil {
		pc.shutdown = true
		return err
	}
	return nil
}

// Shutdown commits (with auto-commit), stores the offsets and stops every
// goroutine and connection. Safe to call twice.
func (pc *PullConsumer) Shutdown() error {
	pc.stateMu.Lock()
	defer pc.stateMu.Unlock()
	if pc.shutdown {
		return nil
	}
	pc.shutdown = true
	close(pc.closing)
	if pc.started && pc.b.c.o.autoCommit {
		pc.pollMu.Lock()
		pc.commitLocked()
		pc.pollMu.Unlock()
	}
	pc.b.stopBase()
	pc.b.c.shutdown()
	return nil
}

func (pc *PullConsumer) unwrap(mq MessageQueue) MessageQueue {
	mq.Topic = pc.b.c.unwrapName(mq.Topic)
	return mq
}

func (pc *PullConsumer) wrap(mq MessageQueue) MessageQueue {
	mq.Topic = pc.b.c.wrapName(mq.Topic)
	return mq
}

// Poll returns the next messages, up to WithPullBatchSize, all of one
// queue in offset order. It waits until some arrive or ctx ends.
func (pc *PullConsumer) Poll(ctx context.Context) ([]*MessageExt, error) {
	if !pc.b.c.running() {
		return nil, ErrNotStarted
	}
	pc.pollMu.Lock()
	defer pc.pollMu.Unlock()
	if pc.b.c.o.autoCommit {
		pc.commitLocked()
	}
	for {
		select {
		case <-pc.closing:
			// Shutdown's commit would not cover messages returned now.
			return nil, ErrNotStarted
		default:
		}
		pqs := pc.activeQueues()
		for i := range pqs {
			pq := pqs[(pc.next+i)%len(pqs)]
			if msgs := pq.takeOrdered(int(pc.b.c.o.pullBatchSize)); len(msgs) > 0 {
				pc.next = (pc.next + i + 1) % len(pqs)
				pc.notePolled(pq)
				return msgs, nil
			}
		}
		select {
		case <-pc.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-pc.closing:
			return nil, ErrNotStarted
		case <-pc.b.ctx.Done():
			return nil, ErrNotStarted
		}
	}
}

// activeQueues returns the unpaused queues in queue order; the slice is
// reused by the next call (both run under pollMu).
func (pc *PullConsumer) activeQueues() []*processQueue {
	pc.b.mu.Lock()
	if pc.sorted == nil || pc.sortedGen != pc.b.pqsGen {
		mqs := make([]MessageQueue, 0, len(pc.b.pqs))
		for mq := range pc.b.pqs {
			mqs = append(mqs, mq)
		}
		sortQueues(mqs)
		pc.sorted = make([]*processQueue, len(mqs))
		for i, mq := range mqs {
			pc.sorted[i] = pc.b.pqs[mq]
		}
		pc.sortedGen = pc.b.pqsGen
	}
	pc.b.mu.Unlock()
	pc.active = pc.active[:0]
	for _, pq := range pc.sorted {
		if !pq.paused.Load() {
			pc.active = append(pc.active, pq)
		}
	}
	return pc.active
}

// Commit marks every message Poll has returned as consumed and stores the
// offsets now.
func (pc *PullConsumer) Commit(ctx context.Context) error {
	if !pc.b.c.running() {
		return ErrNotStarted
	}
	pc.pollMu.Lock()
	mqs := pc.commitLocked()
	pc.pollMu.Unlock()
	pc.b.store.persist(ctx, mqs)
	return ctx.Err()
}

// notePolled records that Poll returned messages of pq (a poll batch comes
// from one queue; the list holds each queue once).
func (pc *PullConsumer) notePolled(pq *processQueue) {
	for _, p := range pc.polled {
		if p == pq {
			return
		}
	}
	pc.polled = append(pc.polled, pq)
}

// commitLocked acknowledges the polled messages in memory and returns the
// queues whose offset moved. A queue rebalance took away (dropped) is left
// alone: its offset is no longer this consumer's to store.
func (pc *PullConsumer) commitLocked() []MessageQueue {
	var moved []MessageQueue
	for i, pq := range pc.polled {
		pc.polled[i] = nil
		if pq.dropped.Load() {
			continue
		}
		if off, ok := pq.ackConsuming(); ok {
			pc.b.store.update(pq.mq, off, true)
			moved = append(moved, pq.mq)
		}
	}
	pc.polled = pc.polled[:0]
	return moved
}

// Seek makes the next Poll of mq start at offset; messages buffered for mq
// are dropped.
func (pc *PullConsumer) Seek(mq MessageQueue, offset int64) error {
	w := pc.wrap(mq)
	pc.pollMu.Lock()
	defer pc.pollMu.Unlock()
	pc.b.mu.Lock()
	pq := pc.b.pqs[w]
	pc.b.mu.Unlock()
	if pq == nil {
		return fmt.Errorf("%w: %v", ErrNotAssigned, mq)
	}
	pq.reset(offset)
	pc.b.store.update(w, offset, false)
	return nil
}

// Committed returns the stored offset of mq (-1 when there is none).
func (pc *PullConsumer) Committed(ctx context.Context, mq MessageQueue) (int64, error) {
	w := pc.wrap(mq)
	if off := pc.b.store.current(w); off >= 0 {
		return off, nil
	}
	return pc.b.store.read(ctx, w)
}

// Pause stops fetching mqs; Poll returns none of their messages until Resume.
func (pc *PullConsumer) Pause(mqs ...MessageQueue) { pc.setPaused(true, mqs) }

// Resume undoes Pause.
func (pc *PullConsumer) Resume(mqs ...MessageQueue) {
	pc.setPaused(false, mqs)
	select {
	case pc.notify <- struct{}{}:
	default:
	}
}

func (pc *PullConsumer) setPaused(p bool, mqs []MessageQueue) {
	pc.b.mu.Lock()
	defer pc.b.mu.Unlock()
	for _, mq := range mqs {
		if pq := pc.b.pqs[pc.wrap(mq)]; pq != nil {
			pq.paused.Store(p)
		}
	}
}

// Assignment lists the queues this consumer fetches now.
func (pc *PullConsumer) Assignment() []MessageQueue {
	qs := pc.b.queues()
	for i := range qs {
		qs[i] = pc.unwrap(qs[i])
	}
	return qs
}
