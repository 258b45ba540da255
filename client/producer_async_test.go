package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// sendAsyncWait runs one SendAsync and waits for its callback.
func sendAsyncWait(t *testing.T, ctx context.Context, p *Producer, m *Message) (*SendResult, error) {
	t.Helper()
	type outcome struct {
		res *SendResult
		err error
	}
	ch := make(chan outcome, 1)
	require.NoError(t, p.SendAsync(ctx, func(_ context.Context, r *SendResult, err error) { ch <- outcome{r, err} }, m))
	o := recvWithin(t, ch, 10*time.Second, "SendAsync callback not called")
	return o.res, o.err
}

func TestProducerAsyncRetriesAndAvoids(t *testing.T) {
	ns := MustStartNameServer(t)
	a := MustStartFakeBroker(t, "broker-a", ns.Addr())
	b := MustStartFakeBroker(t, "broker-b", ns.Addr())
	a.AddTopic("T", 1)
	b.AddTopic("T", 1)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	a.setSendHook(func(req *remoting.Command) *remoting.Command {
		<-hang
		return remoting.NewResponse(req, remoting.SystemError, "stopped")
	})
	// Long enough that a slowed broker-b never times out too (see the sync test).
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithSendTimeout(2*time.Second))
	for i := 0; i < 6; i++ {
		res, err := sendAsyncWait(t, testCtx(t), p, NewMessage("T", []byte("x")))
		require.NoError(t, err)
		assert.Equal(t, "broker-b", res.Queue.BrokerName)
		assert.NotEmpty(t, res.MsgID)
		assert.NotEmpty(t, res.OffsetMsgID)
	}
	assert.Equal(t, 1, a.sendCount(), "after one timeout broker-a is avoided")
	assert.Len(t, b.messages("T"), 6)
}

func TestProducerAsyncBusyBackoffAndErrors(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	var calls atomic.Int32
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		if calls.Add(1) <= 2 {
			return remoting.NewResponse(req, remoting.SystemBusy, "[TIMEOUT_CLEAN_QUEUE]broker busy")
		}
		return nil
	})
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	start := time.Now()
	res, err := sendAsyncWait(t, testCtx(t), p, NewMessage("T", []byte("x")))
	require.NoError(t, err)
	assert.Equal(t, SendOK, res.Status)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "backoff 50 ms then 100 ms")

	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.MessageIllegal, "bad message")
	})
	before := fb.sendCount()
	_, err = sendAsyncWait(t, testCtx(t), p, NewMessage("T", []byte("x")))
	var be *BrokerError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.MessageIllegal, be.Code)
	assert.Equal(t, before+1, fb.sendCount(), "an illegal message is not retried")

	// Every attempt busy: 1+retry attempts, then the last error.
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.SystemBusy, "busy")
	})
	before = fb.sendCount()
	_, err = sendAsyncWait(t, testCtx(t), p, NewMessage("T", []byte("x")))
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.SystemBusy, be.Code)
	assert.Equal(t, before+3, fb.sendCount(), "default retry 2")

	_, err = sendAsyncWait(t, testCtx(t), p, NewMessage("NoSuchTopic", []byte("x")))
	assert.Error(t, err)
}

func TestProducerAsyncContextEndsSend(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		<-hang
		return nil
	})
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithSendTimeout(30*time.Second))

	// A cancelled context ends a send stuck on a hung broker at once.
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := sendAsyncWait(t, ctx, p, NewMessage("T", []byte("x")))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 5*time.Second)

	// A deadline shorter than the send timeout bounds the attempt.
	dctx, dcancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer dcancel()
	start = time.Now()
	_, err = sendAsyncWait(t, dctx, p, NewMessage("T", []byte("x")))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)

	// An invalid message is refused by SendAsync itself; cb is not called.
	assert.ErrorIs(t, p.SendAsync(testCtx(t), func(context.Context, *SendResult, error) { t.Error("cb called") }, NewMessage("T", nil)), ErrEmptyBody)
}

func TestProducerAsyncBoundsInFlight(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	release := make(chan struct{})
	var inBroker atomic.Int32
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		inBroker.Add(1)
		<-release
		return nil
	})
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithMaxAsyncInFlight(2), WithSendTimeout(30*time.Second))
	var done atomic.Int32
	cb := func(_ context.Context, _ *SendResult, err error) {
		assert.NoError(t, err)
		done.Add(1)
	}
	require.NoError(t, p.SendAsync(testCtx(t), cb, NewMessage("T", []byte("1"))))
	require.NoError(t, p.SendAsync(testCtx(t), cb, NewMessage("T", []byte("2"))))
	// A third send waits for a slot; its context ends the wait.
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.SendAsync(ctx, cb, NewMessage("T", []byte("3"))), context.DeadlineExceeded)
	close(release)
	require.Eventually(t, func() bool { return done.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int32(2), inBroker.Load())
}

