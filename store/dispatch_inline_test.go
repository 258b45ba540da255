package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopDispatchLoop ends the store's dispatch loop, so only appenders
// dispatch and a hand-over to the loop stays visible in its wake channel;
// the test calls drain where the loop would. The fresh stop channel lets
// the store's Shutdown make its final pass as usual.
func stopDispatchLoop(s *Store) {
	close(s.reput.stop)
	s.reput.wg.Wait()
	s.reput.stop = make(chan struct{})
}

func mustAppend(t *testing.T, s *Store, topic string, queueID int32, i int, keys string) PutResult {
	t.Helper()
	r, _ := s.AppendMessage(newTestMessage(topic, queueID, body(i, 512), "TagA", keys))
	require.Equal(t, PutOK, r.Status, "%v", r.Err)
	return r
}

// Appenders racing for the dispatch lock must leave nothing behind once they
// have all returned, with no dispatch loop to fall back on: each record gets
// exactly one consume-queue entry and one arrival call, in commitlog order.
// The appenders start together in many short rounds and every round must
// end fully dispatched (a record missed in one round would be picked up by
// the next round's passes, so only a per-round check sees it). 1 MiB
// commitlog files and 200-entry queue files make the appenders cross
// commitlog files and create queue and index files inline.
func TestDispatchInlineConcurrentAppenders(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	stopDispatchLoop(s)
	s.reput.inlineMax = 1 << 30 // no hand-over: appenders alone must cover everything
	var mu sync.Mutex
	arrived := map[int32][]int64{}
	s.SetArrivingListener(func(_ string, queueID int32, next, _, _ int64) {
		mu.Lock()
		arrived[queueID] = append(arrived[queueID], next)
		mu.Unlock()
	})
	const writers, perRound, rounds, queues = 8, 1, 400, 4
	n := 0
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(first int) {
				defer wg.Done()
				<-begin
				for i := first; i < first+perRound; i++ {
					m := newTestMessage("T", int32(i%queues), body(i, 512), "TagA", fmt.Sprintf("k%d", i))
					if r, _ := s.AppendMessage(m); r.Status != PutOK {
						t.Error(r.Err)
						return
					}
				}
			}(n)
			n += perRound
		}
		close(begin)
		wg.Wait()
		require.Zero(t, s.DispatchBehindBytes(), "round %d: records left for a dispatch loop that is not running", round)
	}
	assert.Empty(t, s.reput.wake, "nothing should be handed to the loop")
	require.Greater(t, s.commitLog.MaxOffset(), int64(s.cfg.MappedFileSizeCommitLog))

	total := 0
	mu.Lock()
	defer mu.Unlock()
	for q := int32(0); q < queues; q++ {
		cq := s.consumeQueue("T", q)
		require.NotNil(t, cq)
		n := cq.MaxOffsetInQueue()
		total += int(n)
		prev := int64(-1)
		want := make([]int64, n)
		for i := int64(0); i < n; i++ {
			want[i] = i + 1
			e, ok := cq.Entry(i)
			require.True(t, ok)
			require.Greater(t, e.CommitLogOffset, prev, "queue %d entry %d out of commitlog order", q, i)
			prev = e.CommitLogOffset
			res, ok := s.commitLog.GetMessage(e.CommitLogOffset, e.Size)
			require.True(t, ok)
			m, _, err := message.DecodeRecord(res.Bytes)
			res.Release()
			require.NoError(t, err)
			assert.Equal(t, q, m.QueueID)
			assert.Equal(t, i, m.QueueOffset)
		}
		assert.Equal(t, want, arrived[q], "arrivals of queue %d", q)
	}
	assert.Equal(t, writers*perRound*rounds, total)
}

