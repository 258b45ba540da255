package store

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const testFileSize = 64 << 10

func TestMappedFileCreateWriteSelectFlush(t *testing.T) {
	dir := t.TempDir()
	mf, err := CreateMappedFile(dir, 3*testFileSize, testFileSize)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "00000000000000196608"), mf.Path())
	st, err := os.Stat(mf.Path())
	require.NoError(t, err)
	assert.EqualValues(t, testFileSize, st.Size(), "preallocated to the full size")
	_, err = os.Stat(mf.Path() + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist)

	assert.Equal(t, 0, mf.WrotePosition())
	_, ok := mf.SelectBytes(0, 1)
	assert.False(t, ok, "nothing written yet")

	copy(mf.Buffer(), "hello world")
	mf.SetWrotePosition(11)
	r, ok := mf.SelectBytes(6, 5)
	require.True(t, ok)
	assert.Equal(t, "world", string(r.Bytes))
	assert.EqualValues(t, 3*testFileSize+6, r.StartOffset)
	r.Release()
	r.Release() // twice is harmless

	all, ok := mf.SelectFrom(0)
	require.True(t, ok)
	assert.Equal(t, "hello world", string(all.Bytes))
	all.Release()
	_, ok = mf.SelectFrom(11)
	assert.False(t, ok)

	for _, mode := range []FlushMode{FlushMsync, FlushFdatasync} {
		mf.SetFlushMode(mode)
		copy(mf.Buffer()[mf.WrotePosition():], "!")
		mf.SetWrotePosition(mf.WrotePosition() + 1)
		require.NoError(t, mf.Flush(1<<30), mode.String())
		assert.Equal(t, mf.WrotePosition(), mf.FlushedPosition())
	}
	require.NoError(t, mf.Close())
	data, err := os.ReadFile(mf.Path())
	require.NoError(t, err)
	assert.Equal(t, "hello world!!", string(data[:13]))
	assert.False(t, mf.Hold(), "closed file cannot be held")
}

func TestMappedFileOpenWrongSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, fileName(0))
	require.NoError(t, os.WriteFile(p, make([]byte, 100), 0o644))
	_, err := OpenMappedFile(p, testFileSize)
	require.ErrorIs(t, err, ErrFileSize)
	assert.Contains(t, err.Error(), p)

	q := NewMappedFileQueue(dir, testFileSize, nil)
	err = q.Load()
	require.ErrorIs(t, err, ErrFileSize)
	assert.Contains(t, err.Error(), p)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk"), nil, 0o644))
	require.NoError(t, os.Remove(p))
	require.ErrorIs(t, q.Load(), ErrFileName)
}

func TestMappedFileDestroyWaitsForHolder(t *testing.T) {
	dir := t.TempDir()
	mf, err := CreateMappedFile(dir, 0, testFileSize)
	require.NoError(t, err)
	copy(mf.Buffer(), "abc")
	mf.SetWrotePosition(3)
	r, ok := mf.SelectBytes(0, 3)
	require.True(t, ok)

	done := make(chan error, 1)
	go func() { done <- mf.Destroy(5 * time.Second) }()
	// The destroy is waiting: the reader's bytes stay readable.
	require.Eventually(t, func() bool { return !mf.available.Load() }, time.Second, time.Millisecond)
	assert.False(t, mf.Hold())
	assert.Equal(t, "abc", string(r.Bytes))
	select {
	case <-done:
		t.Fatal("destroy returned while the file was held")
	case <-time.After(20 * time.Millisecond):
	}
	r.Release()
	require.NoError(t, <-done)
	_, err = os.Stat(mf.Path())
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A forced deadline removes the name but leaves the mapping to the holder.
	mf2, err := CreateMappedFile(dir, testFileSize, testFileSize)
	require.NoError(t, err)
	copy(mf2.Buffer(), "xyz")
	mf2.SetWrotePosition(3)
	r2, ok := mf2.SelectBytes(0, 3)
	require.True(t, ok)
	err = mf2.Destroy(10 * time.Millisecond)
	require.ErrorIs(t, err, ErrFileHeld)
	_, err = os.Stat(mf2.Path())
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, "xyz", string(r2.Bytes), "still mapped for the holder")
	r2.Release()
	select {
	case <-mf2.released:
	default:
		t.Fatal("last release did not unmap")
	}
}

