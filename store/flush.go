package store

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCommitLogFlushMode is the system call the commitlog flushes with.
// BenchmarkFlushMode measures both on the sync-flush path (see store-notes.md).
const DefaultCommitLogFlushMode = FlushFdatasync

// groupCommitIdle is how often the SYNC_FLUSH loop flushes with no waiter,
// for messages put with WAIT=false (GroupCommitService waits 10 ms).
const groupCommitIdle = 10 * time.Millisecond

// maxFlushCalls bounds the MappedFileQueue.Flush calls of one round; each
// call persists at most one file, so a round crosses at most this many files.
const maxFlushCalls = 16

// flushService persists the commitlog. It owns one goroutine:
// asyncFlushLoop under ASYNC_FLUSH, groupCommitLoop under SYNC_FLUSH.
//
// Group commit: a writer, after releasing the put lock, queues a waiter for
// the end offset of its record and wakes the loop. The loop takes every
// queued waiter at once, persists everything written so far with one flush
// (one more per file boundary crossed) and answers all of them; writers that
// arrive during that flush form the next group. A flush error is given to
// each waiter it leaves unflushed and then sticks (see ErrFlushFailed).
type flushService struct {
	cl         *CommitLog
	checkpoint *StoreCheckpoint
	// flushFn is MappedFileQueue.Flush; tests replace it to inject failures.
	flushFn func(leastPages int) (int64, error)
	// syncs counts flush calls that persisted something.
	syncs atomic.Int64

	mu      sync.Mutex
	waiters []*flushWaiter // guarded by mu
	stopped bool           // guarded by mu: no new waiters
	spare   []*flushWaiter // owned by the loop goroutine

	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
	err     atomic.Pointer[error] // sticky flush failure
}

type flushWaiter struct {
	upTo int64
	done chan error // capacity 1: the loop never blocks on a writer that gave up

	// Async waiters (waitFlushedAsync) have cb instead of done; the loop or
	// the timeout, whichever settles first, calls it. Never pooled: the
	// timer may still hold the waiter after the loop answered.
	cb      func(error)
	timer   *time.Timer
	settled atomic.Bool
}

// answer hands err to the waiter's writer.
func (w *flushWaiter) answer(err error) {
	if w.cb == nil {
		w.done <- err
		return
	}
	if w.settled.CompareAndSwap(false, true) {
		w.timer.Stop()
		w.cb(err)
	}
}

var flushWaiterPool = sync.Pool{New: func() any { return &flushWaiter{done: make(chan error, 1)} }}

