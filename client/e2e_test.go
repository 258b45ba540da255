package client

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// These tests run the SDK against our real nameserver and broker, in
// process on loopback.

// MustStartBroker starts our broker registered with nsAddr.
func MustStartBroker(t testing.TB, name, nsAddr string, tune func(*conf.BrokerConfig)) *broker.Broker {
	t.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = name
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.NamesrvAddr = nsAddr
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MappedFileSizeConsumeQueue = 20 * 1000
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 1
	cfg.SendMessageThreadPoolNums = 2
	cfg.PullMessageThreadPoolNums = 4
	cfg.QueryMessageThreadPoolNums = 2
	cfg.AdminBrokerThreadPoolNums = 2
	cfg.ClientManageThreadPoolNums = 2
	cfg.ConsumerManageThreadPoolNums = 2
	cfg.EndTransactionThreadPoolNums = 2
	cfg.MessageDelayLevel = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
	if tune != nil {
		tune(&cfg)
	}
	b, err := broker.New(&cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Shutdown(ctx))
	})
	return b
}

// e2eCluster is a nameserver, one broker and an admin client.
func e2eCluster(t *testing.T, topics ...string) (nsAddr string, b *broker.Broker, a *Admin) {
	return e2eClusterWith(t, nil, topics...)
}

// e2eClusterWith is e2eCluster with the broker config adjusted by tune.
func e2eClusterWith(t *testing.T, tune func(*conf.BrokerConfig), topics ...string) (nsAddr string, b *broker.Broker, a *Admin) {
	ns := MustStartNameServer(t)
	b = MustStartBroker(t, "broker-a", ns.Addr(), tune)
	a = MustAdmin(t, WithNameServer(ns.Addr()))
	for _, topic := range topics {
		require.NoError(t, a.CreateTopic(testCtx(t), TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, BrokerAddr: b.Addr()}))
	}
	for _, topic := range topics {
		require.Eventually(t, func() bool {
			_, err := a.TopicRoute(testCtx(t), topic)
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "route of %s", topic)
	}
	return ns.Addr(), b, a
}

func TestE2EProduceConsume(t *testing.T) {
	ns, _, _ := e2eCluster(t, "E2E")
	p := MustStartProducer(t, WithNameServer(ns))
	ctx := testCtx(t)

	big := bytes.Repeat([]byte("0123456789"), 1000)
	var want []string
	res, err := p.SendSync(ctx, NewMessage("E2E", []byte("single")).WithTag("a").WithKeys("k1"))
	require.NoError(t, err)
	want = append(want, "single")
	uniq := res.MsgID
	_, err = p.SendSync(ctx, NewMessage("E2E", big).WithTag("a"))
	require.NoError(t, err)
	want = append(want, string(big[:10]))
	_, err = p.SendSync(ctx, NewMessage("E2E", []byte("b0")).WithTag("a"), NewMessage("E2E", []byte("b1")).WithTag("b"), NewMessage("E2E", []byte("b2")).WithTag("c"))
	require.NoError(t, err)
	want = append(want, "b0", "b1")
	require.NoError(t, p.SendOneWay(ctx, NewMessage("E2E", []byte("oneway")).WithTag("b")))
	want = append(want, "oneway")
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(ctx, func(_ context.Context, _ *SendResult, err error) { done <- err }, NewMessage("E2E", []byte("async")).WithTag("a")))
	require.NoError(t, <-done)
	want = append(want, "async")

	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2E", MessageSelector{Expression: "a || b"}, col.handler))
	}, append(fastOptions(ns), WithGroupName("e2e-cg"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool { return col.count() >= len(want) }, 15*time.Second, 20*time.Millisecond)
	got := map[string]*MessageExt{}
	col.mu.Lock()
	for _, m := range col.msgs {
		key := string(m.Body)
		if len(key) > 100 {
			key = key[:10]
			assert.Equal(t, big, m.Body)
		}
		got[key] = m
	}
	col.mu.Unlock()
	for _, w := range want {
		assert.Contains(t, got, w)
	}
	assert.NotContains(t, got, "b2", "tag c filtered")
	if m := got["single"]; assert.NotNil(t, m) {
		assert.Equal(t, uniq, m.MsgID())
		assert.Equal(t, "k1", m.Keys())
		assert.Equal(t, "E2E", m.Topic)
	}
}

