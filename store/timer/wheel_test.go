package timer

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

var t0 = time.UnixMilli(1_800_000_000_000) // a round second

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func entry(deliver time.Time, q int64) Entry {
	return Entry{DeliverMs: deliver.UnixMilli(), CommitLogOffset: 1000 + q, Size: 100, QueueOffset: q}
}

func mustOpen(t *testing.T, cfg Config, now time.Time) *Wheel {
	t.Helper()
	w, err := Open(cfg, now)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// fired collects what Fire hands over at now.
func fired(t *testing.T, w *Wheel, now time.Time) []int64 {
	t.Helper()
	var got []int64
	require.NoError(t, w.Fire(now, func(e Entry) error {
		assert.LessOrEqual(t, e.DeliverMs, now.UnixMilli(), "handed over early")
		got = append(got, e.QueueOffset)
		return nil
	}))
	return got
}

func TestWheelDeliversAtExactTimeInOrder(t *testing.T) {
	w := mustOpen(t, Config{Dir: t.TempDir(), Precision: time.Second, RollWindow: time.Minute}, t0)
	require.NoError(t, w.Add(entry(at(2500), 0), t0))
	require.NoError(t, w.Add(entry(at(1200), 1), t0))
	require.NoError(t, w.Add(entry(at(-5000), 2), t0)) // in the past: due now
	require.NoError(t, w.Add(entry(at(1200), 3), t0))
	assert.Equal(t, 4, w.Pending())

	assert.Equal(t, []int64{2}, fired(t, w, t0))
	assert.Equal(t, at(1000), w.NextWake())
	assert.Empty(t, fired(t, w, at(1199)))
	assert.Equal(t, at(1200), w.NextWake(), "the slot is loaded, the next wake is the exact delivery time")
	assert.Equal(t, []int64{1, 3}, fired(t, w, at(1200)))
	assert.Empty(t, fired(t, w, at(2499)))
	assert.Equal(t, []int64{0}, fired(t, w, at(2500)))
	assert.Equal(t, 0, w.Pending())
	assert.Equal(t, int64(4), w.EnqueueOffset())
}

func TestWheelRollsLongDelays(t *testing.T) {
	w := mustOpen(t, Config{Dir: t.TempDir(), Precision: 100 * time.Millisecond, RollWindow: time.Second}, t0)
	require.NoError(t, w.Add(entry(at(3750), 7), t0))
	for ms := int64(0); ms < 3750; ms += 50 {
		require.Empty(t, fired(t, w, at(ms)), "at %d ms", ms)
	}
	assert.Equal(t, 1, w.Pending())
	assert.Equal(t, []int64{7}, fired(t, w, at(3750)))
	assert.Equal(t, 0, w.Pending())
}

func TestWheelDeliverErrorKeepsEntry(t *testing.T) {
	w := mustOpen(t, Config{Dir: t.TempDir()}, t0)
	require.NoError(t, w.Add(entry(at(10), 0), t0))
	require.NoError(t, w.Add(entry(at(20), 1), t0))
	boom := errors.New("store busy")
	err := w.Fire(at(1000), func(Entry) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 2, w.Pending())
	assert.Equal(t, []int64{0, 1}, fired(t, w, at(1100)))
}

func TestWheelRestartKeepsPendingOnly(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Precision: 100 * time.Millisecond, RollWindow: 2 * time.Second, FileSize: UnitSize * 4}
	w, err := Open(cfg, t0)
	require.NoError(t, err)
	for q := int64(0); q < 10; q++ {
		require.NoError(t, w.Add(entry(at(100*q), q), t0))
	}
	require.NoError(t, w.Add(entry(at(60_000), 10), t0)) // a roll unit
	assert.Equal(t, []int64{0, 1, 2, 3, 4}, fired(t, w, at(400)))
	require.NoError(t, w.Close())

	w2 := mustOpen(t, cfg, at(450))
	assert.Equal(t, 6, w2.Pending())
	assert.Equal(t, int64(11), w2.EnqueueOffset())
	assert.Equal(t, []int64{5, 6, 7, 8, 9}, fired(t, w2, at(5000)))
	assert.Empty(t, fired(t, w2, at(59_999)))
	assert.Equal(t, []int64{10}, fired(t, w2, at(60_000)))
	require.NoError(t, w2.Flush()) // files go once the checkpoint covers them
	files, err := listSegments(filepath.Join(dir, "timerlog"))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(files), 1, "files with nothing pending are deleted")
}

