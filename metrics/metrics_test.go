package metrics

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

const waitFor = 30 * time.Second

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// stopAtEnd shuts s down when the test ends.
func stopAtEnd(t *testing.T, s interface{ Shutdown(context.Context) error }) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
	})
}

// mustBroker starts a broker registered with ns and an exporter beside it,
// both stopped when the test ends; tweak adjusts the config first.
func mustBroker(t *testing.T, ns string, tweak func(*conf.BrokerConfig)) (*broker.Broker, *Exporter) {
	t.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-m"
	cfg.BrokerIP1, cfg.BindAddress, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	cfg.NamesrvAddr = ns
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 1000, 4000
	cfg.ServerSelectorThreads = 1
	cfg.MetricsExporterType, cfg.MetricsPromExporterHost, cfg.MetricsPromExporterPort = "PROM", "127.0.0.1", 0
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := broker.New(&cfg, quietLog())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	stopAtEnd(t, b)
	exp, err := NewExporter(cfg.PromListenAddr(cfg.BindAddress), NewBrokerCollector(b))
	require.NoError(t, err)
	require.NoError(t, exp.Start())
	stopAtEnd(t, exp)
	return b, exp
}

// mustCluster starts a nameserver and a SYNC_FLUSH broker on loopback, with
// an exporter beside each, all stopped when the test ends.
func mustCluster(t *testing.T) (ns *nameserver.NameServer, b *broker.Broker, nsExp, bExp *Exporter) {
	t.Helper()
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress, nsCfg.ListenPort = "127.0.0.1", 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kv.json")
	nsCfg.ServerSelectorThreads = 1
	ns, err := nameserver.New(nsCfg, quietLog())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	stopAtEnd(t, ns)

	b, bExp = mustBroker(t, ns.Addr(), func(c *conf.BrokerConfig) { c.FlushDiskType = "SYNC_FLUSH" })
	nsExp, err = NewExporter("127.0.0.1:0", NewNameServerCollector(ns))
	require.NoError(t, err)
	require.NoError(t, nsExp.Start())
	stopAtEnd(t, nsExp)
	return ns, b, nsExp, bExp
}

// scrape GETs /metrics and parses the text format.
func scrape(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + e.Addr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value returns the sample of family name whose labels include want, and
// whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, lp := range m.Label {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func must(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := value(fams, name, want)
	require.True(t, ok, "no %s%v in the scrape", name, want)
	return v
}

