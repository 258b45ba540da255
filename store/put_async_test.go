package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportPut reports an append's result through done: at once, or through
// onDurable once durable when the append says a wait is due. The helpers
// below append the way a broker acknowledges without holding a worker.
func reportPut(res PutResult, mustWait bool, onDurable func(PutResult, func(PutResult)), done func(PutResult)) {
	if mustWait {
		onDurable(res, done)
		return
	}
	done(res)
}

func clPutAsync(cl *CommitLog, m *message.MessageExt, done func(PutResult)) {
	res, mustWait := cl.AppendMessage(m)
	reportPut(res, mustWait, cl.OnDurable, done)
}

func clPutBatchAsync(cl *CommitLog, b *message.MessageExtBatch, done func(PutResult)) {
	res, mustWait := cl.AppendMessages(b)
	reportPut(res, mustWait, cl.OnDurable, done)
}

func storePutAsync(s *Store, m *message.MessageExt, done func(PutResult)) {
	res, mustWait := s.AppendMessage(m)
	reportPut(res, mustWait, s.OnDurable, done)
}

func storePutBatchAsync(s *Store, b *message.MessageExtBatch, done func(PutResult)) {
	res, mustWait := s.AppendMessages(b)
	reportPut(res, mustWait, s.OnDurable, done)
}

// collect gathers async put results.
type collect struct {
	mu  sync.Mutex
	res []PutResult
	wg  sync.WaitGroup
}

func (c *collect) done(r PutResult) {
	c.mu.Lock()
	c.res = append(c.res, r)
	c.mu.Unlock()
	c.wg.Done()
}

func (c *collect) wait(t *testing.T) []PutResult {
	t.Helper()
	ch := make(chan struct{})
	go func() { c.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("async puts were not all answered")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res
}

// One goroutine issues many SYNC_FLUSH puts without blocking; each answer
// comes only once its record is on disk, and one flush serves many puts.
func TestPutMessageAsyncGroupCommit(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, nil)
	const n = 500
	var c collect
	c.wg.Add(n)
	for i := range n {
		clPutAsync(cl, clMsg("AG", int32(i%4), clBody(i, 512), nil), func(r PutResult) {
			// The record must be durable when the answer arrives.
			if r.Status == PutOK && cl.FlushedWhere() < r.WroteOffset+int64(r.WroteBytes) {
				r.Status, r.Err = UnknownError, errors.New("answered before its flush")
			}
			c.done(r)
		})
	}
	res := c.wait(t)
	require.Len(t, res, n)
	for _, r := range res {
		require.Equal(t, PutOK, r.Status, "%v", r.Err)
	}
	syncs := cl.flush.syncs.Load()
	t.Logf("%d async puts, %d flushes", n, syncs)
	assert.Less(t, syncs, int64(n/4), "async writers share flushes")
}

func TestPutMessagesAsyncBatchAndAsyncFlushAnswerAtOnce(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	answered := false
	clPutAsync(cl, clMsg("AA", 0, []byte("x"), nil), func(r PutResult) {
		answered = true
		assert.Equal(t, PutOK, r.Status)
	})
	assert.True(t, answered, "ASYNC_FLUSH answers on the caller's goroutine")

	sync := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, nil)
	var c collect
	c.wg.Add(1)
	clPutBatchAsync(sync, clBatch(t, "AB", 0, 5), c.done)
	res := c.wait(t)
	require.Equal(t, PutOK, res[0].Status, "%v", res[0].Err)
	assert.Equal(t, 5, res[0].MsgNum)
	assert.GreaterOrEqual(t, sync.FlushedWhere(), res[0].WroteOffset+int64(res[0].WroteBytes))

	// A refused put is answered at once too.
	answered = false
	clPutAsync(sync, clMsg("AB", 0, make([]byte, sync.cfg.MaxMessageSize+1), nil), func(r PutResult) {
		answered = true
		assert.Equal(t, MessageIllegal, r.Status)
	})
	assert.True(t, answered)
}

