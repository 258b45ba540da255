package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// Errors of the mapped-file layer.
var (
	// ErrFileSize is returned by Load when a file's length differs from the
	// configured file size (a truncated or foreign file); the message names it.
	ErrFileSize = errors.New("store: mapped file has the wrong size")
	// ErrFileName is returned when a file in a mapped-file directory is not
	// named by a 20-digit offset.
	ErrFileName = errors.New("store: mapped file name is not a 20-digit offset")
	// ErrFileHeld is returned by Destroy when readers still held the file at the
	// forced deadline: the file name is removed anyway and the mapping is
	// released by the last reader.
	ErrFileHeld = errors.New("store: mapped file still held by readers at destroy deadline")
	// ErrFileUnavailable is returned when a file is used after Destroy or Close.
	ErrFileUnavailable = errors.New("store: mapped file is no longer available")
)

// osPageSize is the flush granularity. msync needs page-aligned addresses, and
// RocketMQ's "least pages" rule counts 4 KiB pages.
const osPageSize = 4096

// FlushMode selects the system call that persists a mapped file.
type FlushMode int32

const (
	// FlushMsync persists the dirty range with msync(MS_SYNC) (the default).
	FlushMsync FlushMode = iota
	// FlushFdatasync persists the whole file's dirty pages with fdatasync.
	FlushFdatasync
)

// String names the flush mode.
func (m FlushMode) String() string {
	if m == FlushFdatasync {
		return "fdatasync"
	}
	return "msync"
}

// MappedFile is one fixed-size file mapped read/write into memory. Its
// blocks are reserved when it is created (or, for index files, as the writer
// gets there: ensureBacked), so the file never grows and a write through the
// mapping never faults on a block the file system cannot allocate.
//
// Concurrency: exactly one writer (the owner of the file's queue) writes into
// Buffer() at WrotePosition and then publishes the bytes with
// SetWrotePosition; readers load WrotePosition and read below it, which the
// atomic store/load orders. A reader that keeps a slice of the mapping must
// Hold the file first and Release it afterwards: Destroy does not unmap a held
// file.
type MappedFile struct {
	path           string
	fileFromOffset int64
	fileSize       int
	file           *os.File
	data           []byte
	flushMode      atomic.Int32 // a FlushMode

	wrote   atomic.Int64
	flushed atomic.Int64
	// backed is how many bytes from the start are known to have disk
	// blocks; see ensureBacked. Only the writer reads or writes it.
	backed int
	// lastWrite is the unix-nano time, on the owning queue's clock, at which
	// the file was created or last flushed new bytes; 0 for a file mapped
	// from disk and not flushed since, where LastModified falls back to the
	// file's mtime. Taken per flush, not per write: a clock read per append
	// (commitlog and consume queue) showed in the send profile, and
	// retention, its one reader, counts in hours.
	lastWrite atomic.Int64

	// refs counts the owner's reference (1 while the file is available) plus
	// one per Hold. When it reaches zero the mapping is unmapped and the file
	// closed; released is closed at that point.
	refs      atomic.Int64
	available atomic.Bool
	released  chan struct{}
	cleanOnce sync.Once
	cleanErr  error

	flushMu sync.Mutex // serialises flushes of this file
}

// fileName formats an offset as RocketMQ names its files: 20 decimal digits.
func fileName(offset int64) string {
	return fmt.Sprintf("%020d", offset)
}

// parseFileName returns the offset a 20-digit file name encodes.
func parseFileName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
		if v < 0 {
			return 0, false
		}
	}
	return v, true
}

// CreateMappedFile creates dir/<20-digit offset> of fileSize bytes, all of
// its blocks reserved and reading as zeros, and maps it. The file is built
// under a temporary name, synced and then renamed, so a crash never leaves a
// short file under a valid name. A disk without room for it gives an error
// wrapping ErrDiskFull.
func CreateMappedFile(dir string, offset int64, fileSize int) (*MappedFile, error) {
	return createMappedFile(filepath.Join(dir, fileName(offset)), offset, fileSize, fileSize, true)
}