// TestScrapeMatchesTraffic sends and consumes known messages and checks
// the broker's and nameserver's /metrics against them: the put and get
// counters, offsets and lag, group commit, and the nameserver's view.
func TestScrapeMatchesTraffic(t *testing.T) {
	_, b, nsExp, bExp := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	nsAddr := b.Config().NamesrvAddr
	const topic, group = "MetricsTopic", "metrics_group"
	admin, err := client.NewAdmin(client.WithNameServer(nsAddr), client.WithLogger(quietLog()))
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.CreateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, BrokerAddr: b.Addr()}))
	require.Eventually(t, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil }, waitFor, 20*time.Millisecond)

	p, err := client.NewProducer(client.WithNameServer(nsAddr), client.WithGroupName("metrics_producer"), client.WithLogger(quietLog()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	const sent = 200
	for i := range sent {
		_, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprintf("body-%03d", i))))
		require.NoError(t, err)
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	var storeBytes int64
	c, err := client.NewPushConsumer(client.WithNameServer(nsAddr), client.WithGroupName(group), client.WithLogger(quietLog()),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithPersistInterval(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if !seen[m.MsgID()] {
				seen[m.MsgID()] = true
				storeBytes += int64(m.StoreSize)
			}
		}
		return client.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == sent }, waitFor, 20*time.Millisecond)

	tl := map[string]string{"topic": topic}
	gl := map[string]string{"topic": topic, "group": group}
	// The consumer commits its offsets every 100 ms: wait for lag 0.
	require.Eventually(t, func() bool {
		v, ok := value(scrape(t, bExp), "rocketmq_message_accumulation", gl)
		return ok && v == 0
	}, waitFor, 50*time.Millisecond, "the group's lag reaches zero")
	require.NoError(t, c.Shutdown())

	fams := scrape(t, bExp)
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_messages_in_total", tl))
	assert.Equal(t, float64(storeBytes), must(t, fams, "rocketmq_throughput_in_total", tl))
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_producer_offset", tl))
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_messages_out_total", map[string]string{"topic": topic, "consumer_group": group}))
	assert.Equal(t, float64(storeBytes), must(t, fams, "rocketmq_throughput_out_total", map[string]string{"topic": topic, "consumer_group": group}))
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_consumer_offset", gl))
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_brokeruntime_msg_put_total_today_now", nil))
	assert.Equal(t, float64(sent), must(t, fams, "rocketmq_brokeruntime_msg_gettotal_today_now", nil))
	for q := range 4 {
		assert.Zero(t, must(t, fams, "rocketmq_group_diff", map[string]string{"topic": topic, "group": group, "queueid": fmt.Sprint(q)}))
	}
	// A SYNC_FLUSH send waits for group commit at most once (not at all
	// when an earlier round already flushed its record).
	waiters := must(t, fams, "rocketmq_group_commit_waiters_total", nil)
	assert.Positive(t, waiters)
	assert.LessOrEqual(t, waiters, float64(sent))
	assert.LessOrEqual(t, must(t, fams, "rocketmq_group_commit_rounds_total", nil), waiters)
	assert.Positive(t, must(t, fams, "rocketmq_store_flush_latency_seconds", nil))
	assert.Positive(t, must(t, fams, "rocketmq_store_group_commit_latency_seconds", nil))
	// One put in 16 is timed: about 12 of 200 (none at all has odds of 2.5e-6).
	assert.Positive(t, must(t, fams, "rocketmq_store_put_latency_seconds", nil))
	pulls := must(t, fams, "rocketmq_pulls_found_total", map[string]string{"source": "page_cache"}) +
		must(t, fams, "rocketmq_pulls_found_total", map[string]string{"source": "disk"})
	assert.Positive(t, pulls)
	assert.Zero(t, must(t, fams, "rocketmq_requests_rejected_total", map[string]string{"processor": "send"}))
	assert.Positive(t, must(t, fams, "rocketmq_processor_queue_capacity", map[string]string{"processor": "send"}))
	assert.Positive(t, must(t, fams, "rocketmq_storage_size", nil))
	assert.Positive(t, must(t, fams, "rocketmq_brokeruntime_commitlogdir_capacity_total", nil))
	assert.Contains(t, fams, "go_goroutines", "the Go runtime's collector is registered")

	// With the consumer gone, what is sent now is the group's backlog.
	const backlog = 7
	for i := range backlog {
		_, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprintf("late-%d", i))))
		require.NoError(t, err)
	}
	fams = scrape(t, bExp)
	assert.Equal(t, float64(backlog), must(t, fams, "rocketmq_message_accumulation", gl))
	diff := 0.0
	for q := range 4 {
		diff += must(t, fams, "rocketmq_group_diff", map[string]string{"topic": topic, "group": group, "queueid": fmt.Sprint(q)})
	}
	assert.Equal(t, float64(backlog), diff, "per-queue lag sums to the backlog")
	assert.Equal(t, float64(sent+backlog), must(t, fams, "rocketmq_messages_in_total", tl))

	nf := scrape(t, nsExp)
	assert.Equal(t, 1.0, must(t, nf, "rocketmq_namesrv_brokers", nil))
	assert.Equal(t, 1.0, must(t, nf, "rocketmq_namesrv_broker", map[string]string{"broker": "broker-m", "brokerId": "0", "addr": b.Addr()}))
	assert.GreaterOrEqual(t, must(t, nf, "rocketmq_namesrv_requests_total", map[string]string{"request": "REGISTER_BROKER"}), 1.0)
	assert.GreaterOrEqual(t, must(t, nf, "rocketmq_namesrv_requests_total", map[string]string{"request": "GET_ROUTEINFO_BY_TOPIC"}), 1.0)
	assert.Positive(t, must(t, nf, "rocketmq_namesrv_topics", nil))
}

