package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
)

// The broker a pull or an offset goes to, as the official clients pick it
// (findBrokerAddressInSubscribe / findBrokerAddressInAdmin).
func TestBrokerAddrRules(t *testing.T) {
	cases := []struct {
		name  string
		addrs map[int64]string
		id    int64
		want  string
	}{
		{"the suggested slave", map[int64]string{0: "m", 1: "s1"}, 1, "s1"},
		{"the master", map[int64]string{0: "m", 1: "s1"}, 0, "m"},
		{"a missing slave id: the next one", map[int64]string{0: "m", 2: "s2"}, 1, "s2"},
		{"a missing slave id and none next: the master", map[int64]string{0: "m", 3: "s3"}, 1, "m"},
		{"no master: a slave", map[int64]string{1: "s1"}, 0, "s1"},
		{"no master: the lowest id", map[int64]string{3: "s3", 2: "s2"}, 0, "s2"},
		{"the suggested id gone with the master: any", map[int64]string{4: "s4"}, 1, "s4"},
		{"no member", map[int64]string{}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &core{brokerAddrs: map[string]map[int64]string{"broker-a": tc.addrs}}
			assert.Equal(t, tc.want, c.brokerAddr("broker-a", tc.id))
			assert.Empty(t, c.brokerAddr("broker-b", tc.id), "an unknown broker name")
		})
	}
}

// putAll stores the same messages in queue 0 of topic on every broker
// given, at the same offsets, as replication does.
func putAll(t *testing.T, topic string, first, n int, fbs ...*fakeBroker) {
	t.Helper()
	for _, fb := range fbs {
		fb.mu.Lock()
		for i := first; i < first+n; i++ {
			fb.storeLocked(&message.MessageExt{Message: message.Message{Topic: topic, Body: []byte(fmt.Sprintf("m%03d", i)),
				Properties: map[string]string{}}, BornHost: fb.host, BornTimestamp: time.Now().UnixMilli()})
		}
		fb.mu.Unlock()
	}
}

// waitPulls waits until fb has seen at least more pulls of group than
// before, and returns its count.
func waitPulls(t *testing.T, fb *fakeBroker, group string, before, more int, msg string) int {
	t.Helper()
	var seen int
	require.Eventually(t, func() bool {
		_, seen = fb.pulls(group)
		return seen >= before+more
	}, 10*time.Second, 5*time.Millisecond, msg)
	return seen
}

// quiet asserts that fb sees no pull of group while other serves several:
// the pulls went to other.
func quiet(t *testing.T, fb, other *fakeBroker, group, msg string) {
	t.Helper()
	_, before := fb.pulls(group)
	_, otherBefore := other.pulls(group)
	waitPulls(t, other, group, otherBefore, 5, msg)
	_, after := fb.pulls(group)
	// One pull may have been on its way when the suggestion changed.
	assert.LessOrEqual(t, after-before, 1, msg)
}

