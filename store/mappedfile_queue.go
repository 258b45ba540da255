package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// deleteFilesBatchMax bounds how many files one retention round deletes, as
// RocketMQ's DELETE_FILES_BATCH_MAX does, so a round never stalls for long.
const deleteFilesBatchMax = 10

// MappedFileQueue is a directory of equally sized mapped files named by the
// 20-digit global offset of their first byte; together they form one
// contiguous log (commitlog, or one consume queue).
//
// The file list is guarded by mu. Appending to the last file is the owner's
// business (one writer); the queue only creates, finds, flushes, truncates
// and deletes files.
type MappedFileQueue struct {
	dir       string
	fileSize  int
	log       logrus.FieldLogger
	flushMode atomic.Int32
	// now stamps files at creation and flush; retention compares those
	// stamps with its own clock, so both must be the store's one clock.
	now func() time.Time

	mu    sync.RWMutex
	files []*MappedFile

	// allocate creates a file; CreateMappedFile unless SetAllocator
	// replaced it (the commitlog preallocates the next file ahead).
	allocate func(dir string, offset int64, fileSize int) (*MappedFile, error)

	flushMu      sync.Mutex // serialises Flush callers
	flushedWhere atomic.Int64
	// storeTimestamp is an optional value the owner sets after a flush (the
	// store time of the last flushed record), for the checkpoint.
	storeTimestamp atomic.Int64
}

// NewMappedFileQueue returns an empty queue over dir; call Load to map the
// files already there.
func NewMappedFileQueue(dir string, fileSize int, log logrus.FieldLogger) *MappedFileQueue {
	if log == nil {
		l := logrus.New()
		l.SetOutput(discardWriter{})
		log = l
	}
	return &MappedFileQueue{dir: dir, fileSize: fileSize, log: log.WithField("dir", dir), allocate: CreateMappedFile, now: time.Now}
}

// SetClock replaces time.Now as the clock that stamps files when they are
// created and flushed (see MappedFile.LastModified). Call before use.
func (q *MappedFileQueue) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	q.now = now
}

// SetAllocator replaces how LastMappedFileOrCreate creates a file: fn must
// return a new, empty, mapped file of fileSize bytes at exactly offset in
// dir (for example one preallocated ahead of time). Call before use.
func (q *MappedFileQueue) SetAllocator(fn func(dir string, offset int64, fileSize int) (*MappedFile, error)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if fn == nil {
		fn = CreateMappedFile
	}
	q.allocate = fn
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// Dir returns the queue's directory.
func (q *MappedFileQueue) Dir() string { return q.dir }

// FileSize returns the size of every file in the queue.
func (q *MappedFileQueue) FileSize() int { return q.fileSize }

// SetFlushMode selects msync or fdatasync for this queue's current and
// future files.
func (q *MappedFileQueue) SetFlushMode(m FlushMode) {
	q.flushMode.Store(int32(m))
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, mf := range q.files {
		mf.SetFlushMode(m)
	}
}

// Load maps every file of the directory, sorted by offset. Leftover *.tmp
// files (an interrupted preallocation) are removed. A file with a name that
// is not a 20-digit offset, or with the wrong length, fails the load with an
// error naming it. A missing directory is an empty queue.
func (q *MappedFileQueue) Load() error {
	entries, err := os.ReadDir(q.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: read dir %s: %w", q.dir, err)
	}
	type named struct {
		off  int64
		path string
	}
	var found []named
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		path := filepath.Join(q.dir, name)
		if strings.HasSuffix(name, ".tmp") {
			q.log.WithField("file", path).Warn("removing an interrupted preallocation")
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("store: remove %s: %w", path, err)
			}
			continue
		}
		off, ok := parseFileName(name)
		if !ok {
			return fmt.Errorf("%w: %s", ErrFileName, path)
		}
		found = append(found, named{off, path})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].off < found[j].off })
	files := make([]*MappedFile, 0, len(found))
	mode := FlushMode(q.flushMode.Load())
	for i, n := range found {
		if i > 0 && n.off != found[i-1].off+int64(q.fileSize) {
			q.log.WithFields(logrus.Fields{"file": n.path, "expected": found[i-1].off + int64(q.fileSize)}).
				Warn("mapped files are not contiguous")
		}
		mf, err := OpenMappedFile(n.path, q.fileSize)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return err
		}
		mf.SetFlushMode(mode)
		files = append(files, mf)
	}
	q.mu.Lock()
	q.files = files
	q.mu.Unlock()
	return nil
}