// TestSendRequestHeaderMatchesReflective checks the hand-written send
// header against protocol.EncodeHeader of the same V2 header.
func TestSendRequestHeaderMatchesReflective(t *testing.T) {
	p := benchProducer(t)
	tests := []struct {
		name string
		msgs []*Message
		q    MessageQueue
	}{
		{"single", []*Message{NewMessage("T", []byte("x")).WithTag("a").WithKeys("k")}, MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}},
		{"no broker name", []*Message{NewMessage("T", []byte("x")).WithFlag(7)}, MessageQueue{Topic: "T", QueueID: 0}},
		{"batch", []*Message{NewMessage("T", []byte("x")), NewMessage("T", []byte("y"))}, MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}},
		{"retry topic", []*Message{NewMessage("%RETRY%g", []byte("x")).WithProperty(message.PropReconsumeTime, "3").WithProperty(message.PropMaxReconsumeTimes, "16")}, MessageQueue{Topic: "%RETRY%g", BrokerName: "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := p.prepare(tc.msgs, 0)
			require.NoError(t, err)
			req := p.request(out, tc.q)
			want := protocol.SendMessageRequestHeaderV2{
				ProducerGroup: p.groupName(), Topic: out.topic, DefaultTopic: p.c.o.createTopicKey,
				DefaultTopicQueueNums: p.c.o.defaultTopicQueueNums, QueueID: tc.q.QueueID, SysFlag: out.sysFlag,
				BornTimestamp: 1, Flag: out.flag, Properties: out.props, Batch: out.batch, BrokerName: tc.q.BrokerName,
			}
			if tc.name == "retry topic" {
				want.ReconsumeTimes, want.MaxReconsumeTimes = 3, 16
			}
			assert.Nil(t, req.ExtFields, "the header is built in RawExt")
			got := req.FieldMap()
			require.NotEmpty(t, got["g"])
			got["g"] = "1" // born timestamp: now
			assert.Equal(t, protocol.EncodeHeader(&want, nil), got)
			if out.batch {
				assert.Equal(t, remoting.SendBatchMessage, req.RequestCode())
			} else {
				assert.Equal(t, remoting.SendMessageV2, req.RequestCode())
			}
		})
	}
}

// TestDecodeSendResponseMatchesReflective checks the hand-written response
// decoder against protocol.DecodeHeader, errors included.
func TestDecodeSendResponseMatchesReflective(t *testing.T) {
	tests := []struct {
		name string
		ext  map[string]string
	}{
		{"full", map[string]string{"msgId": "AB", "queueId": "3", "queueOffset": "42", "transactionId": "tx", "MSG_REGION": "r", "TRACE_ON": "true"}},
		{"minimal", map[string]string{"msgId": "AB", "queueId": " 0 ", "queueOffset": "0"}},
		{"no msgId", map[string]string{"queueId": "3", "queueOffset": "42"}},
		{"no queueId", map[string]string{"msgId": "AB", "queueOffset": "42"}},
		{"bad queueId", map[string]string{"msgId": "AB", "queueId": "x", "queueOffset": "42"}},
		{"queueId overflow", map[string]string{"msgId": "AB", "queueId": "4294967296", "queueOffset": "42"}},
		{"no queueOffset", map[string]string{"msgId": "AB", "queueId": "1"}},
		{"bad queueOffset", map[string]string{"msgId": "AB", "queueId": "1", "queueOffset": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want protocol.SendMessageResponseHeader
			wantErr := protocol.DecodeHeader(tc.ext, &want)
			raw := &remoting.Command{} // the same fields as a binary answer brings them
			for k, v := range tc.ext {
				raw.RawExt = remoting.AppendField(raw.RawExt, k, v)
			}
			if raw.RawExt == nil {
				raw.RawExt = []byte{}
			}
			for _, resp := range []*remoting.Command{{ExtFields: tc.ext}, raw} {
				got, err := decodeSendResponse(resp)
				if wantErr != nil {
					require.ErrorIs(t, err, protocol.ErrBadHeader)
					assert.Equal(t, wantErr.Error(), err.Error())
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, want, got)
			}
		})
	}
}
