package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/cmd/internal/clustertest"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/testcert"
)

// mqadmin reaches servers that serve TLS only with the --tls options, and
// not without them.
func TestTLSOptions(t *testing.T) {
	ca := testcert.NewCA(t, "mqadmin")
	srv := ca.Loopback(t, "server")
	set := func(c *conf.TLSConfig) {
		c.TLSServerMode = "enforcing"
		c.TLSServerCertPath, c.TLSServerKeyPath = srv.CertPath, srv.KeyPath
		c.TLSEnable, c.TLSClientTrustCertPath = true, ca.CertPath
	}
	ns, _ := clustertest.MustStart(t, clustertest.Options{
		BrokerName: "broker-a",
		Log:        testLogger(),
		Namesrv:    func(c *conf.NamesrvConfig) { set(&c.TLSConfig) },
		Broker:     func(c *conf.BrokerConfig) { smallBroker(c); set(&c.TLSConfig) },
	})
	tlsArgs := []string{"-n", ns.Addr(), "--tlsTrustCertPath", ca.CertPath}
	// The broker registers over TLS too: wait until clusterList shows it.
	require.Eventually(t, func() bool {
		r := mqadmin(t, nil, append([]string{"clusterList"}, tlsArgs...)...)
		return r.code == 0 && len(rows(r.out, "DefaultCluster")) == 1
	}, 10*time.Second, 20*time.Millisecond)
	r := mqadmin(t, nil, append([]string{"topicRoute", "-t", "TBW102"}, tlsArgs...)...)
	assert.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "broker-a")
	r = mqadmin(t, nil, "clusterList", "-n", ns.Addr(), "--tls", "--tlsVerify", "none")
	assert.Equal(t, 0, r.code, "--tlsVerify none trusts any certificate: %s", r.err)

	r = mqadmin(t, nil, "clusterList", "-n", ns.Addr())
	assert.Equal(t, exitFail, r.code, "a plain mqadmin is refused: %s", r.out)
	r = mqadmin(t, nil, "clusterList", "-n", ns.Addr(), "--tls")
	assert.Equal(t, exitFail, r.code, "the system roots do not know the test CA")
	r = mqadmin(t, nil, "clusterList", "-n", ns.Addr(), "--tlsVerify", "maybe")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err, "--tlsVerify")

	r = mqadmin(t, nil, "help", "clusterList")
	assert.Contains(t, r.out, "--tlsTrustCertPath <arg>")
	assert.Contains(t, r.out, "[--tls]")
}
