package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func routeOf(ns *nameserver.NameServer, topic string) *protocol.TopicRouteData {
	return ns.Routes().PickupTopicRouteData(topic)
}

// TestRegisterWithNameServer starts a real nameserver and checks the
// broker's routes appear (TBW102 at once, an admin-created topic and an
// auto-created topic without waiting for the 30 s period) and disappear
// when the broker shuts down.
func TestRegisterWithNameServer(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = ns.Addr()
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())

	rd := routeOf(ns, AutoCreateTopicKey)
	require.NotNil(t, rd, "registration at start is synchronous")
	require.Len(t, rd.BrokerDatas, 1)
	assert.Equal(t, b.Addr(), rd.BrokerDatas[0].BrokerAddrs[0])
	assert.Equal(t, "DefaultCluster", rd.BrokerDatas[0].Cluster)
	assert.Equal(t, "broker-a", rd.BrokerDatas[0].BrokerName)
	require.Len(t, rd.QueueDatas, 1)
	assert.Equal(t, int32(4), rd.QueueDatas[0].WriteQueueNums)

	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("AdminTopic", 8, 6, 6)).ResponseCode())
	require.Eventually(t, func() bool { return routeOf(ns, "AdminTopic") != nil }, 5*time.Second, 5*time.Millisecond)
	qd := routeOf(ns, "AdminTopic").QueueDatas[0]
	assert.Equal(t, int32(8), qd.ReadQueueNums)
	assert.Equal(t, int32(6), qd.WriteQueueNums)

	resp := baInvoke(t, cl, b.Addr(), sendReq("AutoTopic", 0, []byte("x"), nil))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	require.Eventually(t, func() bool { return routeOf(ns, "AutoTopic") != nil }, 5*time.Second, 5*time.Millisecond)

	// The route answer a client gets over the wire.
	req := remoting.NewRequest(remoting.GetRouteInfoByTopic, protocol.EncodeHeader(&protocol.GetRouteInfoRequestHeader{Topic: "AutoTopic"}, nil), nil)
	resp = baInvoke(t, cl, ns.Addr(), req)
	require.Equal(t, remoting.Success, resp.ResponseCode())
	wire, err := protocol.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, b.Addr(), wire.BrokerDatas[0].BrokerAddrs[0])

	mustShutdownBroker(t, b)
	assert.Nil(t, routeOf(ns, "AdminTopic"), "unregistered at shutdown")
	mustShutdownBroker(t, b) // twice is fine
}

func TestRegisterCompressedAndReadOnlyBroker(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = ns.Addr()
	cfg.CompressedRegister = true
	cfg.BrokerPermission = protocol.PermRead
	b := MustStartBroker(t, cfg)
	rd := routeOf(ns, AutoCreateTopicKey)
	require.NotNil(t, rd)
	assert.Equal(t, protocol.PermRead, rd.QueueDatas[0].Perm, "a read-only broker registers its topics read-only")
	_ = b
}

func TestRegisterToUnreachableNameServer(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = "127.0.0.1:1" // nothing listens there
	cfg.RegisterBrokerTimeoutMills = 500
	start := time.Now()
	b := MustStartBroker(t, cfg)
	assert.Less(t, time.Since(start), 5*time.Second, "an unreachable nameserver does not block start for long")
	resp := baInvoke(t, baClient(t), b.Addr(), sendReq("T", 0, []byte("x"), nil))
	assert.Equal(t, remoting.Success, resp.ResponseCode(), "the broker serves without a nameserver")
}

// TestRestartKeepsMessagesAndTopics sends, shuts down, reopens the same
// directory and checks the topics and messages are there and new sends
// continue the queue offsets.
func TestRestartKeepsMessagesAndTopics(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	b1, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b1.Start())
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b1.Addr(), createTopicReq("Kept", 2, 2, 6)).ResponseCode())
	var ids []string
	for i := range 20 {
		resp := baInvoke(t, cl, b1.Addr(), sendReq("Kept", int32(i%2), []byte("body-"+strconv.Itoa(i)), map[string]string{message.PropKeys: "k" + strconv.Itoa(i)}))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		ids = append(ids, resp.FieldMap()["msgId"])
	}
	mustShutdownBroker(t, b1)
	_, err = os.Stat(filepath.Join(cfg.StorePathRootDir, "config", "topics.json"))
	require.NoError(t, err)

	b2 := MustStartBroker(t, cfg)
	tc := b2.Topics().Get("Kept")
	require.NotNil(t, tc)
	assert.Equal(t, int32(2), tc.WriteQueueNums)
	assert.Equal(t, int64(10), b2.Store().MaxOffsetInQueue("Kept", 0))
	assert.Equal(t, int64(10), b2.Store().MaxOffsetInQueue("Kept", 1))
	for i, id := range ids {
		_, off, err := message.ParseOffsetMsgID(id)
		require.NoError(t, err)
		m, err := b2.Store().LookMessageByOffset(off)
		require.NoError(t, err)
		assert.Equal(t, "body-"+strconv.Itoa(i), string(m.Body))
	}
	resp := baInvoke(t, cl, b2.Addr(), sendReq("Kept", 0, []byte("after"), nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	assert.Equal(t, "10", resp.FieldMap()["queueOffset"])
	assert.True(t, b2.Store().LastExitOK())
}

func TestBrokerLifecycle(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.Shutdown(ctx), "shutdown before start")
	assert.ErrorIs(t, b.Start(), ErrShutDown)

	b2 := MustStartBroker(t, cfg)
	assert.ErrorIs(t, b2.Start(), ErrAlreadyStarted)
	b3, err := New(cfg, baLogger())
	require.NoError(t, err)
	assert.Error(t, b3.Start(), "the store directory is locked by the running broker")
	require.NoError(t, b3.Shutdown(ctx))

	bad := *cfg
	bad.FlushDiskType = "SOMETIMES"
	_, err = New(&bad, baLogger())
	assert.ErrorContains(t, err, "flushDiskType")
}

func TestResolveBrokerIP(t *testing.T) {
	ip, err := resolveBrokerIP("")
	require.NoError(t, err)
	assert.True(t, ip.Is4())
	ip, err = resolveBrokerIP("10.1.2.3")
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3", ip.String())
	_, err = resolveBrokerIP("my-host")
	assert.Error(t, err)
}
