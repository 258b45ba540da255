package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/acl"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// e2eACL is the ACL file of these tests: a producer, a consumer and an
// administrator, each with only what it needs.
const e2eACL = `accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB
      - SubOnly=SUB
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopic=SUB
    groupPerms:
      - AclGroup=SUB
  - accessKey: admin-user
    secretKey: admin-secret
    admin: true
`

var (
	producerCred = primitive.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}
	consumerCred = primitive.Credentials{AccessKey: "consumer1", SecretKey: "consumer-secret"}
	adminCred    = acl.Credentials{AccessKey: "admin-user", SecretKey: "admin-secret"}
)

// aclCluster is a cluster whose broker has aclEnable and text as
// $ROCKETMQ_HOME/conf/plain_acl.yml (returned), with topics AclTopic (4
// queues) and SubOnly (2) created by the admin account.
func aclCluster(t *testing.T, text string) (*Cluster, string, *remoting.Client) {
	t.Helper()
	home := t.TempDir()
	path := filepath.Join(home, "conf", "plain_acl.yml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	c := MustStartCluster(t, WithBrokerConfig(func(cfg *conf.BrokerConfig) {
		cfg.AclEnable = true
		cfg.RocketmqHome = home
	}))
	admin := remoting.NewClient(remoting.ClientConfig{BeforeRequest: func(_ string, req *remoting.Command) { adminCred.Sign(req) }})
	t.Cleanup(func() { _ = admin.Close() })
	for topic, queues := range map[string]int32{"AclTopic": 4, "SubOnly": 2} {
		resp := invokeWith(t, admin, c.BrokerAddr, remoting.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{
			Topic: topic, DefaultTopic: "TBW102", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6,
			TopicFilterType: string(protocol.SingleTag)})
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		c.WaitRoute(t, topic)
	}
	return c, path, admin
}