// TestWheelCrashSharesMapping opens a second wheel on the files of one that
// never closed (a killed process: the mapping's pages survive it).
func TestWheelCrashLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, FileSize: UnitSize * 8}
	w, err := Open(cfg, t0)
	require.NoError(t, err)
	for q := int64(0); q < 20; q++ {
		require.NoError(t, w.Add(entry(at(1000*(q%4)), q), t0))
	}
	require.Len(t, fired(t, w, at(1000)), 10)
	// No Flush, no Close: the checkpoint file does not exist.
	_, err = os.Stat(filepath.Join(dir, "timercheck"))
	require.ErrorIs(t, err, os.ErrNotExist)

	w2 := mustOpen(t, cfg, at(1000))
	assert.Equal(t, int64(20), w2.EnqueueOffset(), "units in the log are not read again")
	got := fired(t, w2, at(5000))
	assert.Len(t, got, 10)
	for _, q := range got {
		assert.GreaterOrEqual(t, q%4, int64(2), "entry %d was delivered before the crash", q)
	}
	require.NoError(t, w.closeSegments())
}

func TestWheelBadConfig(t *testing.T) {
	_, err := Open(Config{Dir: t.TempDir(), FileSize: 100}, t0)
	require.ErrorIs(t, err, ErrBadFileSize)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "timercheck"), []byte("{"), 0o644))
	_, err = Open(Config{Dir: dir}, t0)
	require.Error(t, err)
}

// TestWheelDamagedCheckpoint: timercheck is written with a .bak of its
// previous version; a damaged timercheck loads the .bak with a warning
// naming both, and with both damaged Open fails naming both.
func TestWheelDamagedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "timercheck")
	w, err := Open(Config{Dir: dir}, t0)
	require.NoError(t, err)
	require.NoError(t, w.Add(entry(at(0), 0), t0))
	require.NoError(t, w.Flush())
	require.NoError(t, w.Add(entry(at(0), 1), t0))
	require.NoError(t, w.Close())
	data, err := os.ReadFile(path + fsutil.BackupSuffix)
	require.NoError(t, err)
	assert.JSONEq(t, `{"enqueueOffset":1}`, string(data), "the previous write")

	// A backup ahead of the log's units, to tell where the offset came from.
	good := []byte(`{"enqueueOffset":9}`)
	for _, damage := range []string{"{", "", "null", `{"enqueueOffset":-3}`, `{"enqueueOffset":1e99}`, `{"enqueueOffset":"2"}`} {
		require.NoError(t, os.WriteFile(path, []byte(damage), 0o644))
		require.NoError(t, os.WriteFile(path+fsutil.BackupSuffix, good, 0o644))
		log, hook := test.NewNullLogger()
		w, err := Open(Config{Dir: dir, Log: log}, t0)
		require.NoError(t, err, "damage %q", damage)
		assert.Equal(t, int64(9), w.EnqueueOffset(), "damage %q", damage)
		assert.Equal(t, 2, w.Pending())
		e := hook.LastEntry()
		require.NotNil(t, e)
		assert.Equal(t, logrus.WarnLevel, e.Level)
		assert.Equal(t, path, e.Data["file"])
		assert.Equal(t, path+fsutil.BackupSuffix, e.Data["backup"])
		require.NoError(t, w.Close())
	}

	require.NoError(t, os.WriteFile(path, []byte("{"), 0o644))
	require.NoError(t, os.WriteFile(path+fsutil.BackupSuffix, []byte("null"), 0o644))
	_, err = Open(Config{Dir: dir}, t0)
	require.ErrorIs(t, err, fsutil.ErrNoValidCopy)
	assert.ErrorContains(t, err, path+": ")
	assert.ErrorContains(t, err, path+fsutil.BackupSuffix+": ")
}

