package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestGroupCommitServesManyWritersWithFewerSyncs(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, nil)
	const writers, each = 64, 25
	var wg sync.WaitGroup
	results := make(chan PutResult, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				results <- cl.PutMessage(context.Background(), clMsg("GC", int32(w%4), clBody(i, 1024), nil))
			}
		}()
	}
	wg.Wait()
	close(results)
	var maxEnd int64
	for r := range results {
		require.Equal(t, PutOK, r.Status, "%v", r.Err)
		maxEnd = max(maxEnd, r.WroteOffset+int64(r.WroteBytes))
	}
	assert.GreaterOrEqual(t, cl.FlushedWhere(), maxEnd, "every acknowledged record is flushed")
	syncs := cl.flush.syncs.Load()
	t.Logf("%d puts, %d flushes", writers*each, syncs)
	assert.Less(t, syncs, int64(writers*each), "one flush serves several writers")
	assert.Positive(t, syncs)
}

func TestSyncFlushErrorReachesWritersAndSticks(t *testing.T) {
	injected := errors.New("injected EIO")
	cl := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, func(cl *CommitLog) {
		cl.flush.flushFn = func(int) (int64, error) { return cl.mfq.FlushedWhere(), injected }
	})
	const writers = 8
	var wg sync.WaitGroup
	res := make([]PutResult, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = cl.PutMessage(context.Background(), clMsg("E", 0, []byte("payload"), nil))
		}()
	}
	wg.Wait()
	waited := 0
	for _, r := range res {
		assert.ErrorIs(t, r.Err, injected)
		if r.Status == ServiceNotAvailable {
			// Appended after the failure was recorded: refused at once.
			continue
		}
		waited++
		assert.Equal(t, FlushDiskTimeout, r.Status)
		assert.ErrorIs(t, r.Err, ErrFlushFailed)
		// The message stays stored (in the page cache).
		sel, ok := cl.GetMessage(r.WroteOffset, r.WroteBytes)
		require.True(t, ok)
		sel.Release()
	}
	assert.Positive(t, waited, "the writers waiting for the failed flush hear of it")
	r := cl.PutMessage(context.Background(), clMsg("E", 0, []byte("later"), nil))
	assert.Equal(t, ServiceNotAvailable, r.Status, "a failed flush cannot be trusted again")
	assert.ErrorIs(t, r.Err, injected)
	assert.Error(t, cl.Shutdown(), "shutdown reports the flush failure")
}

func TestAsyncFlushErrorIsNotHidden(t *testing.T) {
	injected := errors.New("injected msync failure")
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, func(cl *CommitLog) {
		cl.flush.flushFn = func(int) (int64, error) { return cl.mfq.FlushedWhere(), injected }
	})
	r := cl.PutMessage(context.Background(), clMsg("E", 0, make([]byte, 64<<10), nil))
	require.Equal(t, PutOK, r.Status, "async acknowledges from the page cache")
	require.Eventually(t, func() bool { return cl.flush.failed() != nil }, 5*time.Second, 5*time.Millisecond)
	r = cl.PutMessage(context.Background(), clMsg("E", 0, []byte("x"), nil))
	assert.Equal(t, ServiceNotAvailable, r.Status)
	assert.ErrorIs(t, r.Err, injected)
}

func TestSyncFlushTimeoutKeepsMessage(t *testing.T) {
	release := make(chan struct{})
	cfg := clTestConfig(t, SyncFlush)
	cfg.SyncFlushTimeout = 50 * time.Millisecond
	cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) {
		real := cl.flush.flushFn
		cl.flush.flushFn = func(least int) (int64, error) {
			<-release // a disk that stalls
			return real(least)
		}
	})
	t.Cleanup(func() { close(release) }) // runs before Shutdown's cleanup
	start := time.Now()
	r := cl.PutMessage(context.Background(), clMsg("S", 0, []byte("slow disk"), nil))
	assert.Equal(t, FlushDiskTimeout, r.Status)
	assert.ErrorIs(t, r.Err, ErrFlushTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
	sel, ok := cl.GetMessage(r.WroteOffset, r.WroteBytes)
	require.True(t, ok, "the message stays stored")
	sel.Release()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = cl.PutMessage(ctx, clMsg("S", 0, []byte("cancelled"), nil))
	assert.Equal(t, FlushDiskTimeout, r.Status)
	assert.ErrorIs(t, r.Err, context.Canceled)
}

func TestAsyncFlushHonoursLeastPages(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	cfg.FlushCommitLogThorough = time.Hour
	cl := mustOpenCommitLog(t, cfg, nil, true, nil)
	// Under 4 pages: the interval flush leaves it alone.
	r := cl.PutMessage(context.Background(), clMsg("P", 0, make([]byte, 2000), nil))
	require.Equal(t, PutOK, r.Status)
	time.Sleep(5 * cfg.FlushIntervalCommitLog) // no condition to poll: asserting that nothing happens
	assert.Less(t, cl.FlushedWhere(), cl.MaxOffset())
	// Over 4 pages: flushed by the next interval.
	r = cl.PutMessage(context.Background(), clMsg("P", 0, make([]byte, 5*4096), nil))
	require.Equal(t, PutOK, r.Status)
	require.Eventually(t, func() bool { return cl.FlushedWhere() >= cl.MaxOffset() }, 5*time.Second, 5*time.Millisecond)
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	l, err := LockDir(dir)
	require.NoError(t, err)
	_, err = LockDir(dir)
	assert.ErrorIs(t, err, ErrStoreLocked)
	assert.ErrorContains(t, err, dir)

	// Another process sees the lock too.
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockDirHelperProcess$")
	cmd.Env = append(os.Environ(), "STORE_LOCK_HELPER_DIR="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "locked by another broker")

	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock())
	l2, err := LockDir(dir)
	require.NoError(t, err, "free again after unlock")
	require.NoError(t, l2.Unlock())
}

// TestLockDirHelperProcess runs in a child process of TestLockDir.
func TestLockDirHelperProcess(t *testing.T) {
	dir := os.Getenv("STORE_LOCK_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	_, err := LockDir(dir)
	if err == nil {
		t.Fatal("second process took the lock")
	}
	os.Stdout.WriteString(err.Error() + "\n")
}

func TestCommitLogStopsEveryGoroutine(t *testing.T) {
	for _, ft := range clFlushModes {
		t.Run(ft.String(), func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			cfg := clTestConfig(t, ft)
			cl, err := NewCommitLog(cfg, nil)
			require.NoError(t, err)
			require.NoError(t, cl.Load())
			require.NoError(t, cl.Recover(true, nil))
			cl.Start()
			for i := range 300 {
				require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("L", 0, clBody(i, 4000), nil)).Status)
			}
			require.NoError(t, cl.Shutdown())
			goleak.VerifyNone(t, ignore)
		})
	}
}