func invokeWith(t testing.TB, cl *remoting.Client, addr string, code remoting.RequestCode, header any) *remoting.Command {
	t.Helper()
	var ext map[string]string
	if header != nil {
		ext = protocol.EncodeHeader(header, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := cl.InvokeSync(ctx, addr, remoting.NewRequest(code, ext, nil))
	require.NoError(t, err)
	return resp
}

// writeFileAtomic replaces path as an editor saving it would.
func writeFileAtomic(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestACLOfficialClient: the official Go client with the right credentials
// sends and consumes; with a wrong secret, an unknown AccessKey, no
// credentials, or to a topic it may only SUB, its sends are refused with
// NO_PERMISSION and store nothing; pulls with a wrong secret or for a group
// it may not use are refused the same way.
func TestACLOfficialClient(t *testing.T) {
	c, _, _ := aclCluster(t, e2eACL)
	d := c.StartDriver(t)

	good := d.NewProducerSpec(t, ProducerSpec{Credentials: &producerCred})
	want := bodies("acl", 12)
	good.SendBodies(t, "AclTopic", "", want)
	in := NewInbox()
	push := d.StartPush(t, PushSpec{Group: "AclGroup", Topic: "AclTopic", Credentials: &consumerCred}, in)
	require.Eventually(t, func() bool { return in.HasAll(want) }, consumeWait, pollEvery, "missing %v", in.Missing(want))
	push.Stop(t)

	stored := c.Broker.Store().CommitLogMaxOffset()
	refused := c.Broker.ACL().Refused()
	for _, tc := range []struct {
		name   string
		cred   *primitive.Credentials
		topic  string
		remark string
	}{
		{"wrong secret", &primitive.Credentials{AccessKey: "producer1", SecretKey: "not-the-secret"}, "AclTopic",
			`signature check failed for AccessKey "producer1"`},
		{"unknown AccessKey", &primitive.Credentials{AccessKey: "intruder", SecretKey: "producer-secret"}, "AclTopic",
			`unknown AccessKey "intruder"`},
		{"no credentials", nil, "AclTopic", "no AccessKey in the request"},
		{"SUB-only topic", &producerCred, "SubOnly", `AccessKey "producer1" may not PUB topic "SubOnly"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := d.NewProducerSpec(t, ProducerSpec{Credentials: tc.cred})
			_, err := p.TrySendSync(t, Msg(tc.topic, "must-not-be-stored"))
			require.Error(t, err)
			t.Logf("refused: %v", err)
			assert.Contains(t, err.Error(), "CODE: 16", "NO_PERMISSION")
			assert.Contains(t, err.Error(), tc.remark)
		})
	}
	assert.Equal(t, stored, c.Broker.Store().CommitLogMaxOffset(), "no refused send was stored")
	for q := range 2 {
		assert.Zero(t, c.Broker.Store().MaxOffsetInQueue("SubOnly", int32(q)))
	}
	assert.Greater(t, c.Broker.ACL().Refused(), refused)

	for _, tc := range []struct {
		name, group string
		cred        primitive.Credentials
		remark      string
	}{
		{"pull with a wrong secret", "AclGroup", primitive.Credentials{AccessKey: "consumer1", SecretKey: "bad-secret"}, "signature check failed"},
		{"pull for a denied group", "OtherGroup", consumerCred, `may not SUB group "OtherGroup"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pull := d.StartPull(t, PullSpec{Group: tc.group, Topic: "AclTopic", BrokerName: c.BrokerName, QueueID: 0, Seek: 0, Credentials: &tc.cred})
			_, err := pull.TryPullFrom(t, 0, 10)
			require.Error(t, err)
			t.Logf("refused: %v", err)
			assert.Contains(t, err.Error(), "Response Code: 16")
			assert.Contains(t, err.Error(), tc.remark)
		})
	}
	pull := d.StartPull(t, PullSpec{Group: "AclGroup", Topic: "AclTopic", BrokerName: c.BrokerName, QueueID: 0, Seek: 0, Credentials: &consumerCred})
	r := pull.PullFrom(t, 0, 32)
	assert.Equal(t, primitive.PullFound, r.Status)
}

// TestACLHotReload: a changed plain_acl.yml takes effect within seconds
// for a running official client; a broken one leaves the last good rules.
func TestACLHotReload(t *testing.T) {
	c, path, _ := aclCluster(t, e2eACL)
	d := c.StartDriver(t)
	p := d.NewProducerSpec(t, ProducerSpec{Credentials: &producerCred})
	p.SendSync(t, Msg("AclTopic", "before"))

	writeFileAtomic(t, path, strings.Replace(e2eACL, "AclTopic=PUB", "AclTopic=SUB", 1))
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := p.TrySendSync(t, Msg("AclTopic", "after-flip"))
		return err != nil && strings.Contains(err.Error(), "CODE: 16")
	}, 20*time.Second, 100*time.Millisecond, "the flip to SUB never took effect")
	t.Logf("the permission flipped %v after the file changed", time.Since(start).Round(time.Millisecond))

	// A broken file: the broker says why and keeps refusing as before.
	writeFileAtomic(t, path, strings.Replace(e2eACL, "AclTopic=PUB", "AclTopic=PUB\n  - [broken", 1))
	require.Eventually(t, func() bool { return c.Broker.ACL().LoadError() != nil }, 20*time.Second, pollEvery)
	assert.ErrorIs(t, c.Broker.ACL().LoadError(), acl.ErrBadFile)
	_, err := p.TrySendSync(t, Msg("AclTopic", "while-broken"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CODE: 16")

	writeFileAtomic(t, path, e2eACL)
	require.Eventually(t, func() bool {
		_, err := p.TrySendSync(t, Msg("AclTopic", "fixed"))
		return err == nil
	}, 20*time.Second, 100*time.Millisecond)
	assert.NoError(t, c.Broker.ACL().LoadError())
}

// TestACLOurSDK: our SDK signs its binary headers (sent through the
// broker's raw-fields path) the way the broker checks them, and its admin
// client refuses nothing an admin may do and gets NO_PERMISSION for
// admin-only calls from an account without admin: true.
func TestACLOurSDK(t *testing.T) {
	c, path, _ := aclCluster(t, e2eACL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(client.WithNameServer(c.NamesrvAddr), client.WithGroupName("SdkPG"),
		client.WithCredentials(client.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	res, err := p.SendSync(ctx, client.NewMessage("AclTopic", []byte("sdk")))
	require.NoError(t, err)
	assert.Equal(t, client.SendOK, res.Status)
	// JSON headers carry the same signed fields.
	pj, err := client.NewProducer(client.WithNameServer(c.NamesrvAddr), client.WithGroupName("SdkPGJSON"),
		client.WithHeaderEncoding(client.HeadersJSON),
		client.WithCredentials(client.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}))
	require.NoError(t, err)
	require.NoError(t, pj.Start())
	defer pj.Shutdown()
	res, err = pj.SendSync(ctx, client.NewMessage("AclTopic", []byte("sdk-json")))
	require.NoError(t, err)
	assert.Equal(t, client.SendOK, res.Status)
	// Our push consumer with the consumer's account gets both.
	got := make(chan string, 16)
	pc, err := client.NewPushConsumer(client.WithNameServer(c.NamesrvAddr), client.WithGroupName("AclGroup"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset),
		client.WithCredentials(client.Credentials{AccessKey: "consumer1", SecretKey: "consumer-secret"}))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("AclTopic", client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return client.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	defer pc.Shutdown()
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		for {
			select {
			case b := <-got:
				seen[b] = true
			default:
				return seen["sdk"] && seen["sdk-json"]
			}
		}
	}, consumeWait, pollEvery)

	_, err = p.SendSync(ctx, client.NewMessage("SubOnly", []byte("sdk")))
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.NoPermission, be.Code)

	notAdmin, err := client.NewAdmin(client.WithNameServer(c.NamesrvAddr),
		client.WithCredentials(client.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}))
	require.NoError(t, err)
	defer notAdmin.Close()
	err = notAdmin.UpdateACLConfig(ctx, c.BrokerAddr, protocol.PlainAccessConfig{AccessKey: "producer1", SecretKey: "producer-secret", Admin: true})
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.NoPermission, be.Code)
	assert.Contains(t, be.Remark, "UPDATE_AND_CREATE_ACL_CONFIG")
	err = notAdmin.CreateTopic(ctx, client.TopicConfig{Topic: "Sneaky", BrokerAddr: c.BrokerAddr, ReadQueueNums: 1, WriteQueueNums: 1})
	require.Error(t, err)
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, remoting.NoPermission, be.Code)

	admin, err := client.NewAdmin(client.WithNameServer(c.NamesrvAddr),
		client.WithCredentials(client.Credentials{AccessKey: "admin-user", SecretKey: "admin-secret"}))
	require.NoError(t, err)
	defer admin.Close()
	white := ""
	require.NoError(t, admin.UpdateACLConfig(ctx, c.BrokerAddr, protocol.PlainAccessConfig{AccessKey: "producer2", SecretKey: "producer2-secret",
		WhiteRemoteAddress: &white, DefaultTopicPerm: "PUB"}))
	v, err := admin.ACLConfigVersion(ctx, c.BrokerAddr)
	require.NoError(t, err)
	assert.Equal(t, int64(1), v.FileVersions[path].Counter)
	cfg, err := admin.ACLConfig(ctx, c.BrokerAddr)
	require.NoError(t, err)
	assert.Len(t, cfg.PlainAccessConfigs, 4)
	require.NoError(t, admin.DeleteACLConfig(ctx, c.BrokerAddr, "producer2"))
	require.NoError(t, admin.UpdateGlobalWhiteAddrs(ctx, c.BrokerAddr, []string{"10.1.2.*"}, ""))
	v, err = admin.ACLConfigVersion(ctx, c.BrokerAddr)
	require.NoError(t, err)
	assert.Equal(t, int64(3), v.FileVersions[path].Counter)
}
