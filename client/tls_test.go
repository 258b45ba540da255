package client

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/testcert"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// The SDK over mutual TLS: a nameserver and a broker that serve TLS only
// and require client certificates of the test CA. The broker registers with
// its own client certificate (tls.enable, tls.client.*), so the route the
// SDK finds proves the broker's outgoing TLS too.
func TestE2ESDKOverMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t, "sdk")
	srv := ca.Loopback(t, "server")
	brokerCert := ca.Client(t, "broker")
	appCert := ca.Client(t, "app")
	set := func(c *conf.TLSConfig) {
		c.TLSServerMode = "enforcing"
		c.TLSServerCertPath, c.TLSServerKeyPath = srv.CertPath, srv.KeyPath
		c.TLSServerNeedClientAuth, c.TLSServerTrustCertPath = "require", ca.CertPath
		c.TLSEnable = true
		c.TLSClientCertPath, c.TLSClientKeyPath = brokerCert.CertPath, brokerCert.KeyPath
		c.TLSClientTrustCertPath = ca.CertPath
	}
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress, nsCfg.ListenPort = "127.0.0.1", 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	nsCfg.ServerSelectorThreads = 1
	set(&nsCfg.TLSConfig)
	ns, err := nameserver.New(nsCfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, ns.Shutdown(ctx))
	})
	b := MustStartBroker(t, "broker-a", ns.Addr(), func(c *conf.BrokerConfig) { set(&c.TLSConfig) })

	withTLS := WithTLS(TLSOptions{TrustCertPath: ca.CertPath, CertPath: appCert.CertPath, KeyPath: appCert.KeyPath})
	a := MustAdmin(t, WithNameServer(ns.Addr()), withTLS)
	const topic = "TLSTopic"
	require.NoError(t, a.CreateTopic(testCtx(t), TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, BrokerAddr: b.Addr()}))
	require.Eventually(t, func() bool {
		_, err := a.TopicRoute(testCtx(t), topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the broker registered over TLS")

	p := MustStartProducer(t, WithNameServer(ns.Addr()), withTLS)
	for i := range 10 {
		_, err := p.SendSync(testCtx(t), NewMessage(topic, fmt.Appendf(nil, "m%d", i)))
		require.NoError(t, err)
	}
	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe(topic, MessageSelector{}, col.handler))
	}, append(fastOptions(ns.Addr()), withTLS, WithGroupName("tls-cg"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool { return col.count() >= 10 }, 15*time.Second, 20*time.Millisecond)

	// Without a client certificate, or without TLS, nothing gets through.
	for name, opt := range map[string]Option{
		"no client certificate": WithTLS(TLSOptions{TrustCertPath: ca.CertPath}),
		"plain":                 WithLogger(testLogger()),
	} {
		p := MustStartProducer(t, WithNameServer(ns.Addr()), opt, WithRetry(0), WithSendTimeout(2*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.SendSync(ctx, NewMessage(topic, []byte("refused")))
		cancel()
		assert.Error(t, err, name)
	}
	stats, err := a.TopicStats(testCtx(t), topic)
	require.NoError(t, err)
	var stored int64
	for _, o := range stats {
		stored += o.MaxOffset
	}
	assert.EqualValues(t, 10, stored, "the refused sends stored nothing")

	// A bad trust file fails the constructor.
	_, err = NewProducer(WithNameServer(ns.Addr()), WithTLS(TLSOptions{TrustCertPath: "/nonexistent/ca.pem"}))
	assert.ErrorIs(t, err, ErrBadOption)
}
