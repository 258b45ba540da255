package store

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testEnv is an injectable clock and disk-usage probe, safe for the store's
// goroutines to read.
type testEnv struct {
	now   atomic.Int64  // unix nanoseconds
	usage atomic.Uint64 // float64 bits
}

func newTestEnv(start time.Time, usage float64) *testEnv {
	e := &testEnv{}
	e.now.Store(start.UnixNano())
	e.usage.Store(math.Float64bits(usage))
	return e
}

func (e *testEnv) options() []Option {
	return []Option{
		WithClock(func() time.Time { return time.Unix(0, e.now.Load()) }),
		WithDiskUsage(func(string) (float64, error) { return math.Float64frombits(e.usage.Load()), nil }),
	}
}

// waitFullFilesFlushed waits until the flush loop has persisted every full
// commitlog file. A flush stamps a file with the store's clock, so a test
// that moves the clock on must wait, or a late flush makes a file young again.
func waitFullFilesFlushed(t testing.TB, s *Store) {
	t.Helper()
	cl := s.CommitLog()
	require.Eventually(t, func() bool { return cl.FlushedWhere() >= cl.Files().LastMappedFile().FileFromOffset() },
		10*time.Second, time.Millisecond, "full commitlog files flushed")
}

func (e *testEnv) setUsage(u float64) { e.usage.Store(math.Float64bits(u)) }
func (e *testEnv) set(t time.Time)    { e.now.Store(t.UnixNano()) }
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	return len(entries)
}

// clockBases are the days the retention tests set the store's clock to:
// years from the machine's date either way, and a fixed past date, so that
// retention is shown to follow the store's clock alone (files on disk carry
// the real date).
func clockBases() map[string]time.Time {
	return map[string]time.Time{
		"3y-ago":   time.Now().AddDate(-3, 0, 0),
		"in-3y":    time.Now().AddDate(3, 0, 0),
		"2019-feb": time.Date(2019, 2, 27, 9, 30, 0, 0, time.Local),
	}
}

// noonOf returns 12:00 of t's day.
func noonOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 12, 0, 0, 0, t.Location())
}

func TestRetentionByTimeAdvancesMinOffsets(t *testing.T) {
	for name, base := range clockBases() {
		for _, ft := range flushTypes {
			t.Run(name+"/"+ft.String(), func(t *testing.T) {
				testRetentionByTime(t, ft, noonOf(base))
			})
		}
	}
}

func testRetentionByTime(t *testing.T, ft FlushDiskType, noon time.Time) {
	cfg := testConfig(t.TempDir(), ft)
	cfg.MappedFileSizeConsumeQ = 50 * CQStoreUnitSize
	cfg.MaxIndexNum = 256
	env := newTestEnv(noon, 0.1)
	s := MustOpen(t, cfg, env.options()...)
	const n = 560 // 8 KB each: four 1 MiB commitlog files
	for i := 0; i < n; i++ {
		mustPut(t, s, newTestMessage("T", int32(i%2), body(i, 8000), "", "ka kb"))
	}
	waitDispatched(t, s)
	waitFullFilesFlushed(t, s)
	clFiles := s.CommitLog().Files().Len()
	require.GreaterOrEqual(t, clFiles, 4)
	indexDir := filepath.Join(cfg.StorePathRootDir, indexDirName)
	indexFiles := countFiles(t, indexDir)
	require.GreaterOrEqual(t, indexFiles, 3)
	cqDir := filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "T", "0")
	cqFiles := countFiles(t, cqDir)

	// Not yet expired, not the hour, disk fine: nothing happens.
	s.RunCleanRound()
	assert.Equal(t, clFiles, s.CommitLog().Files().Len())

	// 73 h later, still at noon: expired, but deleteWhen is 04.
	env.set(noon.Add(73 * time.Hour))
	s.RunCleanRound()
	assert.Equal(t, clFiles, s.CommitLog().Files().Len())

	// Commitlog files gone but consume queues not yet cleaned: a pull
	// of their messages reports MESSAGE_WAS_REMOVING and skips ahead.
	at4 := time.Date(noon.Year(), noon.Month(), noon.Day()+4, 4, 0, 0, 0, noon.Location()) // 88 h on
	require.Positive(t, s.CommitLog().DeleteExpiredFiles(at4, cfg.FileReservedTime, 0, time.Second, false))
	r, err := s.GetMessage("g", "T", 0, 0, 32, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, MessageWasRemoving, r.Status)
	assert.Positive(t, r.NextBeginOffset)
	r.Release()

	// At 04: every file but the newest goes, the queues follow.
	env.set(at4)
	s.RunCleanRound()
	assert.Equal(t, 1, s.CommitLog().Files().Len())
	clMin := s.CommitLogMinOffset()
	assert.Equal(t, s.CommitLog().Files().LastMappedFile().FileFromOffset(), clMin)
	assert.Less(t, countFiles(t, cqDir), cqFiles, "consume-queue files follow")
	assert.Less(t, countFiles(t, indexDir), indexFiles, "index files follow")

	for q := int32(0); q < 2; q++ {
		minOff := s.MinOffsetInQueue("T", q)
		require.Positive(t, minOff)
		phy := s.CommitLogOffsetInQueue("T", q, minOff)
		assert.GreaterOrEqual(t, phy, clMin, "min offset points at a live message")
		assert.Less(t, s.CommitLogOffsetInQueue("T", q, minOff-1), clMin)

		r, err := s.GetMessage("g", "T", q, 0, 32, 0, nil)
		require.NoError(t, err)
		assert.Equal(t, OffsetTooSmall, r.Status)
		assert.Equal(t, minOff, r.NextBeginOffset)
		r.Release()

		msgs := pullAll(t, s, "T", q, nil)
		require.Equal(t, int(s.MaxOffsetInQueue("T", q)-minOff), len(msgs))
		for j, m := range msgs {
			off := minOff + int64(j)
			assert.Equal(t, off, m.QueueOffset)
			assert.Equal(t, body(int(2*off)+int(q), 8000), m.Body)
		}
	}
	assert.Equal(t, s.OffsetByTime("T", 0, 0), s.MinOffsetInQueue("T", 0))

	// A min offset not yet corrected over deleted consume-queue files
	// (the window inside a clean round): OFFSET_FOUND_NULL, and the
	// next pull starts at the next consume-queue file.
	cq := s.consumeQueue("T", 0)
	saved := cq.minLogicOffset.Load()
	cq.minLogicOffset.Store(0)
	r, err = s.GetMessage("g", "T", 0, 3, 32, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, OffsetFoundNull, r.Status)
	assert.EqualValues(t, cfg.MappedFileSizeConsumeQ/CQStoreUnitSize, r.NextBeginOffset)
	r.Release()
	cq.minLogicOffset.Store(saved)
	q := s.QueryMessage("T", "ka", 64, 0, math.MaxInt64)
	for _, rec := range q.Messages {
		assert.GreaterOrEqual(t, rec.StartOffset, clMin)
	}
	q.Release()
}