// createMappedFile creates final (see CreateMappedFile) with its first
// reserve bytes backed by disk blocks; the rest stays a hole, and whoever
// writes there first calls ensureBacked. Writing through a mapping into a
// hole on a full file system kills the process with SIGBUS, so nothing may
// write beyond Backed. sync fdatasyncs the reservation before the rename;
// files flushed in the background (consume queues, index) skip it, as their
// recovery reads a lost reservation back as zeros anyway.
//
// The free space is checked first, so a full disk answers ErrDiskFull
// before any file is made.
func createMappedFile(final string, offset int64, fileSize, reserve int, sync bool) (*MappedFile, error) {
	if fileSize <= 0 || reserve < 0 || reserve > fileSize {
		return nil, fmt.Errorf("store: bad mapped file size %d (reserve %d)", fileSize, reserve)
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create dir %s: %w", dir, noSpace(err))
	}
	if _, err := os.Stat(final); err == nil {
		return nil, fmt.Errorf("store: create mapped file %s: %w", final, os.ErrExist)
	}
	if err := checkFreeSpace(dir, reserve); err != nil {
		return nil, fmt.Errorf("store: create mapped file %s: %w", final, err)
	}
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: create mapped file %s: %w", tmp, noSpace(err))
	}
	err = reserveBlocks(f, 0, reserve)
	if err == nil && reserve < fileSize {
		err = f.Truncate(int64(fileSize))
	}
	if err == nil && sync {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store: preallocate %s: %w", tmp, noSpace(err))
	}
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	mf, err := mapFile(f, final, offset, fileSize)
	if err != nil {
		return nil, err
	}
	mf.backed = reserve
	return mf, nil
}

// checkFreeSpace returns an error wrapping ErrDiskFull when the file system
// holding dir has fewer than need bytes available.
func checkFreeSpace(dir string, need int) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // unknown: the allocation itself will tell
	}
	if avail := st.Bavail * uint64(st.Bsize); avail < uint64(need) {
		return fmt.Errorf("%w: %d bytes needed, %d available", ErrDiskFull, need, avail)
	}
	return nil
}