// TestExporterLifecycle covers the HTTP side: a second Start fails, an
// unknown path is 404, Shutdown twice is fine.
func TestExporterLifecycle(t *testing.T) {
	e, err := NewExporter("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, e.Shutdown(context.Background()), "before Start")
	require.NoError(t, e.Start())
	require.ErrorIs(t, e.Start(), ErrExporterStarted)
	resp, err := http.Get("http://" + e.Addr() + "/nope")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, err = http.Get("http://" + e.Addr() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.True(t, strings.Contains(string(body), "go_goroutines"))
	require.NoError(t, e.Shutdown(context.Background()))
	require.NoError(t, e.Shutdown(context.Background()))
	_, err = http.Get("http://" + e.Addr() + "/metrics")
	assert.Error(t, err, "nothing listens after Shutdown")
}

// TestScrapeReplicationLag: a master reports every slave connection's
// acknowledged offset and lag in bytes, exactly as far as the slave's last
// report; a slave reports how far it is behind its master.
func TestScrapeReplicationLag(t *testing.T) {
	ns, m, _, mExp := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	const topic = "ReplTopic"
	admin, err := client.NewAdmin(client.WithNameServer(ns.Addr()), client.WithLogger(quietLog()))
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.CreateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1, BrokerAddr: m.Addr()}))
	require.Eventually(t, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil }, waitFor, 20*time.Millisecond)
	p, err := client.NewProducer(client.WithNameServer(ns.Addr()), client.WithGroupName("repl_producer"), client.WithLogger(quietLog()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	send := func(n int) {
		for i := range n {
			_, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprintf("r-%d", i))))
			require.NoError(t, err)
		}
	}
	send(20)
	firstEnd := m.Store().CommitLogMaxOffset()

	// A raw slave speaking RocketMQ's HA protocol: it reports offset 0,
	// so its lag is everything the master holds.
	kv, err := admin.BrokerRuntimeStats(ctx, m.Addr())
	require.NoError(t, err)
	conn, err := net.Dial("tcp", kv["haServerAddr"])
	require.NoError(t, err)
	defer conn.Close()
	report := func(off int64) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(off))
		_, err := conn.Write(b[:])
		require.NoError(t, err)
	}
	report(0)
	drained := make(chan struct{})
	go func() { // drainLoop: reads the master's pushes so it never blocks
		defer close(drained)
		_, _ = io.Copy(io.Discard, conn)
	}()
	defer func() { conn.Close(); <-drained }()
	peer := map[string]string{"slave": conn.LocalAddr().String()}
	require.Eventually(t, func() bool {
		v, ok := value(scrape(t, mExp), "rocketmq_replication_lag_bytes", peer)
		return ok && v == float64(firstEnd)
	}, waitFor, 20*time.Millisecond, "the raw slave lags by all %d bytes", firstEnd)
	fams := scrape(t, mExp)
	assert.Zero(t, must(t, fams, "rocketmq_replication_slave_ack_offset", peer))
	assert.Equal(t, 1.0, must(t, fams, "rocketmq_replication_slaves", nil))

	report(firstEnd)
	require.Eventually(t, func() bool {
		v, ok := value(scrape(t, mExp), "rocketmq_replication_lag_bytes", peer)
		return ok && v == 0
	}, waitFor, 20*time.Millisecond, "caught up by its report")

	// A real slave follows; the raw one now lags by what came after its report.
	s, sExp := mustBroker(t, ns.Addr(), func(c *conf.BrokerConfig) { c.BrokerID, c.BrokerRole = 1, conf.RoleSlave })
	send(10)
	end := m.Store().CommitLogMaxOffset()
	require.Eventually(t, func() bool {
		return s.Store().CommitLogMaxOffset() == end
	}, waitFor, 20*time.Millisecond, "the slave catches up")
	require.Eventually(t, func() bool {
		fams := scrape(t, mExp)
		f := fams["rocketmq_replication_slave_ack_offset"]
		if f == nil || must(t, fams, "rocketmq_replication_slaves", nil) != 2 {
			return false
		}
		for _, mt := range f.Metric {
			for _, lp := range mt.Label {
				if lp.GetName() == "slave" && lp.GetValue() != peer["slave"] && mt.Gauge.GetValue() == float64(end) {
					return true
				}
			}
		}
		return false
	}, waitFor, 20*time.Millisecond, "the master sees the real slave acknowledge everything")
	fams = scrape(t, mExp)
	assert.Equal(t, float64(end-firstEnd), must(t, fams, "rocketmq_replication_lag_bytes", peer))
	require.Eventually(t, func() bool {
		v, ok := value(scrape(t, sExp), "rocketmq_replication_behind_master_bytes", nil)
		return ok && v == 0
	}, waitFor, 20*time.Millisecond, "the slave reports itself caught up")
	_, onSlave := scrape(t, sExp)["rocketmq_replication_slaves"]
	assert.False(t, onSlave, "a slave has no slaves of its own")
}