func TestRetentionDiskFullRefusesAndResumes(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			env := newTestEnv(time.Now().AddDate(-3, 0, 0), 0.1)
			s := MustOpen(t, cfg, env.options()...)
			for i := 0; i < 400; i++ {
				mustPut(t, s, newTestMessage("T", 0, body(i, 8000), "", ""))
			}
			waitDispatched(t, s)
			files := s.CommitLog().Files().Len()
			require.GreaterOrEqual(t, files, 3)

			// Above 75%: cleaning starts, but only expired files go.
			env.setUsage(0.80)
			s.RunCleanRound()
			assert.Equal(t, files, s.CommitLog().Files().Len())
			assert.False(t, s.DiskFull())

			// Above 90%: writes are refused, and files go regardless of age.
			env.setUsage(0.95)
			s.RunCleanRound()
			assert.True(t, s.DiskFull())
			assert.Equal(t, 1, s.CommitLog().Files().Len())
			assert.Positive(t, s.MinOffsetInQueue("T", 0))
			r := s.PutMessage(context.Background(), newTestMessage("T", 0, body(1, 10), "", ""))
			assert.Equal(t, ServiceNotAvailable, r.Status)
			require.ErrorIs(t, r.Err, ErrDiskFull)
			before := s.MaxOffsetInQueue("T", 0)

			// Between 85% and 90% it stays refused (RocketMQ clears the flag
			// only under the force-clean ratio).
			env.setUsage(0.87)
			s.RunCleanRound()
			assert.True(t, s.DiskFull())

			// Space freed: writes resume with the next offset.
			env.setUsage(0.5)
			s.RunCleanRound()
			assert.False(t, s.DiskFull())
			r = mustPut(t, s, newTestMessage("T", 0, body(1, 10), "", ""))
			assert.Equal(t, before, r.QueueOffset)
		})
	}
}

func TestRetentionCleanLoopRuns(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	cfg.CleanResourceInterval = 5 * time.Millisecond
	env := newTestEnv(time.Now(), 0.1)
	s := MustOpen(t, cfg, env.options()...)
	mustPut(t, s, newTestMessage("T", 0, body(1, 10), "", ""))
	env.setUsage(0.99)
	require.Eventually(t, s.DiskFull, 5*time.Second, time.Millisecond, "the loop checks the disk on its own")
	env.setUsage(0.2)
	require.Eventually(t, func() bool { return !s.DiskFull() }, 5*time.Second, time.Millisecond)
}

func TestStatfsUsage(t *testing.T) {
	u, err := statfsUsage(t.TempDir())
	require.NoError(t, err)
	assert.True(t, u >= 0 && u <= 1, "usage %v", u)
	_, err = statfsUsage(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}

// With cleanFileForciblyEnable=false a full disk refuses writes but deletes
// nothing before it expires: no stored message is given up for space.
func TestRetentionNoForcedCleaning(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	cfg.CleanFileForcibly = false
	env := newTestEnv(time.Now(), 0.1)
	s := MustOpen(t, cfg, env.options()...)
	for i := 0; i < 400; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 8000), "", ""))
	}
	waitDispatched(t, s)
	files := s.CommitLog().Files().Len()
	require.GreaterOrEqual(t, files, 3)
	env.setUsage(0.99)
	s.RunCleanRound()
	assert.True(t, s.DiskFull())
	assert.Equal(t, files, s.CommitLog().Files().Len(), "nothing deleted before its time")
	assert.Zero(t, s.MinOffsetInQueue("T", 0))
}
