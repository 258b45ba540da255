package broker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/testcert"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// With every remoting port TLS-only, a master and its slave still register
// (tls.enable) and the slave copies the master's metadata from the master's
// remoting port over TLS.
func TestSlaveSyncOverTLS(t *testing.T) {
	baVerifyNoLeaks(t)
	ca := testcert.NewCA(t, "broker")
	srv := ca.Loopback(t, "server")
	set := func(c *conf.TLSConfig) {
		c.TLSServerMode = "enforcing"
		c.TLSServerCertPath, c.TLSServerKeyPath = srv.CertPath, srv.KeyPath
		c.TLSEnable, c.TLSClientTrustCertPath = true, ca.CertPath
	}
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress, nsCfg.ListenPort = "127.0.0.1", 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	nsCfg.ServerSelectorThreads, nsCfg.ServerWorkerThreads = 1, 2
	set(&nsCfg.TLSConfig)
	ns, err := nameserver.New(nsCfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, ns.Shutdown(ctx))
	})

	mcfg := testBrokerConfig(t)
	mcfg.NamesrvAddr = ns.Addr()
	set(&mcfg.TLSConfig)
	master := MustStartBroker(t, mcfg)
	tlsCfg, err := remoting.ClientTLSConfig(remoting.ClientTLSOptions{TrustCertPath: ca.CertPath})
	require.NoError(t, err)
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger(), TLS: tlsCfg})
	t.Cleanup(func() { _ = cl.Close() })
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("TLSSyncTopic", 4, 4, 6)).ResponseCode())

	slave := mustStartSlave(t, ns.Addr(), func(c *conf.BrokerConfig) { set(&c.TLSConfig) })
	assert.Equal(t, master.Addr(), slave.MasterAddr(), "the slave registered over TLS")
	require.Eventually(t, func() bool { return slave.topics.Get("TLSSyncTopic") != nil }, 10*time.Second, 5*time.Millisecond,
		"the slave copied the master's topics over TLS")
}
