package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAclFilePath(t *testing.T) {
	cfg := DefaultBrokerConfig()
	cfg.RocketmqHome = "/opt/rocketmq"
	p, err := cfg.AclFilePath()
	require.NoError(t, err)
	assert.Equal(t, "/opt/rocketmq/conf/plain_acl.yml", p, "RocketMQ's place by default")

	cfg.AclPlainFile = "/etc/rocketmq/acl.yml"
	p, err = cfg.AclFilePath()
	require.NoError(t, err)
	assert.Equal(t, "/etc/rocketmq/acl.yml", p)

	cfg = DefaultBrokerConfig()
	cfg.RocketmqHome = ""
	cfg.AclEnable = true
	err = cfg.Validate()
	assert.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), "rocketmqHome")
	cfg.AclEnable = false
	assert.NoError(t, cfg.Validate(), "without ACL nothing needs the path")
}

func TestInnerCredentialsAreCheckedAndRedacted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(path, []byte("aclEnable=true\nrocketmqHome="+dir+"\n"+
		`innerClientAuthenticationCredentials={"accessKey":"rocketmq2","secretKey":"12345678"}`+"\n"), 0o600))
	cfg := DefaultBrokerConfig()
	require.NoError(t, Load(path, &cfg, nil))
	assert.True(t, cfg.AclEnable)
	assert.Equal(t, `{"accessKey":"rocketmq2","secretKey":"12345678"}`, cfg.InnerClientAuthenticationCredentials)
	out := Format(&cfg)
	assert.Contains(t, out, "innerClientAuthenticationCredentials="+Redacted+"\n")
	assert.NotContains(t, out, "12345678")
	assert.Contains(t, out, "aclEnable=true\n")

	cfg.InnerClientAuthenticationCredentials = "rocketmq2:12345678"
	err := cfg.Validate()
	require.ErrorIs(t, err, ErrBadValue)
	assert.False(t, strings.Contains(err.Error(), "12345678"), "the secret is not echoed")
	cfg.InnerClientAuthenticationCredentials = ""
	assert.Contains(t, Format(&cfg), "innerClientAuthenticationCredentials=\n", "unset shows empty")
}
