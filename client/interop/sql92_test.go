//go:build !race

package interop

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
)

// sqlStreamSize messages make the mixed stream of TestOfficialSQL92.
const sqlStreamSize = 60

// sqlProps are the properties of message i of the mixed stream: amount
// 0..590, four regions, every third one gold, vip absent for every fifth
// message and "yes" or "no" for the rest, promo present on odd ones.
func sqlProps(i int) map[string]string {
	p := map[string]string{
		"amount": strconv.Itoa(i * 10),
		"region": []string{"us", "eu", "ap", "sa"}[i%4],
		"tier":   "free",
	}
	if i%3 == 0 {
		p["tier"] = "gold"
	}
	switch i % 5 {
	case 0: // no vip property
	case 1:
		p["vip"] = "yes"
	default:
		p["vip"] = "no"
	}
	if i%2 == 1 {
		p["promo"] = "spring"
	}
	return p
}

// sqlTailProps match all five sqlCases: a tail message sent to every queue
// after the stream tells a consumer that it has seen the whole queue.
var sqlTailProps = map[string]string{"amount": "200", "region": "eu", "tier": "gold", "vip": "no"}

// sqlCases are five subscriptions and, written out independently of the
// broker's evaluator, which messages of the stream each must receive.
var sqlCases = []struct {
	name, expr string
	want       func(i int) bool
}{
	{"numbers", "amount > 100 AND amount <= 300", func(i int) bool { return i*10 > 100 && i*10 <= 300 }},
	{"strings", "region = 'eu' AND tier <> 'free'", func(i int) bool { return i%4 == 1 && i%3 == 0 }},
	{"in", "region IN ('eu', 'ap') AND promo IS NULL", func(i int) bool { return (i%4 == 1 || i%4 == 2) && i%2 == 0 }},
	{"between", "amount BETWEEN 150 AND 250", func(i int) bool { return i >= 15 && i <= 25 }},
	// A missing vip makes vip = 'yes' NULL, and NOT NULL is NULL: not a
	// match (RocketMQ's three-valued logic), unlike vip != "yes" in Go.
	{"null", "NOT (vip = 'yes')", func(i int) bool { return i%5 >= 2 }},
}

// TestOfficialSQL92 sends a mixed stream with the official producer, then
// five official push consumers (one group each) subscribe with SQL92
// expressions on numbers, strings, IN, BETWEEN and NULL handling. Each must
// receive exactly the messages its expression matches. After the stream a
// tail message that every expression matches goes to each of the four
// queues (the producer's round robin); once a consumer has all four, it has
// pulled each queue to its end, so what it got is all it gets.
func TestOfficialSQL92(t *testing.T) {
	ns, _ := clusterWith(t, func(c *conf.BrokerConfig) { c.EnablePropertyFilter = true }, "InteropSQL")
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-sql-pg"),
		producer.WithInstanceName("interop-sql"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range sqlStreamSize {
		m := primitive.NewMessage("InteropSQL", []byte("m-"+strconv.Itoa(i)))
		m.WithProperties(sqlProps(i))
		_, err := p.SendSync(ctx, m)
		require.NoError(t, err)
	}
	tailQueues := map[int]bool{}
	for i := range 4 {
		m := primitive.NewMessage("InteropSQL", []byte("tail-"+strconv.Itoa(i)))
		m.WithProperties(sqlTailProps)
		res, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		tailQueues[res.MessageQueue.QueueId] = true
	}
	require.Len(t, tailQueues, 4, "a tail message in every queue")

	inboxes := make([]*inbox, len(sqlCases))
	for k, sc := range sqlCases {
		in := &inbox{msgs: map[string]received{}}
		inboxes[k] = in
		c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-sql-"+sc.name),
			consumer.WithInstance("interop-sql-"+sc.name), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		require.NoError(t, err)
		require.NoError(t, c.Subscribe("InteropSQL", consumer.MessageSelector{Type: consumer.SQL92, Expression: sc.expr},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					in.add(received{body: string(m.Body), msgID: m.MsgId})
				}
				return consumer.ConsumeSuccess, nil
			}))
		require.NoError(t, c.Start())
		defer c.Shutdown()
	}
	for k, sc := range sqlCases {
		want := []string{"tail-0", "tail-1", "tail-2", "tail-3"}
		for i := range sqlStreamSize {
			if sc.want(i) {
				want = append(want, "m-"+strconv.Itoa(i))
			}
		}
		sort.Strings(want)
		require.Greater(t, len(want), 4, sc.name)
		require.Eventually(t, func() bool {
			got := inboxes[k].keys()
			return slices.Contains(got, "tail-0") && slices.Contains(got, "tail-1") && slices.Contains(got, "tail-2") && slices.Contains(got, "tail-3")
		}, 30*time.Second, 20*time.Millisecond, "%s (%s): got %v", sc.name, sc.expr, inboxes[k].keys())
		require.Eventually(t, func() bool { return len(inboxes[k].keys()) >= len(want) }, 10*time.Second, 20*time.Millisecond,
			"%s (%s): got %v, want %v", sc.name, sc.expr, inboxes[k].keys(), want)
		assert.Equal(t, want, inboxes[k].keys(), "%s (%s)", sc.name, sc.expr)
	}
}

