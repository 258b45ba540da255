package nameserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestKVConfigManagerPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "kvConfig.json")
	k := NewKVConfigManager(path, testLogger())
	require.NoError(t, k.Load(), "a missing file is an empty table")
	require.NoError(t, k.Put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4"))
	require.NoError(t, k.Put("ns", "k", "v"))
	require.NoError(t, k.Put("ns", "k", "v2"))
	require.NoError(t, k.Delete("ns", "missing"))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, `{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"},"ns":{"k":"v2"}}}`, string(b))

	k2 := NewKVConfigManager(path, testLogger())
	require.NoError(t, k2.Load())
	v, ok := k2.Get("ns", "k")
	assert.True(t, ok)
	assert.Equal(t, "v2", v)
	assert.Equal(t, []string{"ORDER_TOPIC_CONFIG", "ns"}, k2.Namespaces())

	require.NoError(t, k2.Delete("ns", "k"))
	_, ok = k2.List("ns")
	assert.False(t, ok)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"kvConfig.json", "kvConfig.json.bak"}, names, "the previous version, no temp files")
	b, err = os.ReadFile(path + fsutil.BackupSuffix)
	require.NoError(t, err)
	assert.JSONEq(t, `{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"},"ns":{"k":"v2"}}}`, string(b))
}

// TestKVConfigDamagedFile: a damaged kvConfig.json loads its .bak with a
// warning naming both files (the damaged one is kept aside); with the .bak
// damaged too, or missing, the nameserver refuses to start and names both.
func TestKVConfigDamagedFile(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	path := cfg.KvConfigPath
	k := NewKVConfigManager(path, testLogger())
	require.NoError(t, k.Put(protocol.NamespaceOrderTopicConfig, "TopicA", "broker-a:4"))
	require.NoError(t, k.Put("ns", "k", "v")) // the .bak holds TopicA only

	for _, damage := range []string{`{"configTable":`, `null`, `{"configTable":{"ns":{"k":5}}}`, ""} {
		require.NoError(t, os.WriteFile(path, []byte(damage), 0o644))
		log, hook := test.NewNullLogger()
		ns, err := New(cfg, log)
		require.NoError(t, err)
		require.NoError(t, ns.Start(), "damage %q", damage)
		v, ok := ns.kv.Get(protocol.NamespaceOrderTopicConfig, "TopicA")
		assert.True(t, ok)
		assert.Equal(t, "broker-a:4", v)
		var warned bool
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel && e.Data["file"] == path {
				warned = e.Data["backup"] == path+fsutil.BackupSuffix
			}
		}
		assert.True(t, warned, "a warning names both files")
		mustShutdown(t, ns)
		aside, err := filepath.Glob(path + ".corrupt-*")
		require.NoError(t, err)
		require.Len(t, aside, 1)
		require.NoError(t, os.Remove(aside[0]))
	}

	for _, bak := range []*string{ptr(`{"configTable"`), nil} {
		require.NoError(t, os.WriteFile(path, []byte(`{"configTable":`), 0o644))
		if bak != nil {
			require.NoError(t, os.WriteFile(path+fsutil.BackupSuffix, []byte(*bak), 0o644))
		} else {
			require.NoError(t, os.Remove(path+fsutil.BackupSuffix))
		}
		ns, err := New(cfg, testLogger())
		require.NoError(t, err)
		err = ns.Start()
		require.ErrorIs(t, err, fsutil.ErrNoValidCopy)
		assert.Contains(t, err.Error(), path+": ")
		assert.Contains(t, err.Error(), path+fsutil.BackupSuffix+": ")
		mustShutdown(t, ns)
	}
}

func ptr(s string) *string { return &s }

func TestKVConfigPersistFailureRollsBack(t *testing.T) {
	dir := t.TempDir()
	// The parent "directory" is a file: every write fails.
	blocker := filepath.Join(dir, "blocker")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	k := NewKVConfigManager(filepath.Join(blocker, "kvConfig.json"), testLogger())
	err := k.Put("ns", "k", "v")
	require.ErrorIs(t, err, ErrKVPersist)
	_, ok := k.Get("ns", "k")
	assert.False(t, ok, "a change that could not be persisted is not kept")
	assert.Empty(t, k.Namespaces())
}

func kvReq(code remoting.RequestCode, h any) *remoting.Command {
	return remoting.NewRequest(code, protocol.EncodeHeader(h, nil), nil)
}

