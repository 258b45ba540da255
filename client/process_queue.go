package client

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// processQueue is the client's state of one queue it consumes: the messages
// pulled and not yet acknowledged, the next offset to pull, and for orderly
// consumers the broker lock. Its pull loop and the consumption of its
// messages stop once it is dropped.
type processQueue struct {
	mq MessageQueue

	mu         sync.Mutex // guards the fields below
	msgs       map[int64]*MessageExt
	size       int64 // body bytes of msgs
	maxOffset  int64 // highest offset ever queued
	nextOffset int64 // next offset to pull
	generation int64 // bumped by seek: pulls in flight are discarded
	suggestID  int64 // brokerId the broker suggested for the next pull
	consuming  map[int64]*MessageExt
	lockUntil  time.Time // broker lock held until (orderly)

	dropped atomic.Bool
	paused  atomic.Bool
	stop    chan struct{} // closed when dropped
	ready   chan struct{} // orderly: signalled when messages arrive
	done    chan struct{} // closed when the queue's goroutines ended
}

func newProcessQueue(mq MessageQueue, offset int64) *processQueue {
	return &processQueue{
		mq: mq, msgs: map[int64]*MessageExt{}, consuming: map[int64]*MessageExt{},
		nextOffset: offset, maxOffset: offset - 1,
		stop: make(chan struct{}), ready: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// drop stops the queue's loops. Safe to call twice.
func (pq *processQueue) drop() {
	if pq.dropped.CompareAndSwap(false, true) {
		close(pq.stop)
	}
}

// put queues pulled messages and returns how many were new.
func (pq *processQueue) put(msgs []*MessageExt) int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n := 0
	for _, m := range msgs {
		if _, ok := pq.msgs[m.QueueOffset]; ok {
			continue
		}
		if _, ok := pq.consuming[m.QueueOffset]; ok {
			continue
		}
		pq.msgs[m.QueueOffset] = m
		pq.size += int64(len(m.Body))
		if m.QueueOffset > pq.maxOffset {
			pq.maxOffset = m.QueueOffset
		}
		n++
	}
	select {
	case pq.ready <- struct{}{}:
	default:
	}
	return n
}

// cached returns the number and body bytes of unacknowledged messages.
func (pq *processQueue) cached() (int, int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n := len(pq.msgs) + len(pq.consuming)
	var size int64
	for _, m := range pq.consuming {
		size += int64(len(m.Body))
	}
	return n, pq.size + size
}

// remove acknowledges msgs and returns the offset to commit: the smallest
// offset still unacknowledged, or one past the highest ever queued.
func (pq *processQueue) remove(msgs []*MessageExt) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if old, ok := pq.msgs[m.QueueOffset]; ok {
			pq.size -= int64(len(old.Body))
			delete(pq.msgs, m.QueueOffset)
		}
		delete(pq.consuming, m.QueueOffset)
	}
	return pq.commitOffsetLocked()
}

func (pq *processQueue) commitOffsetLocked() int64 {
	low := int64(-1)
	for off := range pq.msgs {
		if low < 0 || off < low {
			low = off
		}
	}
	for off := range pq.consuming {
		if low < 0 || off < low {
			low = off
		}
	}
	if low >= 0 {
		return low
	}
	return pq.maxOffset + 1
}

// takeOrdered moves up to n messages, lowest offsets first, into the
// consuming set (orderly consumption and pull-consumer polls).
func (pq *processQueue) takeOrdered(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	offs := make([]int64, 0, len(pq.msgs))
	for off := range pq.msgs {
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	if len(offs) > n {
		offs = offs[:n]
	}
	out := make([]*MessageExt, 0, len(offs))
	for _, off := range offs {
		m := pq.msgs[off]
		delete(pq.msgs, off)
		pq.size -= int64(len(m.Body))
		pq.consuming[off] = m
		out = append(out, m)
	}
	return out
}

// giveBack returns messages taken by takeOrdered to the queue (orderly retry).
func (pq *processQueue) giveBack(msgs []*MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if _, ok := pq.consuming[m.QueueOffset]; !ok {
			continue
		}
		delete(pq.consuming, m.QueueOffset)
		pq.msgs[m.QueueOffset] = m
		pq.size += int64(len(m.Body))
	}
}

// reset forgets every cached message and continues pulling at offset.
func (pq *processQueue) reset(offset int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.msgs = map[int64]*MessageExt{}
	pq.consuming = map[int64]*MessageExt{}
	pq.size = 0
	pq.nextOffset = offset
	pq.maxOffset = offset - 1
	pq.generation++
}

func (pq *processQueue) locked() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return time.Now().Before(pq.lockUntil)
}

func (pq *processQueue) setLocked(until time.Time) {
	pq.mu.Lock()
	pq.lockUntil = until
	pq.mu.Unlock()
}