func TestWheelClosed(t *testing.T) {
	w, err := Open(Config{Dir: t.TempDir()}, t0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	require.ErrorIs(t, w.Add(entry(t0, 0), t0), ErrClosed)
	require.ErrorIs(t, w.Fire(t0, func(Entry) error { return nil }), ErrClosed)
}

// rssBytes reads VmRSS of this process (0 when unknown).
func rssBytes() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// BenchmarkWheelMillionPending adds 1,000,000 entries due between one hour
// and seven days ahead and reports the heap and RSS they cost.
func BenchmarkWheelMillionPending(b *testing.B) {
	const n = 1_000_000
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rss0 := rssBytes()
		w, err := Open(Config{Dir: b.TempDir()}, t0)
		require.NoError(b, err)
		for q := int64(0); q < n; q++ {
			delay := time.Hour + time.Duration(q*604_799)%(6*24*time.Hour)
			if err := w.Add(Entry{DeliverMs: t0.Add(delay).UnixMilli(), CommitLogOffset: q * 200, Size: 200, QueueOffset: q}, t0); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))/(1<<20), "heapMiB")
		b.ReportMetric(float64(after.HeapObjects-min(after.HeapObjects, before.HeapObjects)), "heapObjects")
		b.ReportMetric(float64(rssBytes()-min(rssBytes(), rss0))/(1<<20), "rssMiB")
		require.Equal(b, n, w.Pending())
		require.NoError(b, w.Close())
	}
	b.SetBytes(n * UnitSize)
}

