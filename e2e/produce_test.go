package e2e

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
)

// offsetMsgIDPattern is the form of an IPv4 offsetMsgId: 4 bytes of IP, 4 of
// port, 8 of commitlog offset, in upper-case hex.
var offsetMsgIDPattern = regexp.MustCompile(`^[0-9A-F]{32}$`)

// TestAdminCreateTopic creates a topic with the official admin client and
// reads it back the ways the client offers.
func TestAdminCreateTopic(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("AdminTopic")
	d.CreateTopic(t, c, topic, 6)

	var mqs []QueueRef
	d.must(t, "admin.fetchPublishQueues", topicArgs{Topic: topic}, &mqs)
	require.Len(t, mqs, 6)
	ids := map[int]bool{}
	for _, mq := range mqs {
		assert.Equal(t, topic, mq.Topic)
		assert.Equal(t, c.BrokerName, mq.BrokerName)
		ids[mq.QueueID] = true
	}
	assert.Len(t, ids, 6, "queue ids must be distinct: %v", mqs)

	var topics []string
	d.must(t, "admin.fetchAllTopics", topicArgs{}, &topics)
	assert.Contains(t, topics, topic)

	// The topic exists in the broker's own table, not just in the route.
	tc := c.Broker.Topics().Get(topic)
	require.NotNil(t, tc, "broker has no config for %s", topic)
	assert.Equal(t, int32(6), tc.ReadQueueNums)
	assert.Equal(t, int32(6), tc.WriteQueueNums)
}

// TestProducerSends covers the official producer's four ways to send, each
// message checked afterwards in the store.
func TestProducerSends(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("SendTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")

	var want []string

	t.Run("SendSync", func(t *testing.T) {
		bs := bodies("sync", 12)
		res := p.SendBodies(t, topic, "TagSync", bs)
		want = append(want, bs...)
		queues := map[int]bool{}
		for _, r := range res {
			assert.NotEmpty(t, r.MsgID, "uniq msg id")
			assert.Regexp(t, offsetMsgIDPattern, r.OffsetMsgID)
			assert.Equal(t, topic, r.Topic)
			assert.Equal(t, c.BrokerName, r.BrokerName)
			assert.GreaterOrEqual(t, r.QueueOffset, int64(0))
			queues[r.QueueID] = true
		}
		// The default selector is round-robin: 12 sends touch every queue.
		assert.Len(t, queues, 4)
	})

	t.Run("SendAsync", func(t *testing.T) {
		bs := bodies("async", 10)
		want = append(want, bs...)
		msgs := make([]MsgSpec, len(bs))
		for i, b := range bs {
			msgs[i] = Msg(topic, b)
			msgs[i].Tag = "TagAsync"
		}
		results := p.SendAsync(t, msgs...)
		require.Len(t, results, len(bs))
		for _, r := range results {
			assert.Equal(t, primitive.SendOK, r.Status)
			assert.Regexp(t, offsetMsgIDPattern, r.OffsetMsgID)
		}
	})

	t.Run("SendOneWay", func(t *testing.T) {
		bs := bodies("oneway", 10)
		want = append(want, bs...)
		for _, b := range bs {
			m := Msg(topic, b)
			m.Tag = "TagOneway"
			p.SendOneWay(t, m)
		}
		// No answer to wait for: the messages show up in the store.
		require.Eventually(t, func() bool {
			return totalMax(t, c, topic, 4) >= int64(len(want))
		}, opTimeout, pollEvery, "oneway messages never stored")
	})

	t.Run("BatchSendSync", func(t *testing.T) {
		bs := bodies("batch", 8)
		want = append(want, bs...)
		msgs := make([]MsgSpec, len(bs))
		for i, b := range bs {
			msgs[i] = Msg(topic, b)
			msgs[i].Tag, msgs[i].Keys = "TagBatch", []string{b}
		}
		before := totalMax(t, c, topic, 4)
		r := p.SendSync(t, msgs...)
		// One batch goes to one queue as consecutive entries (the consume
		// queue follows the commitlog asynchronously, hence the wait).
		require.Eventually(t, func() bool { return totalMax(t, c, topic, 4) >= before+int64(len(bs)) },
			opTimeout, pollEvery, "batch never dispatched")
		assert.Equal(t, before+int64(len(bs)), totalMax(t, c, topic, 4))
		assert.Equal(t, int64(len(bs)), c.MaxOffset(t, topic, r.QueueID)-r.QueueOffset,
			"batch must end the queue it went to: %+v", r)
	})

	t.Run("AllStored", func(t *testing.T) {
		stored := c.ReadAll(t, topic)
		got := bodySet(stored)
		for _, b := range want {
			assert.Equal(t, 1, got[b], "message %s stored %d times", b, got[b])
		}
		assert.Len(t, stored, len(want))
		ids := map[string]bool{}
		for _, m := range stored {
			// Batch members arrive without UNIQ_KEY; the broker must give
			// each one an id so consumers can tell them apart.
			id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
			assert.NotEmpty(t, id, "message %s has no UNIQ_KEY", m.Body)
			assert.False(t, ids[id], "duplicate UNIQ_KEY %s", id)
			ids[id] = true
			assert.NotEmpty(t, m.GetTags(), "message %s lost its tag", m.Body)
		}
	})
}

