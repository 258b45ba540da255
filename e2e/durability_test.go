package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// maxRepeats is how many already-consumed messages a consumer restarted in
// the same group may see again: the last batch acknowledged just before
// shutdown can miss the final offset commit (at-least-once).
const maxRepeats = 4

// persistTimeout covers the official client's offset persist schedule (first
// after 10 s, then every 5 s) with room for a loaded machine.
const persistTimeout = 25 * time.Second

// heartbeatSlack is added to the client's 30 s heartbeat period where a test
// has to wait for a heartbeat: a 3 s pull back-off, and -race on 2 cores.
const heartbeatSlack = 15 * time.Second

// committedTotal sums group's committed offsets over the topic's queues
// (-1, none yet, counts as 0).
func committedTotal(t testing.TB, c *Cluster, group, topic string, queues int) int64 {
	t.Helper()
	var n int64
	for q := range queues {
		if off := c.ConsumerOffset(t, group, topic, q); off > 0 {
			n += off
		}
	}
	return n
}

// offsetsReport shows group's committed and max offsets per queue, for
// failure messages (evaluated when the message is printed).
func offsetsReport(t testing.TB, c *Cluster, group, topic string, queues int) fmt.Stringer {
	return stringerFunc(func() string {
		var sb strings.Builder
		for q := range queues {
			fmt.Fprintf(&sb, "[q%d committed %d max %d] ", q, c.ConsumerOffset(t, group, topic, q), c.MaxOffset(t, topic, q))
		}
		return sb.String()
	})
}

