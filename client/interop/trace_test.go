//go:build !race

package interop

import (
	"context"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
)

// traceKinds waits until the trace of msgID has the wanted record types and
// returns the records.
func traceKinds(t *testing.T, ns, msgID string) []client.TraceView {
	t.Helper()
	a, err := client.NewAdmin(client.WithNameServer(ns), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var views []client.TraceView
	require.Eventually(t, func() bool {
		views, err = a.QueryTrace(ctx, "", msgID)
		kinds := map[string]bool{}
		for _, v := range views {
			kinds[v.Type] = true
		}
		return err == nil && kinds[client.TracePub] && kinds[client.TraceSubBefore] && kinds[client.TraceSubAfter]
	}, 30*time.Second, 100*time.Millisecond, "trace of %s: %+v %v", msgID, views, err)
	return views
}

// TestOfficialTrace: the official producer and consumer with WithTrace write
// their records to our broker's trace topic (traceTopicEnable is on by
// default), and our QueryTrace (what mqadmin queryMsgTraceById prints)
// reads both sides; so it does with our producer and the official consumer.
//
// One cluster for both: the official client keeps one trace client per
// process (instance INNER_TRACE_CLIENT_DEFAULT) bound to the first
// nameserver it was given, and a WithTrace naming another one panics.
func TestOfficialTrace(t *testing.T) {
	ns := cluster(t, "TraceOfficial", "TraceMixed", "TraceMixed2")
	t.Run("official both sides", func(t *testing.T) { officialTrace(t, ns) })
	t.Run("our producer, official consumer", func(t *testing.T) { ourTracedProducerOfficialTracedConsumer(t, ns) })
	t.Run("official producer, our consumer", func(t *testing.T) { officialTracedProducerOurTracedConsumer(t, ns) })
}

// officialTracedProducerOurTracedConsumer: the reverse of
// ourTracedProducerOfficialTracedConsumer.
func officialTracedProducerOurTracedConsumer(t *testing.T, ns string) {
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-trace-pg2"),
		producer.WithInstanceName("trace-op2"), producer.WithTrace(&primitive.TraceConfig{NamesrvAddrs: []string{ns}}))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, primitive.NewMessage("TraceMixed2", []byte("traced")))
	require.NoError(t, err)

	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("our-trace-cg"), client.WithLogger(quietLogger()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithTrace(&client.TraceConfig{}))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("TraceMixed2", client.MessageSelector{Expression: "*"},
		func(context.Context, ...*client.MessageExt) (client.ConsumeResult, error) {
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer func() { _ = c.Shutdown() }()

	groups := map[string]string{}
	for _, v := range traceKinds(t, ns, res.MsgID) {
		groups[v.Type] = v.Group
	}
	assert.Equal(t, map[string]string{client.TracePub: "official-trace-pg2", client.TraceSubBefore: "our-trace-cg",
		client.TraceSubAfter: "our-trace-cg"}, groups)
}

func officialTrace(t *testing.T, ns string) {
	tc := &primitive.TraceConfig{NamesrvAddrs: []string{ns}}
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-trace-pg"),
		producer.WithInstanceName("trace-op"), producer.WithTrace(tc))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, primitive.NewMessage("TraceOfficial", []byte("traced")))
	require.NoError(t, err)

	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-trace-cg"),
		consumer.WithInstance("trace-oc"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithTrace(tc))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("TraceOfficial", consumer.MessageSelector{},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer func() { _ = c.Shutdown() }()

	for _, v := range traceKinds(t, ns, res.MsgID) {
		assert.True(t, v.Success, "%+v", v)
		switch v.Type {
		case client.TracePub:
			assert.Equal(t, "official-trace-pg", v.Group)
			assert.Equal(t, "TraceOfficial", v.Topic)
			assert.Equal(t, res.OffsetMsgID, v.OffsetMsgID)
			assert.NotEmpty(t, v.StoreHost)
		case client.TraceSubAfter:
			assert.Equal(t, "official-trace-cg", v.Group)
		}
	}
}

// ourTracedProducerOfficialTracedConsumer: records of our producer and the
// official consumer sit side by side in one trace.
func ourTracedProducerOfficialTracedConsumer(t *testing.T, ns string) {
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithGroupName("our-trace-pg"), client.WithLogger(quietLogger()),
		client.WithTrace(&client.TraceConfig{}))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, client.NewMessage("TraceMixed", []byte("traced")))
	require.NoError(t, err)

	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-trace-cg2"),
		consumer.WithInstance("trace-mixed"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithTrace(&primitive.TraceConfig{NamesrvAddrs: []string{ns}}))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("TraceMixed", consumer.MessageSelector{},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer func() { _ = c.Shutdown() }()

	groups := map[string]string{}
	for _, v := range traceKinds(t, ns, res.MsgID) {
		groups[v.Type] = v.Group
	}
	assert.Equal(t, map[string]string{client.TracePub: "our-trace-pg", client.TraceSubBefore: "official-trace-cg2",
		client.TraceSubAfter: "official-trace-cg2"}, groups)
}
