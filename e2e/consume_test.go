package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestPushConsumerTagSelector: a clustering push consumer subscribed to two
// tags of three gets every message with those tags, sent before and after it
// started, and none with the third.
func TestPushConsumerTagSelector(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("TagTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")

	var want, other []string
	send := func(prefix string) {
		for i := range 30 {
			tag := []string{"TagA", "TagB", "TagC"}[i%3]
			b := fmt.Sprintf("%s-%s-%d", prefix, tag, i)
			p.SendBodies(t, topic, tag, []string{b})
			if tag == "TagB" {
				other = append(other, b)
			} else {
				want = append(want, b)
			}
		}
	}
	send("before")

	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("GTag"), Topic: topic, Expr: "TagA || TagC"}, in)
	send("after")

	WaitAll(t, want, in)
	for _, b := range other {
		assert.Zero(t, in.Count(b), "TagB message %s delivered", b)
	}
	for _, g := range in.Msgs() {
		assert.Contains(t, []string{"TagA", "TagC"}, g.Tag, "message %s", g.Body)
	}
}

// TestClusteringConsumersSplitQueues: two consumers of one group divide the
// topic's queues between them and together receive every message.
func TestClusteringConsumersSplitQueues(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	conns := c.restartBrokerRecordingConns(t)
	d := c.StartDriver(t)
	topic := uniq("SplitTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	group := uniq("GSplit")

	in1, in2 := NewInbox(), NewInbox()
	d.StartPush(t, PushSpec{Group: group, Topic: topic}, in1)
	d.StartPush(t, PushSpec{Group: group, Topic: topic}, in2)
	var ids []string
	require.Eventually(t, func() bool { ids = c.ConsumerIDs(t, group); return len(ids) == 2 },
		opTimeout, pollEvery, "broker never listed both consumers of %s", group)

	// Each consumer rebalances when it learns of the other, in its own
	// time: until both have, one may still hold every queue. Wait until
	// each holds 2 of the 4 and they hold different ones, as the clients
	// themselves report.
	var mu sync.Mutex
	var last string // the last assignment seen, for the failure message
	require.Eventually(t, func() bool {
		held := map[string][]int{}
		seen := map[int]bool{}
		for _, id := range ids {
			qs, ok := conns.heldQueues(t, group, id, topic)
			if !ok {
				return false
			}
			held[id] = qs
			for _, q := range qs {
				seen[q] = true
			}
		}
		mu.Lock()
		last = fmt.Sprint(held)
		mu.Unlock()
		return len(held[ids[0]]) == 2 && len(held[ids[1]]) == 2 && len(seen) == 4
	}, consumeWait, 200*time.Millisecond, "the consumers never split the queues 2 and 2: %v",
		stringerFunc(func() string { mu.Lock(); defer mu.Unlock(); return last }))
	t.Logf("queues held: %s", last)

	// Steady state: what is sent now goes to each queue's single owner.
	steady := bodies("steady", 80)
	p.SendBodies(t, topic, "", steady)

	require.Eventually(t, func() bool {
		for _, b := range steady {
			if in1.Count(b)+in2.Count(b) == 0 {
				return false
			}
		}
		return true
	}, consumeWait, pollEvery, "messages lost between the two consumers")

	q1 := queuesOf(in1.Msgs(), steady)
	q2 := queuesOf(in2.Msgs(), steady)
	for q := range q1 {
		assert.False(t, q2[q], "queue %d consumed by both consumers in steady state (%v / %v)", q, q1, q2)
	}
	assert.Len(t, q1, 2, "AllocateByAveragely gives 2 of 4 queues each: %v / %v", q1, q2)
	assert.Len(t, q2, 2, "AllocateByAveragely gives 2 of 4 queues each: %v / %v", q1, q2)
}

// clientConns are the broker's connections from clients: through one, the
// test asks a client what a Java broker relays GET_CONSUMER_RUNNING_INFO for.
type clientConns struct {
	mu    sync.Mutex
	conns map[uint64]*remoting.Conn
}

// restartBrokerRecordingConns replaces the cluster's broker by one on the
// same port and store that records its connections (hooks go in before the
// server starts). Call it before any client connects.
func (c *Cluster) restartBrokerRecordingConns(t *testing.T) *clientConns {
	t.Helper()
	cc := &clientConns{conns: map[uint64]*remoting.Conn{}}
	port := c.port
	c.stopBroker(t)
	c.raw.CloseConn(c.BrokerAddr)
	b, err := broker.New(c.brokerConfig(port), c.log)
	require.NoError(t, err)
	b.Server().OnConnOpen(func(conn *remoting.Conn) {
		cc.mu.Lock()
		cc.conns[conn.ID()] = conn
		cc.mu.Unlock()
	})
	b.Server().OnConnClose(func(conn *remoting.Conn) {
		cc.mu.Lock()
		delete(cc.conns, conn.ID())
		cc.mu.Unlock()
	})
	require.NoError(t, b.Start(), "broker start")
	c.Broker = b
	require.Equal(t, port, c.port)
	c.WaitRoute(t, "TBW102")
	return cc
}

// heldQueues asks client id of group (an official Go client) for its
// running info and returns the queue ids of topic it holds, not dropped;
// false when no connection gave an answer.
func (cc *clientConns) heldQueues(t *testing.T, group, id, topic string) ([]int, bool) {
	t.Helper()
	cc.mu.Lock()
	conns := make([]*remoting.Conn, 0, len(cc.conns))
	for _, conn := range cc.conns {
		conns = append(conns, conn)
	}
	cc.mu.Unlock()
	// The client answers for any client of its process on any of its
	// connections; the broker's other connections (ours) refuse.
	h := &protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: group, ClientID: id}
	// mqTable is keyed by the queue's JSON, fastjson style, and its values
	// are flat objects.
	re := regexp.MustCompile(`\{"topic":"` + regexp.QuoteMeta(topic) +
		`","brokerName":"[^"]*","queueId":(\d+)\}:\{[^{}]*"dropped":(true|false)`)
	for _, conn := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		resp, err := conn.Invoke(ctx, remoting.NewRequest(remoting.GetConsumerRunningInfo, protocol.EncodeHeader(h, nil), nil))
		cancel()
		if err != nil || resp.ResponseCode() != remoting.Success {
			continue
		}
		var qs []int
		for _, m := range re.FindAllStringSubmatch(string(resp.Body), -1) {
			if m[2] == "false" {
				q, _ := strconv.Atoi(m[1])
				qs = append(qs, q)
			}
		}
		return qs, true
	}
	return nil, false
}

