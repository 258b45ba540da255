package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
)

// TestTraceRecordLayout: records are written in the official Go client's
// layout and read back, as are the shorter layouts of Java clients.
func TestTraceRecordLayout(t *testing.T) {
	var b strings.Builder
	appendRecord(&b, &traceRecord{kind: TracePub, timestamp: 1700000000000, region: "DefaultRegion", group: "pg", topic: "T",
		msgID: "ID1", tags: "tagA", keys: "k1 k2", storeHost: "127.0.0.1:10911", bodyLen: 5, cost: 3, msgType: traceNormalMsg,
		offsetMsgID: "OFF1", success: true, clientHost: "10.0.0.1"})
	appendRecord(&b, &traceRecord{kind: TraceSubBefore, timestamp: 1700000000100, region: "DefaultRegion", group: "cg",
		requestID: "R1", msgID: "ID1", retryTimes: 1, clientHost: "10.0.0.2"})
	appendRecord(&b, &traceRecord{kind: TraceSubAfter, timestamp: 1700000000200, group: "cg", requestID: "R1", msgID: "ID1",
		cost: 7, success: false, contextCode: traceConsumeFailed, keys: "k1 k2"})
	want := "Pub\x011700000000000\x01DefaultRegion\x01pg\x01T\x01ID1\x01tagA\x01k1 k2\x01127.0.0.1:10911\x015\x013\x010\x01OFF1\x01true\x0110.0.0.1\x02" +
		"SubBefore\x011700000000100\x01DefaultRegion\x01cg\x01R1\x01ID1\x011\x01null\x0110.0.0.2\x02" +
		"SubAfter\x01R1\x01ID1\x017\x01false\x01k1 k2\x014\x011700000000200\x01cg\x02"
	require.Equal(t, want, b.String())

	vs := DecodeTraceData(b.String())
	require.Len(t, vs, 3)
	assert.Equal(t, TraceView{Type: TracePub, MsgID: "ID1", Topic: "T", Tags: "tagA", Keys: "k1 k2", Group: "pg", Timestamp: 1700000000000,
		CostTime: 3, Success: true, StoreHost: "127.0.0.1:10911", OffsetMsgID: "OFF1", ClientHost: "10.0.0.1", RegionID: "DefaultRegion"}, vs[0])
	assert.Equal(t, "cg", vs[1].Group)
	assert.Equal(t, "R1", vs[1].RequestID)
	assert.Equal(t, TraceView{Type: TraceSubAfter, MsgID: "ID1", Keys: "k1 k2", Group: "cg", Timestamp: 1700000000200, CostTime: 7,
		RequestID: "R1", ContextCode: traceConsumeFailed}, vs[2])
	assert.Equal(t, "failed", vs[2].Status())

	// Java 4.x: Pub without clientHost, SubAfter without time and group;
	// garbage and truncated records are skipped.
	java := "Pub\x011\x01r\x01pg\x01T\x01ID2\x01\x01\x01h:1\x012\x013\x010\x01OFF\x01true\x02SubAfter\x01R\x01ID2\x014\x01true\x01null\x010\x02" +
		"Pub\x01x\x02SubBefore\x01\x02junk\x02"
	vs = DecodeTraceData(java)
	require.Len(t, vs, 2)
	assert.Equal(t, "OFF", vs[0].OffsetMsgID)
	assert.True(t, vs[1].Success)
	assert.Empty(t, vs[1].Group)
}

// TestE2ETrace: a traced producer and a traced push consumer write Pub,
// SubBefore and SubAfter records that QueryTrace finds by the message id.
func TestE2ETrace(t *testing.T) {
	ns, b, a := e2eCluster(t, "TraceT")
	tr := WithTrace(&TraceConfig{})
	p := MustStartProducer(t, WithNameServer(ns), WithGroupName("trace-pg"), tr)
	ctx := testCtx(t)
	res, err := p.SendSync(ctx, NewMessage("TraceT", []byte("traced")).WithTag("tagT").WithKeys("order-1"))
	require.NoError(t, err)
	asyncDone := make(chan error, 1)
	require.NoError(t, p.SendAsync(ctx, func(_ context.Context, _ *SendResult, err error) { asyncDone <- err },
		NewMessage("TraceT", []byte("traced-async"))))
	require.NoError(t, recvWithin(t, asyncDone, 20*time.Second, "async send"))

	consumed := make(chan string, 4)
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("TraceT", MessageSelector{Expression: "*"}, func(_ context.Context, msgs ...*MessageExt) (ConsumeResult, error) {
			for _, m := range msgs {
				consumed <- m.MsgID()
			}
			return ConsumeSuccess, nil
		}))
	}, WithNameServer(ns), WithGroupName("trace-cg"), WithLogger(testLogger()), WithConsumeFromWhere(ConsumeFromFirstOffset), tr)
	recvWithin(t, consumed, 20*time.Second, "not consumed")

	var views []TraceView
	require.Eventually(t, func() bool {
		views, err = a.QueryTrace(ctx, "", res.MsgID)
		kinds := map[string]bool{}
		for _, v := range views {
			kinds[v.Type] = true
		}
		return err == nil && kinds[TracePub] && kinds[TraceSubBefore] && kinds[TraceSubAfter]
	}, 20*time.Second, 50*time.Millisecond, "trace of %s: %+v %v", res.MsgID, views, err)
	for _, v := range views {
		assert.Equal(t, res.MsgID, v.MsgID)
		assert.True(t, v.Success, "%+v", v)
		switch v.Type {
		case TracePub:
			assert.Equal(t, "trace-pg", v.Group)
			assert.Equal(t, "TraceT", v.Topic)
			assert.Equal(t, "tagT", v.Tags)
			assert.Equal(t, "order-1", v.Keys)
			assert.Equal(t, b.Addr(), v.StoreHost)
			assert.Equal(t, res.OffsetMsgID, v.OffsetMsgID)
			assert.Equal(t, "DefaultRegion", v.RegionID)
		case TraceSubBefore, TraceSubAfter:
			assert.Equal(t, "trace-cg", v.Group)
		}
	}
	assert.NotEmpty(t, views[0].ClientHost)
}