// Files returns a snapshot of the file list, oldest first.
func (q *MappedFileQueue) Files() []*MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return append([]*MappedFile(nil), q.files...)
}

// Len returns the number of files.
func (q *MappedFileQueue) Len() int {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return len(q.files)
}

// FirstMappedFile returns the oldest file, or nil.
func (q *MappedFileQueue) FirstMappedFile() *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	return q.files[0]
}

// LastMappedFile returns the newest file, or nil.
func (q *MappedFileQueue) LastMappedFile() *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	return q.files[len(q.files)-1]
}

// LastMappedFileOrCreate returns the newest file if it has room, else creates
// the next one. With no file at all, the first file starts at startOffset
// rounded down to the file size.
func (q *MappedFileQueue) LastMappedFileOrCreate(startOffset int64) (*MappedFile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var create int64
	switch n := len(q.files); {
	case n == 0:
		create = startOffset - startOffset%int64(q.fileSize)
	case q.files[n-1].IsFull():
		create = q.files[n-1].fileFromOffset + int64(q.fileSize)
	default:
		return q.files[n-1], nil
	}
	mf, err := q.allocate(q.dir, create, q.fileSize)
	if err != nil {
		return nil, err
	}
	if mf.FileFromOffset() != create || mf.FileSize() != q.fileSize {
		mf.Close()
		return nil, fmt.Errorf("store: allocator returned file %s at %d/%d bytes, want offset %d/%d bytes",
			mf.Path(), mf.FileFromOffset(), mf.FileSize(), create, q.fileSize)
	}
	mf.SetFlushMode(FlushMode(q.flushMode.Load()))
	mf.stamp(q.now())
	if len(q.files) == 0 {
		// A new log starts flushed at its first byte.
		q.flushedWhere.Store(create)
	}
	q.files = append(q.files, mf)
	return mf, nil
}

// FindMappedFileByOffset returns the file holding global offset off. If no
// file holds it, it returns the first file when returnFirstOnNotFound, else nil.
func (q *MappedFileQueue) FindMappedFileByOffset(off int64, returnFirstOnNotFound bool) *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	first := q.files[0].fileFromOffset
	if off >= first {
		i := int((off - first) / int64(q.fileSize))
		if i < len(q.files) {
			if mf := q.files[i]; off >= mf.fileFromOffset && off < mf.fileFromOffset+int64(q.fileSize) {
				return mf
			}
		}
		// Not contiguous (should not happen): fall back to a scan.
		for _, mf := range q.files {
			if off >= mf.fileFromOffset && off < mf.fileFromOffset+int64(q.fileSize) {
				return mf
			}
		}
	}
	if returnFirstOnNotFound {
		return q.files[0]
	}
	return nil
}

// MinOffset returns the global offset of the first file, or -1 when empty.
func (q *MappedFileQueue) MinOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return -1
	}
	return q.files[0].fileFromOffset
}

// MaxOffset returns the global offset of the end of the written bytes
// (0 when empty).
func (q *MappedFileQueue) MaxOffset() int64 {
	mf := q.LastMappedFile()
	if mf == nil {
		return 0
	}
	return mf.fileFromOffset + int64(mf.WrotePosition())
}

// MaxWrotePosition is MaxOffset under RocketMQ's other name.
func (q *MappedFileQueue) MaxWrotePosition() int64 { return q.MaxOffset() }

// RollNextFile returns the start of the file after the one holding offset.
func (q *MappedFileQueue) RollNextFile(offset int64) int64 {
	return offset + int64(q.fileSize) - offset%int64(q.fileSize)
}

// FlushedWhere returns the global offset up to which data is on disk.
func (q *MappedFileQueue) FlushedWhere() int64 { return q.flushedWhere.Load() }

