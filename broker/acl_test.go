package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/acl"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

const brokerACL = `accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB
      - SubOnly=SUB
  - accessKey: admin-user
    secretKey: admin-secret
    admin: true
  - accessKey: slave-sync
    secretKey: slave-secret
`

var (
	producerCred = acl.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}
	adminCred    = acl.Credentials{AccessKey: "admin-user", SecretKey: "admin-secret"}
)

// aclBrokerConfig is a test broker with aclEnable and text as
// $ROCKETMQ_HOME/conf/plain_acl.yml.
func aclBrokerConfig(t *testing.T, text string) *conf.BrokerConfig {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.AclEnable = true
	cfg.RocketmqHome = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cfg.RocketmqHome, "conf"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.RocketmqHome, "conf", "plain_acl.yml"), []byte(text), 0o600))
	return cfg
}

// signingClient is a remoting client that signs every request with cred
// (none when cred is zero) and sends headers in st.
func signingClient(t *testing.T, cred acl.Credentials, st remoting.SerializeType) *remoting.Client {
	cl := remoting.NewClient(remoting.ClientConfig{Logger: baLogger(), BeforeRequest: func(_ string, req *remoting.Command) {
		req.SerializeType = st
		if !cred.IsZero() {
			cred.Sign(req)
		}
	}})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// rawSend is a SEND_MESSAGE_V2 whose header fields travel in RawExt, as
// our SDK sends them (the broker's raw-fields fast path).
func rawSend(topic string, body string) *remoting.Command {
	req := sendReqV2(remoting.SendMessageV2, topic, 0, []byte(body), nil)
	for k, v := range req.ExtFields {
		req.RawExt = remoting.AppendField(req.RawExt, k, v)
	}
	req.ExtFields = nil
	return req
}

// TestACLSendRefusals: sends with the right credentials are stored; every
// refused one gets NO_PERMISSION with a remark naming why, and stores
// nothing, in both header encodings (the binary one through the raw-fields
// fast path).
func TestACLSendRefusals(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, aclBrokerConfig(t, brokerACL))
	admin := signingClient(t, adminCred, remoting.JSONSerialize)
	for _, topic := range []string{"AclTopic", "SubOnly"} {
		require.Equal(t, remoting.Success, baInvoke(t, admin, b.Addr(), createTopicReq(topic, 1, 1, 6)).ResponseCode())
	}
	stored := b.Store().CommitLogMaxOffset()

	for _, st := range []remoting.SerializeType{remoting.JSONSerialize, remoting.RocketMQSerialize} {
		t.Run(st.String(), func(t *testing.T) {
			send := func(cl *remoting.Client, topic string) *remoting.Command {
				req := sendReqV2(remoting.SendMessageV2, topic, 0, []byte("m"), nil)
				if st == remoting.RocketMQSerialize {
					req = rawSend(topic, "m")
				}
				return baInvoke(t, cl, b.Addr(), req)
			}
			before := b.Store().MaxOffsetInQueue("AclTopic", 0)
			resp := send(signingClient(t, producerCred, st), "AclTopic")
			require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
			require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("AclTopic", 0) == before+1 }, 5*time.Second, 5*time.Millisecond)
			stored = b.Store().CommitLogMaxOffset()

			refusals := []struct {
				name   string
				cl     *remoting.Client
				topic  string
				remark string
			}{
				{"wrong secret", signingClient(t, acl.Credentials{AccessKey: "producer1", SecretKey: "wrong-secret"}, st), "AclTopic",
					`acl: signature check failed for AccessKey "producer1"`},
				{"unknown key", signingClient(t, acl.Credentials{AccessKey: "stranger", SecretKey: "producer-secret"}, st), "AclTopic",
					`acl: unknown AccessKey "stranger"`},
				{"no credentials", signingClient(t, acl.Credentials{}, st), "AclTopic", "acl: no AccessKey in the request"},
				{"SUB-only topic", signingClient(t, producerCred, st), "SubOnly",
					`acl: no permission: AccessKey "producer1" may not PUB topic "SubOnly" (its permission on it is SUB)`},
				{"unlisted topic", signingClient(t, producerCred, st), "Elsewhere", `may not PUB topic "Elsewhere"`},
			}
			for _, r := range refusals {
				resp := send(r.cl, r.topic)
				assert.Equal(t, remoting.NoPermission, resp.ResponseCode(), r.name)
				assert.Contains(t, resp.Remark, r.remark, r.name)
			}
			assert.Equal(t, stored, b.Store().CommitLogMaxOffset(), "refused sends store nothing")
			assert.Zero(t, b.Store().MaxOffsetInQueue("SubOnly", 0))
			assert.Nil(t, b.Topics().Get("Elsewhere"), "a refused send creates no topic")
		})
	}
}