// totalMax sums the max offsets of a topic's queues: the number of messages
// it holds when nothing was deleted.
func totalMax(t testing.TB, c *Cluster, topic string, queues int) int64 {
	t.Helper()
	var n int64
	for q := range queues {
		n += c.MaxOffset(t, topic, q)
	}
	return n
}

// TestSendAutoCreateAndRejections: a send to an unknown topic creates it
// from TBW102 (autoCreateTopicEnable), and sends the broker must refuse come
// back to the official client as errors with nothing stored.
func TestSendAutoCreateAndRejections(t *testing.T) {
	t.Parallel()
	const maxSize = 64 << 10
	c := MustStartCluster(t, WithBrokerConfig(func(cfg *conf.BrokerConfig) { cfg.MaxMessageSize = maxSize }))
	d := c.StartDriver(t)
	p := d.NewProducer(t, "")

	t.Run("AutoCreate", func(t *testing.T) {
		topic := uniq("AutoTopic")
		r := p.SendSync(t, Msg(topic, "auto-0"))
		assert.Equal(t, topic, r.Topic)
		rd := c.WaitRoute(t, topic)
		require.Len(t, rd.QueueDatas, 1)
		// The client asks for 4 queues (defaultTopicQueueNums) from TBW102.
		assert.Equal(t, int32(4), rd.QueueDatas[0].WriteQueueNums)
		tc := c.Broker.Topics().Get(topic)
		require.NotNil(t, tc)
		assert.Equal(t, int32(4), tc.WriteQueueNums)
		got := bodySet(c.ReadAll(t, topic))
		assert.Equal(t, map[string]int{"auto-0": 1}, got)
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		topic := uniq("BigTopic")
		d.CreateTopic(t, c, topic, 1)
		// Random letters: the client zlib-compresses bodies over 4 KiB, and
		// these still exceed maxMessageSize afterwards.
		rnd := rand.New(rand.NewPCG(1, 2))
		big := make([]byte, 4*maxSize)
		for i := range big {
			big[i] = byte('a' + rnd.IntN(26))
		}
		_, err := p.TrySendSync(t, Msg(topic, string(big)))
		require.Error(t, err, "a body over maxMessageSize must be refused")
		assert.Contains(t, err.Error(), "CODE: 13", "MESSAGE_ILLEGAL expected: %v", err)
		t.Logf("body too large: %v", err)
		assert.Equal(t, int64(0), c.MaxOffset(t, topic, 0), "nothing stored")
		// The producer still works afterwards.
		p.SendSync(t, Msg(topic, "small"))
	})

	t.Run("IllegalTopicName", func(t *testing.T) {
		topic := "bad topic!" + uniq("")
		_, err := p.TrySendSync(t, Msg(topic, "x"))
		require.Error(t, err, "a topic name outside [%%|a-zA-Z0-9_-] must be refused")
		t.Logf("illegal topic name: %v", err)
		assert.Nil(t, c.Broker.Topics().Get(topic), "no topic may be created for an illegal name")
	})
}
