package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Cluster is one nameserver and one master broker running in this process
// on loopback ports, with their data under the test's temporary directory.
type Cluster struct {
	NS          *nameserver.NameServer
	Broker      *broker.Broker
	NamesrvAddr string // 127.0.0.1:port; the official client rejects host names
	BrokerAddr  string
	BrokerName  string
	ClusterName string

	// Logs holds what the servers logged at the log level (warnings by
	// default), for tests that check a refusal was logged.
	Logs *logtest.Hook

	storeDir string
	port     int
	opts     clusterOptions
	log      logrus.FieldLogger
	raw      *remoting.Client
}

type clusterOptions struct {
	brokerName string
	logLevel   logrus.Level
	tune       []func(*conf.BrokerConfig)
	nsTune     []func(*conf.NamesrvConfig)
	rawTLS     *tls.Config
}

// ClusterOption changes how MustStartCluster sets the cluster up.
type ClusterOption func(*clusterOptions)

// WithBrokerConfig lets a test change the broker's configuration before it
// starts (and again at each restart).
func WithBrokerConfig(fn func(*conf.BrokerConfig)) ClusterOption {
	return func(o *clusterOptions) { o.tune = append(o.tune, fn) }
}

// WithNamesrvConfig lets a test change the nameserver's configuration
// before it starts.
func WithNamesrvConfig(fn func(*conf.NamesrvConfig)) ClusterOption {
	return func(o *clusterOptions) { o.nsTune = append(o.nsTune, fn) }
}

// WithRawClientTLS makes the test's own remoting client (Invoke, WaitRoute,
// MaxOffset...) dial TLS with cfg.
func WithRawClientTLS(cfg *tls.Config) ClusterOption {
	return func(o *clusterOptions) { o.rawTLS = cfg }
}

const (
	testClusterName = "E2ECluster"
	// opTimeout bounds one request or one client call in these tests.
	opTimeout = 10 * time.Second
)

// MustStartCluster starts a nameserver and a broker registered to it, waits
// until the nameserver knows the broker, and stops both when the test ends.
func MustStartCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	o := clusterOptions{brokerName: "broker-a", logLevel: logrus.WarnLevel}
	// E2E_SERVER_LOG=info (or debug) shows more of the servers' logs, which
	// go to the test log (printed for failing tests, or with -v).
	if lvl, err := logrus.ParseLevel(os.Getenv("E2E_SERVER_LOG")); err == nil {
		o.logLevel = lvl
	}
	for _, fn := range opts {
		fn(&o)
	}
	l := logrus.New()
	l.SetLevel(o.logLevel)
	l.SetOutput(testWriter{t})
	logs := logtest.NewLocal(l)
	c := &Cluster{
		Logs:        logs,
		BrokerName:  o.brokerName,
		ClusterName: testClusterName,
		storeDir:    t.TempDir(),
		opts:        o,
		log:         l.WithField("test", t.Name()),
		raw:         remoting.NewClient(remoting.ClientConfig{Logger: l, TLS: o.rawTLS}),
	}
	t.Cleanup(func() { _ = c.raw.Close() })

	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress = "127.0.0.1"
	nsCfg.ListenPort = 0
	nsCfg.KvConfigPath = filepath.Join(c.storeDir, "namesrv", "kvConfig.json")
	nsCfg.ServerSelectorThreads = 2
	nsCfg.ServerWorkerThreads = 4
	for _, fn := range o.nsTune {
		fn(&nsCfg)
	}
	ns, err := nameserver.New(nsCfg, c.log)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	c.NS = ns
	c.NamesrvAddr = ns.Addr()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := ns.Shutdown(ctx); err != nil {
			t.Errorf("nameserver shutdown: %v", err)
		}
	})

	// A port pair below the ephemeral range: the broker's HA port is
	// listenPort+1, and after RestartBroker an outgoing connection could
	// hold an ephemeral +1 ("address already in use").
	c.startBroker(t, freePortPair(t))
	t.Cleanup(func() { c.stopBroker(t) })
	return c
}

// brokerConfig is the broker's configuration for this cluster: loopback
// only, data under storeDir, the given port (0 = any free one).
func (c *Cluster) brokerConfig(port int) *conf.BrokerConfig {
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerClusterName = c.ClusterName
	cfg.BrokerName = c.BrokerName
	cfg.BrokerID = 0
	cfg.NamesrvAddr = c.NamesrvAddr
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = port
	cfg.StorePathRootDir = filepath.Join(c.storeDir, "broker")
	cfg.StorePathCommitLog = filepath.Join(c.storeDir, "broker", "commitlog")
	// Small files keep the temporary directories (and the mappings) small;
	// they still hold every test's messages in a handful of files.
	cfg.MappedFileSizeCommitLog = 8 << 20
	cfg.MappedFileSizeConsumeQueue = 20 * 20000
	cfg.MaxHashSlotNum = 5000
	cfg.MaxIndexNum = 20000
	cfg.ServerSelectorThreads = 2
	cfg.AutoCreateTopicEnable = true
	// Shorter periods than production, so the periodic registration and
	// offset flush run (under -race) during the tests too.
	cfg.RegisterNameServerPeriod = 2000
	cfg.FlushConsumerOffsetInterval = 1000
	for _, fn := range c.opts.tune {
		fn(&cfg)
	}
	return &cfg
}

