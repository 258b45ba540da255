package broker

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// baVerifyNoLeaks checks, after every cleanup of the test ran, that the test
// left no goroutine behind. Call it first so its cleanup runs last.
func baVerifyNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func baLogger() logrus.FieldLogger {
	l, _ := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel) // run every log statement, for the race detector
	return l
}

// testBrokerConfig is a broker on 127.0.0.1:0 with a fresh store of 1 MiB
// commitlog files and small pools.
func testBrokerConfig(t testing.TB) *conf.BrokerConfig {
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MappedFileSizeConsumeQueue = 20 * 1000
	cfg.MaxMessageSize = 64 << 10
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 2
	cfg.SendMessageThreadPoolNums = 2
	cfg.PullMessageThreadPoolNums = 4
	cfg.QueryMessageThreadPoolNums = 2
	cfg.AdminBrokerThreadPoolNums = 2
	cfg.ClientManageThreadPoolNums = 2
	cfg.ConsumerManageThreadPoolNums = 2
	cfg.EndTransactionThreadPoolNums = 2
	return &cfg
}

// MustStartBroker starts a broker for cfg and shuts it down when the test ends.
func MustStartBroker(t *testing.T, cfg *conf.BrokerConfig) *Broker {
	t.Helper()
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	return b
}

func mustShutdownBroker(t *testing.T, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.Shutdown(ctx))
}

// mustStartNameServer starts an in-process nameserver on a free loopback port.
func mustStartNameServer(t *testing.T) *nameserver.NameServer {
	t.Helper()
	cfg := conf.DefaultNamesrvConfig()
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.KvConfigPath = filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	cfg.ServerSelectorThreads = 1
	cfg.ServerWorkerThreads = 2
	ns, err := nameserver.New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, ns.Shutdown(ctx))
	})
	return ns
}

func baClient(t *testing.T) *remoting.Client {
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger()})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func baInvoke(t *testing.T, cl *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.InvokeSync(ctx, addr, req)
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	return resp
}

// testBrokerIP is the address test brokers advertise.
var testBrokerIP = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// sendHeaderFor is a SEND_MESSAGE header as the Go client writes it.
func sendHeaderFor(topic string, queueID int32, props map[string]string) *protocol.SendMessageRequestHeader {
	return &protocol.SendMessageRequestHeader{
		ProducerGroup:         "pg",
		Topic:                 topic,
		DefaultTopic:          AutoCreateTopicKey,
		DefaultTopicQueueNums: 4,
		QueueID:               queueID,
		BornTimestamp:         time.Now().UnixMilli(),
		Properties:            string(message.MarshalProperties(props)),
	}
}

// sendReq is a SEND_MESSAGE request (long header).
func sendReq(topic string, queueID int32, body []byte, props map[string]string) *remoting.Command {
	return remoting.NewRequest(remoting.SendMessage, protocol.EncodeHeader(sendHeaderFor(topic, queueID, props), nil), body)
}

// sendReqV2 is a request with the one-letter header (SEND_MESSAGE_V2 or
// SEND_BATCH_MESSAGE).
func sendReqV2(code remoting.RequestCode, topic string, queueID int32, body []byte, props map[string]string) *remoting.Command {
	var v2 protocol.SendMessageRequestHeaderV2
	v2.FromV1(*sendHeaderFor(topic, queueID, props))
	v2.Batch = code == remoting.SendBatchMessage
	return remoting.NewRequest(code, protocol.EncodeHeader(&v2, nil), body)
}

// createTopicReq is UPDATE_AND_CREATE_TOPIC as the Go admin sends it.
func createTopicReq(topic string, read, write, perm int32) *remoting.Command {
	return remoting.NewRequest(remoting.UpdateAndCreateTopic, protocol.EncodeHeader(&protocol.CreateTopicRequestHeader{
		Topic: topic, DefaultTopic: "defaultTopic", ReadQueueNums: read, WriteQueueNums: write, Perm: perm,
		TopicFilterType: string(protocol.SingleTag),
	}, nil), nil)
}
