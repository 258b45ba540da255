package e2e

// Page-cache checks: a kill -9 leaves the kernel's page cache as it was, so
// the next start reads back what the killed process wrote whether or not it
// reached the disk. cachestat(2) tells which pages of a file the kernel
// still holds dirty or under writeback (their bytes are not on the disk):
// after a kill under SYNC_FLUSH no page below acknowledged data may be,
// and after a graceful stop none at all.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pageSize is the page-cache granularity the tests reason in.
const pageSize = 4096

var (
	pageCacheOnce sync.Once
	pageCacheErr  error // why unsynced pages cannot be observed here; nil when they can
)

// pageCacheObservable reports whether cachestat(2) shows, on the file
// system of the temp dir, a page written and not synced as dirty and a
// synced one as clean. When it does not (Linux before 6.5 has no
// cachestat; tmpfs never writes pages back) the checks that need it are
// logged as not run.
func pageCacheObservable(t *testing.T) bool {
	t.Helper()
	pageCacheOnce.Do(func() { pageCacheErr = probePageCache(os.TempDir()) })
	if pageCacheErr != nil {
		t.Logf("page-cache checks not run: %v", pageCacheErr)
		return false
	}
	return true
}

func probePageCache(dir string) error {
	f, err := os.CreateTemp(dir, "e2e-cachestat-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var last error
	// A background writeback between the write and the first look can
	// clean the pages early; three tries make that vanishingly unlikely.
	for try := range 3 {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte(try + 1)}, 4*pageSize), 0); err != nil {
			return err
		}
		written, err := unsyncedPagesOf(f, 0, 4*pageSize)
		if err != nil {
			return err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		synced, err := unsyncedPagesOf(f, 0, 4*pageSize)
		if err != nil {
			return err
		}
		if written > 0 && synced == 0 {
			return nil
		}
		last = fmt.Errorf("cachestat on %s saw %d unsynced pages after a write and %d after fdatasync", dir, written, synced)
	}
	return last
}

// unsyncedPagesOf counts the pages of f in [off, off+n) that are dirty or
// under writeback: their current bytes are not known to be on the disk.
// The kernel tracks this per folio, which may span several pages.
func unsyncedPagesOf(f *os.File, off, n int64) (int64, error) {
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &st, 0); err != nil {
		return 0, fmt.Errorf("cachestat %s: %w", f.Name(), err)
	}
	return int64(st.Dirty + st.Writeback), nil
}

// unsyncedPages is unsyncedPagesOf for a path.
func unsyncedPages(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	u, err := unsyncedPagesOf(f, off, n)
	require.NoError(t, err)
	return u
}

// commitlogFiles returns the commitlog files by start offset.
func commitlogFiles(t *testing.T, c *binCluster) map[int64]string {
	t.Helper()
	dir := filepath.Join(c.StoreDir, "commitlog")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := make(map[int64]string)
	for _, e := range entries {
		if off, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 {
			out[off] = filepath.Join(dir, e.Name())
		}
	}
	return out
}

// maxAckedStart returns the commitlog offset of the newest acknowledged
// record, -1 with none.
func (a *ackLog) maxAckedStart() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := int64(-1)
	for _, r := range a.acked {
		m = max(m, r.CommitLogOffset)
	}
	return m
}

// requireAckedFsynced checks, after a kill under SYNC_FLUSH, that no
// commitlog file wholly below the file of the newest acknowledged record
// has a page the kernel holds unsynced. The group commit flushes files in
// order and answers a record only once the flush passed its end, and
// nothing rewrites a commitlog byte below it, so such a page is data an
// acknowledgement relies on (a recovery stops at the first bad record)
// that no fsync covered: a real power loss now would take it. Within the
// newest file the check says nothing: a folio can straddle the newest
// record's end, and later writes dirty it.
// Each file is reported once (seen, by path).
func requireAckedFsynced(t *testing.T, c *binCluster, log *ackLog, round int, seen map[string]bool) {
	t.Helper()
	newest := log.maxAckedStart()
	if newest < 0 {
		return
	}
	size := c.commitlogFileSize()
	newestFile := newest - newest%size
	for start, path := range commitlogFiles(t, c) {
		if start >= newestFile || seen[path] {
			continue
		}
		if u := unsyncedPages(t, path, 0, size); u > 0 {
			seen[path] = true
			assert.Failf(t, "acknowledged data rests on unsynced bytes",
				"round %d: commitlog file %s holds %d unsynced pages after the kill (the first at %d), though acknowledged records "+
					"follow it (the newest at %d, in file %020d): no fsync covered them",
				round, filepath.Base(path), u, firstUnsyncedPage(t, path, size), newest, newestFile)
		}
	}
}

// requireStoreSynced checks, after a graceful stop, that the kernel holds
// no unsynced page of any file of the store: the stop removed the abort
// file, so the next start recovers "normally" and trusts the files.
func requireStoreSynced(t *testing.T, c *binCluster, when string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(c.StoreDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "lock" { // the lock file's bytes mean nothing
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if u := unsyncedPages(t, path, 0, st.Size()); u > 0 {
			rel, _ := filepath.Rel(c.StoreDir, path)
			assert.Failf(t, "graceful stop left unsynced data", "%s: %s holds %d unsynced pages (the first at %d)",
				when, rel, u, firstUnsyncedPage(t, path, st.Size()))
		}
		return nil
	}))
}

// unsyncedTailPages returns how many pages the kernel holds unsynced in
// commitlog files before the last one with data (after a kill at a file
// boundary: the previous file's tail still waited for its flush).
func unsyncedTailPages(t *testing.T, c *binCluster) int64 {
	t.Helper()
	files := commitlogFiles(t, c)
	last := int64(-1)
	for start, path := range files {
		if fileHasData(path) {
			last = max(last, start)
		}
	}
	var n int64
	for start, path := range files {
		if start < last {
			n += unsyncedPages(t, path, 0, c.commitlogFileSize())
		}
	}
	return n
}

// firstUnsyncedPage returns the position of the first page of path the
// kernel holds unsynced.
func firstUnsyncedPage(t *testing.T, path string, size int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for pos := int64(0); pos < size; pos += pageSize {
		u, err := unsyncedPagesOf(f, pos, pageSize)
		require.NoError(t, err)
		if u > 0 {
			return pos
		}
	}
	return size
}