// officialPull pulls once with the official pull consumer subscribed with a
// SQL92 expression and returns the error it reports.
func officialPull(t *testing.T, ns, topic, group, expr string) error {
	t.Helper()
	c, err := rocketmq.NewPullConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName(group),
		consumer.WithInstance(group))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}))
	require.NoError(t, c.Start())
	defer c.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = c.Pull(ctx, 8)
	return err
}

// TestOfficialSQL92Refused: the official client sees why its subscription is
// refused: a bad expression gets SUBSCRIPTION_PARSE_FAILED (23) with the
// parse error, and a broker with enablePropertyFilter off says so.
func TestOfficialSQL92Refused(t *testing.T) {
	ns, _ := clusterWith(t, func(c *conf.BrokerConfig) { c.EnablePropertyFilter = true }, "InteropSQLBad")
	err := officialPull(t, ns, "InteropSQLBad", "official-sql-bad", "amount > 'x'")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Response Code: 23")
	assert.Contains(t, err.Error(), "cannot be compared", "the parse error reaches the client")

	off, _ := clusterWith(t, nil, "InteropSQLOff")
	err = officialPull(t, off, "InteropSQLOff", "official-sql-off", "amount > 5")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not support consumer to filter message by SQL92")
	assert.Contains(t, err.Error(), "enablePropertyFilter=true")
}

// TestOurSQL92ConsumerOfficialProducer: our push consumer subscribes with
// SQL92 to what the official producer sent and gets exactly the matches.
func TestOurSQL92ConsumerOfficialProducer(t *testing.T) {
	ns, _ := clusterWith(t, func(c *conf.BrokerConfig) { c.EnablePropertyFilter = true }, "InteropSQLOurs")
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-sql-pg2"),
		producer.WithInstanceName("interop-sql2"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var want []string
	for i := range 20 {
		m := primitive.NewMessage("InteropSQLOurs", []byte(fmt.Sprintf("o-%02d", i)))
		m.WithProperties(sqlProps(i))
		_, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		if i%4 == 1 || i*10 >= 150 {
			want = append(want, fmt.Sprintf("o-%02d", i))
		}
	}
	in := &inbox{msgs: map[string]received{}}
	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("our-sql-cg"), client.WithLogger(quietLogger()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("InteropSQLOurs", client.MessageSelector{Type: client.SQL92, Expression: "region = 'eu' OR amount >= 150"},
		func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				in.add(received{body: string(m.Body)})
			}
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer c.Shutdown()
	require.Eventually(t, func() bool { return len(in.keys()) >= len(want) }, 30*time.Second, 20*time.Millisecond)
	assert.True(t, slices.Equal(want, in.keys()), "got %v, want %v", in.keys(), want)
}