// A push consumer pulls from the broker id the last answer suggested
// (suggestWhichBrokerId), falls back to the slave while the master is out
// of the route, and goes back to the master once it returns and the slave
// suggests 0. Offsets are committed to and read from the master while it
// is in the route, also while pulling from the slave (a pull to a slave
// never carries the commit flag), and to and from the slave while the master
// is gone.
func TestConsumerReadsFromSlaves(t *testing.T) {
	ns := MustStartNameServer(t)
	master := MustStartFakeBroker(t, "broker-a", ns.Addr())
	slave := MustStartFakeBrokerID(t, "broker-a", 1, ns.Addr())
	master.AddTopic("T", 1)
	slave.AddTopic("T", 1)
	const group = "cg-slave"
	putAll(t, "T", 0, 5, master, slave)
	// As brokers with slaveReadEnable do for a group whose brokerId is 1.
	master.setSuggest(1)
	slave.setSuggest(1)

	var col collector
	pc := MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("T", MessageSelector{Expression: "*"}, col.handler))
	}, append(fastOptions(ns.Addr()), WithGroupName(group), WithConsumeFromWhere(ConsumeFromFirstOffset),
		WithRouteRefreshInterval(50*time.Millisecond))...)
	offsetAt := func(fb *fakeBroker) int64 {
		off, ok := fb.storedOffset(group, "T", 0)
		if !ok {
			return -1
		}
		return off
	}

	// 1. The suggestion is honoured: the pulls move to the slave and stay.
	require.Eventually(t, func() bool { return col.count() == 5 }, 10*time.Second, 5*time.Millisecond)
	waitPulls(t, slave, group, 0, 1, "the master suggests brokerId 1")
	quiet(t, master, slave, group, "pulls stay on the slave while it suggests 1")
	putAll(t, "T", 5, 5, master, slave)
	require.Eventually(t, func() bool { return col.count() == 10 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return offsetAt(master) == 10 }, 10*time.Second, 5*time.Millisecond,
		"offsets go to the master, which is in the route")
	assert.Equal(t, int64(-1), offsetAt(slave), "no offset reaches the slave while the master is in the route")
	assert.Zero(t, slave.commitFlagged(group), "no pull to a slave carries the commit-offset flag")

	// 2. A suggestion of 0 sends the pulls back to the master.
	master.setSuggest(0)
	_, before := master.pulls(group)
	slave.setSuggest(0)
	waitPulls(t, master, group, before, 1, "the slave suggests the master")
	quiet(t, slave, master, group, "pulls stay on the master while it suggests 0")

	// 3. The master leaves the route: the slave serves pulls and takes the
	// offsets.
	master.unregister()
	_, before = slave.pulls(group)
	waitPulls(t, slave, group, before, 1, "with the master gone from the route, pulls go to the slave")
	quiet(t, master, slave, group, "no pull goes to a master out of the route")
	putAll(t, "T", 10, 5, master, slave)
	require.Eventually(t, func() bool { return col.count() == 15 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return offsetAt(slave) == 15 }, 10*time.Second, 5*time.Millisecond,
		"offsets go to the slave while no master is in the route")
	assert.Equal(t, int64(10), offsetAt(master), "the master out of the route gets no offset")
	// Where a member taking the queue now would resume (rebalance reads
	// the broker's offset): the slave answers.
	off, err := newRemoteOffsetStore(pc.b.c, group).read(testCtx(t), MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(15), off, "QUERY_CONSUMER_OFFSET goes to the slave while no master is in the route")
	assert.Zero(t, slave.commitFlagged(group), "still no commit flag to the slave")

	// 4. The master is back: the slave's suggestion 0 sends the pulls to
	// it, and the offsets follow.
	master.register()
	_, before = master.pulls(group)
	waitPulls(t, master, group, before, 1, "the master back in the route and suggested")
	quiet(t, slave, master, group, "pulls stay on the master")
	putAll(t, "T", 15, 5, master, slave)
	require.Eventually(t, func() bool { return col.count() == 20 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return offsetAt(master) == 20 }, 10*time.Second, 5*time.Millisecond,
		"offsets go to the master again")
	assert.Equal(t, int64(15), offsetAt(slave))
	assert.Equal(t, 20, len(col.bodies()), "each message once")
}

// Against our real broker: with the master stopped, a new consumer group
// finds its offset on the slave, consumes every message the slave copied,
// and commits its progress there.
func TestConsumerReadsFromRealSlave(t *testing.T) {
	ns := MustStartNameServer(t)
	master := MustStartBroker(t, "broker-a", ns.Addr(), nil)
	slave := MustStartBroker(t, "broker-a", ns.Addr(), func(c *conf.BrokerConfig) {
		c.BrokerRole = conf.RoleSlave
		c.BrokerID = 1
	})
	a := MustAdmin(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)
	// On the slave too: its metadata sync would copy the topic, but only
	// up to 10 s later (it ran when the slave learned its master).
	for _, addr := range []string{master.Addr(), slave.Addr()} {
		require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: "HA", ReadQueueNums: 2, WriteQueueNums: 2, BrokerAddr: addr}))
	}
	require.Eventually(t, func() bool {
		_, err := a.TopicRoute(ctx, "HA")
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	sendN(t, p, "HA", 20, nil)
	require.Eventually(t, func() bool {
		return slave.Store().CommitLog().MaxOffset() == master.Store().CommitLog().MaxOffset()
	}, 20*time.Second, 20*time.Millisecond, "the slave copies the master's commitlog")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, master.Shutdown(sctx))

	var col collector
	pc := MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("HA", MessageSelector{Expression: "*"}, col.handler))
	}, append(fastOptions(ns.Addr()), WithGroupName("cg-real-slave"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool { return col.count() == 20 }, 30*time.Second, 20*time.Millisecond,
		"every message, read from the slave")
	assert.Len(t, col.bodies(), 20)
	// Read through a store of its own: the consumer's would take the
	// answer as its in-memory offset.
	offsets := newRemoteOffsetStore(pc.b.c, "cg-real-slave")
	require.Eventually(t, func() bool {
		total := int64(0)
		for q := int32(0); q < 2; q++ {
			off, err := offsets.read(ctx, MessageQueue{Topic: "HA", BrokerName: "broker-a", QueueID: q})
			if err != nil || off < 0 {
				return false
			}
			total += off
		}
		return total == 20
	}, 10*time.Second, 20*time.Millisecond, "the progress is committed to the slave")
}