func TestE2EPullConsumerAndAdmin(t *testing.T) {
	ns, b, a := e2eCluster(t, "E2EPull")
	p := MustStartProducer(t, WithNameServer(ns))
	ctx := testCtx(t)
	var ids []*SendResult
	for i := 0; i < 8; i++ {
		res, err := p.SendSync(ctx, NewMessage("E2EPull", []byte(fmt.Sprint("p", i))).WithKeys(fmt.Sprint("key", i)))
		require.NoError(t, err)
		ids = append(ids, res)
	}
	pc := MustStartPullConsumer(t, func(pc *PullConsumer) {
		require.NoError(t, pc.Subscribe("E2EPull", MessageSelector{}))
	}, append(fastOptions(ns), WithGroupName("e2e-pull"), WithConsumeFromWhere(ConsumeFromFirstOffset), WithAutoCommit(false))...)
	msgs := pollN(t, pc, 8)
	require.NoError(t, pc.Commit(ctx))
	assert.Len(t, msgs, 8)

	progress, err := a.ConsumerProgress(ctx, "e2e-pull", "E2EPull")
	require.NoError(t, err)
	var lag, consumed int64
	for _, q := range progress {
		lag += q.Lag
		consumed += q.ConsumerOffset
	}
	assert.Equal(t, int64(0), lag)
	assert.Equal(t, int64(8), consumed)

	stats, err := a.TopicStats(ctx, "E2EPull")
	require.NoError(t, err)
	var max int64
	for _, s := range stats {
		max += s.MaxOffset
	}
	assert.Equal(t, int64(8), max)

	m, err := a.ViewMessage(ctx, ids[3].OffsetMsgID)
	require.NoError(t, err)
	assert.Equal(t, []byte("p3"), m.Body)
	m, err = a.QueryMessageByQueueOffset(ctx, ids[5].Queue, ids[5].QueueOffset)
	require.NoError(t, err)
	assert.Equal(t, []byte("p5"), m.Body)

	require.Eventually(t, func() bool {
		found, err := a.QueryMessageByKey(ctx, "E2EPull", "key2", 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		return err == nil && len(found) == 1 && string(found[0].Body) == "p2"
	}, 5*time.Second, 50*time.Millisecond, "query by key")
	found, err := a.QueryMessageByUniqKey(ctx, "E2EPull", ids[6].MsgID)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, []byte("p6"), found[0].Body)

	conns, err := a.ConsumerConnections(ctx, "e2e-pull")
	require.NoError(t, err)
	require.Len(t, conns.ConnectionSet, 1)
	assert.Equal(t, pc.ClientID(), conns.ConnectionSet[0].ClientID)

	cfg, err := a.BrokerConfig(ctx, b.Addr())
	require.NoError(t, err)
	assert.Equal(t, "broker-a", cfg["brokerName"])
	rt, err := a.BrokerRuntimeStats(ctx, b.Addr())
	require.NoError(t, err)
	assert.NotEmpty(t, rt)
	groups, err := a.SubscriptionGroups(ctx, b.Addr())
	require.NoError(t, err)
	assert.Contains(t, groups.SubscriptionGroupTable, "e2e-pull")
	sg := protocol.NewSubscriptionGroupConfig("e2e-admin-group")
	sg.RetryMaxTimes = 3
	require.NoError(t, a.CreateSubscriptionGroup(ctx, b.Addr(), sg))
	groups, err = a.SubscriptionGroups(ctx, b.Addr())
	require.NoError(t, err)
	if assert.Contains(t, groups.SubscriptionGroupTable, "e2e-admin-group") {
		assert.Equal(t, int32(3), groups.SubscriptionGroupTable["e2e-admin-group"].RetryMaxTimes)
	}
	require.NoError(t, a.DeleteSubscriptionGroup(ctx, b.Addr(), "e2e-admin-group", true))
	groups, err = a.SubscriptionGroups(ctx, b.Addr())
	require.NoError(t, err)
	assert.NotContains(t, groups.SubscriptionGroupTable, "e2e-admin-group")

	require.NoError(t, a.DeleteTopic(ctx, "E2EPull", ""))
	topics, err := a.TopicList(ctx)
	require.NoError(t, err)
	assert.NotContains(t, topics, "E2EPull")
}

