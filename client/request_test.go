package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// replyCluster starts a nameserver and two brokers of one cluster; topic
// lives on broker-a only, the reply topic on both (each broker creates it).
func replyCluster(t *testing.T, topic string) (ns string, ba, bb *broker.Broker) {
	t.Helper()
	nsrv := MustStartNameServer(t)
	ba = MustStartBroker(t, "broker-a", nsrv.Addr(), nil)
	bb = MustStartBroker(t, "broker-b", nsrv.Addr(), nil)
	a := MustAdmin(t, WithNameServer(nsrv.Addr()))
	ctx := testCtx(t)
	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2, BrokerAddr: ba.Addr()}))
	require.Eventually(t, func() bool {
		r, err := a.TopicRoute(ctx, ReplyTopic("DefaultCluster"))
		if err != nil || len(r.QueueDatas) != 2 {
			return false
		}
		_, err = a.TopicRoute(ctx, topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	return nsrv.Addr(), ba, bb
}

// MustStartReplier starts a push consumer of topic that answers every
// request with "re:"+body through its own producer (WithRetry(0), so a reply
// the chosen broker cannot push fails instead of trying the other broker).
func MustStartReplier(t *testing.T, ns, topic string) {
	t.Helper()
	rp := MustStartProducer(t, WithNameServer(ns), WithGroupName("replier-pg"), WithRetry(0))
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe(topic, MessageSelector{Expression: "*"},
			func(ctx context.Context, msgs ...*MessageExt) (ConsumeResult, error) {
				for _, m := range msgs {
					reply, err := CreateReplyMessage(m, append([]byte("re:"), m.Body...))
					if err != nil {
						return ConsumeRetryLater, err
					}
					// The requester may take the push before the broker answers
					// here, and the test may end in between: only a failure
					// while it still runs counts.
					if _, err := rp.SendSync(ctx, reply); err != nil && ctx.Err() == nil {
						t.Errorf("reply to %s: %v", m.Body, err)
					}
				}
				return ConsumeSuccess, nil
			}))
	}, WithNameServer(ns), WithGroupName("replier-cg"), WithLogger(testLogger()), WithConsumeFromWhere(ConsumeFromFirstOffset))
}

// TestE2ERequestReply: concurrent requests each get their own reply, from
// both brokers of the cluster, though the request topic lives on one of
// them: the requester heartbeats the reply topic's brokers too, so each
// broker pushes straight to it (the replier does not retry).
func TestE2ERequestReply(t *testing.T) {
	ns, ba, bb := replyCluster(t, "ReqT")
	MustStartReplier(t, ns, "ReqT")
	p := MustStartProducer(t, WithNameServer(ns), WithGroupName("requester-pg"))
	ctx := testCtx(t)

	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	stores := map[string]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("req-%d", i)
			reply, err := p.Request(ctx, 15*time.Second, NewMessage("ReqT", []byte(body)))
			if !assert.NoError(t, err, body) {
				return
			}
			assert.Equal(t, "re:"+body, string(reply.Body), "the reply of its own request")
			assert.Equal(t, ReplyTopic("DefaultCluster"), reply.Topic)
			assert.NotEmpty(t, reply.Property(message.PropReplyMessageArriveTime))
			mu.Lock()
			stores[reply.StoreHost.String()]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Len(t, stores, 2, "replies pushed by both brokers: %v (a=%s b=%s)", stores, ba.Addr(), bb.Addr())

	got := make(chan string, 1)
	require.NoError(t, p.RequestAsync(ctx, 15*time.Second, func(_ context.Context, reply *MessageExt, err error) {
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(reply.Body)
	}, NewMessage("ReqT", []byte("async"))))
	assert.Equal(t, "re:async", recvWithin(t, got, 20*time.Second, "no async reply"))
	assert.Zero(t, p.requests.pending(), "no request left waiting")
}

