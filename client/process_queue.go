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

	mu   sync.Mutex // guards the fields below
	msgs map[int64]*MessageExt
	size int64 // body bytes of msgs
	// order holds the offsets of msgs in ascending order, and possibly
	// offsets no longer in msgs (removed by a push consumer's ack), skipped
	// when met and compacted away in put. It spares takeOrdered a sort and
	// commitOffsetLocked a walk of msgs on every poll.
	order      []int64
	maxOffset  int64 // highest offset ever queued
	nextOffset int64 // next offset to pull
	generation int64 // bumped by seek: pulls in flight are discarded
	suggestID  int64 // brokerId the broker suggested for the next pull
	// consuming holds what takeOrdered handed out and is not yet acked or
	// given back, in the order handed out: a poll batch or two, or an
	// orderly consumer's batch, so a slice is cheaper than a map written
	// per message. Acks and give-backs come in the same order, which keeps
	// finding them a step each. An offset is in at most one of msgs and
	// consuming, and there once.
	consuming []*MessageExt
	consSize  int64     // body bytes of consuming
	lockUntil time.Time // broker lock held until (orderly)

	dropped atomic.Bool
	paused  atomic.Bool
	stop    chan struct{} // closed when dropped
	ready   chan struct{} // orderly: signalled when messages arrive
	done    chan struct{} // closed when the queue's goroutines ended
}

func newProcessQueue(mq MessageQueue, offset int64) *processQueue {
	return &processQueue{
		mq: mq, msgs: map[int64]*MessageExt{},
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
		// Nothing above maxOffset was ever queued, so the usual pull (the
		// run after the last) needs no duplicate check.
		if m.QueueOffset <= pq.maxOffset {
			if _, ok := pq.msgs[m.QueueOffset]; ok {
				continue
			}
			if pq.consumingIndexLocked(m.QueueOffset) >= 0 {
				continue
			}
		}
		pq.msgs[m.QueueOffset] = m
		pq.size += int64(len(m.Body))
		if m.QueueOffset > pq.maxOffset {
			pq.maxOffset = m.QueueOffset
		}
		pq.insertOrderLocked(m.QueueOffset)
		n++
	}
	if len(pq.order) > 2*len(pq.msgs)+1024 {
		pq.compactOrderLocked()
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
	return len(pq.msgs) + len(pq.consuming), pq.size + pq.consSize
}

// insertOrderLocked adds off to order; pulls come in offset order, so this
// is nearly always an append.
func (pq *processQueue) insertOrderLocked(off int64) {
	n := len(pq.order)
	if n == 0 || pq.order[n-1] < off {
		pq.order = append(pq.order, off)
		return
	}
	i := sort.Search(n, func(i int) bool { return pq.order[i] >= off })
	if i < n && pq.order[i] == off {
		return // a stale entry of the same offset: it is live again
	}
	pq.order = append(pq.order, 0)
	copy(pq.order[i+1:], pq.order[i:])
	pq.order[i] = off
}

// compactOrderLocked drops the offsets no longer in msgs.
func (pq *processQueue) compactOrderLocked() {
	live := pq.order[:0]
	for _, off := range pq.order {
		if _, ok := pq.msgs[off]; ok {
			live = append(live, off)
		}
	}
	clear(pq.order[len(live):])
	pq.order = live
}

// lowestLocked returns the lowest offset in msgs, dropping the stale
// entries in front of it from order.
func (pq *processQueue) lowestLocked() (int64, bool) {
	for len(pq.order) > 0 {
		off := pq.order[0]
		if _, ok := pq.msgs[off]; ok {
			return off, true
		}
		pq.order = pq.order[1:]
	}
	return 0, false
}

// remove acknowledges msgs and returns the offset to commit: the smallest
// offset still unacknowledged, or one past the highest ever queued.
func (pq *processQueue) remove(msgs []*MessageExt) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	next, cut := 0, false
	for _, m := range msgs {
		if old, ok := pq.msgs[m.QueueOffset]; ok {
			pq.size -= int64(len(old.Body))
			delete(pq.msgs, m.QueueOffset)
		}
		if old := pq.cutConsumingLocked(m.QueueOffset, &next); old != nil {
			pq.consSize -= int64(len(old.Body))
			cut = true
		}
	}
	if cut {
		pq.compactConsumingLocked()
	}
	return pq.commitOffsetLocked()
}

