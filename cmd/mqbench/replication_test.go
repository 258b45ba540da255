package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/cmd/internal/clustertest"
	"github.com/gorocketmq/gorocketmq/conf"
)

// The replication commands against an in-process master and slave: the
// catch-up of a slave started after the master took messages, then a
// short replag run in which every message reaches the slave.
func TestReplicationCommandsAgainstMasterAndSlave(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nameserver, a master and a slave")
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	small := func(c *conf.BrokerConfig) {
		c.MappedFileSizeCommitLog = 4 << 20
		c.MappedFileSizeConsumeQueue = 20 * 10000
		c.HaSendHeartbeatInterval = 500
	}
	ns, master := clustertest.MustStart(t, clustertest.Options{BrokerName: "bench-ha", Log: log, Broker: small})
	ctx := context.Background()

	var out, errOut bytes.Buffer
	code := run(ctx, []string{"producer", "-n", ns.Addr(), "-t", "BenchHA", "-w", "2", "-s", "512",
		"--count", "200", "-d", "20s", "--queues", "2"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())

	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName, cfg.BrokerID, cfg.BrokerRole = "bench-ha", 1, conf.RoleSlave
	cfg.BrokerIP1, cfg.BindAddress, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	cfg.NamesrvAddr = ns.Addr()
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "slave")
	cfg.MaxHashSlotNum, cfg.MaxIndexNum, cfg.ServerSelectorThreads = 1000, 4000, 1
	small(&cfg)
	slave, err := broker.New(&cfg, log)
	require.NoError(t, err)
	require.NoError(t, slave.Start())
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, slave.Shutdown(sctx))
	})

	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"hacatchup", "--master", master.Addr(), "--slave", slave.Addr(), "--from-offset", "0", "-d", "30s"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	// A new slave copies the master's newest file: here, all of it.
	copied := field(t, out.String(), `\[Complete\] Catch-up: (\d+) bytes from offset 0 to \d+ in [\d.]+ s: [\d.]+ MB/s`)
	assert.Equal(t, master.Store().CommitLogMaxOffset(), copied)

	// The topic the slave copied at its start (a new one would take the
	// next copy, 10 s later).
	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"replag", "-n", ns.Addr(), "-t", "BenchHA", "--queues", "2", "--master", master.Addr(),
		"--slave", slave.Addr(), "--rate", "200", "-w", "2", "-d", "1s"}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	s := out.String()
	sent := field(t, s, `\[Complete\] Send Total: (\d+) Replicated`)
	assert.Greater(t, sent, int64(100), "about 200 paced over 1 s")
	assert.Equal(t, sent, field(t, s, `Replicated: (\d+) Missing`), "every message reaches the slave")
	assert.Equal(t, int64(0), field(t, s, `Missing: (\d+) `))
	assert.Regexp(t, `(?m)^p50/p99/p999 Lag\(ms\): -?[\d.]+ -?[\d.]+ -?[\d.]+$`, s)
	assert.Regexp(t, `\((\d+) messages placed\)`, s)
	assert.Equal(t, sent, field(t, s, `\((\d+) messages placed\)`), "every message's ack lag is placed")
}
