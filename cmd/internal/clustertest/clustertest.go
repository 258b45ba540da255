// Package clustertest starts an in-process nameserver and broker on
// loopback for the command tests, so each command's tests drive real
// servers without repeating how to configure them small and temporary.
package clustertest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// stopTimeout bounds each server's shutdown at test cleanup.
const stopTimeout = 10 * time.Second

// Options shape the cluster MustStart starts.
type Options struct {
	// BrokerName names the broker (of DefaultCluster).
	BrokerName string
	// Log receives both servers' logs.
	Log logrus.FieldLogger
	// Namesrv and Broker, when not nil, adjust the configs after the
	// loopback, port-0, temp-dir and small-index settings.
	Namesrv func(*conf.NamesrvConfig)
	Broker  func(*conf.BrokerConfig)
}

// MustStart starts a nameserver on 127.0.0.1:0 with its KV file in a temp
// dir, then a broker registering with it whose store lives in a temp dir,
// and stops both (broker first) when the test ends.
func MustStart(t testing.TB, o Options) (*nameserver.NameServer, *broker.Broker) {
	t.Helper()
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress = "127.0.0.1"
	nsCfg.ListenPort = 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	nsCfg.ServerSelectorThreads = 1
	if o.Namesrv != nil {
		o.Namesrv(&nsCfg)
	}
	ns, err := nameserver.New(nsCfg, o.Log)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		assert.NoError(t, ns.Shutdown(ctx))
	})

	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = o.BrokerName
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.NamesrvAddr = ns.Addr()
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 1
	if o.Broker != nil {
		o.Broker(&cfg)
	}
	b, err := broker.New(&cfg, o.Log)
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		assert.NoError(t, b.Shutdown(ctx))
	})
	return ns, b
}
