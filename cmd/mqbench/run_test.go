package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// mustStartCluster starts a nameserver and one small broker on loopback
// with a temporary store, and returns the nameserver's address.
func mustStartCluster(t *testing.T) string {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)

	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress = "127.0.0.1"
	nsCfg.ListenPort = 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	nsCfg.ServerSelectorThreads = 1
	ns, err := nameserver.New(nsCfg, log)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, ns.Shutdown(ctx))
	})

	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "bench-test"
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.NamesrvAddr = ns.Addr()
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 4 << 20
	cfg.MappedFileSizeConsumeQueue = 20 * 10000
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 1
	b, err := broker.New(&cfg, log)
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, b.Shutdown(ctx))
	})
	return ns.Addr()
}

// field returns the integer after label in line, failing the test if absent.
func field(t *testing.T, out, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	require.Len(t, m, 2, "%q not in:\n%s", pattern, out)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return n
}

// The tool against real servers: a bounded producer run, then a consumer
// that reads exactly what was stored (the warm-up message included), then
// the latency command.
func TestProducerConsumerLatencyAgainstBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nameserver and a broker")
	}
	ns := mustStartCluster(t)
	ctx := context.Background()

	var out, errOut bytes.Buffer
	code := run(ctx, []string{"producer", "-n", ns, "-t", "BenchT", "-w", "4", "-s", "256", "--batch", "8",
		"--count", "300", "-d", "20s", "--queues", "4", "--keys"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	s := out.String()
	assert.Regexp(t, `(?m)^\[Complete\] Send Total: 300 Send TPS: \d+ Max RT\(ms\): \d+ Average RT\(ms\): [\d.]+ Send Failed: 0 Response Failed: 0$`, s)
	assert.Regexp(t, `(?m)^p50/p99/p999 RT\(ms\): [\d.]+ [\d.]+ [\d.]+$`, s)
	assert.Regexp(t, `(?m)^\[CPU\] mqbench used `, s)

	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"consumer", "-n", ns, "-t", "BenchT", "--from", "first", "--count", "301", "-d", "20s"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.Equal(t, int64(301), field(t, out.String(), `\[Complete\] Consume Total: (\d+) `), "300 + the warm-up message")
	assert.Positive(t, field(t, out.String(), `Consume TPS: (\d+) Average\(B2C\)`))

	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"latency", "-n", ns, "-t", "BenchLat", "--rate", "200", "-d", "1s", "-w", "2"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	sent := field(t, out.String(), `\[Complete\] Send Total: (\d+) Receive Total`)
	got := field(t, out.String(), `Receive Total: (\d+) Lost`)
	assert.Greater(t, sent, int64(100), "about 200 paced over 1 s")
	assert.Equal(t, sent, got, "every sent message comes back")
	assert.Regexp(t, `(?m)^p50/p99/p999 E2E\(ms\): [\d.]+ [\d.]+ [\d.]+$`, out.String())
}
