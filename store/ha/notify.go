package ha

import (
	"slices"
	"sync"
	"sync/atomic"
)

// notifier wakes a master's connection writers when the commitlog grows
// (RocketMQ's WaitNotifyObject). Its appended method is the store's append
// listener, so it runs on every put: while no writer waits it is one atomic
// load, with no lock, allocation or channel send.
//
// A writer with nothing to send sets waiting, checks the commitlog end once
// more, and only then parks on its channel. An appender publishes its bytes
// (the file's wrote position, an atomic store) before it loads waiting, so
// either the appender sees the flag and wakes the writer, or the writer's
// second look sees the bytes: a wake-up is never lost.
type notifier struct {
	waiting atomic.Bool
	// chans holds one buffered (1) channel per writer; copied on change so
	// appenders read it without a lock.
	chans atomic.Pointer[[]chan struct{}]
	mu    sync.Mutex // serialises changes of chans
}

// appended is the append listener.
func (n *notifier) appended() {
	if !n.waiting.Load() || !n.waiting.CompareAndSwap(true, false) {
		return
	}
	if p := n.chans.Load(); p != nil {
		for _, ch := range *p {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}

// add registers a writer's channel.
func (n *notifier) add(ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var next []chan struct{}
	if p := n.chans.Load(); p != nil {
		next = slices.Clone(*p)
	}
	next = append(next, ch)
	n.chans.Store(&next)
}

// remove unregisters a writer's channel.
func (n *notifier) remove(ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.chans.Load()
	if p == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*p), func(c chan struct{}) bool { return c == ch })
	n.chans.Store(&next)
}

// announce says a writer is about to park; it must look for data once more
// before it does.
func (n *notifier) announce() { n.waiting.Store(true) }