func fillFile(t *testing.T, q *MappedFileQueue, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mf, err := q.LastMappedFileOrCreate(0)
		require.NoError(t, err)
		pos := mf.WrotePosition()
		mf.Buffer()[pos] = byte(i)
		mf.SetWrotePosition(pos + 1)
	}
}

func TestMappedFileQueueLifecycle(t *testing.T) {
	dir := t.TempDir()
	const size = 4096
	q := NewMappedFileQueue(dir, size, nil)
	require.NoError(t, q.Load())
	assert.EqualValues(t, -1, q.MinOffset())
	assert.EqualValues(t, 0, q.MaxOffset())

	fillFile(t, q, 3*size+100)
	require.Equal(t, 4, q.Len())
	assert.EqualValues(t, 0, q.MinOffset())
	assert.EqualValues(t, 3*size+100, q.MaxOffset())
	assert.EqualValues(t, 2*size, q.FindMappedFileByOffset(2*size+5, false).FileFromOffset())
	assert.Nil(t, q.FindMappedFileByOffset(10*size, false))
	assert.EqualValues(t, 0, q.FindMappedFileByOffset(10*size, true).FileFromOffset())
	assert.EqualValues(t, 2*size, q.RollNextFile(size+1))

	// Flush file by file until everything is on disk.
	where, err := q.FlushAll()
	require.NoError(t, err)
	assert.EqualValues(t, 3*size+100, where)

	// Least pages: 100 more bytes in the same page are not enough for 1 page.
	fillFile(t, q, 100)
	where, err = q.Flush(1)
	require.NoError(t, err)
	assert.EqualValues(t, 3*size+100, where)
	where, err = q.Flush(0)
	require.NoError(t, err)
	assert.EqualValues(t, 3*size+200, where)
	require.NoError(t, q.Close())

	// Reload: files are marked full, then truncated back.
	q = NewMappedFileQueue(dir, size, nil)
	require.NoError(t, q.Load())
	require.Equal(t, 4, q.Len())
	assert.EqualValues(t, 4*size, q.MaxOffset())
	require.NoError(t, q.TruncateDirtyFiles(size+10))
	assert.Equal(t, 2, q.Len())
	assert.EqualValues(t, size+10, q.MaxOffset())
	assert.EqualValues(t, size+10, q.FlushedWhere())
	r, ok := q.LastMappedFile().SelectBytes(9, 1)
	require.True(t, ok)
	assert.Equal(t, byte((size+9)%256), r.Bytes[0])
	r.Release()
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2)

	// Delete by time never deletes the last file.
	fillFile(t, q, 3*size)
	require.Equal(t, 5, q.Len())
	n := q.DeleteExpiredByTime(time.Now(), time.Hour, 0, time.Second, false, math.MaxInt64)
	assert.Equal(t, 0, n, "nothing is an hour old")
	n = q.DeleteExpiredByTime(time.Now().Add(2*time.Hour), time.Hour, 0, time.Second, false, math.MaxInt64)
	assert.Equal(t, 4, n)
	assert.Equal(t, 1, q.Len())
	assert.EqualValues(t, 4*size, q.MinOffset())

	fillFile(t, q, 2*size)
	n = q.DeleteBeforeOffset(func(mf *MappedFile) bool { return mf.FileFromOffset() < 5*size }, time.Second)
	assert.Equal(t, 1, n)
	assert.EqualValues(t, 5*size, q.MinOffset())
	require.NoError(t, q.Destroy())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestMappedFileQueueAllocator(t *testing.T) {
	dir := t.TempDir()
	q := NewMappedFileQueue(dir, 4096, nil)
	var calls []int64
	q.SetAllocator(func(d string, off int64, size int) (*MappedFile, error) {
		calls = append(calls, off)
		return CreateMappedFile(d, off, size)
	})
	fillFile(t, q, 4096+1)
	assert.Equal(t, []int64{0, 4096}, calls)
	q.SetAllocator(func(d string, off int64, size int) (*MappedFile, error) {
		return CreateMappedFile(d, off+1, size) // wrong offset
	})
	fillFile(t, q, 4095)
	_, err := q.LastMappedFileOrCreate(0)
	assert.ErrorContains(t, err, "allocator returned")
	require.NoError(t, q.Close())
}

