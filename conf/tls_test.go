package conf

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/testcert"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// The dotted tls.* keys load from a properties file, from YAML written
// flat or nested, and as RocketMQ spells them whatever the case.
func TestLoadTLSKeys(t *testing.T) {
	ca := testcert.NewCA(t, "conf")
	srv := ca.Loopback(t, "srv")
	props := "tls.server.mode=enforcing\n" +
		"tls.server.certPath=" + srv.CertPath + "\n" +
		"tls.server.keyPath=" + srv.KeyPath + "\n" +
		"tls.server.keyPassword=hush\n" +
		"tls.server.need.client.auth=require\n" +
		"tls.server.trustCertPath=" + ca.CertPath + "\n" +
		"tls.enable=true\ntls.client.authServer=true\n" +
		"serverMaxConnections=100\nserverMaxConnectionsPerAddress=10\n"
	nested := "tls:\n  server:\n    mode: enforcing\n    certPath: " + srv.CertPath + "\n    keyPath: " + srv.KeyPath +
		"\n    keyPassword: hush\n    need:\n      client:\n        auth: require\n    trustCertPath: " + ca.CertPath +
		"\n  enable: true\n  client:\n    authServer: true\nserverMaxConnections: 100\nserverMaxConnectionsPerAddress: 10\n"
	flatYAML := strings.NewReplacer("=", ": ").Replace(props)
	for name, file := range map[string]string{"broker.conf": props, "nested.yaml": nested, "flat.yaml": flatYAML} {
		t.Run(name, func(t *testing.T) {
			log, hook := test.NewNullLogger()
			cfg := DefaultBrokerConfig()
			cfg.StorePathRootDir = t.TempDir()
			require.NoError(t, Load(writeFile(t, name, file), &cfg, log))
			assert.Empty(t, hook.AllEntries(), "no key is unknown")
			assert.Equal(t, "enforcing", cfg.TLSServerMode)
			assert.Equal(t, srv.CertPath, cfg.TLSServerCertPath)
			assert.Equal(t, srv.KeyPath, cfg.TLSServerKeyPath)
			assert.Equal(t, "hush", cfg.TLSServerKeyPassword)
			assert.Equal(t, "require", cfg.TLSServerNeedClientAuth)
			assert.Equal(t, ca.CertPath, cfg.TLSServerTrustCertPath)
			assert.True(t, cfg.TLSEnable)
			assert.True(t, cfg.TLSClientAuthServer)
			assert.Equal(t, 100, cfg.ServerMaxConnections)
			assert.Equal(t, 10, cfg.ServerMaxConnectionsPerAddress)
			assert.Equal(t, remoting.TLSEnforcing, cfg.ServerTLSMode())

			out := Format(&cfg)
			assert.Contains(t, out, "tls.server.mode=enforcing\n")
			assert.Contains(t, out, "tls.server.keyPassword=******\n", "a password is never printed")
			assert.NotContains(t, out, "hush")
		})
	}
}

// tls.config.file is read after the server's file; its tls.* lines win,
// and it cannot change anything else.
func TestTLSConfigFile(t *testing.T) {
	ca := testcert.NewCA(t, "conf")
	srv := ca.Loopback(t, "srv")
	tlsFile := writeFile(t, "tls.properties", "tls.server.certPath="+srv.CertPath+"\ntls.server.keyPath="+srv.KeyPath+
		"\ntls.server.mode=permissive\nlistenPort=1\ntls.client.trustCertPath="+ca.CertPath+"\n")
	log, hook := test.NewNullLogger()
	cfg := DefaultNamesrvConfig()
	cfg.KvConfigPath = t.TempDir() + "/kv.json"
	require.NoError(t, Load(writeFile(t, "namesrv.conf", "listenPort=9877\ntls.server.mode=enforcing\ntls.config.file="+tlsFile+"\n"), &cfg, log))
	assert.Equal(t, srv.CertPath, cfg.TLSServerCertPath)
	assert.Equal(t, "permissive", cfg.TLSServerMode, "the tls file wins")
	assert.Equal(t, 9877, cfg.ListenPort, "the tls file sets tls.* keys only")
	require.Len(t, hook.AllEntries(), 1)
	assert.Equal(t, "listenPort", hook.LastEntry().Data["key"])

	mode, tlsCfg, err := cfg.ServerTLS()
	require.NoError(t, err)
	assert.Equal(t, remoting.TLSPermissive, mode)
	require.NotNil(t, tlsCfg)
	assert.Len(t, tlsCfg.Certificates, 1)

	err = Load(writeFile(t, "namesrv.conf", "tls.config.file=/nonexistent/tls.properties\n"), &cfg, log)
	assert.ErrorIs(t, err, ErrRead, "a named tls file must exist")
}

