package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestPushConsumerLatency: with a push consumer waiting, each message sent
// reaches it in milliseconds. A broker that short-polls (answers an empty
// pull after a fixed wait, RocketMQ's 1 s shortPollingTimeMills) would put the
// median near half that wait. Both ends are timed in the client process.
func TestPushConsumerLatency(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("LatencyTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("GLatency"), Topic: topic}, in)

	// Warm-up: the consumer has its queues and a pull parked on each.
	p.SendBodies(t, topic, "", []string{"warmup"})
	WaitAll(t, []string{"warmup"}, in)

	const n = 50
	lat := make([]time.Duration, 0, n)
	for i := range n {
		body := fmt.Sprintf("lat-%d", i)
		r := p.SendBodies(t, topic, "", []string{body})[0]
		var got Got
		require.Eventually(t, func() bool {
			for _, g := range in.Msgs() {
				if g.Body == body {
					got = g
					return true
				}
			}
			return false
		}, consumeWait, time.Millisecond, "message %s never arrived", body)
		lat = append(lat, got.Received.Sub(r.Start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("publish-to-receive latency over %d messages: p50 %v, p99 %v, max %v", n, p50, p99, lat[n-1])
	assert.Less(t, p50, 200*time.Millisecond, "median publish-to-receive latency")
}

// rawPull sends one PULL_MESSAGE with our own client and returns the
// response and how long the broker took to answer.
func rawPull(t testing.TB, c *Cluster, h *protocol.PullMessageRequestHeader) (*remoting.Command, time.Duration) {
	t.Helper()
	resp, took, err := rawPullE(c, h)
	require.NoError(t, err)
	return resp, took
}

// rawPullE is rawPull for goroutines other than the test's.
func rawPullE(c *Cluster, h *protocol.PullMessageRequestHeader) (*remoting.Command, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(h.SuspendTimeoutMillis)*time.Millisecond+opTimeout)
	defer cancel()
	start := time.Now()
	resp, err := c.raw.InvokeSync(ctx, c.BrokerAddr, remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(h, nil), nil))
	return resp, time.Since(start), err
}

func pullHeader(group, topic string, offset int64, suspend time.Duration, sub string) *protocol.PullMessageRequestHeader {
	flags := protocol.PullFlagSubscription
	if suspend > 0 {
		flags |= protocol.PullFlagSuspend
	}
	return &protocol.PullMessageRequestHeader{
		ConsumerGroup:        group,
		Topic:                topic,
		QueueID:              0,
		QueueOffset:          offset,
		MaxMsgNums:           32,
		SysFlag:              flags,
		SuspendTimeoutMillis: suspend.Milliseconds(),
		Subscription:         sub,
		SubVersion:           time.Now().UnixMilli(),
		ExpressionType:       "TAG",
	}
}

func pullResponseHeader(t testing.TB, resp *remoting.Command) protocol.PullMessageResponseHeader {
	t.Helper()
	var h protocol.PullMessageResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h), "pull response header %v", resp.ExtFields)
	return h
}

