package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
)

const mqadminACL = `accounts:
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
  - accessKey: plainUser
    secretKey: plain-secret
    defaultTopicPerm: PUB
`

// homeWithTools is a ROCKETMQ_HOME whose conf/tools.yml holds text (none
// when empty).
func homeWithTools(t *testing.T, text string) string {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "conf"), 0o755))
	if text != "" {
		require.NoError(t, os.WriteFile(filepath.Join(home, "conf", "tools.yml"), []byte(text), 0o600))
	}
	return home
}

func TestACLCommands(t *testing.T) {
	brokerHome := homeWithTools(t, "")
	aclPath := filepath.Join(brokerHome, "conf", "plain_acl.yml")
	require.NoError(t, os.WriteFile(aclPath, []byte(mqadminACL), 0o600))
	c := MustStartClusterWith(t, func(cfg *conf.BrokerConfig) {
		cfg.AclEnable = true
		cfg.RocketmqHome = brokerHome
	})
	admin := map[string]string{"NAMESRV_ADDR": c.ns, "ROCKETMQ_HOME": homeWithTools(t, "accessKey: rocketmq2\nsecretKey: 12345678\n")}
	run := func(env map[string]string, args ...string) result {
		t.Helper()
		return mqadmin(t, env, args...)
	}
	ok := func(args ...string) string {
		t.Helper()
		r := run(admin, args...)
		require.Equal(t, 0, r.code, "mqadmin %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out, r.err)
		return r.out
	}

	out := ok("updateAclConfig", "-b", c.addr, "-a", "newUser1", "-s", "newSecret1", "-t", "T1=PUB,T2=SUB", "-u", "SUB", "-m", "false")
	assert.Contains(t, out, "create or update plain access config to "+c.addr+" success.")
	assert.Contains(t, out, "accessKey='newUser1'")
	assert.NotContains(t, out, "newSecret1", "the secret is not printed")
	data, err := os.ReadFile(aclPath)
	require.NoError(t, err)
	assert.Contains(t, string(data), "newUser1")
	assert.Contains(t, string(data), "T2=SUB")

	out = ok("clusterAclConfigVersion", "-c", "DefaultCluster")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Equal(t, []string{"#Cluster", "Name", "#Broker", "Name", "#Broker", "Addr", "#AclFilePath", "#AclConfigVersionNum", "#AclLastUpdateTime"}, fields(lines[0]))
	row := fields(lines[1])
	assert.Equal(t, []string{"DefaultCluster", "broker-a", c.addr, aclPath, "1"}, row[:5])
	assert.Equal(t, "get cluster's plain access config version success.", lines[2])

	out = ok("getAclConfig", "-b", c.addr)
	assert.Contains(t, out, "  accessKey         : newUser1")
	assert.Contains(t, out, "  topicPerms        : [T1=PUB, T2=SUB]")

	ok("updateGlobalWhiteAddr", "-c", "DefaultCluster", "-g", "10.1.*,192.168.7.8")
	assert.Equal(t, []string{"10.1.*", "192.168.7.8"}, c.broker.ACL().Rules().File().GlobalWhiteRemoteAddresses)

	out = ok("deleteAccessConfig", "-b", c.addr, "-a", "newUser1")
	assert.Contains(t, out, "delete plain access config account from "+c.addr+" success.")
	assert.Contains(t, out, "account's accesskey is:newUser1")
	r := run(admin, "deleteAclConfig", "-b", c.addr, "-a", "newUser1")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "answered code 210")

	// Without tools.yml the requests are unsigned; with a non-admin
	// account they are refused as such.
	r = run(map[string]string{"NAMESRV_ADDR": c.ns}, "updateAclConfig", "-b", c.addr, "-a", "sneaky-one", "-s", "sneaky-secret", "-m", "true")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "answered code 16: acl: no AccessKey in the request")
	plain := map[string]string{"NAMESRV_ADDR": c.ns, "ROCKETMQ_HOME": homeWithTools(t, "accessKey: plainUser\nsecretKey: plain-secret\n")}
	r = run(plain, "updateAclConfig", "-b", c.addr, "-a", "plainUser", "-s", "plain-secret", "-m", "true")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "answered code 16: acl: admin account needed")
	r = run(plain, "clusterAclConfigVersion", "-b", c.addr)
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "GET_BROKER_CLUSTER_ACL_INFO")
	r = run(map[string]string{"NAMESRV_ADDR": c.ns, "ROCKETMQ_HOME": homeWithTools(t, "accessKey: [x\n")}, "clusterAclConfigVersion", "-b", c.addr)
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "tools.yml")

	// Other commands sign too: topic creation needs the admin account.
	ok("updateTopic", "-b", c.addr, "-t", "AclMadeTopic")
	r = run(plain, "updateTopic", "-b", c.addr, "-t", "NotMadeTopic")
	assert.Equal(t, exitFail, r.code)
	assert.Nil(t, c.broker.Topics().Get("NotMadeTopic"))
}
