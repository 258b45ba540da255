package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/cmd/internal/clustertest"
	"github.com/gorocketmq/gorocketmq/conf"
)

// mustStartCluster starts a nameserver and one small broker on loopback
// with a temporary store, and returns the nameserver's address.
func mustStartCluster(t *testing.T) string {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)

	ns, _ := clustertest.MustStart(t, clustertest.Options{
		BrokerName: "bench-test",
		Log:        log,
		Broker: func(c *conf.BrokerConfig) {
			c.MappedFileSizeCommitLog = 4 << 20
			c.MappedFileSizeConsumeQueue = 20 * 10000
		},
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
