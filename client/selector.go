package client

import (
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// QueueSelector picks the queue a message goes to. queues is never empty;
// lastBroker is the broker the previous attempt of this send failed on ("" on
// the first attempt), so a selector can steer a retry elsewhere.
type QueueSelector interface {
	Select(msg *Message, queues []MessageQueue, lastBroker string) (MessageQueue, error)
}

// ErrNoQueueChosen means the manual selector got a message without Queue.
var ErrNoQueueChosen = errors.New("client: manual selector needs Message.Queue")

// roundRobin keeps one counter per topic.
type roundRobin struct {
	mu       sync.Mutex
	counters map[string]*atomic.Uint32
}

func (r *roundRobin) next(topic string) uint32 {
	r.mu.Lock()
	if r.counters == nil {
		r.counters = make(map[string]*atomic.Uint32)
	}
	c := r.counters[topic]
	if c == nil {
		c = new(atomic.Uint32)
		r.counters[topic] = c
	}
	r.mu.Unlock()
	return c.Add(1) - 1
}

// pick takes the next queue, skipping lastBroker's queues when another broker
// has some.
func (r *roundRobin) pick(topic string, queues []MessageQueue, lastBroker string) MessageQueue {
	n := r.next(topic)
	if lastBroker != "" {
		for i := range queues {
			q := queues[(int(n)+i)%len(queues)]
			if q.BrokerName != lastBroker {
				return q
			}
		}
	}
	return queues[int(n%uint32(len(queues)))]
}

// RoundRobinSelector spreads messages over the queues in turn, per topic.
type RoundRobinSelector struct{ rr roundRobin }

// NewRoundRobinSelector returns a round-robin selector.
func NewRoundRobinSelector() *RoundRobinSelector { return &RoundRobinSelector{} }

// Select implements QueueSelector.
func (s *RoundRobinSelector) Select(msg *Message, queues []MessageQueue, lastBroker string) (MessageQueue, error) {
	return s.rr.pick(msg.Topic, queues, lastBroker), nil
}

// HashSelector sends messages with the same sharding key to the same queue
// (FNV-32a of the key modulo the queue count, as the official Go client's
// hash selector); messages without a key go round-robin.
type HashSelector struct{ rr roundRobin }

// NewHashSelector returns a sharding-key hash selector.
func NewHashSelector() *HashSelector { return &HashSelector{} }

// Select implements QueueSelector.
func (s *HashSelector) Select(msg *Message, queues []MessageQueue, lastBroker string) (MessageQueue, error) {
	if key := msg.ShardingKey(); key != "" {
		return queues[hashIndex(key, len(queues))], nil
	}
	return s.rr.pick(msg.Topic, queues, lastBroker), nil
}

func hashIndex(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// ManualSelector sends each message to the queue in its Queue field.
type ManualSelector struct{}

// NewManualSelector returns a selector that honours Message.Queue.
func NewManualSelector() ManualSelector { return ManualSelector{} }

// Select implements QueueSelector.
func (ManualSelector) Select(msg *Message, queues []MessageQueue, _ string) (MessageQueue, error) {
	if msg.Queue == nil {
		return MessageQueue{}, ErrNoQueueChosen
	}
	return *msg.Queue, nil
}

// faultTracker remembers brokers that timed out or could not be reached, so
// a producer avoids them for a while when it has a choice. Every send asks
// it; while no broker is avoided (the usual case) that costs one atomic load.
type faultTracker struct {
	d        time.Duration
	avoiding atomic.Int32 // len(until), for the lock-free fast path
	mu       sync.Mutex
	until    map[string]time.Time
	now      func() time.Time
}

func newFaultTracker(d time.Duration) *faultTracker {
	return &faultTracker{d: d, until: make(map[string]time.Time), now: time.Now}
}

// mark records a failure of broker.
func (f *faultTracker) mark(broker string) {
	if f.d <= 0 {
		return
	}
	f.mu.Lock()
	f.until[broker] = f.now().Add(f.d)
	f.avoiding.Store(int32(len(f.until)))
	f.mu.Unlock()
}

// clear forgets broker's failure after a success.
func (f *faultTracker) clear(broker string) {
	if f.avoiding.Load() == 0 {
		return
	}
	f.mu.Lock()
	delete(f.until, broker)
	f.avoiding.Store(int32(len(f.until)))
	f.mu.Unlock()
}

// available reports whether broker is not being avoided.
func (f *faultTracker) available(broker string) bool {
	if f.avoiding.Load() == 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.until[broker]
	if !ok {
		return true
	}
	if f.now().After(u) {
		delete(f.until, broker)
		f.avoiding.Store(int32(len(f.until)))
		return true
	}
	return false
}

// filter returns the queues of available brokers, or all of them when every
// broker is being avoided (a send must go somewhere).
func (f *faultTracker) filter(queues []MessageQueue) []MessageQueue {
	if f.avoiding.Load() == 0 {
		return queues
	}
	out := make([]MessageQueue, 0, len(queues))
	for _, q := range queues {
		if f.available(q.BrokerName) {
			out = append(out, q)
		}
	}
	if len(out) == 0 {
		return queues
	}
	return out
}
