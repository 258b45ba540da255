package remoting

import (
	"sync"
	"sync/atomic"
)

// Pool is a bounded set of workers with a bounded queue. Submit never blocks:
// when the queue is full it refuses, and the server answers SYSTEM_BUSY at once,
// so a slow processor can never stall the network loop.
type Pool struct {
	name    string
	tasks   chan func()
	wg      sync.WaitGroup
	mu      sync.RWMutex // guards closed against a send on a closed channel
	closed  bool
	running atomic.Int32
	// rejected counts tasks refused because the queue was full (each
	// answered SYSTEM_BUSY), for the metrics.
	rejected atomic.Int64
}

// newPool starts workers goroutines serving a queue of queueLen tasks.
func newPool(name string, workers, queueLen int) *Pool {
	if workers < 1 {
		workers = 1
	}
	if queueLen < 0 {
		queueLen = 0
	}
	p := &Pool{name: name, tasks: make(chan func(), queueLen)}
	p.wg.Add(workers)
	for range workers {
		go p.workLoop()
	}
	return p
}

// Name is the pool's name, for logs.
func (p *Pool) Name() string { return p.name }

// Submit queues f, or reports false at once if the queue is full or the pool stopped.
func (p *Pool) Submit(f func()) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false
	}
	select {
	case p.tasks <- f:
		return true
	default:
		p.rejected.Add(1)
		return false
	}
}

// Rejected returns how many tasks were refused for a full queue since start.
func (p *Pool) Rejected() int64 { return p.rejected.Load() }

// Capacity returns how many tasks may wait in the queue.
func (p *Pool) Capacity() int { return cap(p.tasks) }

// Busy returns the number of tasks running now.
func (p *Pool) Busy() int { return int(p.running.Load()) }

// Queued returns the number of tasks waiting.
func (p *Pool) Queued() int { return len(p.tasks) }

func (p *Pool) workLoop() {
	defer p.wg.Done()
	for f := range p.tasks {
		p.running.Add(1)
		f()
		p.running.Add(-1)
	}
}

// stop refuses new tasks, lets the workers finish the queued ones, and returns a
// channel closed once they have. Safe to call twice.
func (p *Pool) stop() <-chan struct{} {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.tasks)
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	return done
}