func TestKVConfigOverTheWireSurvivesRestart(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	cfg.OrderMessageEnable = true
	ns := MustStartNameServer(t, cfg)
	cl := mustClient(t)

	resp := mustInvoke(t, cl, ns.Addr(), kvReq(remoting.PutKVConfig, &protocol.PutKVConfigRequestHeader{Namespace: "ns", Key: "k", Value: "v"}))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.PutKVConfig, &protocol.PutKVConfigRequestHeader{Namespace: protocol.NamespaceOrderTopicConfig, Key: "TopicA", Value: "broker-a:4"}))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.PutKVConfig, map[string]string{"namespace": "ns"}, nil))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "key")

	// Restart on the same file.
	mustShutdown(t, ns)
	ns = MustStartNameServer(t, cfg)

	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.GetKVConfig, &protocol.GetKVConfigRequestHeader{Namespace: "ns", Key: "k"}))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	var gh protocol.GetKVConfigResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &gh))
	assert.Equal(t, "v", gh.Value)

	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.GetKVListByNamespace, &protocol.GetKVListByNamespaceRequestHeader{Namespace: "ns"}))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	table, err := protocol.DecodeKVTable(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "v"}, table.Table)

	// The order config reaches brokers (REGISTER_BROKER's body) and clients (the route).
	a := brokerA()
	resp = mustInvoke(t, cl, ns.Addr(), a.registerRequest(t))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	table, err = protocol.DecodeKVTable(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"TopicA": "broker-a:4"}, table.Table)
	assert.Equal(t, "broker-a:4", mustRoute(t, cl, ns.Addr(), "TopicA").OrderTopicConf)
	assert.Empty(t, mustRoute(t, cl, ns.Addr(), "TopicB").OrderTopicConf)

	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.DeleteKVConfig, &protocol.DeleteKVConfigRequestHeader{Namespace: "ns", Key: "k"}))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.GetKVConfig, &protocol.GetKVConfigRequestHeader{Namespace: "ns", Key: "k"}))
	assert.Equal(t, remoting.QueryNotFound, resp.ResponseCode())
	assert.Equal(t, "No config item, Namespace: ns Key: k", resp.Remark)
	resp = mustInvoke(t, cl, ns.Addr(), kvReq(remoting.GetKVListByNamespace, &protocol.GetKVListByNamespaceRequestHeader{Namespace: "ns"}))
	assert.Equal(t, remoting.QueryNotFound, resp.ResponseCode())
}

func TestNamesrvConfigGetAndUpdate(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	ns := MustStartNameServer(t, cfg)
	cl := mustClient(t)
	update := func(body string) *remoting.Command {
		return mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.UpdateNamesrvConfig, nil, []byte(body)))
	}
	getConfig := func() string {
		resp := mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.GetNamesrvConfig, nil, nil))
		require.Equal(t, remoting.Success, resp.ResponseCode())
		return string(resp.Body)
	}
	assert.Contains(t, getConfig(), "kvConfigPath="+cfg.KvConfigPath+"\n")
	assert.Contains(t, getConfig(), "orderMessageEnable=false\n")

	resp := update("orderMessageEnable=true\nbrokerChannelExpiredTime=60000\n")
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.True(t, ns.Config().OrderMessageEnable)
	assert.Equal(t, int64(60000), ns.Config().BrokerChannelExpiredTime)
	assert.Contains(t, getConfig(), "orderMessageEnable=true\n")

	tests := []struct {
		name   string
		body   string
		code   remoting.ResponseCode
		remark string
	}{
		{"kv path (CVE-2023-37582)", "kvConfigPath=/etc/cron.d/x\n", remoting.NoPermission, "kvConfigPath"},
		{"config store path", "configStorePath=/tmp/x\n", remoting.NoPermission, "configStorePath"},
		{"rocketmq home", "rocketmqHome=/tmp\n", remoting.NoPermission, "rocketmqHome"},
		{"listen port", "listenPort=1\n", remoting.NoPermission, "listenPort"},
		{"unknown key", "filterServerNums=1\n", remoting.NoPermission, "filterServerNums"},
		{"allowed mixed with forbidden", "orderMessageEnable=false\nkvConfigPath=/tmp/x\n", remoting.NoPermission, "kvConfigPath"},
		{"bad bool", "orderMessageEnable=maybe\n", remoting.SystemError, "orderMessageEnable"},
		{"bad interval", "scanNotActiveBrokerInterval=0\n", remoting.SystemError, "scanNotActiveBrokerInterval"},
		// As a Duration it would overflow negative: the scan timer would spin.
		{"overflowing interval", "scanNotActiveBrokerInterval=92233720368547758\n", remoting.SystemError, "scanNotActiveBrokerInterval"},
		{"overflowing expiry", "brokerChannelExpiredTime=9223372036854775807\n", remoting.SystemError, "brokerChannelExpiredTime"},
		{"env name with newline", `productEnvName=a\nb=c`, remoting.SystemError, "productEnvName"},
		{"bad escape", `productEnvName=\u12`, remoting.SystemError, "string2Properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := update(tt.body)
			assert.Equal(t, tt.code, resp.ResponseCode())
			assert.Contains(t, resp.Remark, tt.remark)
		})
	}
	after := ns.Config()
	assert.Equal(t, cfg.KvConfigPath, after.KvConfigPath)
	assert.True(t, after.OrderMessageEnable, "a refused update changes nothing")
	assert.Equal(t, "center", after.ProductEnvName)
	assert.False(t, strings.Contains(getConfig(), "/etc/cron.d"))

	resp = update("")
	assert.Equal(t, remoting.Success, resp.ResponseCode(), "an empty update is a no-op")
}
