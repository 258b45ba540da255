package e2e

// SQL92 consumption with filter bitmaps (enableCalcFilterBitMap) through
// the official Go client, which runs in a child process of this test binary
// as in issue5_test.go (its own data races must not fail a -race run).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

const (
	envSQL92Child = "E2E_SQL92_BITMAP_CHILD" // set: run as the client child
	envSQL92NS    = "E2E_SQL92_NAMESRV"
	envSQL92Topic = "E2E_SQL92_TOPIC"
	envSQL92Group = "E2E_SQL92_GROUP"

	sql92Expr   = "region = 'eu' AND n >= 0"
	sql92Before = 40 // messages sent before the consumer subscribes
	sql92After  = 80 // and after its subscription is registered
)

func init() {
	if os.Getenv(envSQL92Child) != "" {
		os.Exit(runSQL92Child())
	}
}

// sql92Message is message i of the mixed stream: one in four is region=eu.
func sql92Message(topic string, i int) *primitive.Message {
	m := primitive.NewMessage(topic, []byte("m"+strconv.Itoa(i)))
	region := "us"
	if i%4 == 0 {
		region = "eu"
	}
	m.WithProperty("region", region)
	m.WithProperty("n", strconv.Itoa(i))
	m.WithTag("T" + strconv.Itoa(i%3))
	return m
}

// runSQL92Child sends the first part of the stream, subscribes with
// sql92Expr, and when the parent writes "more" sends the rest; it reports
// sent and received bodies as JSON lines (i5Event) until stdin closes.
func runSQL92Child() int {
	emit, fail := childReport()
	ns := primitive.NamesrvAddr{os.Getenv(envSQL92NS)}
	topic, group := os.Getenv(envSQL92Topic), os.Getenv(envSQL92Group)
	p, err := startChildProducer(ns, group+"_p")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = p.Shutdown() }()
	send := func(from, to int) error {
		for i := from; i < to; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			res, err := p.SendSync(ctx, sql92Message(topic, i))
			cancel()
			if err != nil {
				return err
			}
			if res.Status != primitive.SendOK {
				return fmt.Errorf("send %d: status %d", i, res.Status)
			}
			emit(i5Event{Ev: "sent", Body: "m" + strconv.Itoa(i)})
		}
		return nil
	}
	if err := send(0, sql92Before); err != nil {
		return fail(err)
	}
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithInstance(group+"_c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return fail(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: sql92Expr},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				emit(i5Event{Ev: "recv", Body: string(m.Body)})
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return fail(err)
	}
	if err := c.Start(); err != nil {
		return fail(err)
	}
	defer func() { _ = c.Shutdown() }()
	emit(i5Event{Ev: "ready"})
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "more" {
		return 0
	}
	if err := send(sql92Before, sql92Before+sql92After); err != nil {
		return fail(err)
	}
	emit(i5Event{Ev: "done"})
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	return 0
}

// TestSQL92FilterBitmapOfficialClient: with enableCalcFilterBitMap, a push
// consumer of the official client subscribed with SQL92 receives exactly
// the matching messages of a mixed stream: those stored before it
// subscribed (their bitmaps, computed for another group, lack its bits: they
// are evaluated on read) and those after (decided by bitmaps).
func TestSQL92FilterBitmapOfficialClient(t *testing.T) {
	c := MustStartCluster(t, WithBrokerConfig(func(cfg *conf.BrokerConfig) {
		cfg.EnablePropertyFilter = true
		cfg.EnableCalcFilterBitMap = true
	}))
	topic, group := uniq("SqlBitmap"), uniq("cg_sql_bitmap")
	// Another group's SQL92 subscription, registered first: the messages
	// sent before our consumer subscribes get bitmaps without its bits,
	// which its pulls must not trust.
	hb, err := json.Marshal(&protocol.HeartbeatData{ClientID: "other-client", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: "cg_other", ConsumeType: protocol.ConsumePassively, MessageModel: protocol.Clustering,
		ConsumeFromWhere: protocol.ConsumeFromFirstOffset, SubscriptionDataSet: []protocol.SubscriptionData{{
			Topic: topic, SubString: "region = 'nowhere'", ExpressionType: protocol.ExpressionSQL92, SubVersion: 1,
		}},
	}}})
	require.NoError(t, err)
	resp := c.Invoke(t, c.BrokerAddr, remoting.HeartBeat, nil, hb)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	ch := startClientChild(t, "sql92 client: ",
		envSQL92Child+"=1", envSQL92NS+"="+c.NamesrvAddr, envSQL92Topic+"="+topic, envSQL92Group+"="+group)

	ch.wait("ready", "", 60*time.Second)
	// The consumer's heartbeat registers its filter; the rest of the
	// stream is stored after that.
	registry := filepath.Join(c.storeDir, "broker", "config", "consumerFilter.json")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(registry)
		return err == nil && strings.Contains(string(b), group) && !strings.Contains(string(b), `"bitmapFrom": -1`)
	}, 30*time.Second, 10*time.Millisecond, "the group's SQL92 subscription is registered")
	_, err = io.WriteString(ch.stdin, "more\n")
	require.NoError(t, err)
	ch.wait("done", "", 60*time.Second)

	want := map[string]bool{}
	for i := range sql92Before + sql92After {
		if i%4 == 0 {
			want["m"+strconv.Itoa(i)] = true
		}
	}
	got := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range ch.events("recv") {
			out[e.Body] = true
		}
		return out
	}
	require.Eventually(t, func() bool {
		if errs := ch.events("error"); len(errs) > 0 {
			require.FailNow(t, "client child failed", errs[0].Err)
		}
		return len(got()) >= len(want)
	}, 60*time.Second, 10*time.Millisecond, "every matching message arrives")
	// Every queue consumed to its end: nothing else is on its way.
	route := c.WaitRoute(t, topic)
	require.Eventually(t, func() bool {
		for _, q := range route.QueueDatas {
			for id := range int(q.ReadQueueNums) {
				if c.ConsumerOffset(t, group, topic, id) < c.MaxOffset(t, topic, id) {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "the consumer reaches the end of every queue")
	assert.Equal(t, want, got(), "exactly the matching messages, before and after the subscription")

	units, err := os.ReadDir(filepath.Join(c.storeDir, "broker", "consumequeue_filter", topic))
	require.NoError(t, err, "the broker computed bitmaps for the topic")
	assert.NotEmpty(t, units)
}
