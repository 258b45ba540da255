package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func topicReq(code remoting.RequestCode, topic string) *remoting.Command {
	return remoting.NewRequest(code, protocol.EncodeHeader(&protocol.TopicRequestHeader{Topic: topic}, nil), nil)
}

func TestAdminTopicBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	b := MustStartBroker(t, cfg)
	cl := baClient(t)
	badFilter := createTopicReq("T", 1, 1, 6)
	badFilter.ExtFields["topicFilterType"] = "REGEX"
	noOrder := createTopicReq("T", 1, 1, 6)
	delete(noOrder.ExtFields, "order")
	cases := []struct {
		name   string
		req    *remoting.Command
		code   remoting.ResponseCode
		remark string
	}{
		{"create: illegal characters", createTopicReq("bad topic", 1, 1, 6), remoting.SystemError, "illegal characters"},
		{"create: too long", createTopicReq(strings.Repeat("x", 200), 1, 1, 6), remoting.SystemError, "max length"},
		{"create: blank", createTopicReq("", 1, 1, 6), remoting.SystemError, "blank"},
		{"create: TBW102", createTopicReq(AutoCreateTopicKey, 1, 1, 6), remoting.SystemError, "conflict with system topic"},
		{"create: rmq_sys_ prefix", createTopicReq("rmq_sys_mine", 1, 1, 6), remoting.SystemError, "conflict with system topic"},
		{"create: cluster name", createTopicReq(cfg.BrokerClusterName, 1, 1, 6), remoting.SystemError, "conflict with system topic"},
		{"create: zero queues", createTopicReq("T", 0, 1, 6), remoting.SystemError, "readQueueNums 0"},
		{"create: too many queues", createTopicReq("T", 1, 5000, 6), remoting.SystemError, "writeQueueNums 5000"},
		{"create: bad perm", createTopicReq("T", 1, 1, 99), remoting.SystemError, "perm 99"},
		{"create: bad filter type", badFilter, remoting.SystemError, "topicFilterType"},
		{"create: missing field", noOrder, remoting.SystemError, "<order>"},
		{"delete: system topic", topicReq(remoting.DeleteTopicInBroker, ScheduleTopic), remoting.SystemError, "conflict with system topic"},
		{"delete: illegal name", topicReq(remoting.DeleteTopicInBroker, "a b"), remoting.SystemError, "illegal"},
		{"stats: unknown topic", topicReq(remoting.GetTopicStatsInfo, "Nope"), remoting.TopicNotExist, "not exist"},
		{"config: unknown topic", topicReq(remoting.GetTopicConfig, "Nope"), remoting.TopicNotExist, "No topic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := baInvoke(t, cl, b.Addr(), tc.req)
			assert.Equal(t, tc.code, resp.ResponseCode(), resp.Remark)
			assert.Contains(t, resp.Remark, tc.remark)
		})
	}
	assert.Nil(t, b.Topics().Get("T"), "no refused create left a topic behind")
}

func TestAdminTopicLifecycle(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	req := createTopicReq("Orders", 4, 2, 6)
	req.ExtFields["order"] = "true"
	req.ExtFields["topicFilterType"] = "MULTI_TAG"
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), req).ResponseCode())

	resp := baInvoke(t, cl, b.Addr(), topicReq(remoting.GetTopicConfig, "Orders"))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	var tc protocol.TopicConfig
	require.NoError(t, json.Unmarshal(resp.Body, &tc))
	assert.Equal(t, protocol.TopicConfig{TopicName: "Orders", ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6, TopicFilterType: protocol.MultiTag, Order: true}, tc)

	for range 3 {
		require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), sendReq("Orders", 1, []byte("x"), nil)).ResponseCode())
	}
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("Orders", 1) == 3 }, 5*time.Second, 5*time.Millisecond)
	resp = baInvoke(t, cl, b.Addr(), topicReq(remoting.GetTopicStatsInfo, "Orders"))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	stats, err := protocol.DecodeTopicStatsTable(resp.Body)
	require.NoError(t, err)
	require.Len(t, stats.OffsetTable, 2, "one entry per write queue")
	q1 := stats.OffsetTable[protocol.MessageQueue{Topic: "Orders", BrokerName: "broker-a", QueueID: 1}]
	assert.Equal(t, int64(0), q1.MinOffset)
	assert.Equal(t, int64(3), q1.MaxOffset)
	assert.InDelta(t, time.Now().UnixMilli(), q1.LastUpdateTimestamp, 60_000)
	q0 := stats.OffsetTable[protocol.MessageQueue{Topic: "Orders", BrokerName: "broker-a", QueueID: 0}]
	assert.Equal(t, protocol.TopicOffset{}, q0)

	resp = baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	all, err := protocol.DecodeTopicConfigSerializeWrapper(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, all.TopicConfigTable, "Orders")
	assert.Contains(t, all.TopicConfigTable, AutoCreateTopicKey)
	assert.Positive(t, all.DataVersion.Counter)

	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), sendReq("Orders", 0, []byte("before delete"), nil)).ResponseCode())
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("Orders", 0) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), topicReq(remoting.DeleteTopicInBroker, "Orders")).ResponseCode())
	assert.Nil(t, b.Topics().Get("Orders"))
	assert.Zero(t, b.Store().MaxOffsetInQueue("Orders", 0), "the consume queues go with the topic")
	assert.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), topicReq(remoting.DeleteTopicInBroker, "Orders")).ResponseCode(),
		"deleting a missing topic succeeds, as in RocketMQ")
}

func TestAdminBrokerInfo(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), sendReq("Info", 0, []byte("x"), nil)).ResponseCode())

	resp := baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	kv, err := protocol.DecodeKVTable(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "1", kv.Table["msgPutTotalTodayNow"])
	assert.Equal(t, "V4_9_8", kv.Table["brokerVersionDesc"])
	assert.NotEqual(t, "0", kv.Table["commitLogMaxOffset"])

	resp = baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.GetBrokerConfig, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	props, err := conf.ParseProperties(string(resp.Body))
	require.NoError(t, err)
	assert.Equal(t, "broker-a", props["brokerName"])
	assert.Equal(t, "DefaultCluster", props["brokerClusterName"])
	assert.NotEmpty(t, resp.ExtFields["version"])
}