// queuesOf is the set of queues the messages of want among got came from.
func queuesOf(got []Got, want []string) map[int]bool {
	set := map[string]bool{}
	for _, b := range want {
		set[b] = true
	}
	out := map[int]bool{}
	for _, g := range got {
		if set[g.Body] {
			out[g.QueueID] = true
		}
	}
	return out
}

// TestBroadcastingConsumersEachGetAll: in broadcasting mode every consumer of
// the group receives every message.
func TestBroadcastingConsumersEachGetAll(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("BcastTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")
	group := uniq("GBcast")

	before := bodies("before", 20)
	p.SendBodies(t, topic, "", before)
	in1, in2, in3 := NewInbox(), NewInbox(), NewInbox()
	for _, in := range []*Inbox{in1, in2, in3} {
		d.StartPush(t, PushSpec{Group: group, Topic: topic, Broadcast: true}, in)
	}
	after := bodies("after", 20)
	p.SendBodies(t, topic, "", after)

	all := append(append([]string{}, before...), after...)
	WaitAll(t, all, in1, in2, in3)
	for i, in := range []*Inbox{in1, in2, in3} {
		assert.Equal(t, []int{0, 1, 2, 3}, in.Queues(), "broadcasting consumer %d must read every queue", i)
	}
}

// TestOrderlyPerKeyOrder: messages sent with the hash selector and a sharding
// key, consumed with ConsumeOrderly, arrive in send order per key, each key
// from one queue.
func TestOrderlyPerKeyOrder(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("OrderTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "hash")

	const keys, perKey = 6, 25
	key := func(k int) string { return fmt.Sprintf("order-%d", k) }
	sendRange := func(from, to int) {
		for i := from; i < to; i++ {
			for k := range keys {
				m := Msg(topic, fmt.Sprintf("%s:%d", key(k), i))
				m.ShardingKey = key(k)
				p.SendSync(t, m)
			}
		}
	}
	sendRange(0, perKey/2)
	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("GOrder"), Topic: topic, Orderly: true, BatchMax: 4}, in)
	sendRange(perKey/2, perKey)

	seqs := func() map[string][]int {
		out := map[string][]int{}
		for _, g := range in.Msgs() {
			k, n, ok := strings.Cut(g.Body, ":")
			if !ok {
				continue
			}
			i, _ := strconv.Atoi(n)
			out[k] = append(out[k], i)
		}
		return out
	}
	require.Eventually(t, func() bool {
		s := seqs()
		for k := range keys {
			if len(s[key(k)]) < perKey {
				return false
			}
		}
		return true
	}, consumeWait, pollEvery, "orderly consumer did not get every message")

	s := seqs()
	want := make([]int, perKey)
	for i := range want {
		want[i] = i
	}
	queueOfKey := map[string]map[int]bool{}
	for _, g := range in.Msgs() {
		k, _, _ := strings.Cut(g.Body, ":")
		if queueOfKey[k] == nil {
			queueOfKey[k] = map[int]bool{}
		}
		queueOfKey[k][g.QueueID] = true
	}
	for k := range keys {
		assert.Equal(t, want, s[key(k)], "key %s out of order or repeated", key(k))
		assert.Len(t, queueOfKey[key(k)], 1, "key %s spread over queues %v", key(k), queueOfKey[key(k)])
	}
}

// TestConsumeFromLastOffsetNewGroup: a brand-new group with the client's
// default CONSUME_FROM_LAST_OFFSET gets what is sent after it started and not
// the backlog (RocketMQ itself starts such a group at 0 when the queue's
// first message is still in memory, which surprises users; ecosystem.md,
// pain point 13).
func TestConsumeFromLastOffsetNewGroup(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t)
	d := c.StartDriver(t)
	topic := uniq("LastTopic")
	d.CreateTopic(t, c, topic, 4)
	p := d.NewProducer(t, "")

	backlog := bodies("backlog", 20)
	p.SendBodies(t, topic, "", backlog)
	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("GLast"), Topic: topic, FromLast: true}, in)
	fresh := bodies("fresh", 20)
	p.SendBodies(t, topic, "", fresh)
	WaitAll(t, fresh, in)
	for _, b := range backlog {
		assert.Zero(t, in.Count(b), "backlog message %s delivered to a new LAST_OFFSET group", b)
	}
}