func newFlushService(cl *CommitLog) *flushService {
	return &flushService{
		cl:      cl,
		flushFn: cl.mfq.Flush,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (fs *flushService) start() {
	if !fs.started.CompareAndSwap(false, true) {
		return
	}
	if fs.cl.cfg.FlushDiskType == SyncFlush {
		go fs.groupCommitLoop()
	} else {
		go fs.asyncFlushLoop()
	}
}

// failed returns the sticky flush error, if any.
func (fs *flushService) failed() error {
	if p := fs.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records a flush error (the first one sticks) and returns it wrapped.
func (fs *flushService) fail(err error) error {
	werr := fmt.Errorf("%w: %w", ErrFlushFailed, err)
	if fs.err.CompareAndSwap(nil, &werr) {
		fs.cl.log.WithError(err).WithField("flushedWhere", fs.cl.mfq.FlushedWhere()).
			Error("commitlog flush failed; refusing further puts")
	}
	return *fs.err.Load()
}

// flushTo calls flushFn until target is flushed, no progress is made, or the
// round's call budget is spent.
func (fs *flushService) flushTo(leastPages int, target int64) error {
	for range maxFlushCalls {
		before := fs.cl.mfq.FlushedWhere()
		start := time.Now()
		where, err := fs.flushFn(leastPages)
		if err != nil {
			return err
		}
		if where > before {
			fs.syncs.Add(1)
			fs.cl.metrics.FlushLatency.Observe(time.Since(start))
		}
		if where >= target || where <= before {
			return nil
		}
	}
	return nil
}

// flushAndMark flushes with leastPages and, when everything written before
// the call is on disk, records the newest store time in the checkpoint. The
// store time is read before the end offset: a put publishes its bytes before
// its time, so the time read belongs to a record below the offset read.
func (fs *flushService) flushAndMark(leastPages int) error {
	if err := fs.failed(); err != nil {
		return err
	}
	ts := fs.cl.lastStoreTimestamp.Load()
	target := fs.cl.mfq.MaxOffset()
	if err := fs.flushTo(leastPages, target); err != nil {
		return fs.fail(err)
	}
	if fs.checkpoint != nil && ts > 0 && fs.cl.mfq.FlushedWhere() >= target {
		fs.checkpoint.SetPhysicMsgTimestamp(ts)
		fs.cl.mfq.SetStoreTimestamp(ts)
	}
	return nil
}

// asyncFlushLoop is FlushRealTimeService with flushCommitLogTimed: every
// FlushIntervalCommitLog it flushes when at least FlushCommitLogLeastPages
// pages are dirty, and everything every FlushCommitLogThorough. Writers do
// not wake it: under ASYNC_FLUSH the page cache is the acknowledgement, and
// waking on every put would turn it into a sync per few pages.
func (fs *flushService) asyncFlushLoop() {
	defer close(fs.done)
	cfg := fs.cl.cfg
	interval := cfg.FlushIntervalCommitLog
	if interval <= 0 {
		interval = 500 * time.Millisecond // RocketMQ's default; a ticker cannot take <= 0
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	lastThorough := time.Now()
	for {
		select {
		case <-fs.stop:
			return
		case <-t.C:
		}
		least := cfg.FlushCommitLogLeastPages
		if now := time.Now(); now.Sub(lastThorough) >= cfg.FlushCommitLogThorough {
			least, lastThorough = 0, now
		}
		_ = fs.flushAndMark(least) // logged by fail; puts see it through failed()
	}
}

// groupCommitLoop serves SYNC_FLUSH waiters (GroupCommitService).
func (fs *flushService) groupCommitLoop() {
	defer close(fs.done)
	idle := time.NewTicker(groupCommitIdle)
	defer idle.Stop()
	for {
		select {
		case <-fs.stop:
			fs.commitRound()
			return
		case <-fs.wake:
			// Writers answered by the previous round are putting again right
			// now; yielding once lets them queue up for this round instead of
			// the next, which nearly doubles the writers served per sync.
			runtime.Gosched()
		case <-idle.C:
		}
		fs.commitRound()
	}
}

// commitRound answers every queued waiter with one flush of all written data.
func (fs *flushService) commitRound() {
	fs.mu.Lock()
	batch := fs.waiters
	fs.waiters = fs.spare[:0]
	fs.mu.Unlock()

	start := time.Now()
	err := fs.failed()
	if err == nil && (len(batch) > 0 || fs.cl.mfq.FlushedWhere() < fs.cl.mfq.MaxOffset()) {
		err = fs.flushAndMark(0)
	}
	if len(batch) > 0 {
		defer func(n int) {
			m := fs.cl.metrics
			m.GroupCommitLatency.Observe(time.Since(start))
			m.GroupCommitRounds.Add(1)
			m.GroupCommitWaiters.Add(int64(n))
		}(len(batch))
	}
	flushed := fs.cl.mfq.FlushedWhere()
	for _, w := range batch {
		switch {
		case flushed >= w.upTo:
			w.answer(nil)
		case err != nil:
			w.answer(err)
		default:
			w.answer(fmt.Errorf("%w: flushed to %d, record ends at %d", ErrFlushFailed, flushed, w.upTo))
		}
	}
	clear(batch)
	fs.spare = batch[:0]
}

// waitFlushed blocks until the commitlog is on disk up to upTo, the flush
// fails, SyncFlushTimeout passes or ctx ends.
func (fs *flushService) waitFlushed(ctx context.Context, upTo int64) error {
	if fs.cl.mfq.FlushedWhere() >= upTo {
		return nil
	}
	if err := fs.failed(); err != nil {
		return err
	}
	w := flushWaiterPool.Get().(*flushWaiter)
	w.upTo = upTo
	fs.mu.Lock()
	if fs.stopped {
		fs.mu.Unlock()
		flushWaiterPool.Put(w)
		return ErrCommitLogClosed
	}
	fs.waiters = append(fs.waiters, w)
	fs.mu.Unlock()
	select {
	case fs.wake <- struct{}{}:
	default:
	}
	timeout := fs.cl.cfg.SyncFlushTimeout
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-w.done:
		flushWaiterPool.Put(w)
		return err
	case <-t.C:
		// w stays with the loop, which answers into its buffered channel.
		return fmt.Errorf("%w after %v (record ends at %d)", ErrFlushTimeout, timeout, upTo)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrFlushTimeout, ctx.Err())
	}
}

// waitFlushedAsync is waitFlushed that calls cb once instead of blocking:
// at once when nothing needs waiting for, else from the group commit loop
// (or the SyncFlushTimeout timer). cb must not block: it runs on the loop.
func (fs *flushService) waitFlushedAsync(upTo int64, cb func(error)) {
	if fs.cl.mfq.FlushedWhere() >= upTo {
		cb(nil)
		return
	}
	if err := fs.failed(); err != nil {
		cb(err)
		return
	}
	w := &flushWaiter{upTo: upTo, cb: cb}
	timeout := fs.cl.cfg.SyncFlushTimeout
	fs.mu.Lock()
	if fs.stopped {
		fs.mu.Unlock()
		cb(ErrCommitLogClosed)
		return
	}
	// Armed under mu, so the loop (which takes the waiter under mu) sees it set.
	w.timer = time.AfterFunc(timeout, func() {
		if w.settled.CompareAndSwap(false, true) {
			cb(fmt.Errorf("%w after %v (record ends at %d)", ErrFlushTimeout, timeout, upTo))
		}
	})
	fs.waiters = append(fs.waiters, w)
	fs.mu.Unlock()
	select {
	case fs.wake <- struct{}{}:
	default:
	}
}

// shutdown stops the loop, answers the waiters left and flushes everything,
// retrying up to 10 times as FlushRealTimeService does on shutdown.
func (fs *flushService) shutdown() error {
	fs.mu.Lock()
	fs.stopped = true
	fs.mu.Unlock()
	if fs.started.Load() {
		close(fs.stop)
		<-fs.done
	}
	var err error
	for range 10 {
		if err = fs.flushAndMark(0); err != nil {
			return err
		}
		if fs.cl.mfq.FlushedWhere() >= fs.cl.mfq.MaxOffset() {
			return nil
		}
	}
	return fmt.Errorf("%w: flushed to %d of %d at shutdown", ErrFlushFailed, fs.cl.mfq.FlushedWhere(), fs.cl.mfq.MaxOffset())
}
