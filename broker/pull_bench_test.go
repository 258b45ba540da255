package broker

import (
	"context"
	"path/filepath"
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
func bcBenchBroker(b *testing.B, n, size int) *Broker {
	b.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1, cfg.BindAddress, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	cfg.StorePathRootDir = filepath.Join(b.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 4 << 20
	cfg.MappedFileSizeConsumeQueue = 20 * 1000
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 1000, 4000
	cfg.ServerSelectorThreads = 1
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
