package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPullConsumerSeekAndPoll drives the official lite-pull consumer: an
// assigned queue, a seek before the first poll, polls that also see messages
// sent while polling, PullFrom at an explicit offset, and the offset commit.
func TestPullConsumerSeekAndPoll(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("PullTopic")
	d.CreateTopic(t, c, topic, 2)
	p := d.NewProducer(t, "manual")
	sendTo := func(from, to int) {
		for i := from; i < to; i++ {
			m := Msg(topic, fmt.Sprintf("pull-%d", i))
			m.QueueID, m.BrokerName = 1, c.BrokerName
			r := p.SendSync(t, m)
			require.Equal(t, 1, r.QueueID)
			require.Equal(t, int64(i), r.QueueOffset, "queue offsets count from 0 in a new queue")
		}
	}
	sendTo(0, 20)
	// Seeking past the dispatched end would be an illegal offset: wait for
	// the consume queue, which follows SEND_OK asynchronously.
	require.Eventually(t, func() bool { return c.MaxOffset(t, topic, 1) == 20 }, opTimeout, pollEvery)

	group := uniq("GPull")
	pc := d.StartPull(t, PullSpec{Group: group, Topic: topic, BrokerName: c.BrokerName, QueueID: 1, Seek: 12, BatchSize: 8})

	var got []Got
	pollUntil := func(n int) {
		t.Helper()
		deadline := time.Now().Add(consumeWait)
		for len(got) < n && time.Now().Before(deadline) {
			got = append(got, pc.Poll(t, time.Second)...)
		}
		require.Len(t, got, n, "poll returned %d of %d messages", len(got), n)
	}
	pollUntil(8)
	for i, m := range got {
		assert.Equal(t, int64(12+i), m.Offset, "seek to 12 then poll")
		assert.Equal(t, fmt.Sprintf("pull-%d", 12+i), m.Body)
	}

	// Messages sent while the consumer polls reach it too.
	sendTo(20, 25)
	pollUntil(13)
	assert.Equal(t, "pull-24", got[12].Body)

	// PullFrom reads at any offset without moving the poll position.
	res := pc.PullFrom(t, 3, 4)
	require.Equal(t, primitive.PullFound, res.Status, "%+v", res)
	require.NotEmpty(t, res.Msgs)
	require.LessOrEqual(t, len(res.Msgs), 4)
	for i, m := range res.Msgs {
		assert.Equal(t, int64(3+i), m.Offset)
	}
	assert.Equal(t, int64(3+len(res.Msgs)), res.NextBeginOffset)
	assert.Equal(t, int64(25), res.MaxOffset)
	assert.Equal(t, int64(0), res.MinOffset)

	// The acknowledged position is committed to the broker.
	pc.Persist(t)
	require.Eventually(t, func() bool { return c.ConsumerOffset(t, group, topic, 1) == 25 },
		opTimeout, pollEvery, "committed offset of %s stays %d", group, c.ConsumerOffset(t, group, topic, 1))
}