func TestMappedFileQueueLoadRemovesTmp(t *testing.T) {
	dir := t.TempDir()
	logger, hook := test.NewNullLogger()
	require.NoError(t, os.WriteFile(filepath.Join(dir, fileName(0)+".tmp"), []byte("x"), 0o644))
	q := NewMappedFileQueue(dir, 4096, logger)
	require.NoError(t, q.Load())
	assert.Equal(t, 0, q.Len())
	require.NotNil(t, hook.LastEntry())
	assert.Equal(t, logrus.WarnLevel, hook.LastEntry().Level)
}

// BenchmarkMappedFileAppendFlush measures 1 KiB appends into a mapped file
// with a flush every 64 appends, for each flush mode.
func BenchmarkMappedFileAppendFlush(b *testing.B) {
	for _, mode := range []FlushMode{FlushMsync, FlushFdatasync} {
		b.Run(mode.String(), func(b *testing.B) {
			q := NewMappedFileQueue(b.TempDir(), 16<<20, nil)
			q.SetFlushMode(mode)
			msg := make([]byte, 1024)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				mf, err := q.LastMappedFileOrCreate(0)
				if err != nil {
					b.Fatal(err)
				}
				pos := mf.WrotePosition()
				n := copy(mf.Buffer()[pos:], msg)
				mf.SetWrotePosition(pos + n)
				if i%64 == 63 {
					if _, err := q.Flush(0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			require.NoError(b, q.Destroy())
		})
	}
}

func TestMappedFileResident(t *testing.T) {
	mf, err := CreateMappedFile(t.TempDir(), 0, 4*os.Getpagesize())
	require.NoError(t, err)
	t.Cleanup(func() { _ = mf.Destroy(time.Second) })
	page := os.Getpagesize()
	copy(mf.Buffer()[page:], "touched")
	mf.SetWrotePosition(page + 7)
	assert.True(t, mf.resident(page+3), "a page just written is in memory")
	assert.False(t, mf.resident(-1))
	assert.False(t, mf.resident(4*page))

	// Written back and dropped from the page cache, it is not (tmpfs keeps
	// its pages: nothing to drop there).
	var fs unix.Statfs_t
	require.NoError(t, unix.Statfs(mf.Path(), &fs))
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temp dir is on tmpfs, whose pages cannot be dropped")
	}
	require.NoError(t, unix.Msync(mf.Buffer(), unix.MS_SYNC))
	require.NoError(t, unix.Madvise(mf.Buffer(), unix.MADV_DONTNEED))
	f, err := os.Open(mf.Path())
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	assert.False(t, mf.resident(page+3), "dropped from the page cache")
	assert.Equal(t, "touched", string(mf.Buffer()[page:page+7]), "and read back from disk")
}

// noFallocate makes the store act on a file system without fallocate(2)
// for the rest of the test (store tests do not run in parallel).
func noFallocate(t *testing.T) {
	fallocate = func(int, uint32, int64, int64) error { return unix.EOPNOTSUPP }
	t.Cleanup(func() { fallocate = unix.Fallocate }) // registered first: runs after the stores' cleanups
}

// On a file system without fallocate, a file loaded from disk gets zeros
// written into its holes only: the first put after a restart used to zero
// the whole newest commitlog file, acknowledged records included.
func TestNoFallocateKeepsLoadedData(t *testing.T) {
	noFallocate(t)
	cfg := testConfig(t.TempDir(), SyncFlush)
	s := MustOpen(t, cfg)
	first := mustPut(t, s, newTestMessage("T", 0, body(1, 100), "", "k1"))
	require.NoError(t, s.Shutdown(context.Background()))

	s = MustOpen(t, cfg)
	mustPut(t, s, newTestMessage("T", 0, body(2, 100), "", "k2"))
	rec, ok := s.SelectOneMessageByOffset(first.WroteOffset)
	require.True(t, ok, "the first message, acknowledged under SYNC_FLUSH, is gone after one more put")
	rec.Release()
	assert.Len(t, pullAll(t, s, "T", 0, nil), 2)
}

// Without fallocate, ensureBacked still backs the holes it must.
func TestNoFallocateFillsHoles(t *testing.T) {
	noFallocate(t)
	mf, err := createMappedFile(filepath.Join(t.TempDir(), "f"), 0, 1<<20, 4096, false)
	require.NoError(t, err)
	defer mf.Destroy(0)
	copy(mf.Buffer(), "data")
	require.NoError(t, mf.ensureBacked(512<<10, 0))
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(int(mf.file.Fd()), &st))
	assert.GreaterOrEqual(t, st.Blocks*512, int64(1<<20), "whole file backed")
	assert.Equal(t, "data", string(mf.Buffer()[:4]))
}
