package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func MustStartPullConsumer(t *testing.T, setup func(*PullConsumer), opts ...Option) *PullConsumer {
	t.Helper()
	pc, err := NewPullConsumer(opts...)
	require.NoError(t, err)
	setup(pc)
	require.NoError(t, pc.Start())
	t.Cleanup(func() { require.NoError(t, pc.Shutdown()) })
	return pc
}

// pollN polls until n messages arrived or the time is up.
func pollN(t *testing.T, pc *PullConsumer, n int) []*MessageExt {
	t.Helper()
	var out []*MessageExt
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		msgs, err := pc.Poll(ctx)
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			continue
		}
		out = append(out, msgs...)
	}
	require.Len(t, out, n)
	return out
}

func TestPullConsumerAssignPollCommitSeek(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 2)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	sendN(t, p, "T", 10, nil)

	pc := MustStartPullConsumer(t, func(*PullConsumer) {}, append(fastOptions(ns.Addr()), WithGroupName("pg"), WithAutoCommit(false), WithConsumeFromWhere(ConsumeFromFirstOffset), WithPullBatchSize(3))...)
	qs, err := pc.TopicQueues(testCtx(t), "T")
	require.NoError(t, err)
	require.Len(t, qs, 2)
	require.NoError(t, pc.Assign("T", qs...))
	require.Eventually(t, func() bool { return len(pc.Assignment()) == 2 }, 5*time.Second, 10*time.Millisecond)

	msgs := pollN(t, pc, 10)
	seen := map[string]bool{}
	for _, m := range msgs {
		assert.Equal(t, "T", m.Topic)
		seen[string(m.Body)] = true
	}
	assert.Len(t, seen, 10)
	off, err := pc.Committed(testCtx(t), qs[0])
	require.NoError(t, err)
	assert.Equal(t, int64(-1), off, "nothing committed without Commit")
	require.NoError(t, pc.Commit(testCtx(t)))
	for _, q := range qs {
		off, err := pc.Committed(testCtx(t), q)
		require.NoError(t, err)
		assert.Equal(t, int64(5), off)
		stored, ok := fb.storedOffset("pg", "T", q.QueueID)
		assert.True(t, ok)
		assert.Equal(t, int64(5), stored, "Commit stores in the broker at once")
	}

	// Seek back: queue 0's messages come again.
	require.NoError(t, pc.Seek(qs[0], 0))
	again := pollN(t, pc, 5)
	for _, m := range again {
		assert.Equal(t, qs[0].QueueID, m.QueueID)
	}
	assert.ErrorIs(t, pc.Seek(MessageQueue{Topic: "T", BrokerName: "nope"}, 0), ErrNotAssigned)

	// Pause queue 1: new messages there wait until Resume.
	pc.Pause(qs[1])
	sendN(t, p, "T", 4, nil) // 2 per queue
	got := pollN(t, pc, 2)
	for _, m := range got {
		assert.Equal(t, qs[0].QueueID, m.QueueID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = pc.Poll(ctx)
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	pc.Resume(qs[1])
	got = pollN(t, pc, 2)
	for _, m := range got {
		assert.Equal(t, qs[1].QueueID, m.QueueID)
	}
}

func TestPullConsumerSubscribeAutoCommit(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 4)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	opts := append(fastOptions(ns.Addr()), WithGroupName("pg"), WithConsumeFromWhere(ConsumeFromFirstOffset))
	setup := func(pc *PullConsumer) { require.NoError(t, pc.Subscribe("T", MessageSelector{Expression: "a || b"})) }
	pc1 := MustStartPullConsumer(t, setup, opts...)
	pc2 := MustStartPullConsumer(t, setup, opts...)
	require.Eventually(t, func() bool { return len(pc1.Assignment()) == 2 && len(pc2.Assignment()) == 2 }, 5*time.Second, 10*time.Millisecond)

	tags := []string{"a", "b", "c"}
	sendN(t, p, "T", 24, func(i int, m *Message) { m.WithTag(tags[i%3]) })
	// 24 messages round-robin over 4 queues; tags a and b pass: 16.
	total := 0
	deadline := time.Now().Add(10 * time.Second)
	for total < 16 && time.Now().Before(deadline) {
		for _, pc := range []*PullConsumer{pc1, pc2} {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			msgs, err := pc.Poll(ctx)
			cancel()
			if err == nil {
				for _, m := range msgs {
					assert.NotEqual(t, "c", m.Tags())
				}
				total += len(msgs)
			}
		}
	}
	assert.Equal(t, 16, total)
	// An empty poll commits the last batch (auto-commit), and the persist
	// loop stores every queue's offset: 6 each.
	for _, pc := range []*PullConsumer{pc1, pc2} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, _ = pc.Poll(ctx)
		cancel()
	}
	require.Eventually(t, func() bool {
		for q := int32(0); q < 4; q++ {
			if off, _ := fb.storedOffset("pg", "T", q); off != 6 {
				return false
			}
		}
		return true
	}, 5*time.Second, 20*time.Millisecond)
}

// Shutdown does not wait for a Poll that is waiting for messages (it holds
// the poll lock Shutdown's last commit needs); the Poll ends with an error.
func TestPullConsumerShutdownEndsWaitingPoll(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	pc, err := NewPullConsumer(append(fastOptions(ns.Addr()), WithGroupName("pg"))...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("T", MessageSelector{}))
	require.NoError(t, pc.Start())
	polled := make(chan error, 1)
	go func() {
		_, err := pc.Poll(context.Background())
		polled <- err
	}()
	time.Sleep(100 * time.Millisecond) // let Poll take the lock and wait
	done := make(chan error, 1)
	go func() { done <- pc.Shutdown() }()
	require.NoError(t, recvWithin(t, done, 10*time.Second, "Shutdown waited for an idle Poll"))
	assert.ErrorIs(t, recvWithin(t, polled, 5*time.Second, "Poll did not return after Shutdown"), ErrNotStarted)
	_, err = pc.Poll(context.Background())
	assert.ErrorIs(t, err, ErrNotStarted, "Poll after Shutdown")
}