// TestPullIsParkedUntilMessageArrives checks long polling on the wire: a pull
// at the end of a queue is not answered until a message arrives, then at
// once; with nothing arriving it is answered (PULL_NOT_FOUND) after its
// suspend timeout.
func TestPullIsParkedUntilMessageArrives(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	topic := uniq("ParkTopic")
	d := c.StartDriver(t)
	d.CreateTopic(t, c, topic, 1)
	p := d.NewProducer(t, "")
	group := uniq("GPark")
	// The producer's first send looks the route up and connects: not part
	// of what is measured.
	p.SendBodies(t, topic, "", []string{"park-warmup"})
	// SEND_OK means written to the commitlog; the consume queue entry
	// follows asynchronously (as in RocketMQ), so wait for it before
	// pulling at offset 1.
	require.Eventually(t, func() bool { return c.MaxOffset(t, topic, 0) == 1 }, opTimeout, pollEvery)

	var wakes []time.Duration
	for round := range 5 {
		offset := int64(round + 1)
		type result struct {
			resp *remoting.Command
			took time.Duration
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, took, err := rawPullE(c, pullHeader(group, topic, offset, 15*time.Second, "*"))
			done <- result{resp, took, err}
		}()
		// Parked: no answer while nothing arrives. 300 ms is far beyond a
		// loopback round trip, so an answer now would be a short poll.
		select {
		case r := <-done:
			require.NoError(t, r.err)
			require.FailNowf(t, "pull answered before any message arrived",
				"round %d: code %d remark %q after %v", round, r.resp.Code, r.resp.Remark, r.took)
		case <-time.After(300 * time.Millisecond):
		}
		body := fmt.Sprintf("park-%d", round)
		sent := time.Now()
		p.SendBodies(t, topic, "", []string{body})
		var r result
		select {
		case r = <-done:
		case <-time.After(opTimeout):
			require.FailNowf(t, "parked pull never woke", "round %d", round)
		}
		wake := time.Since(sent)
		require.NoError(t, r.err)
		wakes = append(wakes, wake)
		require.Equal(t, int32(remoting.Success), r.resp.Code, "round %d: remark %q", round, r.resp.Remark)
		h := pullResponseHeader(t, r.resp)
		assert.Equal(t, offset+1, h.NextBeginOffset)
		assert.Equal(t, offset+1, h.MaxOffset)
		msgs := primitive.DecodeMessage(r.resp.Body)
		require.Len(t, msgs, 1)
		assert.Equal(t, body, string(msgs[0].Body))
		assert.Equal(t, offset, msgs[0].QueueOffset)
		// Far below the 15 s suspend timeout: the arrival woke the pull.
		assert.Less(t, wake, 2*time.Second, "round %d: parked pull answered %v after the send", round, wake)
	}
	sort.Slice(wakes, func(i, j int) bool { return wakes[i] < wakes[j] })
	t.Logf("parked pulls answered %v after the send started (sorted)", wakes)
	// The send itself is a round trip through the driver process; the
	// median still has to be far from a 1 s short poll.
	assert.Less(t, wakes[len(wakes)/2], 300*time.Millisecond, "median wake-up after a send")

	// Nothing arrives: the broker answers at the suspend timeout, not before,
	// and not much later than RocketMQ's 5 s hold-check period.
	const suspend = 1500 * time.Millisecond
	resp, took := rawPull(t, c, pullHeader(group, topic, 6, suspend, "*"))
	require.Equal(t, int32(remoting.PullNotFound), resp.Code, "remark %q", resp.Remark)
	assert.GreaterOrEqual(t, took, suspend-100*time.Millisecond, "answered before the suspend timeout")
	assert.Less(t, took, suspend+6*time.Second, "answered long after the suspend timeout")
	h := pullResponseHeader(t, resp)
	assert.Equal(t, int64(6), h.NextBeginOffset)
	assert.Equal(t, int64(6), h.MaxOffset)
}

// TestBrokerFiltersTagsOnPull: the broker filters by tag itself (the
// official client filters again, so only the wire shows this): a pull with
// subscription "TagA" returns only TagA messages, and moves past a run of
// others.
func TestBrokerFiltersTagsOnPull(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	topic := uniq("FilterTopic")
	d := c.StartDriver(t)
	d.CreateTopic(t, c, topic, 1)
	p := d.NewProducer(t, "")
	p.SendBodies(t, topic, "TagA", []string{"a0", "a1"})
	p.SendBodies(t, topic, "TagB", []string{"b0", "b1", "b2"})
	p.SendBodies(t, topic, "TagA", []string{"a2"})
	p.SendBodies(t, topic, "TagB", []string{"b3", "b4"})
	group := uniq("GFilter")
	// The consume queue follows SEND_OK asynchronously.
	require.Eventually(t, func() bool { return c.MaxOffset(t, topic, 0) == 8 }, opTimeout, pollEvery)

	var got []string
	offset := int64(0)
	for range 10 {
		if offset >= 8 {
			break
		}
		resp, _ := rawPull(t, c, pullHeader(group, topic, offset, 0, "TagA"))
		h := pullResponseHeader(t, resp)
		switch remoting.ResponseCode(resp.Code) {
		case remoting.Success:
			for _, m := range primitive.DecodeMessage(resp.Body) {
				got = append(got, string(m.Body))
				assert.Equal(t, "TagA", m.GetTags())
			}
		case remoting.PullNotFound, remoting.PullRetryImmediately:
		default:
			require.Failf(t, "unexpected pull answer", "code %d remark %q", resp.Code, resp.Remark)
		}
		require.Greater(t, h.NextBeginOffset, offset, "pull at %d did not advance (code %d)", offset, resp.Code)
		offset = h.NextBeginOffset
	}
	assert.Equal(t, []string{"a0", "a1", "a2"}, got)
	assert.Equal(t, int64(8), offset, "filtered pulls must end at the queue's end")
}