func TestE2ERebalanceAndOrderly(t *testing.T) {
	ns, _, _ := e2eCluster(t, "E2EOrder")
	p := MustStartProducer(t, WithNameServer(ns))
	opts := append(fastOptions(ns), WithGroupName("e2e-order"), WithConsumerOrder(true), WithConsumeFromWhere(ConsumeFromFirstOffset))
	var mu sync.Mutex
	got := map[string][]string{}
	handler := func(_ context.Context, msgs ...*MessageExt) (ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			k := strings.SplitN(string(m.Body), "-", 2)[0]
			got[k] = append(got[k], string(m.Body))
		}
		return ConsumeSuccess, nil
	}
	sub := func(pc *PushConsumer) { require.NoError(t, pc.Subscribe("E2EOrder", MessageSelector{}, handler)) }
	pc1 := MustStartPushConsumer(t, sub, opts...)
	pc2 := MustStartPushConsumer(t, sub, opts...)
	require.Eventually(t, func() bool { return countQueues(pc1, "E2EOrder") == 2 && countQueues(pc2, "E2EOrder") == 2 }, 10*time.Second, 20*time.Millisecond)
	for i := 0; i < 10; i++ {
		for k := 0; k < 4; k++ {
			_, err := p.SendSync(testCtx(t), NewMessage("E2EOrder", []byte(fmt.Sprintf("k%d-%03d", k, i))).WithShardingKey(fmt.Sprint("key", k)))
			require.NoError(t, err)
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range got {
			n += len(v)
		}
		return n
	}
	require.Eventually(t, func() bool { return count() == 40 }, 15*time.Second, 20*time.Millisecond)
	mu.Lock()
	for k, v := range got {
		for i := 1; i < len(v); i++ {
			assert.Less(t, v[i-1], v[i], "key %s out of order", k)
		}
	}
	mu.Unlock()
	// pc2 leaves; pc1 takes every queue and keeps consuming.
	require.NoError(t, pc2.Shutdown())
	require.Eventually(t, func() bool { return countQueues(pc1, "E2EOrder") == 4 }, 15*time.Second, 20*time.Millisecond)
	for k := 0; k < 4; k++ {
		_, err := p.SendSync(testCtx(t), NewMessage("E2EOrder", []byte(fmt.Sprintf("k%d-%03d", k, 99))).WithShardingKey(fmt.Sprint("key", k)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return count() >= 44 }, 15*time.Second, 20*time.Millisecond)
}

func TestE2EBroadcastAndRetry(t *testing.T) {
	ns, _, _ := e2eCluster(t, "E2EBc", "E2ERetry")
	p := MustStartProducer(t, WithNameServer(ns))
	dir := t.TempDir()
	var c1, c2 collector
	for i, col := range []*collector{&c1, &c2} {
		MustStartPushConsumer(t, func(pc *PushConsumer) { require.NoError(t, pc.Subscribe("E2EBc", MessageSelector{}, col.handler)) },
			append(fastOptions(ns), WithGroupName("e2e-bc"), WithConsumerModel(Broadcasting), WithOffsetStoreDir(dir),
				WithInstanceName(fmt.Sprint("bc", i)), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	}
	sendN(t, p, "E2EBc", 6, nil)
	require.Eventually(t, func() bool { return c1.count() == 6 && c2.count() == 6 }, 15*time.Second, 20*time.Millisecond)

	var mu sync.Mutex
	var times []int32
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2ERetry", MessageSelector{}, func(_ context.Context, msgs ...*MessageExt) (ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			times = append(times, msgs[0].ReconsumeTimes)
			if msgs[0].ReconsumeTimes < 2 {
				return ConsumeRetryLater, nil
			}
			assert.Equal(t, "E2ERetry", msgs[0].Topic)
			assert.Equal(t, []byte("again"), msgs[0].Body)
			return ConsumeSuccess, nil
		}))
	}, append(fastOptions(ns), WithGroupName("e2e-retry"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	_, err := p.SendSync(testCtx(t), NewMessage("E2ERetry", []byte("again")))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(times) == 3
	}, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	assert.Equal(t, []int32{0, 1, 2}, times)
	mu.Unlock()
}