// SetFlushedWhere sets the flushed offset (recovery).
func (q *MappedFileQueue) SetFlushedWhere(off int64) { q.flushedWhere.Store(off) }

// StoreTimestamp returns the value last set with SetStoreTimestamp.
func (q *MappedFileQueue) StoreTimestamp() int64 { return q.storeTimestamp.Load() }

// SetStoreTimestamp records the store time of the last flushed record.
func (q *MappedFileQueue) SetStoreTimestamp(ts int64) { q.storeTimestamp.Store(ts) }

// Flush persists the file holding FlushedWhere if it is full or has at least
// leastPages unflushed 4 KiB pages (leastPages <= 0: anything unflushed), and
// returns the new flushed offset. One call flushes at most one file, so a
// caller that needs an offset in the next file calls again.
func (q *MappedFileQueue) Flush(leastPages int) (int64, error) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	where := q.flushedWhere.Load()
	mf := q.FindMappedFileByOffset(where, where < q.MinOffset() || where == 0)
	if mf == nil {
		return where, nil
	}
	wrote := mf.WrotePosition()
	flushed := mf.FlushedPosition()
	able := wrote > flushed
	if able && leastPages > 0 && wrote < mf.fileSize {
		able = wrote/osPageSize-flushed/osPageSize >= leastPages
	}
	if able {
		if err := mf.Flush(wrote); err != nil {
			if errors.Is(err, ErrFileUnavailable) {
				// Retention deleted the file after we found it: its data
				// no longer matters, so flushing moves past it.
				next := mf.fileFromOffset + int64(q.fileSize)
				if next > where {
					q.flushedWhere.Store(next)
				}
				return max(next, where), nil
			}
			return where, err
		}
		mf.stamp(q.now())
	}
	newWhere := mf.fileFromOffset + int64(mf.FlushedPosition())
	if newWhere > where {
		q.flushedWhere.Store(newWhere)
		where = newWhere
	}
	return where, nil
}

// FlushAll flushes every file up to the end of the written data, as a clean
// shutdown does, and returns the flushed offset.
func (q *MappedFileQueue) FlushAll() (int64, error) {
	for i := 0; i <= q.Len()+1; i++ {
		before := q.flushedWhere.Load()
		where, err := q.Flush(0)
		if err != nil {
			return where, err
		}
		if where >= q.MaxOffset() || where == before {
			return where, nil
		}
	}
	return q.flushedWhere.Load(), nil
}

