package nameserver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// verifyNoLeaks checks, after every cleanup of the test has run, that the
// test left no goroutine behind. Goroutines alive before it started are
// ignored: the official client's test in this package leaves some running.
// Call it first, so its cleanup runs last.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testLogger() logrus.FieldLogger {
	l, _ := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel) // run every log statement, for the race detector
	return l
}

func testConfig(t testing.TB) conf.NamesrvConfig {
	cfg := conf.DefaultNamesrvConfig()
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.KvConfigPath = filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	cfg.ServerSelectorThreads = 2
	cfg.ServerWorkerThreads = 4
	return cfg
}

// MustStartNameServer starts a nameserver on a free loopback port and stops
// it when the test ends.
func MustStartNameServer(t *testing.T, cfg conf.NamesrvConfig) *NameServer {
	t.Helper()
	ns, err := New(cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { mustShutdown(t, ns) })
	return ns
}

func mustShutdown(t *testing.T, ns *NameServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ns.Shutdown(ctx))
}

func mustClient(t *testing.T) *remoting.Client {
	cl := remoting.NewClient(remoting.ClientConfig{Logger: testLogger()})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func mustInvoke(t *testing.T, cl *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.InvokeSync(ctx, addr, req)
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	return resp
}

// broker describes a broker registering the way ours (and Java's) does.
type broker struct {
	cluster, name, addr, ha string
	id                      int64
	topics                  []*protocol.TopicConfig
	version                 protocol.DataVersion
	compressed              bool
}

func (b broker) registerRequest(t testing.TB) *remoting.Command {
	body := &protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]*protocol.TopicConfig{}, DataVersion: b.version,
	}}
	for _, tc := range b.topics {
		body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
	}
	enc, err := body.Encode(b.compressed)
	require.NoError(t, err)
	h := &protocol.RegisterBrokerRequestHeader{BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, HaServerAddr: b.ha,
		BrokerID: b.id, Compressed: b.compressed, BodyCrc32: protocol.BodyCRC32(enc)}
	return remoting.NewRequest(remoting.RegisterBroker, protocol.EncodeHeader(h, nil), enc)
}

func (b broker) mustRegister(t *testing.T, cl *remoting.Client, nsAddr string) protocol.RegisterBrokerResponseHeader {
	t.Helper()
	resp := mustInvoke(t, cl, nsAddr, b.registerRequest(t))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	var h protocol.RegisterBrokerResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h
}

func routeRequest(topic string) *remoting.Command {
	return remoting.NewRequest(remoting.GetRouteInfoByTopic, protocol.EncodeHeader(&protocol.GetRouteInfoRequestHeader{Topic: topic}, nil), nil)
}

func mustRoute(t *testing.T, cl *remoting.Client, addr, topic string) *protocol.TopicRouteData {
	t.Helper()
	resp := mustInvoke(t, cl, addr, routeRequest(topic))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	r, err := protocol.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err)
	return r
}

func routeCode(t *testing.T, cl *remoting.Client, addr, topic string) remoting.ResponseCode {
	return mustInvoke(t, cl, addr, routeRequest(topic)).ResponseCode()
}