// consumingIndexLocked returns the index of offset in consuming, or -1.
func (pq *processQueue) consumingIndexLocked(off int64) int {
	for i, m := range pq.consuming {
		if m != nil && m.QueueOffset == off {
			return i
		}
	}
	return -1
}

// cutConsumingLocked finds offset in consuming, searching from *next on
// and wrapping, and sets its slot to nil (compactConsumingLocked removes
// the holes). It returns the message, or nil, and leaves *next after the
// slot, so a run of offsets in the order taken costs a step per message.
func (pq *processQueue) cutConsumingLocked(off int64, next *int) *MessageExt {
	n := len(pq.consuming)
	for j := range n {
		i := (*next + j) % n
		if m := pq.consuming[i]; m != nil && m.QueueOffset == off {
			pq.consuming[i] = nil
			*next = i + 1
			return m
		}
	}
	return nil
}

// compactConsumingLocked drops the slots cutConsumingLocked emptied,
// keeping the order of the rest.
func (pq *processQueue) compactConsumingLocked() {
	live := pq.consuming[:0]
	for _, m := range pq.consuming {
		if m != nil {
			live = append(live, m)
		}
	}
	clear(pq.consuming[len(live):])
	pq.consuming = live
}

// ackConsuming acknowledges every message taken by takeOrdered (a pull
// consumer's commit) and returns the offset to commit; false when there
// was none.
func (pq *processQueue) ackConsuming() (int64, bool) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if len(pq.consuming) == 0 {
		return 0, false
	}
	clear(pq.consuming) // drop the pointers, keep the array
	pq.consuming = pq.consuming[:0]
	pq.consSize = 0
	return pq.commitOffsetLocked(), true
}

func (pq *processQueue) commitOffsetLocked() int64 {
	low := int64(-1)
	if off, ok := pq.lowestLocked(); ok {
		low = off
	}
	// consuming holds at most a batch or two in flight.
	for _, m := range pq.consuming {
		if low < 0 || m.QueueOffset < low {
			low = m.QueueOffset
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
	out := make([]*MessageExt, 0, min(n, len(pq.msgs)))
	i := 0
	for ; i < len(pq.order) && len(out) < n; i++ {
		off := pq.order[i]
		m, ok := pq.msgs[off]
		if !ok {
			continue // stale
		}
		delete(pq.msgs, off)
		pq.size -= int64(len(m.Body))
		pq.consSize += int64(len(m.Body))
		out = append(out, m)
	}
	pq.order = pq.order[i:]
	pq.consuming = append(pq.consuming, out...)
	return out
}

// giveBack returns messages taken by takeOrdered to the queue (orderly retry).
func (pq *processQueue) giveBack(msgs []*MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	next, cut := 0, false
	for _, m := range msgs {
		if pq.cutConsumingLocked(m.QueueOffset, &next) == nil {
			continue
		}
		cut = true
		pq.consSize -= int64(len(m.Body))
		pq.msgs[m.QueueOffset] = m
		pq.size += int64(len(m.Body))
		pq.insertOrderLocked(m.QueueOffset)
	}
	if cut {
		pq.compactConsumingLocked()
	}
}

// reset forgets every cached message and continues pulling at offset.
func (pq *processQueue) reset(offset int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.msgs = map[int64]*MessageExt{}
	pq.consuming = nil
	pq.order = nil
	pq.size, pq.consSize = 0, 0
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