// noSpace marks an out-of-space (or out-of-quota) error as ErrDiskFull,
// keeping the system error in the chain.
func noSpace(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// reserveBlocks allocates disk blocks for [off, off+n) of f, which then read
// back as zeros; the file grows to off+n if it is shorter.
//
// fallocate(2) allocates the blocks without writing them. Writing zeros
// instead costs the same at sync time but pushes the whole range through
// the disk first: measured on a shared disk it starved SYNC_FLUSH group
// commits for seconds at every new commitlog file. Filesystems without
// fallocate get the zeros written. A file whose blocks are allocated also
// syncs about twice as fast as a growing one (BenchmarkPreallocate).
func reserveBlocks(f *os.File, off, n int) error {
	if n <= 0 {
		return nil
	}
	err := fallocate(int(f.Fd()), 0, int64(off), int64(n))
	if err == nil || !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	return writeZeros(f, off, n)
}

// reserveHoles is reserveBlocks for a file that may hold data in
// [off, off+n) (a mapped file loaded from disk): without fallocate, zeros
// are written into its holes only, never over bytes it holds.
func reserveHoles(f *os.File, off, n int) error {
	err := fallocate(int(f.Fd()), 0, int64(off), int64(n))
	if err == nil || !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	fd, end := int(f.Fd()), int64(off+n)
	for pos := int64(off); pos < end; {
		hole, err := unix.Seek(fd, pos, unix.SEEK_HOLE)
		if err != nil || hole >= end {
			return nil // no hole left (or none the file system can tell)
		}
		data, err := unix.Seek(fd, hole, unix.SEEK_DATA)
		if err != nil || data > end {
			data = end // ENXIO: nothing but hole up to the end of the file
		}
		if err := writeZeros(f, int(hole), int(data-hole)); err != nil {
			return err
		}
		pos = data
	}
	return nil
}

// writeZeros writes n zero bytes at off.
func writeZeros(f *os.File, off, n int) error {
	zeros := make([]byte, min(n, 1<<20))
	for done := 0; done < n; {
		w, err := f.WriteAt(zeros[:min(len(zeros), n-done)], int64(off+done))
		if err != nil {
			return err
		}
		done += w
	}
	return nil
}

// ensureBacked makes sure bytes [0, end) of the file have disk blocks before
// the caller writes below end, reserving up to the next multiple of chunk
// (the whole file when chunk <= 0) at a time. Only the file's one writer
// calls it (it guards backed); a loaded file starts unbacked, as it may have
// been made sparse by an older version, and its first write checks it once.
// A full disk gives an error wrapping ErrDiskFull and nothing is written.
func (mf *MappedFile) ensureBacked(end, chunk int) error {
	if end <= mf.backed {
		return nil
	}
	upTo := mf.fileSize
	if chunk > 0 {
		upTo = min((end+chunk-1)/chunk*chunk, mf.fileSize)
	}
	if !mf.Hold() {
		return fmt.Errorf("%w: %s", ErrFileUnavailable, mf.path)
	}
	defer mf.Release()
	if err := reserveHoles(mf.file, mf.backed, upTo-mf.backed); err != nil {
		return fmt.Errorf("store: reserve blocks of %s [%d,%d): %w", mf.path, mf.backed, upTo, noSpace(err))
	}
	mf.backed = upTo
	return nil
}

// OpenMappedFile maps an existing file; its length must be fileSize. The
// write and flush positions start at the end of the file (as RocketMQ marks
// loaded files fully written); recovery moves them back.
func OpenMappedFile(path string, fileSize int) (*MappedFile, error) {
	offset, ok := parseFileName(filepath.Base(path))
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrFileName, path)
	}
	return openMappedFile(path, offset, fileSize)
}

// openMappedFile maps path as a file starting at global offset offset.
func openMappedFile(path string, offset int64, fileSize int) (*MappedFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: open mapped file %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: stat %s: %w", path, err)
	}
	if st.Size() != int64(fileSize) {
		f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, expected %d (truncated or configured with another file size)",
			ErrFileSize, path, st.Size(), fileSize)
	}
	mf, err := mapFile(f, path, offset, fileSize)
	if err != nil {
		return nil, err
	}
	mf.wrote.Store(int64(fileSize))
	mf.flushed.Store(int64(fileSize))
	return mf, nil
}

func mapFile(f *os.File, path string, offset int64, fileSize int) (*MappedFile, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, fileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: mmap %s: %w", path, err)
	}
	mf := &MappedFile{
		path:           path,
		fileFromOffset: offset,
		fileSize:       fileSize,
		file:           f,
		data:           data,
		released:       make(chan struct{}),
	}
	mf.refs.Store(1)
	mf.available.Store(true)
	return mf, nil
}

// Path returns the file's path.
func (mf *MappedFile) Path() string { return mf.path }

// FileFromOffset returns the global offset of the file's first byte.
func (mf *MappedFile) FileFromOffset() int64 { return mf.fileFromOffset }

// FileSize returns the file's fixed size.
func (mf *MappedFile) FileSize() int { return mf.fileSize }

// WrotePosition returns the end of the published bytes, relative to the file.
func (mf *MappedFile) WrotePosition() int { return int(mf.wrote.Load()) }

// SetWrotePosition publishes the bytes below pos to readers. Only the writer
// calls it, after it wrote the bytes.
func (mf *MappedFile) SetWrotePosition(pos int) {
	mf.wrote.Store(int64(pos))
}

// FlushedPosition returns the end of the bytes known to be on disk.
func (mf *MappedFile) FlushedPosition() int { return int(mf.flushed.Load()) }

