package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// bcBenchBroker starts a broker with a topic "B" of one queue holding n
// messages of size bytes, tagged tagA.
func bcBenchBroker(b *testing.B, n, size int) *Broker { return bcBenchBrokerWith(b, n, size, nil) }

// bcBenchBrokerWith is bcBenchBroker with tweak applied to the config
// before the broker starts.
func bcBenchBrokerWith(b *testing.B, n, size int, tweak func(*conf.BrokerConfig)) *Broker {
	b.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1, cfg.BindAddress, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	cfg.StorePathRootDir = filepath.Join(b.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MappedFileSizeConsumeQueue = 300000 * 20
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 1000, 4000
	cfg.ServerSelectorThreads = 1
	if tweak != nil {
		tweak(&cfg)
	}
	br, err := New(&cfg, baLogger())
	require.NoError(b, err)
	require.NoError(b, br.Start())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(b, br.Shutdown(ctx))
	})
	require.NoError(b, br.topics.Update(&protocol.TopicConfig{
		TopicName: "B", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: protocol.SingleTag,
	}))
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger()})
	defer cl.Close()
	body := []byte(strings.Repeat("x", size))
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.InvokeSync(ctx, br.Addr(), sendReq("B", 0, body, map[string]string{message.PropTags: "tagA"}))
		cancel()
		require.NoError(b, err)
		require.Equal(b, int32(remoting.Success), resp.Code, resp.Remark)
	}
	require.Eventually(b, func() bool { return br.store.MaxOffsetInQueue("B", 0) == int64(n) }, 5*time.Second, time.Millisecond)
	return br
}

// BenchmarkExecutePullFound measures one 32-message pull of 1 KiB messages
// on the processor path (store read, headers, and the one copy of the
// records into a frame buffer, as writePull makes), without the network.
func BenchmarkExecutePullFound(b *testing.B) {
	br := bcBenchBroker(b, 32, 1024)
	pr := &pullRequest{
		req:    remoting.NewRequest(remoting.PullMessage, nil, nil),
		h:      *bcPullHeader("cg", "B", 0, 0, 0, 0),
		filter: store.NewTagFilter("tagA"),
	}
	resp, body := br.consume.executePull(pr, false)
	require.Equal(b, int32(remoting.Success), resp.Code, resp.Remark)
	require.NotNil(b, body)
	b.SetBytes(int64(body.BufferTotalSize))
	body.Release()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, body = br.consume.executePull(pr, false)
		if resp.Code != int32(remoting.Success) || body == nil {
			b.Fatal(resp.Remark)
		}
		if _, err := remoting.AppendFrameWith(make([]byte, 0, 256+body.BufferTotalSize), resp, body.BufferTotalSize, body.AppendBody); err != nil {
			b.Fatal(err)
		}
		body.Release()
	}
}

// BenchmarkArrivingListener measures the store's arriving listener on the
// dispatch goroutine when no pull waits for the queue: the common case, and
// it runs for every stored message.
func BenchmarkArrivingListener(b *testing.B) {
	br := bcBenchBroker(b, 0, 0)
	hs := br.consume.hold
	b.ReportAllocs()
	for b.Loop() {
		hs.notifyMessageArriving("B", 0, 10, 123, 0)
	}
}

// consumeBacklogSize messages of 1 KiB are stored for
// BenchmarkConsumeBacklogSQL92VsTag; one in ten is tagged TagA and carries
// region=eu.
const consumeBacklogSize = 20000

// BenchmarkConsumeBacklogSQL92VsTag measures what a consumer catching up on
// a stored backlog sees: pulls of 32 messages over loopback from an
// in-process broker, each answer decoded into messages (what a client must
// do with it), until the backlog is drained. Within each op it drains the
// backlog with a tag filter (TagA) and with the SQL92 expression
// region = 'eu', which select the same one message in ten, and it reports
// both rates in messages consumed per second and their ratio.
func BenchmarkConsumeBacklogSQL92VsTag(b *testing.B) {
	br := bcBenchBroker(b, 0, 0)
	br.cfg.EnablePropertyFilter = true
	benchConsumeBacklog(b, br)
}