// TestACLAdminOnly: admin-only requests from an account without admin:
// true are refused before they change anything.
func TestACLAdminOnly(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, aclBrokerConfig(t, brokerACL))
	producer := signingClient(t, producerCred, remoting.JSONSerialize)
	resp := baInvoke(t, producer, b.Addr(), createTopicReq("Sneaky", 1, 1, 6))
	assert.Equal(t, remoting.NoPermission, resp.ResponseCode())
	assert.Contains(t, resp.Remark, `request code 17 (UPDATE_AND_CREATE_TOPIC) needs admin: true, which AccessKey "producer1" has not`)
	assert.Nil(t, b.Topics().Get("Sneaky"))

	for code, name := range map[remoting.RequestCode]string{
		remoting.DeleteTopicInBroker:          "DELETE_TOPIC_IN_BROKER",
		remoting.UpdateAndCreateACLConfig:     "UPDATE_AND_CREATE_ACL_CONFIG",
		remoting.UpdateGlobalWhiteAddrsConfig: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
		remoting.GetBrokerClusterACLConfig:    "GET_BROKER_CLUSTER_ACL_CONFIG",
		remoting.InvokeBrokerToResetOffset:    "INVOKE_BROKER_TO_RESET_OFFSET",
		remoting.DeleteSubscriptionGroup:      "DELETE_SUBSCRIPTIONGROUP",
	} {
		resp := baInvoke(t, producer, b.Addr(), remoting.NewRequest(code, map[string]string{"topic": "AclTopic", "groupName": "g",
			protocol.ACLAccessKey: "producer1", protocol.ACLSecretKey: "new-secret", protocol.ACLAdmin: "true"}, nil))
		assert.Equal(t, remoting.NoPermission, resp.ResponseCode(), name)
		assert.Contains(t, resp.Remark, name)
	}
	// Nothing changed: producer1 is still no admin.
	resp = baInvoke(t, producer, b.Addr(), createTopicReq("Sneaky", 1, 1, 6))
	assert.Equal(t, remoting.NoPermission, resp.ResponseCode())
}

func aclReq(code remoting.RequestCode, ext map[string]string) *remoting.Command {
	return remoting.NewRequest(code, ext, nil)
}

// TestACLAdministration: the ACL admin requests change the file and the
// rules in force at once.
func TestACLAdministration(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := aclBrokerConfig(t, brokerACL)
	b := MustStartBroker(t, cfg)
	admin := signingClient(t, adminCred, remoting.JSONSerialize)
	require.Equal(t, remoting.Success, baInvoke(t, admin, b.Addr(), createTopicReq("AclTopic", 1, 1, 6)).ResponseCode())
	newbie := signingClient(t, acl.Credentials{AccessKey: "newbie-user", SecretKey: "newbie-secret"}, remoting.RocketMQSerialize)
	require.Equal(t, remoting.NoPermission, baInvoke(t, newbie, b.Addr(), rawSend("AclTopic", "x")).ResponseCode())

	version := func() protocol.ClusterACLVersionInfo {
		resp := baInvoke(t, admin, b.Addr(), aclReq(remoting.GetBrokerClusterACLInfo, nil))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		var h protocol.ClusterACLVersionInfo
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
		return h
	}
	v0 := version()
	assert.Equal(t, "broker-a", v0.BrokerName)
	assert.Equal(t, b.Addr(), v0.BrokerAddr)
	assert.Contains(t, v0.Version, `"counter":0`)
	path := filepath.Join(cfg.RocketmqHome, "conf", "plain_acl.yml")
	assert.Contains(t, v0.AllACLFileVersion, path)

	pc := protocol.PlainAccessConfig{AccessKey: "newbie-user", SecretKey: "newbie-secret", DefaultTopicPerm: "PUB", TopicPerms: []string{"Other=SUB"}}
	resp := baInvoke(t, admin, b.Addr(), aclReq(remoting.UpdateAndCreateACLConfig, pc.Header()))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, remoting.Success, baInvoke(t, newbie, b.Addr(), rawSend("AclTopic", "x")).ResponseCode(), "in force at once")
	assert.Contains(t, version().Version, `"counter":1`)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), "newbie-user")

	bad := protocol.PlainAccessConfig{AccessKey: "newbie-user", SecretKey: "short"}
	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.UpdateAndCreateACLConfig, bad.Header()))
	assert.Equal(t, remoting.UpdateAndCreateACLConfigFailed, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "longer than 6")

	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.GetBrokerClusterACLConfig, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	body, err := protocol.DecodeACLConfigBody(resp.Body)
	require.NoError(t, err)
	require.Len(t, body.PlainAccessConfigs, 4)
	assert.Equal(t, "newbie-user", body.PlainAccessConfigs[3].AccessKey)
	assert.Equal(t, []string{"Other=SUB"}, body.PlainAccessConfigs[3].TopicPerms)

	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.UpdateGlobalWhiteAddrsConfig,
		map[string]string{protocol.ACLGlobalWhiteAddrs: "10.0.0.*", protocol.ACLFileFullPath: "/etc/passwd"}))
	assert.Equal(t, remoting.UpdateGlobalWhiteAddrsConfigFailed, resp.ResponseCode(), "a path from the network names no other file")
	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.UpdateGlobalWhiteAddrsConfig,
		map[string]string{protocol.ACLGlobalWhiteAddrs: "10.0.0.*,192.168.3.1-2", protocol.ACLFileFullPath: path}))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, []string{"10.0.0.*", "192.168.3.1-2"}, b.ACL().Rules().File().GlobalWhiteRemoteAddresses)
	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{protocol.ACLGlobalWhiteAddrs: "10.0.0.x"}))
	assert.Equal(t, remoting.UpdateGlobalWhiteAddrsConfigFailed, resp.ResponseCode())

	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.DeleteACLConfig, map[string]string{protocol.ACLAccessKey: "newbie-user"}))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	resp = baInvoke(t, newbie, b.Addr(), rawSend("AclTopic", "x"))
	assert.Equal(t, remoting.NoPermission, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "unknown AccessKey")
	resp = baInvoke(t, admin, b.Addr(), aclReq(remoting.DeleteACLConfig, map[string]string{protocol.ACLAccessKey: "newbie-user"}))
	assert.Equal(t, remoting.DeleteACLConfigFailed, resp.ResponseCode())
	assert.Contains(t, version().Version, `"counter":3`)
}

