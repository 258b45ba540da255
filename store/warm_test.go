package store

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/message"
)

// warmRecorder stands in for madvise and records what was populated, as
// offsets into the commitlog.
type warmRecorder struct {
	mu     sync.Mutex
	ranges [][2]int64
	err    error
}

func (r *warmRecorder) populate(offset int64, b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.ranges = append(r.ranges, [2]int64{offset, offset + int64(len(b))})
	return nil
}

func (r *warmRecorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ranges)
}

// covered reports whether [from, to) lies within the populated ranges.
func (r *warmRecorder) covered(from, to int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for from < to {
		moved := false
		for _, rg := range r.ranges {
			if rg[0] <= from && from < rg[1] {
				from = rg[1]
				moved = true
			}
		}
		if !moved {
			return false
		}
	}
	return true
}

func TestWarmerPopulatesAheadOncePerFile(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	rec := &warmRecorder{}
	cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) { cl.warm.populate = rec.populate })
	body := bytes.Repeat([]byte("w"), 1000)
	const files = 3
	for cl.MaxOffset() < files<<20 {
		require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("W", 0, body, nil)).Status)
	}
	// Every file the writer reached is warm to its end, ahead of the writer.
	require.Eventually(t, func() bool { return rec.covered(cl.MaxOffset(), (files+1)<<20) }, 5*time.Second, 5*time.Millisecond)
	// A window (32 MiB) larger than a file warms the rest of a file in one
	// pass when the writer enters it: a few passes per file, not one per put.
	assert.LessOrEqual(t, rec.calls(), 2*(files+1), "populate calls")
	assert.LessOrEqual(t, cl.warm.passes.Load(), int64(2*(files+1)), "wake-ups of the warmer")
}

func TestWarmerStopsWhereUnsupported(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	rec := &warmRecorder{err: unix.EINVAL}
	cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) { cl.warm.populate = rec.populate })
	require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("W", 0, []byte("x"), nil)).Status)
	require.Eventually(t, cl.warm.off.Load, 5*time.Second, 5*time.Millisecond)
	for range 100 {
		require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("W", 0, []byte("x"), nil)).Status)
	}
	assert.Empty(t, cl.warm.wake, "no wake-ups once warming is off")
}

func TestWarmerOnlyUnderAsyncFlush(t *testing.T) {
	syncCL := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, nil)
	assert.Nil(t, syncCL.warm, "SYNC_FLUSH writes with pwrite: nothing to warm")

	// This machine's kernel populates for real, and the data written over
	// warmed pages reads back.
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	res := cl.PutMessage(context.Background(), clMsg("W", 0, []byte("after warming"), nil))
	require.Equal(t, PutOK, res.Status)
	require.Eventually(t, func() bool { return cl.warm.upTo.Load() > res.WroteOffset || cl.warm.off.Load() },
		5*time.Second, 5*time.Millisecond)
	if cl.warm.off.Load() {
		t.Skip("this kernel has no MADV_POPULATE_READ (Linux 5.14+)")
	}
	sel, ok := cl.GetMessage(res.WroteOffset, res.WroteBytes)
	require.True(t, ok)
	defer sel.Release()
	m, _, err := message.DecodeRecord(sel.Bytes)
	require.NoError(t, err)
	assert.Equal(t, []byte("after warming"), m.Body)
}

func TestWarmerSkipsAWindowOnOtherErrors(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	rec := &warmRecorder{err: unix.ENOMEM}
	cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) { cl.warm.populate = rec.populate })
	require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("W", 0, []byte("x"), nil)).Status)
	// passes counts a pass as it starts, and next moves when it ends: an
	// append in between would rightly wake a second pass.
	require.Eventually(t, func() bool { return cl.warm.passes.Load() == 1 && cl.warm.next.Load() != 0 },
		5*time.Second, 5*time.Millisecond)
	for range 100 {
		require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("W", 0, []byte("x"), nil)).Status)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(1), cl.warm.passes.Load(), "a failed window is not retried on every append")
	assert.False(t, cl.warm.off.Load(), "only a missing madvise turns warming off")
}
