package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// bcStartBroker starts a broker on 127.0.0.1:0 with a fresh store; tweak,
// when set, runs between New and Start (to shorten the consume side's
// timers). The broker shuts down when the test ends.
func bcStartBroker(t *testing.T, tweak func(b *Broker)) *Broker {
	t.Helper()
	b, err := New(testBrokerConfig(t), baLogger())
	require.NoError(t, err)
	if tweak != nil {
		tweak(b)
	}
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	return b
}

// bcCreateTopic creates a read-write topic with queues queues.
func bcCreateTopic(t *testing.T, b *Broker, topic string, queues int32) {
	t.Helper()
	require.NoError(t, b.topics.Update(&protocol.TopicConfig{
		TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.SingleTag,
	}))
}

// bcSend stores one message with tags (and keys) through SEND_MESSAGE and
// returns the response.
func bcSend(t *testing.T, cl *remoting.Client, addr, topic string, queueID int32, body, tags, keys string) *remoting.Command {
	t.Helper()
	props := map[string]string{message.PropUniqKey: strconv.FormatInt(time.Now().UnixNano(), 16)}
	if tags != "" {
		props[message.PropTags] = tags
	}
	if keys != "" {
		props[message.PropKeys] = keys
	}
	resp := baInvoke(t, cl, addr, sendReq(topic, queueID, []byte(body), props))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	return resp
}

// bcHeartbeat sends a consumer heartbeat for group with the subscriptions.
func bcHeartbeat(t *testing.T, cl *remoting.Client, addr, clientID, group string, where protocol.ConsumeFromWhere, subs ...protocol.SubscriptionData) {
	t.Helper()
	hb := protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: protocol.Clustering,
		ConsumeFromWhere: where, SubscriptionDataSet: subs,
	}}}
	body, err := json.Marshal(&hb)
	require.NoError(t, err)
	resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
}

// bcTagSub is a tag subscription as the Go client builds it.
func bcTagSub(topic, expr string) protocol.SubscriptionData {
	return protocol.SubscriptionData{Topic: topic, SubString: expr, SubVersion: time.Now().UnixNano(), ExpressionType: protocol.ExpressionTag}
}

// bcPullHeader is a PULL_MESSAGE header as the Go push consumer writes it.
func bcPullHeader(group, topic string, queueID int32, offset int64, sysFlag int32, suspendMs int64) *protocol.PullMessageRequestHeader {
	return &protocol.PullMessageRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: queueID, QueueOffset: offset, MaxMsgNums: 32,
		SysFlag: sysFlag, SuspendTimeoutMillis: suspendMs, ExpressionType: protocol.ExpressionTag,
	}
}

func bcPullReq(h *protocol.PullMessageRequestHeader) *remoting.Command {
	return remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(h, nil), nil)
}

// bcPullResult is a decoded pull response.
type bcPullResult struct {
	code   remoting.ResponseCode
	remark string
	hdr    protocol.PullMessageResponseHeader
	tags   []string
	bodies []string
	offs   []int64
}

// bcDecodePull checks the four headers every pull response must carry and
// decodes the records of the body.
func bcDecodePull(t *testing.T, resp *remoting.Command) bcPullResult {
	t.Helper()
	r := bcPullResult{code: resp.ResponseCode(), remark: resp.Remark}
	if r.code != remoting.Success && r.code != remoting.PullNotFound && r.code != remoting.PullRetryImmediately && r.code != remoting.PullOffsetMoved {
		return r
	}
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &r.hdr), "all four pull response headers are required")
	for b := resp.Body; len(b) > 0; {
		rec, err := message.ParseRecord(b)
		require.NoError(t, err)
		tags, _ := rec.Property(message.PropTags)
		r.tags = append(r.tags, string(tags))
		r.bodies = append(r.bodies, string(rec.Body()))
		r.offs = append(r.offs, rec.QueueOffset())
		b = b[rec.Size():]
	}
	return r
}

// bcPull sends a pull and waits for its answer.
func bcPull(t *testing.T, cl *remoting.Client, addr string, h *protocol.PullMessageRequestHeader) bcPullResult {
	t.Helper()
	return bcDecodePull(t, baInvoke(t, cl, addr, bcPullReq(h)))
}

// bcAsyncPull sends a pull without waiting; the answer (or error) arrives
// on the returned channel.
func bcAsyncPull(t *testing.T, cl *remoting.Client, addr string, h *protocol.PullMessageRequestHeader) <-chan *remoting.Command {
	t.Helper()
	ch := make(chan *remoting.Command, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var once sync.Once
	err := cl.InvokeAsync(ctx, addr, bcPullReq(h), 30*time.Second, func(resp *remoting.Command, err error) {
		once.Do(cancel)
		if err != nil {
			resp = nil
		}
		ch <- resp
	})
	if err != nil {
		cancel()
	}
	require.NoError(t, err)
	return ch
}

// bcOffsetReq builds a request whose header is h.
func bcReq(code remoting.RequestCode, h any, body []byte) *remoting.Command {
	var ext map[string]string
	if h != nil {
		ext = protocol.EncodeHeader(h, nil)
	}
	return remoting.NewRequest(code, ext, body)
}

// bcOffset reads the offset header of a response.
func bcOffset(t *testing.T, resp *remoting.Command) int64 {
	t.Helper()
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	var h protocol.OffsetResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h.Offset
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// bcWaitQueue waits until the dispatch made n entries of topic/queueID
// readable (a send returns before its consume-queue entry exists).
func bcWaitQueue(t *testing.T, b *Broker, topic string, queueID int32, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return b.store.MaxOffsetInQueue(topic, queueID) >= n }, 5*time.Second, time.Millisecond)
}
