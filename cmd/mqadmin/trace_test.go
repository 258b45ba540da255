package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
)

// TestQueryMsgTraceById: a message sent and consumed with trace on shows
// its Pub block (producer group, client, send time, cost, status, broker,
// store time) and its consumer group's Sub block.
func TestQueryMsgTraceById(t *testing.T) {
	c := MustStartCluster(t)
	c.createTopic(t, "TraceTopicT")
	tr := client.WithTrace(&client.TraceConfig{})
	p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithGroupName("trace-pg"), client.WithLogger(testLogger()), tr)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { require.NoError(t, p.Shutdown()) }()
	ctx := testCtx(t)
	res, err := p.SendSync(ctx, client.NewMessage("TraceTopicT", []byte("traced")).WithTag("tagT"))
	require.NoError(t, err)

	consumed := make(chan struct{}, 1)
	pc, err := client.NewPushConsumer(client.WithNameServer(c.ns), client.WithGroupName("trace-cg"), client.WithLogger(testLogger()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), tr)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("TraceTopicT", client.MessageSelector{Expression: "*"},
		func(context.Context, ...*client.MessageExt) (client.ConsumeResult, error) {
			select {
			case consumed <- struct{}{}:
			default:
			}
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, pc.Start())
	defer func() { require.NoError(t, pc.Shutdown()) }()
	select {
	case <-consumed:
	case <-time.After(20 * time.Second):
		t.Fatal("not consumed")
	}

	var out string
	require.Eventually(t, func() bool {
		out = c.ok(t, "queryMsgTraceById", "-i", res.MsgID)
		return strings.Contains(out, "#ProducerGroup") && strings.Contains(out, "#ConsumerGroup")
	}, 20*time.Second, 100*time.Millisecond, "trace of %s:\n%s", res.MsgID, out)
	lines := strings.Split(out, "\n")
	var pub, sub []string
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "Pub":
			pub = f
		case len(f) > 0 && f[0] == "Sub":
			sub = f
		}
	}
	// Pub group host date time cost status broker date time
	require.Len(t, pub, 10, out)
	assert.Equal(t, "trace-pg", pub[1])
	assert.Regexp(t, `^\d+ms$`, pub[5])
	assert.Equal(t, "success", pub[6])
	assert.Equal(t, c.addr, pub[7])
	assert.Regexp(t, `^\d{4}-\d\d-\d\d$`, pub[8])
	// Sub group host date time cost status
	require.Len(t, sub, 7, out)
	assert.Equal(t, "trace-cg", sub[1])
	assert.Equal(t, "success", sub[6])

	out = c.ok(t, "queryMsgTraceById", "-i", "NO_SUCH_ID", "-t", client.DefaultTraceTopic)
	assert.Empty(t, strings.TrimSpace(out), "no records, nothing printed, as Java's tool")
}