func TestTLSConfigValidate(t *testing.T) {
	base := func() BrokerConfig {
		c := DefaultBrokerConfig()
		c.StorePathRootDir = t.TempDir()
		return c
	}
	cases := map[string]struct {
		set     func(*TLSConfig, *ConnLimitConfig)
		wantKey string
	}{
		"unknown mode fails closed": {func(c *TLSConfig, _ *ConnLimitConfig) { c.TLSServerMode = "enforce" }, "tls.server.mode"},
		"enforcing without a cert":  {func(c *TLSConfig, _ *ConnLimitConfig) { c.TLSServerMode = "enforcing" }, "tls.server.mode"},
		"cert without key": {func(c *TLSConfig, _ *ConnLimitConfig) {
			c.TLSServerMode, c.TLSServerCertPath = "enforcing", "/x.pem"
		}, "tls.server.certPath"},
		"client auth without trust": {func(c *TLSConfig, _ *ConnLimitConfig) {
			c.TLSServerMode, c.TLSServerCertPath, c.TLSServerKeyPath, c.TLSServerNeedClientAuth = "enforcing", "/c", "/k", "require"
		}, "tls.server.need.client.auth"},
		"unknown client auth":     {func(c *TLSConfig, _ *ConnLimitConfig) { c.TLSServerNeedClientAuth = "always" }, "tls.server.need.client.auth"},
		"client cert without key": {func(c *TLSConfig, _ *ConnLimitConfig) { c.TLSClientCertPath = "/c" }, "tls.client.certPath"},
		"negative limit":          {func(_ *TLSConfig, l *ConnLimitConfig) { l.ServerMaxConnections = -1 }, "serverMaxConnections"},
		"negative per-address":    {func(_ *TLSConfig, l *ConnLimitConfig) { l.ServerMaxConnectionsPerAddress = -1 }, "serverMaxConnectionsPerAddress"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := base()
			tc.set(&c.TLSConfig, &c.ConnLimitConfig)
			err := c.Validate()
			require.ErrorIs(t, err, ErrBadValue)
			assert.Contains(t, err.Error(), tc.wantKey)
		})
	}

	// Unset mode: permissive with a certificate (RocketMQ's default),
	// disabled without; test mode serves a self-signed one.
	c := base()
	require.NoError(t, c.Validate())
	assert.Equal(t, remoting.TLSDisabled, c.ServerTLSMode())
	mode, tlsCfg, err := c.ServerTLS()
	require.NoError(t, err)
	assert.Equal(t, remoting.TLSDisabled, mode)
	assert.Nil(t, tlsCfg)
	c.TLSServerCertPath, c.TLSServerKeyPath = "/c", "/k"
	require.NoError(t, c.Validate())
	assert.Equal(t, remoting.TLSPermissive, c.ServerTLSMode())
	c = base()
	c.TLSTestModeEnable = true
	require.NoError(t, c.Validate())
	mode, tlsCfg, err = c.ServerTLS()
	require.NoError(t, err)
	assert.Equal(t, remoting.TLSPermissive, mode)
	require.NotNil(t, tlsCfg)
	assert.Len(t, tlsCfg.Certificates, 1, "a self-signed certificate")
}

// The broker's own calls: plain without tls.enable; with it, server
// certificates are checked (chain only) once a trust file or authServer
// asks, and not at all otherwise, as RocketMQ's default.
func TestBrokerClientTLS(t *testing.T) {
	ca := testcert.NewCA(t, "conf")
	c := DefaultBrokerConfig()
	cfg, err := c.ClientTLS()
	require.NoError(t, err)
	assert.Nil(t, cfg)

	c.TLSEnable = true
	cfg, err = c.ClientTLS()
	require.NoError(t, err)
	assert.True(t, cfg.InsecureSkipVerify)
	assert.Nil(t, cfg.VerifyConnection, "nothing verified")

	c.TLSClientTrustCertPath = ca.CertPath
	cfg, err = c.ClientTLS()
	require.NoError(t, err)
	assert.NotNil(t, cfg.VerifyConnection, "the chain is verified")
	assert.NotNil(t, cfg.RootCAs)

	c.TLSClientTrustCertPath = "/nonexistent.pem"
	_, err = c.ClientTLS()
	assert.ErrorIs(t, err, remoting.ErrTLSConfig)
}