// TestConsumerRestartResumesFromCommittedOffset: a consumer that stops and a
// new one that starts in the same group continue where the first left off.
func TestConsumerRestartResumesFromCommittedOffset(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("ResumeTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	group := uniq("GResume")

	first := bodies("first", 40)
	p.SendBodies(t, topic, "", first)
	in1 := NewInbox()
	c1 := d.StartPush(t, PushSpec{Group: group, Topic: topic, Goroutines: 1}, in1)
	WaitAll(t, first, in1)
	// The official client advances its in-memory offset only after the
	// handler returns, and its Shutdown drops queues before persisting, so a
	// stop right after the last delivery can persist a stale offset. Wait for
	// its periodic persist (first after 10 s) to commit what was consumed.
	require.Eventually(t, func() bool { return committedTotal(t, c, group, topic, 4) >= int64(len(first)-maxRepeats) },
		persistTimeout, pollEvery, "offsets not committed: %v", offsetsReport(t, c, group, topic, 4))
	c1.Stop(t)

	second := bodies("second", 40)
	p.SendBodies(t, topic, "", second)
	in2 := NewInbox()
	d.StartPush(t, PushSpec{Group: group, Topic: topic}, in2)
	WaitAll(t, second, in2)

	repeats := 0
	for _, b := range first {
		repeats += in2.Count(b)
	}
	assert.LessOrEqual(t, repeats, maxRepeats, "restarted consumer re-read %d of %d consumed messages", repeats, len(first))
	t.Logf("restarted consumer re-read %d already consumed messages", repeats)
}

// TestBrokerRestartKeepsMessagesAndOffsets: a broker shut down and started
// again on the same store and port still has every message it acknowledged
// and every offset a consumer committed, and clients carry on.
func TestBrokerRestartKeepsMessagesAndOffsets(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("RestartTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	group := uniq("GRestart")

	stored := bodies("stored", 60)
	p.SendBodies(t, topic, "", stored)
	in1 := NewInbox()
	c1 := d.StartPush(t, PushSpec{Group: group, Topic: topic, Goroutines: 1}, in1)
	WaitAll(t, stored, in1)
	// As above: let the client's periodic persist commit before stopping it.
	require.Eventually(t, func() bool { return committedTotal(t, c, group, topic, 4) >= int64(len(stored)-maxRepeats) },
		persistTimeout, pollEvery, "offsets not committed: %v", offsetsReport(t, c, group, topic, 4))
	c1.Stop(t)
	committed := committedTotal(t, c, group, topic, 4)

	offsets := make([]int64, 4)
	maxes := make([]int64, 4)
	for q := range 4 {
		offsets[q] = c.ConsumerOffset(t, group, topic, q)
		maxes[q] = c.MaxOffset(t, topic, q)
	}

	c.RestartBroker(t)
	c.WaitRoute(t, topic)

	for q := range 4 {
		assert.Equal(t, maxes[q], c.MaxOffset(t, topic, q), "queue %d max offset after restart", q)
		assert.Equal(t, offsets[q], c.ConsumerOffset(t, group, topic, q), "queue %d committed offset after restart", q)
	}
	got := bodySet(c.ReadAll(t, topic))
	for _, b := range stored {
		assert.Equal(t, 1, got[b], "message %s after restart", b)
	}
	assert.Len(t, got, len(stored))

	// The producer from before the restart sends again, and a consumer in
	// the group gets only what is new.
	after := bodies("after", 20)
	p.SendBodies(t, topic, "", after)
	in2 := NewInbox()
	d.StartPush(t, PushSpec{Group: group, Topic: topic}, in2)
	WaitAll(t, after, in2)
	repeats := 0
	for _, b := range stored {
		repeats += in2.Count(b)
	}
	// Exactly the messages whose offsets were not committed come again.
	assert.Equal(t, int64(len(stored))-committed, int64(repeats),
		"after the restart the group must resume at its committed offsets (%d of %d)", committed, len(stored))
}

// TestPushConsumerAcrossBrokerRestart: a push consumer that stays up while
// the broker restarts carries on with what is sent afterwards, without
// re-reading what it had consumed.
func TestPushConsumerAcrossBrokerRestart(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("AcrossTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	group := uniq("GAcross")

	in := NewInbox()
	d.StartPush(t, PushSpec{Group: group, Topic: topic}, in)
	before := bodies("before", 40)
	p.SendBodies(t, topic, "", before)
	WaitAll(t, before, in)

	start := time.Now()
	c.RestartBroker(t)
	t.Logf("broker restarted in %v", time.Since(start))

	after := bodies("after", 40)
	p.SendBodies(t, topic, "", after)
	// The new broker process knows the group's subscription only from the
	// client's next heartbeat (every 30 s): the Go push consumer pulls
	// without one, so until then its pulls get SUBSCRIPTION_NOT_EXIST and
	// back off 3 s (the same with RocketMQ's broker). Hence the bound.
	start = time.Now()
	WaitAllWithin(t, 30*time.Second+heartbeatSlack, after, in)
	t.Logf("consumption resumed %v after the restart", time.Since(start))
	repeats := 0
	for _, b := range before {
		repeats += in.Count(b) - 1
	}
	assert.LessOrEqual(t, repeats, maxRepeats, "consumer re-read %d messages after the restart", repeats)
}

// TestBrokerRestartUnderLoadServesReconnects: clients busy with requests
// while the broker restarts must all be served by the new process. A
// connection the old process accepted during its shutdown and then neither
// served nor closed would leave its client waiting forever: the official Go
// client never closes a connection on a timeout, so a push consumer whose
// connection is such a zombie stops for good.
func TestBrokerRestartUnderLoadServesReconnects(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	addr := c.BrokerAddr // RestartBroker keeps the port
	req := func() *remoting.Command {
		return remoting.NewRequest(remoting.GetMaxOffset,
			protocol.EncodeHeader(&protocol.TopicQueueRequestHeader{Topic: "TBW102", QueueID: 0}, nil), nil)
	}
	for round := range 3 {
		const n = 16
		clients := make([]*remoting.Client, n)
		for i := range clients {
			clients[i] = remoting.NewClient(remoting.ClientConfig{Logger: c.log})
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					_, _ = cl.InvokeSync(ctx, addr, req())
					cancel()
				}
			}()
		}
		time.Sleep(50 * time.Millisecond) // let the load run before the restart
		c.RestartBroker(t)
		stop.Store(true)
		wg.Wait()

		ok := make([]bool, n)
		for i, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				resp, err := cl.InvokeSync(ctx, addr, req())
				ok[i] = err == nil && resp.Code == int32(remoting.Success)
			}()
		}
		wg.Wait()
		var stuck []int
		for i, cl := range clients {
			if !ok[i] {
				stuck = append(stuck, i)
			}
			_ = cl.Close()
		}
		require.Empty(t, stuck, "round %d: clients with no answer from the restarted broker within 3 s: %v", round, stuck)
	}
}