func TestPutMessageAsyncFlushErrorAndTimeout(t *testing.T) {
	injected := errors.New("injected EIO")
	cl := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, func(cl *CommitLog) {
		cl.flush.flushFn = func(int) (int64, error) { return cl.mfq.FlushedWhere(), injected }
	})
	var c collect
	c.wg.Add(3)
	for range 3 {
		clPutAsync(cl, clMsg("AE", 0, []byte("p"), nil), c.done)
	}
	// A put stored before the failure waits for its flush and hears of it; one
	// that comes after is refused, since a failed flush stops all writes.
	timedOut := 0
	for _, r := range c.wait(t) {
		assert.Contains(t, []PutStatus{FlushDiskTimeout, ServiceNotAvailable}, r.Status)
		assert.ErrorIs(t, r.Err, injected)
		if r.Status == FlushDiskTimeout {
			timedOut++
		}
	}
	assert.Positive(t, timedOut, "the first put was stored and waited for the failed flush")
	c.wg.Add(1)
	clPutAsync(cl, clMsg("AE", 0, []byte("late"), nil), c.done)
	all := c.wait(t)
	require.Len(t, all, 4)
	assert.Equal(t, ServiceNotAvailable, all[3].Status)
	assert.ErrorIs(t, all[3].Err, ErrFlushFailed)

	cfg := clTestConfig(t, SyncFlush)
	cfg.SyncFlushTimeout = 50 * time.Millisecond
	release := make(chan struct{})
	slow := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) {
		real := cl.flush.flushFn
		cl.flush.flushFn = func(least int) (int64, error) {
			<-release
			return real(least)
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the commitlog's Shutdown cleanup
	var d collect
	d.wg.Add(1)
	clPutAsync(slow, clMsg("AT", 0, []byte("slow"), nil), d.done)
	r := d.wait(t)[0]
	assert.Equal(t, FlushDiskTimeout, r.Status)
	assert.ErrorIs(t, r.Err, ErrFlushTimeout)
	sel, ok := slow.GetMessage(r.WroteOffset, r.WroteBytes)
	require.True(t, ok, "a timed-out message stays stored")
	sel.Release()
}

func clBatch(t *testing.T, topic string, queueID int32, n int) *message.MessageExtBatch {
	t.Helper()
	var msgs []*message.Message
	for i := range n {
		msgs = append(msgs, &message.Message{Body: clBody(i, 100)})
	}
	body, err := message.AppendBatch(nil, msgs)
	require.NoError(t, err)
	return &message.MessageExtBatch{MessageExt: *clMsg(topic, queueID, body, nil)}
}

// The facade's async puts reach the consume queue like blocking ones, and a
// shut-down store refuses them through the callback.
func TestStorePutMessageAsync(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), SyncFlush))
	var c collect
	c.wg.Add(10)
	for i := range 10 {
		storePutAsync(s, newTestMessage("SA", 1, body(i, 64), "t", ""), c.done)
	}
	for _, r := range c.wait(t) {
		require.Equal(t, PutOK, r.Status, "%v", r.Err)
	}
	waitDispatched(t, s)
	assert.EqualValues(t, 10, s.MaxOffsetInQueue("SA", 1))

	require.NoError(t, s.Shutdown(context.Background()))
	var d collect
	d.wg.Add(1)
	storePutBatchAsync(s, &message.MessageExtBatch{MessageExt: *newTestMessage("SA", 1, nil, "", "")}, d.done)
	r := d.wait(t)[0]
	assert.Equal(t, ServiceNotAvailable, r.Status)
	assert.ErrorIs(t, r.Err, ErrShutdown)
}

// A zero flush interval (a broker.conf typo) must not panic the flush loop.
func TestAsyncFlushLoopSurvivesZeroInterval(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	cfg.FlushIntervalCommitLog = 0
	cl := mustOpenCommitLog(t, cfg, nil, true, nil)
	r := cl.PutMessage(context.Background(), clMsg("Z", 0, []byte("x"), nil))
	require.Equal(t, PutOK, r.Status)
}

// CheckRecord picks KEYS, UNIQ_KEY and the tags code (the delivery time for
// parked topics) straight out of the record's properties.
func TestCheckRecordDispatchFields(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	put := func(topic string, props map[string]string) DispatchRequest {
		r := cl.PutMessage(context.Background(), clMsg(topic, 0, []byte("b"), props))
		require.Equal(t, PutOK, r.Status)
		sel, ok := cl.GetMessage(r.WroteOffset, r.WroteBytes)
		require.True(t, ok)
		defer sel.Release()
		d, err := CheckRecord(sel.Bytes, true)
		require.NoError(t, err)
		return d
	}
	d := put("Plain", map[string]string{message.PropKeys: "k1 k2", message.PropUniqKey: "U1", message.PropTags: "tagA",
		message.PropTimerOutMS: "123"})
	assert.Equal(t, "k1 k2", d.Keys)
	assert.Equal(t, "U1", d.UniqKey)
	assert.Equal(t, message.TagsHashCode("tagA"), d.TagsCode, "TIMER_OUT_MS only counts on parked topics")

	d = put(scheduleTopic, map[string]string{message.PropTags: "tagA", message.PropTimerOutMS: "1700000000123"})
	assert.EqualValues(t, 1700000000123, d.TagsCode)
	d = put(timerTopic, map[string]string{message.PropTimerOutMS: "not a number"})
	assert.Zero(t, d.TagsCode)
}

// mustWait is true only where an acknowledgement has to wait for the disk.
func TestAppendMessageMustWait(t *testing.T) {
	async := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	_, mustWait := async.AppendMessage(clMsg("W", 0, []byte("x"), nil))
	assert.False(t, mustWait, "ASYNC_FLUSH acknowledges from the page cache")

	sync := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, nil)
	res, mustWait := sync.AppendMessage(clMsg("W", 0, []byte("x"), nil))
	require.Equal(t, PutOK, res.Status)
	assert.True(t, mustWait)
	_, mustWait = sync.AppendMessage(clMsg("W", 0, []byte("y"), map[string]string{message.PropWaitStoreMsgOK: "false"}))
	assert.False(t, mustWait, "WAIT=false skips the flush wait")
	res, mustWait = sync.AppendMessage(clMsg("W", 0, make([]byte, sync.cfg.MaxMessageSize+1), nil))
	assert.Equal(t, MessageIllegal, res.Status)
	assert.False(t, mustWait, "a refusal has nothing to wait for")
}
