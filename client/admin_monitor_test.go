package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestAdminLooksIntoRunningClients drives the broker-forwarded requests
// end to end: the admin asks through our broker, our consumer answers.
func TestAdminLooksIntoRunningClients(t *testing.T) {
	const topic, group = "Monitor", "monitor-cg"
	ns, b, a := e2eCluster(t, topic)
	ctx := testCtx(t)
	p := MustStartProducer(t, WithNameServer(ns), WithGroupName("monitor-pg"))
	var sent []*SendResult
	for i := range 8 {
		res, err := p.SendSync(ctx, NewMessage(topic, []byte(fmt.Sprintf("m%d", i))).WithKeys(fmt.Sprintf("k%d", i)).WithTag("t"))
		require.NoError(t, err)
		sent = append(sent, res)
	}
	var col collector
	pc := MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe(topic, MessageSelector{}, col.handler))
	}, append(fastOptions(ns), WithGroupName(group), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool { return col.count() >= len(sent) }, 15*time.Second, 20*time.Millisecond)

	// The producer's first heartbeat goes a second after its start.
	var conns []protocol.Connection
	require.Eventually(t, func() bool {
		var err error
		conns, err = a.ProducerConnections(ctx, "monitor-pg", topic)
		return err == nil && len(conns) == 1
	}, 15*time.Second, 50*time.Millisecond)
	assert.Equal(t, "GO", conns[0].Language)
	_, err := a.ProducerConnections(ctx, "no-such-producer-group", topic)
	assert.Error(t, err)

	info, err := a.ConsumerRunningInfo(ctx, group, pc.ClientID(), true)
	require.NoError(t, err)
	assert.Equal(t, string(protocol.ConsumePassively), info.Properties["PROP_CONSUME_TYPE"])
	assert.NotEmpty(t, info.Jstack, "jstackEnable asks for the goroutines")
	var subscribed []string
	for _, s := range info.SubscriptionSet {
		subscribed = append(subscribed, s.Topic)
	}
	assert.Contains(t, subscribed, topic)
	queues := 0
	for mq := range info.MQTable {
		if mq.Topic == topic {
			queues++
		}
	}
	assert.Equal(t, 4, queues)
	require.Contains(t, info.StatusTable, topic)
	assert.Positive(t, info.StatusTable[topic].ConsumeOKTPS)
	_, err = a.ConsumerRunningInfo(ctx, group, "no-such-client", false)
	assert.ErrorContains(t, err, "not online")

	// The client's own offsets, gathered by the broker.
	require.Eventually(t, func() bool {
		st, err := a.ConsumerStatus(ctx, group, topic, "")
		if err != nil || len(st[pc.ClientID()]) != 4 {
			return false
		}
		var sum int64
		for _, off := range st[pc.ClientID()] {
			sum += off
		}
		return sum == int64(len(sent))
	}, 15*time.Second, 50*time.Millisecond)

	// The listener runs again on a stored message, by offset id and by
	// unique id; the group's offsets stay where they are.
	before := col.count()
	res, err := a.ConsumeMessageDirectly(ctx, group, pc.ClientID(), topic, sent[3].OffsetMsgID)
	require.NoError(t, err)
	assert.Equal(t, protocol.CRSuccess, res.ConsumeResult)
	res, err = a.ConsumeMessageDirectly(ctx, group, pc.ClientID(), topic, sent[5].MsgID)
	require.NoError(t, err)
	assert.Equal(t, protocol.CRSuccess, res.ConsumeResult)
	assert.Equal(t, before+2, col.count())
	col.mu.Lock()
	assert.Equal(t, "m3", string(col.msgs[before].Body))
	assert.Equal(t, topic, col.msgs[before].Topic)
	assert.Equal(t, "m5", string(col.msgs[before+1].Body))
	col.mu.Unlock()

	// Per-broker consume stats and the broker's statistics.
	require.Eventually(t, func() bool {
		l, err := a.BrokerConsumeStats(ctx, b.Addr(), false, 0)
		if err != nil || l.TotalDiff != 0 {
			return false
		}
		for _, m := range l.ConsumeStatsList {
			for _, cs := range m[group] {
				for mq := range cs.OffsetTable {
					if mq.Topic == topic {
						return true
					}
				}
			}
		}
		return false
	}, 15*time.Second, 50*time.Millisecond)
	d, err := a.ViewBrokerStatsData(ctx, b.Addr(), broker.StatsTopicPutNums, topic)
	require.NoError(t, err)
	assert.Equal(t, int64(len(sent)), d.StatsMinute.Sum)
	d, err = a.ViewBrokerStatsData(ctx, b.Addr(), broker.StatsGroupGetNums, topic+"@"+group)
	require.NoError(t, err)
	assert.Equal(t, int64(len(sent)), d.StatsMinute.Sum, "each message pulled once")
	_, err = a.ViewBrokerStatsData(ctx, b.Addr(), broker.StatsTopicPutNums, "NoSuchTopic")
	assert.ErrorContains(t, err, "not exist")

	groups, err := a.TopicConsumers(ctx, topic)
	require.NoError(t, err)
	assert.Contains(t, groups, group)
}

// TestAdminCloneOffsetsAndPull: offsets copied to a new group, a queue
// read in order without any group moving, and the broker's clean-up
// triggers accepted.
func TestAdminCloneOffsetsAndPull(t *testing.T) {
	const topic = "CloneT"
	ns, b, a := e2eCluster(t, topic)
	ctx := testCtx(t)
	p := MustStartProducer(t, WithNameServer(ns), WithQueueSelector(NewManualSelector()))
	q0 := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}
	for i := range 5 {
		m := NewMessage(topic, []byte(fmt.Sprintf("c%d", i))).WithTag(fmt.Sprintf("tag%d", i%2))
		m.Queue = &q0
		_, err := p.SendSync(ctx, m)
		require.NoError(t, err)
	}
	// Commit an offset for the source group directly.
	_, err := a.ResetOffsetByTime(ctx, "src-cg", topic, time.Now().Add(time.Hour), true)
	require.NoError(t, err)
	require.NoError(t, a.CloneGroupOffset(ctx, "src-cg", "dst-cg", topic, true))
	prog, err := a.ConsumerProgress(ctx, "dst-cg", topic)
	require.NoError(t, err)
	var total int64
	for _, q := range prog {
		total += q.ConsumerOffset
	}
	assert.Equal(t, int64(5), total, "the clone holds the source's offsets")

	r, err := a.Pull(ctx, q0, "", 1, 32)
	require.NoError(t, err)
	require.True(t, r.Found)
	require.Len(t, r.Messages, 4)
	assert.Equal(t, "c1", string(r.Messages[0].Body))
	assert.Equal(t, int64(5), r.NextOffset)
	r, err = a.Pull(ctx, q0, "tag0", 0, 32)
	require.NoError(t, err)
	require.Len(t, r.Messages, 3, "tag0 is on c0, c2, c4")
	r, err = a.Pull(ctx, q0, "", 5, 32)
	require.NoError(t, err)
	assert.False(t, r.Found, "nothing beyond the end")
	minOff, err := a.MinOffset(ctx, q0)
	require.NoError(t, err)
	assert.Zero(t, minOff)
	off, err := a.SearchOffset(ctx, q0, time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(5), off)

	require.NoError(t, a.CleanExpiredConsumeQueue(ctx, b.Addr()))
	require.NoError(t, a.DeleteExpiredCommitLog(ctx, b.Addr()))
}
