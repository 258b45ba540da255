//go:build !race

package interop

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

func quietLogger() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// cluster starts our nameserver and broker in process and creates topics.
func cluster(t *testing.T, topics ...string) string {
	t.Helper()
	ns, _ := clusterWith(t, nil, topics...)
	return ns
}

// clusterWith is cluster with the broker's config adjusted by tune (nil: the
// defaults); it also returns the broker.
func clusterWith(t *testing.T, tune func(*conf.BrokerConfig), topics ...string) (string, *broker.Broker) {
	t.Helper()
	rlog.SetLogLevel("error")
	dir := t.TempDir()
	ncfg := conf.DefaultNamesrvConfig()
	ncfg.BindAddress, ncfg.ListenPort = "127.0.0.1", 0
	ncfg.KvConfigPath = filepath.Join(dir, "kv.json")
	ns, err := nameserver.New(ncfg, quietLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	bcfg := conf.DefaultBrokerConfig()
	bcfg.BrokerIP1, bcfg.BindAddress, bcfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	bcfg.NamesrvAddr = ns.Addr()
	bcfg.StorePathRootDir = filepath.Join(dir, "store")
	bcfg.MappedFileSizeCommitLog = 1 << 20
	if tune != nil {
		tune(&bcfg)
	}
	b, err := broker.New(&bcfg, quietLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		_ = ns.Shutdown(ctx)
	})
	a, err := client.NewAdmin(client.WithNameServer(ns.Addr()), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range topics {
		require.NoError(t, a.CreateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4}))
		require.Eventually(t, func() bool { _, err := a.TopicRoute(ctx, topic); return err == nil }, 10*time.Second, 20*time.Millisecond)
	}
	return ns.Addr(), b
}

// received is what a consumer saw of one message.
type received struct {
	body, tag, keys, msgID string
}

type inbox struct {
	mu   sync.Mutex
	msgs map[string]received // by body prefix
}

func (in *inbox) add(r received) {
	in.mu.Lock()
	defer in.mu.Unlock()
	key := r.body
	if len(key) > 16 {
		key = key[:16]
	}
	in.msgs[key] = r
}

func (in *inbox) keys() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for k := range in.msgs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (in *inbox) get(k string) received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.msgs[k]
}

var big = bytes.Repeat([]byte("interop-compressed-"), 600) // ~11 KB: compressed by both clients

// TestOfficialProducerToOurConsumer: what the official producer sends (single
// with tag and keys, a compressed body, a batch) our push consumer reads.
func TestOfficialProducerToOurConsumer(t *testing.T) {
	ns := cluster(t, "InteropA")
	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("official-pg"),
		producer.WithInstanceName("interop-a"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	single := primitive.NewMessage("InteropA", []byte("single"))
	single.WithTag("tagA")
	single.WithKeys([]string{"k1", "k2"})
	res, err := p.SendSync(ctx, single)
	require.NoError(t, err)
	singleID := res.MsgID
	comp := primitive.NewMessage("InteropA", big)
	comp.WithTag("tagA")
	_, err = p.SendSync(ctx, comp)
	require.NoError(t, err)
	m1, m2 := primitive.NewMessage("InteropA", []byte("batch-1")), primitive.NewMessage("InteropA", []byte("batch-2"))
	m1.WithTag("tagB")
	m2.WithTag("tagB")
	_, err = p.SendSync(ctx, m1, m2)
	require.NoError(t, err)

	in := &inbox{msgs: map[string]received{}}
	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("our-cg"), client.WithLogger(quietLogger()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("InteropA", client.MessageSelector{Expression: "tagA || tagB"},
		func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				in.add(received{string(m.Body), m.Tags(), m.Keys(), m.MsgID()})
			}
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer c.Shutdown()
	require.Eventually(t, func() bool { return len(in.keys()) == 4 }, 30*time.Second, 20*time.Millisecond)
	s := in.get("single")
	assert.Equal(t, "tagA", s.tag)
	assert.Equal(t, "k1 k2", s.keys)
	assert.Equal(t, singleID, s.msgID)
	cb := in.get(string(big[:16]))
	assert.Equal(t, string(big), cb.body, "compressed by the official producer, read by ours")
	assert.Equal(t, "tagB", in.get("batch-1").tag)
	assert.NotEmpty(t, in.get("batch-2").msgID)
}

// TestOurProducerToOfficialConsumer: what our producer sends (single with tag
// and keys, a compressed body, a batch with a UNIQ_KEY per member) the
// official push consumer reads, with our message ids.
func TestOurProducerToOfficialConsumer(t *testing.T) {
	ns := cluster(t, "InteropB")
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithLogger(quietLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := map[string]string{}
	res, err := p.SendSync(ctx, client.NewMessage("InteropB", []byte("single")).WithTag("tagA").WithKeys("k1", "k2"))
	require.NoError(t, err)
	ids["single"] = res.MsgID
	_, err = p.SendSync(ctx, client.NewMessage("InteropB", big).WithTag("tagA"))
	require.NoError(t, err)
	res, err = p.SendSync(ctx, client.NewMessage("InteropB", []byte("batch-1")).WithTag("tagB"), client.NewMessage("InteropB", []byte("batch-2")).WithTag("tagB"))
	require.NoError(t, err)
	bids := strings.Split(res.MsgID, ",")
	require.Len(t, bids, 2)
	ids["batch-1"], ids["batch-2"] = bids[0], bids[1]
	_, err = p.SendSync(ctx, client.NewMessage("InteropB", []byte("filtered")).WithTag("tagC"))
	require.NoError(t, err)

	in := &inbox{msgs: map[string]received{}}
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("official-cg"),
		consumer.WithInstance("interop-b"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("InteropB", consumer.MessageSelector{Type: consumer.TAG, Expression: "tagA || tagB"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				in.add(received{string(m.Body), m.GetTags(), m.GetKeys(), m.MsgId})
			}
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	defer c.Shutdown()
	require.Eventually(t, func() bool { return len(in.keys()) == 4 }, 30*time.Second, 20*time.Millisecond)
	s := in.get("single")
	assert.Equal(t, "tagA", s.tag)
	assert.Equal(t, "k1 k2", s.keys)
	for body, id := range ids {
		assert.Equal(t, id, in.get(body).msgID, "%s keeps our UNIQ_KEY as its MsgId", body)
	}
	assert.Equal(t, string(big), in.get(string(big[:16])).body, "compressed by ours, read by the official consumer")
	assert.NotContains(t, in.keys(), "filtered")
}