// TestE2ERequestTimeoutAndStrays: without a replier a request times out
// (sync and async) and leaves nothing behind; a reply to a requester that is
// gone is refused with the broker's reason; a reply nobody waits for is
// taken and dropped.
func TestE2ERequestTimeoutAndStrays(t *testing.T) {
	ns, _, _ := replyCluster(t, "ReqNone")
	p := MustStartProducer(t, WithNameServer(ns), WithGroupName("requester-pg"))
	ctx := testCtx(t)

	start := time.Now()
	_, err := p.Request(ctx, 300*time.Millisecond, NewMessage("ReqNone", []byte("nobody")))
	require.ErrorIs(t, err, ErrRequestTimeout)
	assert.Less(t, time.Since(start), 15*time.Second)

	got := make(chan error, 1)
	require.NoError(t, p.RequestAsync(ctx, 300*time.Millisecond, func(_ context.Context, reply *MessageExt, err error) {
		assert.Nil(t, reply)
		got <- err
	}, NewMessage("ReqNone", []byte("nobody-async"))))
	assert.ErrorIs(t, recvWithin(t, got, 20*time.Second, "no timeout callback"), ErrRequestTimeout)
	assert.Zero(t, p.requests.pending())

	rp := MustStartProducer(t, WithNameServer(ns), WithGroupName("replier-pg"), WithRetry(0))
	req := &MessageExt{Message: message.Message{Topic: "ReqNone", Properties: map[string]string{
		message.PropCluster: "DefaultCluster", message.PropReplyToClient: "127.0.0.1@gone", message.PropCorrelationID: "c-1"}}}
	reply, err := CreateReplyMessage(req, []byte("late"))
	require.NoError(t, err)
	_, err = rp.SendSync(ctx, reply)
	var be *BrokerError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.SystemError, be.Code)
	assert.Contains(t, be.Remark, "channel of the requester not found")

	// A requester that heartbeated both brokers and went away.
	gone := MustStartProducer(t, WithNameServer(ns), WithGroupName("gone-pg"))
	_, err = gone.Request(ctx, 100*time.Millisecond, NewMessage("ReqNone", []byte("then leave")))
	require.ErrorIs(t, err, ErrRequestTimeout)
	require.NoError(t, gone.Shutdown())
	req.Properties[message.PropReplyToClient] = gone.ClientID()
	reply, err = CreateReplyMessage(req, []byte("too late"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the brokers see the connection close
		_, err = rp.SendSync(ctx, reply)
		return errors.As(err, &be) && strings.Contains(be.Remark, "channel of the requester not found")
	}, 10*time.Second, 20*time.Millisecond, "last: %v", err)

	// To a live requester, with a correlation id it never sent.
	req.Properties[message.PropReplyToClient] = p.ClientID()
	reply, err = CreateReplyMessage(req, []byte("stray"))
	require.NoError(t, err)
	for i := 0; i < 4; i++ { // both brokers know the requester by now
		_, err = rp.SendSync(ctx, reply)
		require.NoError(t, err)
	}
	assert.Zero(t, p.requests.pending())

	_, err = CreateReplyMessage(&MessageExt{}, nil)
	assert.ErrorIs(t, err, ErrNotARequest)
}

// TestRequestShutdownEndsWaits: Shutdown ends a RequestAsync still waiting,
// once, with ErrNotStarted, and later requests are refused.
func TestRequestShutdownEndsWaits(t *testing.T) {
	ns, _, _ := replyCluster(t, "ReqShut")
	p, err := NewProducer(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	got := make(chan error, 2)
	require.NoError(t, p.RequestAsync(testCtx(t), time.Minute, func(_ context.Context, _ *MessageExt, err error) { got <- err },
		NewMessage("ReqShut", []byte("x"))))
	require.NoError(t, p.Shutdown())
	assert.True(t, errors.Is(recvWithin(t, got, 10*time.Second, "no callback at shutdown"), ErrNotStarted))
	assert.Empty(t, got, "called once")
	_, err = p.Request(testCtx(t), time.Second, NewMessage("ReqShut", []byte("y")))
	assert.ErrorIs(t, err, ErrNotStarted)
}