func TestE2EDelay(t *testing.T) {
	ns, _, _ := e2eCluster(t, "E2EDelay")
	p := MustStartProducer(t, WithNameServer(ns))
	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2EDelay", MessageSelector{}, col.handler))
	}, append(fastOptions(ns), WithGroupName("e2e-delay"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	sent := time.Now()
	_, err := p.SendSync(testCtx(t), NewMessage("E2EDelay", []byte("later")).WithDelayTimeLevel(1))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return col.count() == 1 }, 15*time.Second, 20*time.Millisecond)
	took := time.Since(sent)
	assert.GreaterOrEqual(t, took, 900*time.Millisecond, "delay level 1 = 1s here")
}

// probeSupported reports whether the broker knows request code (it does not
// answer REQUEST_CODE_NOT_SUPPORTED).
func probeSupported(t *testing.T, addr string, code remoting.RequestCode) bool {
	t.Helper()
	cl := remoting.NewClient(remoting.ClientConfig{Logger: testLogger()})
	defer cl.Close()
	resp, err := cl.InvokeSync(testCtx(t), addr, remoting.NewRequest(code, nil, nil))
	require.NoError(t, err)
	return resp.ResponseCode() != remoting.RequestCodeNotSupported
}

func TestE2ETransaction(t *testing.T) {
	ns, _, _ := e2eClusterWith(t, func(cfg *conf.BrokerConfig) {
		cfg.TransactionCheckInterval = 200 // ms: check pending half messages quickly
		cfg.TransactionTimeOut = 100
	}, "E2ETx")
	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2ETx", MessageSelector{}, col.handler))
	}, append(fastOptions(ns), WithGroupName("e2e-tx"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	l := &txListener{exec: map[string]LocalTransactionState{"tx-commit": CommitMessageState, "tx-rollback": RollbackMessageState,
		"tx-unknown": UnknownState}, check: CommitMessageState}
	tp, err := NewTransactionProducer(l, WithNameServer(ns), WithGroupName("e2e-txg"), WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, tp.Start())
	t.Cleanup(func() { require.NoError(t, tp.Shutdown()) })
	for _, body := range []string{"tx-commit", "tx-rollback", "tx-unknown"} {
		_, err = tp.SendMessageInTransaction(testCtx(t), NewMessage("E2ETx", []byte(body)))
		require.NoError(t, err)
	}
	// tx-commit at once, tx-unknown once the broker asked and the listener
	// committed it; tx-rollback never.
	require.Eventually(t, func() bool { return col.count() == 2 }, 15*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"tx-commit", "tx-unknown"}, col.bodies())
	l.mu.Lock()
	if assert.NotEmpty(t, l.checked) {
		assert.Equal(t, []byte("tx-unknown"), l.checked[0].Body)
		assert.Equal(t, "e2e-txg", l.checked[0].Property(message.PropProducerGroup))
	}
	l.mu.Unlock()
	col.mu.Lock()
	for _, m := range col.msgs {
		assert.NotEqual(t, "tx-rollback", string(m.Body))
		// Stored as Java stores a committed half message: commit type.
		assert.Equal(t, message.TransactionCommitType, message.TransactionType(m.SysFlag))
	}
	col.mu.Unlock()
}

