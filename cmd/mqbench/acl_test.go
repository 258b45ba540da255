package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/cmd/internal/clustertest"
	"github.com/gorocketmq/gorocketmq/conf"
)

// TestProducerSignsWithAKSK: against a broker with aclEnable, a producer
// run with -ak/-sk sends and consumes; without them every send fails.
func TestProducerSignsWithAKSK(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nameserver and a broker")
	}
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "conf"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "conf", "plain_acl.yml"),
		[]byte("accounts:\n  - {accessKey: bencher, secretKey: bench-secret, admin: true}\n"), 0o600))
	log := logrus.New()
	log.SetOutput(io.Discard)
	ns, _ := clustertest.MustStart(t, clustertest.Options{BrokerName: "bench-acl", Log: log, Broker: func(c *conf.BrokerConfig) {
		c.MappedFileSizeCommitLog = 4 << 20
		c.MappedFileSizeConsumeQueue = 20 * 10000
		c.AclEnable = true
		c.RocketmqHome = home
	}})
	ctx := context.Background()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"producer", "-n", ns.Addr(), "-t", "BenchAcl", "-w", "2", "-s", "128", "--count", "50", "-d", "20s",
		"--queues", "2", "-ak", "bencher", "-sk", "bench-secret"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.Regexp(t, `(?m)^\[Complete\] Send Total: 50 .* Send Failed: 0 Response Failed: 0$`, out.String())
	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"consumer", "-n", ns.Addr(), "-t", "BenchAcl", "--from", "first", "--count", "51", "-d", "20s",
		"-ak", "bencher", "-sk", "bench-secret"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.Equal(t, int64(51), field(t, out.String(), `\[Complete\] Consume Total: (\d+) `))

	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"producer", "-n", ns.Addr(), "-t", "BenchAcl", "-w", "1", "-s", "128", "--count", "5", "-d", "2s"}, &out, &errOut)
	assert.NotEqual(t, 0, code, "unsigned: %s", out.String())
	assert.Contains(t, out.String()+errOut.String(), "code 16")

	_, _, err := setupRun("producer", &producerFlags{}, []string{"-t", "T", "-ak", "bencher"}, io.Discard)
	assert.ErrorIs(t, err, errBadFlag)
}