// BenchmarkWheelReopenMillion measures a restart with 1,000,000 pending
// entries: Open walks the timerlog and relinks every unit.
func BenchmarkWheelReopenMillion(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	w, err := Open(Config{Dir: dir}, t0)
	require.NoError(b, err)
	for q := int64(0); q < n; q++ {
		delay := time.Hour + time.Duration(q*604_799)%(6*24*time.Hour)
		require.NoError(b, w.Add(Entry{DeliverMs: t0.Add(delay).UnixMilli(), CommitLogOffset: q * 200, Size: 200, QueueOffset: q}, t0))
	}
	require.NoError(b, w.Close())
	b.ReportAllocs()
	b.SetBytes(n * UnitSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := Open(Config{Dir: dir}, t0)
		if err != nil {
			b.Fatal(err)
		}
		if w.Pending() != n {
			b.Fatalf("pending %d", w.Pending())
		}
		if err := w.closeSegments(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWheelCrashAfterFileDropDeliversNothingTwice: a file whose units were
// all delivered used to be deleted at once, before the checkpoint covered
// its queue offsets. A crash then left neither the units nor a checkpoint,
// EnqueueOffset restarted at 0 and the broker re-read (and re-delivered)
// every message of that file. Files now go only after the checkpoint that
// covers them is written.
func TestWheelCrashAfterFileDropDeliversNothingTwice(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, FileSize: UnitSize * 2}
	w, err := Open(cfg, t0)
	require.NoError(t, err)
	require.NoError(t, w.Add(entry(at(10), 0), t0))
	require.NoError(t, w.Add(entry(at(20), 1), t0)) // fills the file: the next unit starts a new one
	require.Equal(t, []int64{0, 1}, fired(t, w, at(1000)))
	// Crash: no Flush, no Close.
	w2 := mustOpen(t, cfg, at(1000))
	assert.Equal(t, int64(2), w2.EnqueueOffset(), "delivered messages must not be read again")
	require.NoError(t, w.closeSegments())

	require.NoError(t, w2.Flush())
	files, err := listSegments(filepath.Join(dir, "timerlog"))
	require.NoError(t, err)
	assert.Empty(t, files, "a file with nothing pending goes once the checkpoint covers it")
	w3 := mustOpen(t, Config{Dir: dir, FileSize: UnitSize * 2}, at(2000))
	assert.Equal(t, int64(2), w3.EnqueueOffset())
	assert.Zero(t, w3.Pending())
}

// TestWheelRollCallback: a roll unit still ahead goes to Config.Roll; when
// it stores the message anew the unit is done (the copy comes back through
// Add), an error keeps the unit for the next Fire, and false rolls it as
// without a callback.
func TestWheelRollCallback(t *testing.T) {
	var rolled []int64
	var fail error
	move := true
	cfg := Config{Dir: t.TempDir(), Precision: 100 * time.Millisecond, RollWindow: time.Second,
		Roll: func(e Entry) (bool, error) {
			if fail != nil {
				return false, fail
			}
			rolled = append(rolled, e.QueueOffset)
			return move, nil
		}}
	w := mustOpen(t, cfg, t0)
	require.NoError(t, w.Add(entry(at(5000), 1), t0))
	require.NoError(t, w.Add(entry(at(6000), 2), t0))

	fail = errors.New("store busy")
	require.ErrorIs(t, w.Fire(at(1000), func(Entry) error { return nil }), fail)
	assert.Equal(t, 2, w.Pending(), "a failed roll keeps the unit")

	fail, move = nil, false
	assert.Empty(t, fired(t, w, at(1000)))
	assert.Equal(t, []int64{1, 2}, rolled)
	assert.Equal(t, 2, w.Pending(), "not moved: rolled in the wheel")

	move = true
	assert.Empty(t, fired(t, w, at(2000)))
	assert.Equal(t, []int64{1, 2, 1, 2}, rolled)
	assert.Zero(t, w.Pending(), "moved: the copy comes back through Add")
}

// TestWheelCancelMarkers: a cancel marker keeps its flag through a roll and
// a restart, is handed over after the other entries of its millisecond even
// when added first, and RecoveredCancels reports the markers pending at
// Open, once.
func TestWheelCancelMarkers(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Precision: 100 * time.Millisecond, RollWindow: time.Second}
	w, err := Open(cfg, t0)
	require.NoError(t, err)
	marker := func(deliver time.Time, q int64) Entry { e := entry(deliver, q); e.Cancel = true; return e }
	require.NoError(t, w.Add(marker(at(500), 0), t0))
	require.NoError(t, w.Add(entry(at(500), 1), t0))
	require.NoError(t, w.Add(marker(at(2500), 2), t0)) // rolls
	require.NoError(t, w.Add(entry(at(700), 3), t0))
	assert.Nil(t, w.RecoveredCancels(), "nothing recovered in a new wheel")
	require.NoError(t, w.Close())

	w = mustOpen(t, cfg, t0)
	rec := w.RecoveredCancels()
	require.Len(t, rec, 2)
	assert.Equal(t, marker(at(500), 0), rec[0])
	assert.Equal(t, marker(at(2500), 2), rec[1])
	assert.Nil(t, w.RecoveredCancels(), "reported once")

	var got []Entry
	for ms := int64(0); ms <= 2500; ms += 50 {
		require.NoError(t, w.Fire(at(ms), func(e Entry) error { got = append(got, e); return nil }))
	}
	require.Len(t, got, 4)
	assert.Equal(t, []Entry{entry(at(500), 1), marker(at(500), 0), entry(at(700), 3), marker(at(2500), 2)}, got,
		"the marker of a millisecond after its other entries; the flag kept through the roll")
	require.NoError(t, w.Flush())
	require.NoError(t, w.Close())
	w = mustOpen(t, cfg, at(2600))
	assert.Empty(t, w.RecoveredCancels(), "markers handed over are done")
}