// An appender never waits for the dispatch lock, and one that finds a
// backlog dispatches only its budget and hands the rest to the loop.
func TestDispatchInlineHandsBacklogToLoop(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	stopDispatchLoop(s)
	s.reput.inlineMax = 3
	start := s.reput.reputFrom.Load()

	s.reput.mu.Lock() // someone else is dispatching
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10; i++ {
			mustAppend(t, s, "T", 0, i, "")
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("appenders waited for the dispatch lock")
	}
	assert.Equal(t, start, s.reput.reputFrom.Load())
	assert.True(t, s.reput.pending.Load())
	s.reput.mu.Unlock()

	mustAppend(t, s, "T", 0, 10, "")
	assert.Equal(t, int64(3), s.consumeQueue("T", 0).MaxOffsetInQueue(), "the appender's budget")
	assert.Positive(t, s.DispatchBehindBytes())
	assert.Len(t, s.reput.wake, 1, "the rest is handed to the loop")

	s.reput.drain() // what the loop does when woken
	assert.Zero(t, s.DispatchBehindBytes())
	assert.Equal(t, int64(11), s.consumeQueue("T", 0).MaxOffsetInQueue())
}

// A consume-queue write that fails inline is not retried on the appender:
// the record stays undispatched (no entry, no index, no arrival), later
// appenders leave dispatch to the loop, and the loop's retry hands dispatch
// back to the appenders once it succeeds.
func TestDispatchInlineDefersFailedQueueWrite(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	stopDispatchLoop(s)
	var arrivals atomic.Int32
	s.SetArrivingListener(func(string, int32, int64, int64, int64) { arrivals.Add(1) })

	mustAppend(t, s, "A", 0, 0, "")
	require.Zero(t, s.DispatchBehindBytes(), "the appender dispatches its own record")

	// A file where topic B's queue directory belongs: B's first queue file
	// cannot be created until it is removed.
	blocker := filepath.Join(s.cqRoot, "B")
	require.NoError(t, os.MkdirAll(s.cqRoot, 0o755))
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	rb := mustAppend(t, s, "B", 0, 1, "kb")
	assert.Equal(t, rb.WroteOffset, s.reput.reputFrom.Load(), "dispatch stops at the failed record")
	assert.True(t, s.reput.inlineOff.Load())
	assert.Len(t, s.reput.wake, 1)

	mustAppend(t, s, "A", 0, 2, "")
	assert.Equal(t, rb.WroteOffset, s.reput.reputFrom.Load(), "later records wait for the loop")
	assert.Equal(t, int32(1), arrivals.Load())
	q := s.QueryMessage("B", "kb", 8, 0, time.Now().UnixMilli()+1000)
	assert.Empty(t, q.Messages, "no index entry for a record without its queue entry")
	q.Release()

	require.NoError(t, os.Remove(blocker))
	s.reput.drain()
	assert.Zero(t, s.DispatchBehindBytes())
	assert.False(t, s.reput.inlineOff.Load())
	assert.Equal(t, int64(1), s.consumeQueue("B", 0).MaxOffsetInQueue())
	assert.Equal(t, int64(2), s.consumeQueue("A", 0).MaxOffsetInQueue())
	assert.Equal(t, int32(3), arrivals.Load())
	q = s.QueryMessage("B", "kb", 8, 0, time.Now().UnixMilli()+1000)
	assert.Len(t, q.Messages, 1)
	q.Release()

	mustAppend(t, s, "A", 0, 3, "")
	assert.Zero(t, s.DispatchBehindBytes(), "appenders dispatch again")
}

// Shutdown's final pass dispatches what no one dispatched yet, and no
// appender dispatches after it.
func TestDispatchShutdownFinalPass(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	s.reput.mu.Lock() // appends below are left undispatched
	for i := 0; i < 5; i++ {
		mustAppend(t, s, "T", 0, i, "")
	}
	s.reput.mu.Unlock()
	require.Positive(t, s.DispatchBehindBytes())
	s.reput.shutdown()
	assert.Zero(t, s.DispatchBehindBytes())
	assert.Equal(t, int64(5), s.consumeQueue("T", 0).MaxOffsetInQueue())
	end := s.reput.reputFrom.Load()
	s.reput.dispatchNow()
	assert.Equal(t, end, s.reput.reputFrom.Load())
	assert.True(t, s.reput.pending.Load(), "an appender after shutdown dispatches nothing")
}
