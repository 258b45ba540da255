//go:build !race

package interop

import (
	"context"
	"sort"
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

// TestOfficialTimerCancel: the official Go client has no cancel call, but
// it can send RocketMQ 5's delete marker itself (TIMER_DEL_UNIQKEY =
// "topic+msgId", due at the message's time). A scheduled message it sent
// and cancelled that way is never delivered, nor is one it sent that our
// producer cancelled with CancelScheduled; the message due after both is
// delivered, and only it reaches the topic.
func TestOfficialTimerCancel(t *testing.T) {
	const topic = "InteropTimerCancel"
	ns := cluster(t, topic)
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-timer-pg"),
		producer.WithInstanceName("interop-timer"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	ours, err := client.NewProducer(client.WithNameServer(ns), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	require.NoError(t, ours.Start())
	defer ours.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	due := time.Now().Add(2500 * time.Millisecond) // room for the sends on a slow machine
	send := func(body string, at time.Time) *primitive.SendResult {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithDelayTimestamp(at)
		res, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		return res
	}
	byOfficial := send("cancelled-by-official", due)
	byOurs := send("cancelled-by-ours", due)
	send("kept", due.Add(300*time.Millisecond))

	marker := primitive.NewMessage(topic, []byte("cancel"))
	marker.WithDelayTimestamp(due)
	marker.WithProperty("TIMER_DEL_UNIQKEY", topic+"+"+byOfficial.MsgID)
	_, err = p.SendSync(ctx, marker)
	require.NoError(t, err)
	mq := client.MessageQueue{Topic: topic, BrokerName: byOurs.MessageQueue.BrokerName, QueueID: int32(byOurs.MessageQueue.QueueId)}
	require.NoError(t, ours.CancelScheduled(ctx, mq, byOurs.MsgID, due))

	in := &inbox{msgs: map[string]received{}}
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-timer-cg"),
		consumer.WithInstance("interop-timer"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				in.add(received{body: string(m.Body)})
			}
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer c.Shutdown()
	require.Eventually(t, func() bool { return len(in.keys()) >= 1 }, 20*time.Second, 20*time.Millisecond)

	admin, err := client.NewAdmin(client.WithNameServer(ns), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	defer admin.Close()
	stats, err := admin.TopicStats(ctx, topic)
	require.NoError(t, err)
	var stored int64
	for _, o := range stats {
		stored += o.MaxOffset - o.MinOffset
	}
	assert.Equal(t, int64(1), stored, "only the kept message reached the topic")
	got := in.keys()
	sort.Strings(got)
	assert.Equal(t, []string{"kept"}, got)
}
