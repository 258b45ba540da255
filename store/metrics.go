package store

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/metrics/latency"
)

// hotPathSampling is how many puts or reads share one timing: reading the
// clock twice costs about as much as a small append on some virtual machines
// (kvm-clock), so the put and get histograms time about one call in 16.
const hotPathSampling = 16

// Metrics are the store's own timings and counts, kept where the work is
// done and read without locks (package metrics turns them into Prometheus
// series at scrape time). The put and get histograms are sampled (see
// PutLatency); the flush ones time every call.
type Metrics struct {
	// PutLatency times an append (encoding, the writer lock and the copy
	// into the mapped file), about one in 16 (latency.Histogram.SampleEvery).
	PutLatency latency.Histogram
	// GetLatency times a GetMessage (consume-queue scan and record
	// lookup), sampled like PutLatency.
	GetLatency latency.Histogram
	// FlushLatency times every commitlog flush call that persisted pages
	// (msync or fsync), under either flush type.
	FlushLatency latency.Histogram
	// GroupCommitLatency times every SYNC_FLUSH group-commit round that had
	// writers waiting: its flush plus answering them.
	GroupCommitLatency latency.Histogram
	// GroupCommitRounds and GroupCommitWaiters count those rounds and the
	// writers they answered (waiters per round = the batching achieved).
	GroupCommitRounds  atomic.Int64
	GroupCommitWaiters atomic.Int64
}

func newMetrics() *Metrics {
	m := &Metrics{}
	m.PutLatency.SetSampling(hotPathSampling)
	m.GetLatency.SetSampling(hotPathSampling)
	return m
}

// Metrics returns the store's timings and counts.
func (s *Store) Metrics() *Metrics { return s.commitLog.metrics }

// DiskSpace is the file system holding the commitlog.
type DiskSpace struct {
	Total, Free uint64  // bytes; Free is what an unprivileged writer may use
	UsedRatio   float64 // the share the store's retention acts on, 0-1
}

// CommitLogDiskSpace reads the size and free space of the commitlog's file
// system (the store root's when the commitlog directory does not exist yet).
func (s *Store) CommitLogDiskSpace() (DiskSpace, error) {
	var err error
	for _, p := range []string{s.commitLog.Files().Dir(), s.cfg.StorePathRootDir} {
		var st unix.Statfs_t
		if err = unix.Statfs(p, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return DiskSpace{}, err
		}
		total := st.Blocks * uint64(st.Bsize)
		free := st.Bavail * uint64(st.Bsize)
		used := float64(st.Blocks-st.Bfree) * float64(st.Bsize)
		ds := DiskSpace{Total: total, Free: free}
		if d := used + float64(free); d > 0 {
			ds.UsedRatio = used / d
		}
		return ds, nil
	}
	return DiskSpace{}, err
}

// CommitLogFlushedOffset is how far the commitlog is on disk.
func (s *Store) CommitLogFlushedOffset() int64 { return s.commitLog.FlushedWhere() }

// CleanExpiredConsumeQueues deletes, now, the consume-queue and index
// files whose entries all point below the commitlog's min offset, and
// advances those queues' min offsets (mqadmin cleanExpiredCQ). The clean
// loop does the same after each commitlog deletion; this runs it even when
// the loop believes it is done. Queue offsets keep counting: a queue
// emptied by retention is not restarted at 0 under its consumers.
func (s *Store) CleanExpiredConsumeQueues() {
	minPhy := s.commitLog.MinOffset()
	for _, cq := range s.consumeQueues() {
		cq.DeleteExpired(minPhy, s.cfg.DestroyMappedFileForce)
	}
	if s.index != nil {
		s.index.DeleteExpired(minPhy, s.cfg.DestroyMappedFileForce)
	}
	if minPhy > s.cleanedUpTo.Load() {
		s.cleanedUpTo.Store(minPhy)
	}
}
