package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// BenchmarkConsumeQueueRecover recovers one queue of 1,000,000 entries (one
// consume-queue file, so recovery scans every entry) over a commitlog of
// 1,000,000 records of about 200 bytes:
//
//   - structural: Recover, the scan to the last valid entry (what recovery
//     did before entries were checked against the commitlog);
//   - verified: RecoverVerified, every entry checked against its record;
//   - verified-cold: the same after the commitlog and queue files were
//     dropped from the page cache (posix_fadvise DONTNEED, files unmapped);
//   - dispatch: for comparison, building the same entries from the
//     commitlog as dispatch does (CheckRecord and ConsumeQueue.Put per
//     record, no index).
func BenchmarkConsumeQueueRecover(b *testing.B) {
	const n = 1_000_000
	cfg := DefaultConfig(b.TempDir())
	cfg.MappedFileSizeCommitLog = 256 << 20
	cfg.MappedFileSizeConsumeQ = n * CQStoreUnitSize
	cfg.MessageIndexEnable = false
	s, err := Open(cfg, nil)
	require.NoError(b, err)
	m := newTestMessage("T", 0, body(0, 100), "TagA", "")
	for range n {
		if r := s.PutMessage(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Err)
		}
	}
	waitDispatched(b, s)
	require.NoError(b, s.Shutdown(context.Background()))

	cqRoot := filepath.Join(cfg.StorePathRootDir, consumeQueueDirName)
	open := func(b *testing.B) (*CommitLog, *ConsumeQueue) {
		cl, err := NewCommitLog(cfg, nil)
		require.NoError(b, err)
		require.NoError(b, cl.Load())
		require.NoError(b, cl.Recover(true, nil))
		cq := NewConsumeQueue(cqRoot, "T", 0, cfg.MappedFileSizeConsumeQ, nil)
		require.NoError(b, cq.Load())
		return cl, cq
	}
	closeBoth := func(cl *CommitLog, cq *ConsumeQueue) {
		_ = cq.Close()
		_ = cl.Shutdown()
	}
	perEntry := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entry")
	}

	b.Run("structural", func(b *testing.B) {
		cl, cq := open(b)
		defer closeBoth(cl, cq)
		for b.Loop() {
			require.NoError(b, cq.Recover())
		}
		require.EqualValues(b, n, cq.MaxOffsetInQueue())
		perEntry(b)
	})
	b.Run("verified", func(b *testing.B) {
		cl, cq := open(b)
		defer closeBoth(cl, cq)
		b.ReportAllocs()
		for b.Loop() {
			from, err := cq.RecoverVerified(cl)
			require.NoError(b, err)
			require.EqualValues(b, -1, from)
		}
		require.EqualValues(b, n, cq.MaxOffsetInQueue())
		perEntry(b)
	})
	b.Run("verified-cold", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			dropCache(b, filepath.Join(cfg.StorePathRootDir, "commitlog"))
			dropCache(b, cqRoot)
			cl, cq := open(b) // the commitlog walk reads its tail back in
			dropCache(b, filepath.Join(cfg.StorePathRootDir, "commitlog"))
			b.StartTimer()
			from, err := cq.RecoverVerified(cl)
			b.StopTimer()
			require.NoError(b, err)
			require.EqualValues(b, -1, from)
			closeBoth(cl, cq)
			b.StartTimer()
		}
		perEntry(b)
	})
	b.Run("dispatch", func(b *testing.B) {
		cl, cq := open(b)
		defer closeBoth(cl, cq)
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			fresh := NewConsumeQueue(dir, "T", 0, cfg.MappedFileSizeConsumeQ, nil)
			b.StartTimer()
			built := 0
			for off := cl.MinOffset(); off < cl.MaxOffset(); {
				res, ok := cl.GetData(off)
				require.True(b, ok)
				pos := 0
				for pos < len(res.Bytes) {
					req, err := CheckRecord(res.Bytes[pos:], false)
					if err != nil {
						b.Fatal(err)
					}
					if req.BlankRecord {
						break
					}
					e := CQEntry{CommitLogOffset: req.CommitLogOffset, Size: req.MsgSize, TagsCode: req.TagsCode}
					if err := fresh.Put(e, req.ConsumeQueueOffset); err != nil {
						b.Fatal(err)
					}
					pos += int(req.MsgSize)
					built++
				}
				res.Release()
				off = cl.RollNextFile(off)
			}
			b.StopTimer()
			require.Equal(b, n, built)
			require.NoError(b, fresh.Destroy())
			b.StartTimer()
		}
		perEntry(b)
	})
}

// dropCache asks the kernel to drop the cached pages of the files in dir
// (it keeps pages that are mapped or dirty).
func dropCache(b *testing.B, dir string) {
	entries, err := os.ReadDir(dir)
	require.NoError(b, err)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() {
			dropCache(b, path)
			continue
		}
		f, err := os.Open(path)
		require.NoError(b, err)
		require.NoError(b, unix.Fdatasync(int(f.Fd())))
		require.NoError(b, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		f.Close()
	}
}