func TestE2EResetOffsetByTime(t *testing.T) {
	ns, b, a := e2eCluster(t, "E2EReset")
	p := MustStartProducer(t, WithNameServer(ns))
	sendN(t, p, "E2EReset", 8, nil)
	opts := append(fastOptions(ns), WithGroupName("e2e-reset"), WithConsumeFromWhere(ConsumeFromFirstOffset))
	var col collector
	pc := MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2EReset", MessageSelector{}, col.handler))
	}, opts...)
	require.Eventually(t, func() bool { return col.count() == 8 }, 15*time.Second, 20*time.Millisecond)

	online := probeSupported(t, b.Addr(), remoting.InvokeBrokerToResetOffset)
	if !online {
		// Without the broker's reset the offsets are written directly,
		// which needs the group offline.
		require.NoError(t, pc.Shutdown())
	}
	offsets, err := a.ResetOffsetByTime(testCtx(t), "e2e-reset", "E2EReset", time.Unix(0, 0), true)
	require.NoError(t, err)
	require.Len(t, offsets, 4)
	for _, off := range offsets {
		assert.Zero(t, off)
	}
	if !online {
		progress, err := a.ConsumerProgress(testCtx(t), "e2e-reset", "E2EReset")
		require.NoError(t, err)
		var lag int64
		for _, q := range progress {
			lag += q.Lag
		}
		assert.Equal(t, int64(8), lag, "everything is unconsumed again")
		MustStartPushConsumer(t, func(pc *PushConsumer) {
			require.NoError(t, pc.Subscribe("E2EReset", MessageSelector{}, col.handler))
		}, opts...)
	}
	// Online: the broker told the consumer; offline: it restarted at 0.
	require.Eventually(t, func() bool { return col.count() == 16 }, 15*time.Second, 20*time.Millisecond)
}

// countQueues counts the queues of topic pc consumes.
func countQueues(pc *PushConsumer, topic string) int {
	n := 0
	for _, q := range pc.Queues() {
		if q.Topic == topic {
			n++
		}
	}
	return n
}

func TestE2EProducerFailover(t *testing.T) {
	ns := MustStartNameServer(t)
	ba := MustStartBroker(t, "broker-a", ns.Addr(), nil)
	bb := MustStartBroker(t, "broker-b", ns.Addr(), nil)
	a := MustAdmin(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)
	for _, b := range []*broker.Broker{ba, bb} {
		require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: "E2EFail", ReadQueueNums: 2, WriteQueueNums: 2, BrokerAddr: b.Addr()}))
	}
	require.Eventually(t, func() bool {
		r, err := a.TopicRoute(ctx, "E2EFail")
		return err == nil && len(r.QueueDatas) == 2
	}, 10*time.Second, 20*time.Millisecond)

	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithSendTimeout(time.Second))
	brokers := map[string]int{}
	for i := 0; i < 8; i++ {
		res, err := p.SendSync(ctx, NewMessage("E2EFail", []byte("x")))
		require.NoError(t, err)
		brokers[res.Queue.BrokerName]++
	}
	assert.Equal(t, map[string]int{"broker-a": 4, "broker-b": 4}, brokers)

	// broker-a goes away; the producer's cached route still names it.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, ba.Shutdown(sctx))
	cancel()
	brokers = map[string]int{}
	for i := 0; i < 8; i++ {
		res, err := p.SendSync(ctx, NewMessage("E2EFail", []byte("y")))
		require.NoError(t, err, "send %d", i)
		brokers[res.Queue.BrokerName]++
	}
	assert.Equal(t, map[string]int{"broker-b": 8}, brokers)
}
