package store

import (
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Warming the commitlog ahead of the writer (ASYNC_FLUSH only).
//
// The writer copies each record into the mapped file; the first touch of a
// page then faults it in on the writer's goroutine, which on the broker is
// the event loop answering sends. A fresh page is not cheap: the kernel
// allocates and zeroes it, and on a virtual machine the first use of guest
// memory also faults in the host. Measured on this project's 2-core VM the
// copy into the mapping was a quarter of the broker's CPU under async 1 KiB
// sends (runtime.memmove under CommitLog.writeAt), about 7 us per 4 KiB page.
//
// The warmer keeps warmAhead bytes after the write position resident with
// madvise(MADV_POPULATE_READ), one chunk at a time on its own goroutine: the
// pages come in as clean page cache over the preallocated (zero) file, and
// the writer's later write is a minor fault. READ, not WRITE: populated pages
// must not be dirty, or a flush would write zeros that the writer then
// writes again. Under SYNC_FLUSH the commitlog writes with pwrite and never
// touches the mapping, so there is nothing to warm. RocketMQ's
// warmMapedFileEnable touches a whole new file up front instead, dirtying it.
const (
	warmAhead = 32 << 20
	warmChunk = 1 << 20
)

// warmer populates the mapping ahead of the commitlog's write position.
type warmer struct {
	cl   *CommitLog
	upTo atomic.Int64 // commitlog offset warmed up to (exclusive)
	// next is the write offset that wakes the loop: half the window short
	// of upTo, or the end of the file once it is warm to its end (the
	// next file then starts a new window).
	next atomic.Int64
	off  atomic.Bool // populating failed (an old kernel): stop trying
	// passes counts wake-ups of the loop (tests check it is not one per put).
	passes atomic.Int64
	wake   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
	// populate is unix.Madvise with MADV_POPULATE_READ on b, the mapping at
	// commitlog offset offset (tests replace it).
	populate func(offset int64, b []byte) error
}

func newWarmer(cl *CommitLog) *warmer {
	return &warmer{
		cl: cl, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		populate: func(_ int64, b []byte) error { return unix.Madvise(b, unix.MADV_POPULATE_READ) },
	}
}

func (w *warmer) start() {
	w.wg.Add(1)
	go w.loop()
}

func (w *warmer) shutdown() {
	close(w.stop)
	w.wg.Wait()
}

// wrote tells the warmer the writer reached offset end; it wakes the loop
// once less than half the window is left. Called under the writer lock: an
// atomic load in the common case.
func (w *warmer) wrote(end int64) {
	if end < w.next.Load() || w.off.Load() {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *warmer) loop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		w.warm()
	}
}

// warm populates the last file from the write position (or where the last
// pass stopped) up to warmAhead beyond it, a chunk at a time so it can stop
// promptly.
func (w *warmer) warm() {
	w.passes.Add(1)
	mf := w.cl.mfq.LastMappedFile()
	if mf == nil || !mf.Hold() {
		return
	}
	defer mf.Release()
	base := mf.FileFromOffset()
	size := int64(mf.FileSize())
	pos := int64(mf.WrotePosition())
	from := max(w.upTo.Load()-base, pos) &^ (int64(unix.Getpagesize()) - 1)
	end := min(pos+warmAhead, size)
	data := mf.Buffer()
	for from < end {
		select {
		case <-w.stop:
			return
		default:
		}
		to := min(from+warmChunk, end)
		if err := w.populate(base+from, data[from:to]); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
				// MADV_POPULATE_READ is Linux 5.14+: the writer faults the
				// pages in itself, as without a warmer.
				w.off.Store(true)
				w.cl.log.WithError(err).Debug("warming the commitlog ahead of the writer is not supported here")
				return
			}
			// Short of memory, say: skip this window rather than retry on
			// every append; the writer faults these pages in itself.
			w.cl.log.WithError(err).WithField("offset", base+from).Debug("warming the commitlog failed")
			w.upTo.Store(base + end)
			w.next.Store(min(base+end, base+size))
			return
		}
		w.upTo.Store(base + to)
		from = to
	}
	if end == size {
		w.next.Store(base + size)
	} else {
		w.next.Store(base + end - warmAhead/2)
	}
}