// TruncateDirtyFiles cuts the log at global offset off: the file holding it
// gets its write and flush positions set there, later files are deleted,
// and FlushedWhere becomes off.
func (q *MappedFileQueue) TruncateDirtyFiles(off int64) error {
	// No flush runs meanwhile: it could publish a flushed offset computed
	// from the old write positions.
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	var keep, drop []*MappedFile
	for _, mf := range q.files {
		tail := mf.fileFromOffset + int64(q.fileSize)
		switch {
		case tail <= off:
			keep = append(keep, mf)
		case off >= mf.fileFromOffset:
			pos := int(off - mf.fileFromOffset)
			mf.wrote.Store(int64(pos))
			mf.flushed.Store(int64(min(pos, mf.FlushedPosition())))
			keep = append(keep, mf)
		default:
			drop = append(drop, mf)
		}
	}
	q.files = keep
	q.mu.Unlock()
	// Recovery truncates data that was read back from the files, so what
	// remains below off counts as flushed.
	q.flushedWhere.Store(off)
	var errs []error
	for _, mf := range drop {
		q.log.WithFields(logrus.Fields{"file": mf.path, "offset": off}).Warn("deleting a file beyond the truncation offset")
		if err := mf.Destroy(time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteLastMappedFile removes the newest file (consume-queue truncation).
func (q *MappedFileQueue) DeleteLastMappedFile() error {
	q.mu.Lock()
	if len(q.files) == 0 {
		q.mu.Unlock()
		return nil
	}
	mf := q.files[len(q.files)-1]
	q.files = q.files[:len(q.files)-1]
	q.mu.Unlock()
	return mf.Destroy(time.Second)
}

// deleteFirstWhile destroys files oldest first, never the last one, while
// pred holds, at most max files, pausing interval between deletions. It stops
// at the first file it cannot destroy, which stays in the queue.
func (q *MappedFileQueue) deleteFirstWhile(pred func(mf *MappedFile) bool, max int, interval, forceTimeout time.Duration) int {
	deleted := 0
	for deleted < max {
		q.mu.RLock()
		if len(q.files) <= 1 {
			q.mu.RUnlock()
			break
		}
		mf := q.files[0]
		q.mu.RUnlock()
		if !pred(mf) {
			break
		}
		err := mf.Destroy(forceTimeout)
		q.mu.Lock()
		if len(q.files) > 0 && q.files[0] == mf {
			q.files = q.files[1:]
		}
		q.mu.Unlock()
		if err != nil {
			// The name is gone either way; the mapping is freed by the last reader.
			q.log.WithError(err).WithField("file", mf.path).Warn("deleted a file still held by readers")
		} else {
			q.log.WithField("file", mf.path).Info("deleted expired file")
		}
		deleted++
		if interval > 0 && deleted < max {
			time.Sleep(interval)
		}
	}
	if deleted > 0 {
		if err := fsutil.SyncDir(q.dir); err != nil {
			q.log.WithError(err).Warn("sync dir after delete")
		}
	}
	return deleted
}

// DeleteExpiredByTime deletes, oldest first and never the newest file, files
// last modified at least expire before now (every candidate when
// cleanImmediately), at most 10 per call with interval between deletions.
// forceTimeout bounds the wait for readers of each file. It returns the
// number of files deleted.
//
// Files ending above keepFrom are kept whatever their age: the owner still
// needs them (the commitlog passes its dispatch position, so a disk so full
// that dispatch stalled cannot make retention delete undispatched messages).
// Deleting a file that has not expired (cleanImmediately) is logged at warn
// level with the offsets it takes.
func (q *MappedFileQueue) DeleteExpiredByTime(now time.Time, expire, interval, forceTimeout time.Duration, cleanImmediately bool, keepFrom int64) int {
	return q.deleteFirstWhile(func(mf *MappedFile) bool {
		if mf.fileFromOffset+int64(mf.fileSize) > keepFrom {
			return false
		}
		lastModified := mf.LastModified()
		if !now.Before(lastModified.Add(expire)) {
			return true
		}
		if cleanImmediately {
			q.log.WithFields(logrus.Fields{
				"file": mf.path, "fromOffset": mf.fileFromOffset, "toOffset": mf.fileFromOffset + int64(mf.WrotePosition()),
				"lastModified": lastModified,
			}).Warn("disk above the force-clean ratio: deleting a file before its reserved time")
		}
		return cleanImmediately
	}, deleteFilesBatchMax, interval, forceTimeout)
}

// DeleteBeforeOffset deletes, oldest first and never the newest file, files
// for which below(file) reports that every unit points below the caller's
// minimum (a consume queue reads its last entry). It returns the number of
// files deleted.
func (q *MappedFileQueue) DeleteBeforeOffset(below func(mf *MappedFile) bool, forceTimeout time.Duration) int {
	return q.deleteFirstWhile(below, 1<<30, 0, forceTimeout)
}

// Close unmaps every file (once unheld) without deleting anything.
func (q *MappedFileQueue) Close() error {
	q.mu.Lock()
	files := q.files
	q.files = nil
	q.mu.Unlock()
	var errs []error
	for _, mf := range files {
		if err := mf.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Destroy deletes every file and the directory.
func (q *MappedFileQueue) Destroy() error {
	q.mu.Lock()
	files := q.files
	q.files = nil
	q.mu.Unlock()
	var errs []error
	for _, mf := range files {
		if err := mf.Destroy(time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	q.flushedWhere.Store(0)
	if err := os.RemoveAll(q.dir); err != nil {
		errs = append(errs, fmt.Errorf("store: remove %s: %w", q.dir, err))
	}
	return errors.Join(errs...)
}
