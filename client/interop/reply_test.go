//go:build !race

package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// twoBrokerCluster starts our nameserver and two brokers of one cluster;
// topic is created on broker-a only, so a requester of it heartbeats
// broker-a, while the reply topic lives on both.
func twoBrokerCluster(t *testing.T, topic string) string {
	t.Helper()
	rlog.SetLogLevel("error")
	dir := t.TempDir()
	ncfg := conf.DefaultNamesrvConfig()
	ncfg.BindAddress, ncfg.ListenPort = "127.0.0.1", 0
	ncfg.KvConfigPath = filepath.Join(dir, "kv.json")
	ns, err := nameserver.New(ncfg, quietLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	var brokers []*broker.Broker
	for _, name := range []string{"broker-a", "broker-b"} {
		bcfg := conf.DefaultBrokerConfig()
		bcfg.BrokerName = name
		bcfg.BrokerIP1, bcfg.BindAddress, bcfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
		bcfg.NamesrvAddr = ns.Addr()
		bcfg.StorePathRootDir = filepath.Join(dir, name)
		bcfg.MappedFileSizeCommitLog = 1 << 20
		b, err := broker.New(&bcfg, quietLogger())
		require.NoError(t, err)
		require.NoError(t, b.Start())
		brokers = append(brokers, b)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, b := range brokers {
			_ = b.Shutdown(ctx)
		}
		_ = ns.Shutdown(ctx)
	})
	a, err := client.NewAdmin(client.WithNameServer(ns.Addr()), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.CreateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2, BrokerAddr: brokers[0].Addr()}))
	require.Eventually(t, func() bool {
		r, err := a.TopicRoute(ctx, client.ReplyTopic("DefaultCluster"))
		if err != nil || len(r.QueueDatas) != 2 {
			return false
		}
		_, err = a.TopicRoute(ctx, topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	return ns.Addr()
}

// startOfficialReplier answers each request on topic with "re:"+body using
// the official consumer.CreateReplyMessage (which drops the body it is
// given, so the body is set after it) and an official producer.
func startOfficialReplier(t *testing.T, ns, topic, instance string) {
	t.Helper()
	rp, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-replier-pg"),
		producer.WithInstanceName(instance+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, rp.Start())
	t.Cleanup(func() { _ = rp.Shutdown() })
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-replier-cg"),
		consumer.WithInstance(instance+"-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := consumer.CreateReplyMessage(m, nil)
				if err != nil {
					return consumer.ConsumeRetryLater, err
				}
				reply.Body = append([]byte("re:"), m.Body...)
				// A failed reply shows as the requester's timeout. (The
				// requester may take the push before the broker answers here
				// and the test end meanwhile, so no t.Errorf from here.)
				_, _ = rp.SendSync(ctx, reply)
			}
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
}

// startOurReplier is startOfficialReplier with our SDK.
func startOurReplier(t *testing.T, ns, topic string) {
	t.Helper()
	rp, err := client.NewProducer(client.WithNameServer(ns), client.WithGroupName("our-replier-pg"), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	require.NoError(t, rp.Start())
	t.Cleanup(func() { _ = rp.Shutdown() })
	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("our-replier-cg"), client.WithLogger(quietLogger()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, client.MessageSelector{Expression: "*"},
		func(ctx context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := client.CreateReplyMessage(m, append([]byte("re:"), m.Body...))
				if err != nil {
					return client.ConsumeRetryLater, err
				}
				_, _ = rp.SendSync(ctx, reply) // as in startOfficialReplier
			}
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
}

// officialRequests sends n concurrent official Requests and checks each
// gets the reply to its own body.
func officialRequests(t *testing.T, ns, topic, instance string, n int) {
	t.Helper()
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-requester-pg"),
		producer.WithInstanceName(instance))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One request first: the official producer loads a topic's route on
	// first use without a lock, and concurrent first sends can find none.
	first, err := p.Request(ctx, 20*time.Second, primitive.NewMessage(topic, []byte(instance+"-first")))
	require.NoError(t, err)
	assert.Equal(t, "re:"+instance+"-first", string(first.Body))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("%s-req-%d", instance, i)
			reply, err := p.Request(ctx, 20*time.Second, primitive.NewMessage(topic, []byte(body)))
			if assert.NoError(t, err, body) && assert.NotNil(t, reply, body) {
				assert.Equal(t, "re:"+body, string(reply.Body), "the reply of its own request")
			}
		}()
	}
	wg.Wait()
	got := make(chan string, 1)
	require.NoError(t, p.RequestAsync(ctx, 20*time.Second, func(_ context.Context, reply *primitive.Message, err error) {
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(reply.Body)
	}, primitive.NewMessage(topic, []byte(instance+"-async"))))
	select {
	case s := <-got:
		assert.Equal(t, "re:"+instance+"-async", s)
	case <-time.After(30 * time.Second):
		t.Fatal("no async reply")
	}
}

// ourRequests is officialRequests with our SDK as the requester.
func ourRequests(t *testing.T, ns, topic string, n int) {
	t.Helper()
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithGroupName("our-requester-pg"), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("ours-req-%d", i)
			reply, err := p.Request(ctx, 20*time.Second, client.NewMessage(topic, []byte(body)))
			if assert.NoError(t, err, body) {
				assert.Equal(t, "re:"+body, string(reply.Body), "the reply of its own request")
			}
		}()
	}
	wg.Wait()
}

// TestOfficialRequestOfficialReplier: the official client on both sides, two
// brokers; replies the broker that took them cannot push (the requester
// heartbeats only the request topic's broker) are retried by the replier on
// the other broker, as with RocketMQ.
func TestOfficialRequestOfficialReplier(t *testing.T) {
	ns := twoBrokerCluster(t, "ReplyOO")
	startOfficialReplier(t, ns, "ReplyOO", "rr-oo")
	officialRequests(t, ns, "ReplyOO", "req-oo", 8)
}

// TestOfficialRequestOurReplier: the official requester answered by ours.
func TestOfficialRequestOurReplier(t *testing.T) {
	ns := twoBrokerCluster(t, "ReplyOU")
	startOurReplier(t, ns, "ReplyOU")
	officialRequests(t, ns, "ReplyOU", "req-ou", 8)
}

// TestOurRequestOfficialReplier: our requester answered by the official
// replier.
func TestOurRequestOfficialReplier(t *testing.T) {
	ns := twoBrokerCluster(t, "ReplyUO")
	startOfficialReplier(t, ns, "ReplyUO", "rr-uo")
	ourRequests(t, ns, "ReplyUO", 8)
}

// TestOfficialRequestTimesOut: no replier: the official Request ends with
// its timeout error, not a hang.
func TestOfficialRequestTimesOut(t *testing.T) {
	ns := twoBrokerCluster(t, "ReplyNone")
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-requester-pg"),
		producer.WithInstanceName("req-none"))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	start := time.Now()
	reply, err := p.Request(context.Background(), 500*time.Millisecond, primitive.NewMessage("ReplyNone", []byte("nobody")))
	require.Error(t, err)
	assert.Nil(t, reply)
	assert.Contains(t, err.Error(), "timeout")
	assert.Less(t, time.Since(start), 20*time.Second)
}