// BenchmarkConsumeBacklogSQL92VsTagBitmap is BenchmarkConsumeBacklogSQL92VsTag
// with enableCalcFilterBitMap on and the group's SQL92 subscription
// registered (by a heartbeat) before the backlog is stored: a consumer group
// that went offline while its backlog built up. The SQL92 pulls then skip
// the records whose bitmaps lack the group's bits without reading them.
func BenchmarkConsumeBacklogSQL92VsTagBitmap(b *testing.B) {
	br := bcBenchBrokerWith(b, 0, 0, func(cfg *conf.BrokerConfig) {
		cfg.EnablePropertyFilter = true
		cfg.EnableCalcFilterBitMap = true
	})
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger()})
	hb, err := json.Marshal(&protocol.HeartbeatData{ClientID: "bench-client", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: "cg", ConsumeType: protocol.ConsumePassively, MessageModel: protocol.Clustering,
		ConsumeFromWhere: protocol.ConsumeFromFirstOffset, SubscriptionDataSet: []protocol.SubscriptionData{{
			Topic: "B", SubString: "region = 'eu'", ExpressionType: protocol.ExpressionSQL92, SubVersion: 1,
		}},
	}}})
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cl.InvokeSync(ctx, br.Addr(), remoting.NewRequest(remoting.HeartBeat, nil, hb))
	cancel()
	require.NoError(b, err)
	require.Equal(b, int32(remoting.Success), resp.Code, resp.Remark)
	require.NoError(b, cl.Close()) // the group goes offline; its filter stays registered
	require.NotNil(b, br.consume.bitmaps.pullFilter("cg", "B", "region = 'eu'"))
	benchConsumeBacklog(b, br)
}

// benchConsumeBacklog stores the backlog and measures its consumption for
// the benchmarks above.
func benchConsumeBacklog(b *testing.B, br *Broker) {
	body := []byte(strings.Repeat("x", 1024))
	for i := range consumeBacklogSize {
		tag, region := "TagB", "us"
		if i%10 == 0 {
			tag, region = "TagA", "eu"
		}
		m := &message.MessageExt{Message: message.Message{Topic: "B", Body: body}, BornTimestamp: time.Now().UnixMilli(),
			BornHost: netip.MustParseAddrPort("127.0.0.1:40000"), StoreHost: br.StoreHost()}
		m.SetProperty(message.PropTags, tag)
		m.SetProperty(message.PropUniqKey, fmt.Sprintf("7F0000010F6B18B4AAC27D8A%08X", i))
		m.SetProperty(message.PropKeys, "order-"+strconv.Itoa(i))
		m.SetProperty(message.PropCluster, "DefaultCluster")
		m.SetProperty(message.PropWaitStoreMsgOK, "true")
		m.SetProperty("region", region)
		m.SetProperty("amount", strconv.Itoa(i%1000))
		if res := br.store.PutMessage(context.Background(), m); !res.OK() {
			b.Fatal(res.Status, res.Err)
		}
	}
	require.Eventually(b, func() bool { return br.store.MaxOffsetInQueue("B", 0) == consumeBacklogSize }, 10*time.Second, time.Millisecond)
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger()})
	defer cl.Close()
	drain := func(typ, expr string) int {
		got := 0
		for off := int64(0); off < consumeBacklogSize; {
			h := bcPullHeader("cg", "B", 0, off, protocol.PullFlagSubscription, 0)
			h.ExpressionType, h.Subscription = typ, expr
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := cl.InvokeSync(ctx, br.Addr(), bcPullReq(h))
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			var rh protocol.PullMessageResponseHeader
			if err := protocol.DecodeHeader(resp.ExtFields, &rh); err != nil || rh.NextBeginOffset <= off {
				b.Fatalf("pull at %d: code %d %s", off, resp.Code, resp.Remark)
			}
			if resp.Code == int32(remoting.Success) {
				msgs, err := message.DecodeRecords(resp.Body)
				if err != nil {
					b.Fatal(err)
				}
				got += len(msgs)
			}
			off = rh.NextBeginOffset
		}
		return got
	}
	want := consumeBacklogSize / 10
	var tagTime, sqlTime time.Duration
	tagBest, sqlBest := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if n := drain(protocol.ExpressionTag, "TagA"); n != want {
			b.Fatalf("tag: %d messages, want %d", n, want)
		}
		mid := time.Now()
		if n := drain(protocol.ExpressionSQL92, "region = 'eu'"); n != want {
			b.Fatalf("sql92: %d messages, want %d", n, want)
		}
		tagTime += mid.Sub(start)
		sqlTime += time.Since(mid)
		tagBest, sqlBest = min(tagBest, mid.Sub(start)), min(sqlBest, time.Since(mid))
	}
	tagRate := float64(want*b.N) / tagTime.Seconds()
	sqlRate := float64(want*b.N) / sqlTime.Seconds()
	b.ReportMetric(tagRate, "tag-msgs/s")
	b.ReportMetric(sqlRate, "sql92-msgs/s")
	b.ReportMetric(sqlRate/tagRate, "sql92/tag")
	// The fastest drain of each: on a machine shared with other work the
	// ratio of sums swings with the load; the best runs show the code.
	b.ReportMetric(tagBest.Seconds()/sqlBest.Seconds(), "sql92/tag-best")
}