// TestE2ETraceTransactionAndRequest: a traced producer's sends that do not
// go through SendSync or SendAsync are traced too: a transaction's half
// message (a Pub record QueryTrace finds by its id) and a request (a Pub
// record under the request's key; no replier, so the request times out
// after its send).
func TestE2ETraceTransactionAndRequest(t *testing.T) {
	ns, _, a := e2eCluster(t, "TraceTx", "TraceReq")
	tr := WithTrace(&TraceConfig{})
	ctx := testCtx(t)
	l := &txListener{exec: map[string]LocalTransactionState{"tx": CommitMessageState}}
	tp, err := NewTransactionProducer(l, WithNameServer(ns), WithGroupName("trace-txg"), WithLogger(testLogger()), tr)
	require.NoError(t, err)
	require.NoError(t, tp.Start())
	t.Cleanup(func() { require.NoError(t, tp.Shutdown()) })
	res, err := tp.SendMessageInTransaction(ctx, NewMessage("TraceTx", []byte("tx")))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		vs, err := a.QueryTrace(ctx, "", res.MsgID)
		return err == nil && len(vs) == 1 && vs[0].Type == TracePub && vs[0].Topic == "TraceTx" && vs[0].Group == "trace-txg"
	}, 20*time.Second, 50*time.Millisecond, "Pub record of the half message %s", res.MsgID)

	p := MustStartProducer(t, WithNameServer(ns), WithGroupName("trace-req"), tr)
	_, err = p.Request(ctx, 300*time.Millisecond, NewMessage("TraceReq", []byte("ask")).WithKeys("req-key-1"))
	require.ErrorIs(t, err, ErrRequestTimeout)
	require.Eventually(t, func() bool {
		msgs, err := a.QueryMessageByKey(ctx, DefaultTraceTopic, "req-key-1", 64, time.UnixMilli(0), time.Now().Add(time.Hour))
		if err != nil {
			return false
		}
		for _, m := range msgs {
			for _, v := range DecodeTraceData(string(m.Body)) {
				if v.Type == TracePub && v.Topic == "TraceReq" && v.Keys == "req-key-1" && v.Group == "trace-req" {
					return true
				}
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "Pub record of the request")
}

// TestE2ETraceCustomTopic: a broker's msgTraceTopicName is created at start
// (traceTopicEnable) and a client naming it writes there; with
// traceTopicEnable off, the default trace topic is auto-created by the
// first record (autoCreateTopicEnable).
func TestE2ETraceCustomTopic(t *testing.T) {
	ns := MustStartNameServer(t)
	MustStartBroker(t, "broker-a", ns.Addr(), func(c *conf.BrokerConfig) { c.MsgTraceTopicName = "MyTraceT" })
	MustStartBroker(t, "broker-b", ns.Addr(), func(c *conf.BrokerConfig) { c.TraceTopicEnable = false })
	a := MustAdmin(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)
	require.Eventually(t, func() bool {
		r, err := a.TopicRoute(ctx, "MyTraceT")
		return err == nil && len(r.QueueDatas) == 1 && r.QueueDatas[0].BrokerName == "broker-a"
	}, 10*time.Second, 20*time.Millisecond, "broker-a creates its msgTraceTopicName")
	r, err := a.TopicRoute(ctx, DefaultTraceTopic)
	if err == nil {
		assert.Empty(t, r.QueueDatas, "neither broker creates RMQ_SYS_TRACE_TOPIC at start")
	}

	for _, topic := range []string{"MyTraceT", DefaultTraceTopic} {
		p := MustStartProducer(t, WithNameServer(ns.Addr()), WithGroupName("trace-pg"), WithTrace(&TraceConfig{TraceTopic: topic}))
		res, err := p.SendSync(ctx, NewMessage("AutoTraced", []byte("x")))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			vs, err := a.QueryTrace(ctx, topic, res.MsgID)
			return err == nil && len(vs) == 1 && vs[0].Type == TracePub
		}, 20*time.Second, 50*time.Millisecond, "Pub record of %s in %s", res.MsgID, topic)
	}
}

// FuzzDecodeTraceData: any trace message body decodes without panicking,
// and what appendRecord writes decodes back to the same message id.
func FuzzDecodeTraceData(f *testing.F) {
	var b strings.Builder
	appendRecord(&b, &traceRecord{kind: TracePub, timestamp: 1, group: "pg", topic: "T", msgID: "ID", success: true})
	appendRecord(&b, &traceRecord{kind: TraceSubBefore, timestamp: 2, group: "cg", requestID: "R", msgID: "ID"})
	appendRecord(&b, &traceRecord{kind: TraceSubAfter, timestamp: 3, group: "cg", requestID: "R", msgID: "ID"})
	f.Add(b.String(), "ID")
	f.Add("Pub\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02SubAfter\x01\x01\x01x\x02", "x")
	f.Fuzz(func(t *testing.T, data, msgID string) {
		_ = DecodeTraceData(data)
		if strings.ContainsAny(msgID, "\x01\x02") {
			return
		}
		var b strings.Builder
		appendRecord(&b, &traceRecord{kind: TraceSubAfter, requestID: "R", msgID: msgID, group: "cg"})
		vs := DecodeTraceData(b.String())
		if len(vs) != 1 || vs[0].MsgID != msgID {
			t.Fatalf("record about %q decoded as %+v", msgID, vs)
		}
	})
}