// SetFlushedPosition sets the flushed position (recovery, truncation).
func (mf *MappedFile) SetFlushedPosition(pos int) { mf.flushed.Store(int64(pos)) }

// IsFull reports whether the whole file has been written.
func (mf *MappedFile) IsFull() bool { return mf.WrotePosition() >= mf.fileSize }

// Buffer returns the whole mapping. The writer writes at WrotePosition under
// its own lock; readers should use SelectBytes so the file stays mapped.
func (mf *MappedFile) Buffer() []byte { return mf.data }

// SetFlushMode chooses msync or fdatasync for Flush.
func (mf *MappedFile) SetFlushMode(m FlushMode) { mf.flushMode.Store(int32(m)) }

// LastModified returns the time its queue stamped the file with (at creation
// and at each flush that persisted new bytes). A file written before this
// process opened it, and not flushed since, has no stamp: its time can only
// come from the filesystem, so LastModified returns the file's mtime, which
// is on the real clock.
func (mf *MappedFile) LastModified() time.Time {
	if ns := mf.lastWrite.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	st, err := os.Stat(mf.path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// stamp records t as the file's last modification (see LastModified).
func (mf *MappedFile) stamp(t time.Time) { mf.lastWrite.Store(t.UnixNano()) }

// resident reports whether the page holding pos is in memory, so a read
// there does not wait for the disk (mincore). The caller holds mf. An error
// counts as not resident.
func (mf *MappedFile) resident(pos int) bool {
	if pos < 0 || pos >= len(mf.data) {
		return false
	}
	page := os.Getpagesize()
	start := pos &^ (page - 1) // the mapping starts on a page
	var vec [1]byte
	if err := mincore(mf.data[start:min(start+page, len(mf.data))], vec[:]); err != nil {
		return false
	}
	return vec[0]&1 != 0
}

// mincore is mincore(2), which golang.org/x/sys/unix does not wrap on Linux:
// one byte per page of b in vec, bit 0 set when the page is resident.
func mincore(b, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))),
		uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return errno
	}
	return nil
}

// Hold takes a reference that keeps the mapping alive. It fails once Destroy
// or Close has begun.
func (mf *MappedFile) Hold() bool {
	if !mf.available.Load() {
		return false
	}
	if mf.refs.Add(1) > 1 {
		return true
	}
	// The count already reached zero: the file is being cleaned up.
	mf.refs.Add(-1)
	return false
}

// Release drops a reference taken by Hold. The last release of a destroyed
// file unmaps it.
func (mf *MappedFile) Release() {
	if mf.refs.Add(-1) == 0 {
		mf.cleanup()
	}
}

// cleanup unmaps and closes the file once nobody references it.
func (mf *MappedFile) cleanup() {
	mf.cleanOnce.Do(func() {
		var errs []error
		if err := unix.Munmap(mf.data); err != nil {
			errs = append(errs, fmt.Errorf("store: munmap %s: %w", mf.path, err))
		}
		if err := mf.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close %s: %w", mf.path, err))
		}
		mf.cleanErr = errors.Join(errs...)
		close(mf.released)
	})
}

// shutdown withdraws the owner's reference once.
func (mf *MappedFile) shutdown() {
	if mf.available.CompareAndSwap(true, false) {
		mf.Release()
	}
}

// Close withdraws the owner's reference: the file is unmapped now if no
// reader holds it, else by the last Release. The file stays on disk.
func (mf *MappedFile) Close() error {
	mf.shutdown()
	select {
	case <-mf.released:
		return mf.cleanErr
	default:
		return nil
	}
}

// Destroy removes the file. It waits up to timeout for readers to release
// the mapping; past the deadline it removes the name anyway (the space is
// freed when the last holder releases) and returns ErrFileHeld. Unmapping
// under a reader would crash the process, so that is never forced.
func (mf *MappedFile) Destroy(timeout time.Duration) error {
	mf.shutdown()
	var heldErr error
	select {
	case <-mf.released:
	case <-time.After(timeout):
		heldErr = fmt.Errorf("%w: %s", ErrFileHeld, mf.path)
	}
	if err := os.Remove(mf.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errors.Join(heldErr, fmt.Errorf("store: remove %s: %w", mf.path, err))
	}
	if heldErr != nil {
		return heldErr
	}
	return mf.cleanErr
}

