package store

import (
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// fileAllocator creates the next commitlog file ahead of time, as RocketMQ's
// AllocateMappedFileService does. Preallocating a file writes and syncs its
// whole size in zeros (1 GiB by default), which would otherwise stall every
// writer behind the put lock at each roll. After each allocation it prepares
// the following file in allocateLoop; the writer then only takes it over.
type fileAllocator struct {
	log logrus.FieldLogger

	mu    sync.Mutex  // held while creating a file, so both paths never race on a name
	ready *MappedFile // a preallocated file not yet in the queue; guarded by mu

	reqs    chan allocRequest
	stop    chan struct{}
	done    chan struct{}
	started bool // set by start, before any concurrent use
	once    sync.Once
}

type allocRequest struct {
	dir    string
	offset int64
	size   int
}

func newFileAllocator(log logrus.FieldLogger) *fileAllocator {
	a := &fileAllocator{
		log:  log,
		reqs: make(chan allocRequest, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	return a
}

// start launches allocateLoop; until then every file is created on demand.
func (a *fileAllocator) start() {
	if !a.started {
		a.started = true
		go a.allocateLoop()
	}
}

// allocate returns the file at offset: the one made ahead if it matches, else
// a new one made now. It then asks for the next file in the background.
func (a *fileAllocator) allocate(dir string, offset int64, size int) (*MappedFile, error) {
	a.mu.Lock()
	mf := a.ready
	a.ready = nil
	if mf != nil && (mf.FileFromOffset() != offset || mf.FileSize() != size) {
		// The log moved elsewhere (truncation): the spare is of no use.
		a.discard(mf)
		mf = nil
	}
	var err error
	if mf == nil {
		mf, err = CreateMappedFile(dir, offset, size)
	}
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a.prepare(dir, offset+int64(size), size)
	return mf, nil
}

// prepare asks allocateLoop for the file at offset without waiting.
func (a *fileAllocator) prepare(dir string, offset int64, size int) {
	select {
	case a.reqs <- allocRequest{dir, offset, size}:
	default: // one request is pending already; it is for the same next file
	}
}

func (a *fileAllocator) allocateLoop() {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			return
		case r := <-a.reqs:
			a.mu.Lock()
			if a.ready == nil {
				start := time.Now()
				mf, err := CreateMappedFile(r.dir, r.offset, r.size)
				if err != nil {
					// The writer will create it itself and report the error.
					a.log.WithError(err).WithField("offset", r.offset).Warn("preallocating the next commitlog file failed")
				} else {
					a.ready = mf
					a.log.WithFields(logrus.Fields{"file": mf.Path(), "took": time.Since(start)}).Debug("preallocated the next commitlog file")
				}
			}
			a.mu.Unlock()
		}
	}
}

// discard deletes a spare file that was never part of the log. Caller holds mu.
func (a *fileAllocator) discard(mf *MappedFile) {
	if err := mf.Destroy(time.Second); err != nil {
		a.log.WithError(err).WithField("file", mf.Path()).Warn("removing an unused preallocated file")
	}
}

// close stops the loop and deletes the spare file, so a restart does not
// find an empty file after the last one. Safe to call twice.
func (a *fileAllocator) close() {
	a.once.Do(func() {
		close(a.stop)
		if a.started {
			<-a.done
		}
		a.mu.Lock()
		if a.ready != nil {
			a.discard(a.ready)
			a.ready = nil
		}
		a.mu.Unlock()
	})
}