// TestACLAdminOnBrokerWithoutACL: the ACL admin codes say ACL is off.
func TestACLAdminOnBrokerWithoutACL(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	pc := protocol.PlainAccessConfig{AccessKey: "someone-x", SecretKey: "secret-xx"}
	resp := baInvoke(t, cl, b.Addr(), aclReq(remoting.UpdateAndCreateACLConfig, pc.Header()))
	assert.Equal(t, remoting.UpdateAndCreateACLConfigFailed, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "aclEnable=false")
	resp = baInvoke(t, cl, b.Addr(), aclReq(remoting.GetBrokerClusterACLInfo, nil))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Nil(t, b.ACL())
}

// TestACLBrokerNeedsItsFile: aclEnable without a loadable file does not start.
func TestACLBrokerNeedsItsFile(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.AclEnable = true
	cfg.RocketmqHome = t.TempDir()
	_, err := New(cfg, baLogger())
	assert.ErrorIs(t, err, os.ErrNotExist)

	cfg = aclBrokerConfig(t, "accounts:\n  - {accessKey: tooshort, secretKey: 123}\n")
	_, err = New(cfg, baLogger())
	assert.ErrorIs(t, err, acl.ErrBadFile)
}

// TestSlaveSyncWithACLMaster: a master with ACL refuses a slave without
// credentials; with innerClientAuthenticationCredentials the slave copies
// the master's metadata. (Replication itself, on the HA port, carries no
// ACL in RocketMQ's protocol.)
func TestSlaveSyncWithACLMaster(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	mcfg := aclBrokerConfig(t, brokerACL)
	mcfg.NamesrvAddr = ns.Addr()
	master := MustStartBroker(t, mcfg)
	admin := signingClient(t, adminCred, remoting.JSONSerialize)
	require.Equal(t, remoting.Success, baInvoke(t, admin, master.Addr(), createTopicReq("SyncedTopic", 2, 2, 6)).ResponseCode())

	refusedBefore := master.ACL().Refused()
	bare := mustStartSlave(t, ns.Addr(), nil)
	require.Eventually(t, func() bool { return master.ACL().Refused() > refusedBefore }, 10*time.Second, 5*time.Millisecond,
		"the master refuses the unsigned slave")
	assert.Zero(t, bare.slaveSync.last.Load(), "no sync completed without credentials")
	assert.Nil(t, bare.topics.Get("SyncedTopic"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, bare.Shutdown(ctx))

	signed := mustStartSlave(t, ns.Addr(), func(c *conf.BrokerConfig) {
		c.BrokerID = 2
		c.InnerClientAuthenticationCredentials = `{"accessKey":"slave-sync","secretKey":"slave-secret"}`
	})
	require.Eventually(t, func() bool { return signed.slaveSync.last.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "a sync completes")
	assert.NotNil(t, signed.topics.Get("SyncedTopic"))
}

// TestGetBrokerConfigHidesCredentials: GET_BROKER_CONFIG does not hand out
// the inner credentials' secret.
func TestGetBrokerConfigHidesCredentials(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := aclBrokerConfig(t, brokerACL)
	cfg.InnerClientAuthenticationCredentials = `{"accessKey":"slave-sync","secretKey":"slave-secret"}`
	b := MustStartBroker(t, cfg)
	resp := baInvoke(t, signingClient(t, producerCred, remoting.JSONSerialize), b.Addr(), remoting.NewRequest(remoting.GetBrokerConfig, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	assert.Contains(t, string(resp.Body), "innerClientAuthenticationCredentials="+conf.Redacted)
	assert.False(t, strings.Contains(string(resp.Body), "slave-secret"))
}