// Flush persists the written bytes in [FlushedPosition, upTo) and advances
// the flushed position. upTo is clamped to the wrote position. msync works on
// whole pages, so the range is widened to page boundaries.
func (mf *MappedFile) Flush(upTo int) error {
	if !mf.Hold() {
		return fmt.Errorf("%w: %s", ErrFileUnavailable, mf.path)
	}
	defer mf.Release()
	mf.flushMu.Lock()
	defer mf.flushMu.Unlock()
	upTo = min(upTo, mf.WrotePosition())
	from := mf.FlushedPosition()
	if upTo <= from {
		return nil
	}
	var err error
	if FlushMode(mf.flushMode.Load()) == FlushFdatasync {
		err = unix.Fdatasync(int(mf.file.Fd()))
	} else {
		start := from &^ (osPageSize - 1)
		end := min((upTo+osPageSize-1)&^(osPageSize-1), mf.fileSize)
		err = unix.Msync(mf.data[start:end], unix.MS_SYNC)
	}
	if err != nil {
		return fmt.Errorf("store: flush %s [%d,%d): %w", mf.path, from, upTo, err)
	}
	mf.flushed.Store(int64(upTo))
	return nil
}

// SelectResult is a held slice of a mapped file. Bytes stay valid until
// Release; a zero SelectResult releases nothing.
type SelectResult struct {
	// StartOffset is the global offset of Bytes[0].
	StartOffset int64
	// Bytes aliases the mapping: do not write to it or use it after Release.
	Bytes []byte
	mf    *MappedFile
}

// Size returns len(Bytes).
func (r *SelectResult) Size() int { return len(r.Bytes) }

// MappedFile returns the file the bytes belong to (nil when released).
func (r *SelectResult) MappedFile() *MappedFile { return r.mf }

// Release drops the hold on the file. It is safe to call twice.
func (r *SelectResult) Release() {
	if r.mf != nil {
		r.mf.Release()
		r.mf = nil
	}
	r.Bytes = nil
}

// SelectBytes holds the file and returns size bytes at pos (file-relative).
// It returns false if the range is not fully written or the file is gone.
func (mf *MappedFile) SelectBytes(pos, size int) (SelectResult, bool) {
	if pos < 0 || size < 0 || pos+size > mf.WrotePosition() {
		return SelectResult{}, false
	}
	if !mf.Hold() {
		return SelectResult{}, false
	}
	return SelectResult{StartOffset: mf.fileFromOffset + int64(pos), Bytes: mf.data[pos : pos+size : pos+size], mf: mf}, true
}

// SelectFrom holds the file and returns the written bytes from pos to the
// wrote position. It returns false if pos is at or beyond the wrote position.
func (mf *MappedFile) SelectFrom(pos int) (SelectResult, bool) {
	w := mf.WrotePosition()
	if pos < 0 || pos >= w {
		return SelectResult{}, false
	}
	return mf.SelectBytes(pos, w-pos)
}

// syncWhole persists the whole mapping regardless of positions; files
// written at random places (index files) use it.
func (mf *MappedFile) syncWhole() error {
	if !mf.Hold() {
		return fmt.Errorf("%w: %s", ErrFileUnavailable, mf.path)
	}
	defer mf.Release()
	mf.flushMu.Lock()
	defer mf.flushMu.Unlock()
	if err := unix.Msync(mf.data, unix.MS_SYNC); err != nil {
		return fmt.Errorf("store: flush %s: %w", mf.path, err)
	}
	return nil
}

// fallocate is unix.Fallocate; a variable so a test can act as a file
// system without it.
var fallocate = unix.Fallocate