func (c *Cluster) startBroker(t testing.TB, port int) {
	t.Helper()
	b, err := broker.New(c.brokerConfig(port), c.log)
	require.NoError(t, err)
	require.NoError(t, b.Start(), "broker start")
	c.Broker = b
	c.BrokerAddr = b.Addr()
	_, p, err := net.SplitHostPort(c.BrokerAddr)
	require.NoError(t, err)
	c.port, err = strconv.Atoi(p)
	require.NoError(t, err)
	// The broker registers at start; wait until the nameserver routes its
	// default topic so clients started next find it.
	c.WaitRoute(t, "TBW102")
}

func (c *Cluster) stopBroker(t testing.TB) {
	t.Helper()
	if c.Broker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := c.Broker.Shutdown(ctx); err != nil {
		t.Errorf("broker shutdown: %v", err)
	}
	c.Broker = nil
}

// RestartBroker shuts the broker down and starts a new one on the same port
// and the same store directory, as an operator restarting the process would.
func (c *Cluster) RestartBroker(t testing.TB) {
	t.Helper()
	port := c.port
	c.stopBroker(t)
	// Drop our cached connection to the old process.
	c.raw.CloseConn(c.BrokerAddr)
	c.startBroker(t, port)
	require.Equal(t, port, c.port, "broker came back on another port")
}

// Invoke sends one request with our own remoting client to addr.
func (c *Cluster) Invoke(t testing.TB, addr string, code remoting.RequestCode, header any, body []byte) *remoting.Command {
	t.Helper()
	var ext map[string]string
	if header != nil {
		ext = protocol.EncodeHeader(header, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := c.raw.InvokeSync(ctx, addr, remoting.NewRequest(code, ext, body))
	require.NoError(t, err, "request code %d to %s", code, addr)
	return resp
}

// route asks the nameserver for topic's route; nil when it has none.
func (c *Cluster) route(t testing.TB, topic string) *protocol.TopicRouteData {
	t.Helper()
	resp := c.Invoke(t, c.NamesrvAddr, remoting.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
	if remoting.ResponseCode(resp.Code) != remoting.Success {
		return nil
	}
	rd, err := protocol.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err, "route body %q", resp.Body)
	return rd
}

// WaitRoute waits until the nameserver routes topic to this cluster's broker.
func (c *Cluster) WaitRoute(t testing.TB, topic string) *protocol.TopicRouteData {
	t.Helper()
	var rd *protocol.TopicRouteData
	require.Eventually(t, func() bool {
		rd = c.route(t, topic)
		if rd == nil {
			return false
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == c.BrokerName && bd.MasterAddr() == c.BrokerAddr {
				return len(rd.QueueDatas) > 0
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "nameserver never routed %s to %s", topic, c.BrokerAddr)
	return rd
}

// ConsumerOffset is the offset the broker stores for group on one queue, or
// -1 when it has none (QUERY_NOT_FOUND).
func (c *Cluster) ConsumerOffset(t testing.TB, group, topic string, queueID int) int64 {
	t.Helper()
	resp := c.Invoke(t, c.BrokerAddr, remoting.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: int32(queueID),
	}, nil)
	switch remoting.ResponseCode(resp.Code) {
	case remoting.Success:
		var h protocol.OffsetResponseHeader
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
		return h.Offset
	case remoting.QueryNotFound:
		return -1
	default:
		require.Failf(t, "QUERY_CONSUMER_OFFSET failed", "code %d remark %q", resp.Code, resp.Remark)
		return 0
	}
}

// MaxOffset is the number of entries in a consume queue (its next offset).
func (c *Cluster) MaxOffset(t testing.TB, topic string, queueID int) int64 {
	t.Helper()
	resp := c.Invoke(t, c.BrokerAddr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: topic, QueueID: int32(queueID)}, nil)
	require.Equal(t, int32(remoting.Success), resp.Code, "GET_MAX_OFFSET %s/%d: %s", topic, queueID, resp.Remark)
	var h protocol.OffsetResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h.Offset
}

// ConsumerIDs lists the clients the broker knows in group.
func (c *Cluster) ConsumerIDs(t testing.TB, group string) []string {
	t.Helper()
	resp := c.Invoke(t, c.BrokerAddr, remoting.GetConsumerListByGroup, &protocol.GroupRequestHeader{ConsumerGroup: group}, nil)
	if remoting.ResponseCode(resp.Code) != remoting.Success {
		return nil
	}
	var body protocol.ConsumerListBody
	require.NoError(t, json.Unmarshal(resp.Body, &body), "consumer list body %q", resp.Body)
	return body.ConsumerIDList
}

// testWriter sends the servers' log lines to the test log, so they show
// only for failing tests (or with -v).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	// Logging after the test ended panics; server goroutines may still log
	// during shutdown, which Cleanup orders before the end.
	defer func() { _ = recover() }()
	w.t.Log(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}

// uniq returns a name unique in this process, for topics, groups and the
// official client's instance names (its clients are shared per instance name
// process-wide, so two tests must never reuse one).
func uniq(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}

var seq atomic.Int64
