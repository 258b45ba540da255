package broker

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// bcNotifyClient is a client connection that records the
// NOTIFY_CONSUMER_IDS_CHANGED requests the broker sends it.
type bcNotifyClient struct {
	cl *remoting.Client
	mu sync.Mutex
	n  []string // consumerGroup of each notice
}

func newBCNotifyClient(t *testing.T) *bcNotifyClient {
	nc := &bcNotifyClient{cl: baClient(t)}
	nc.cl.RegisterHandler(remoting.NotifyConsumerIdsChanged, func(_ string, req *remoting.Command) *remoting.Command {
		assert.True(t, req.IsOneway(), "RocketMQ sends the notice oneway")
		nc.mu.Lock()
		nc.n = append(nc.n, req.ExtFields["consumerGroup"])
		nc.mu.Unlock()
		return nil
	})
	return nc
}

func (nc *bcNotifyClient) count() int {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	return len(nc.n)
}

func bcConsumerList(t *testing.T, cl *remoting.Client, addr, group string) []string {
	t.Helper()
	resp := baInvoke(t, cl, addr, bcReq(remoting.GetConsumerListByGroup, &protocol.GroupRequestHeader{ConsumerGroup: group}, nil))
	if resp.Code != int32(remoting.Success) {
		return nil
	}
	var body protocol.ConsumerListBody
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	return body.ConsumerIDList
}

func TestHeartbeatMembershipNotifies(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "HB", 4)
	addr := b.Addr()
	c1, c2 := newBCNotifyClient(t), newBCNotifyClient(t)

	bcHeartbeat(t, c1.cl, addr, "10.0.0.1@1", "cg", protocol.ConsumeFromLastOffset, bcTagSub("HB", "*"), bcTagSub("%RETRY%cg", "*"))
	require.Eventually(t, func() bool { return c1.count() == 1 }, 5*time.Second, time.Millisecond)
	// The heartbeat created the group's config and its retry topic.
	tc := b.topics.Get("%RETRY%cg")
	require.NotNil(t, tc)
	assert.Equal(t, protocol.PermRead|protocol.PermWrite, tc.Perm)
	assert.Equal(t, int32(1), tc.ReadQueueNums)
	require.NotNil(t, b.consume.groups.Get("cg"))

	bcHeartbeat(t, c2.cl, addr, "10.0.0.2@1", "cg", protocol.ConsumeFromLastOffset, bcTagSub("HB", "*"), bcTagSub("%RETRY%cg", "*"))
	require.Eventually(t, func() bool { return c1.count() == 2 && c2.count() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"10.0.0.1@1", "10.0.0.2@1"}, bcConsumerList(t, c1.cl, addr, "cg"))

	// A repeated heartbeat changes nothing and notifies nobody.
	bcHeartbeat(t, c2.cl, addr, "10.0.0.2@1", "cg", protocol.ConsumeFromLastOffset, bcTagSub("HB", "*"), bcTagSub("%RETRY%cg", "*"))

	// GET_CONSUMER_CONNECTION_LIST describes the members.
	resp := baInvoke(t, c1.cl, addr, bcReq(remoting.GetConsumerConnectionList, &protocol.GroupRequestHeader{ConsumerGroup: "cg"}, nil))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	var cc protocol.ConsumerConnection
	require.NoError(t, json.Unmarshal(resp.Body, &cc))
	require.Len(t, cc.ConnectionSet, 2)
	assert.Equal(t, "10.0.0.1@1", cc.ConnectionSet[0].ClientID)
	assert.Equal(t, "GO", cc.ConnectionSet[0].Language)
	assert.Contains(t, cc.SubscriptionTable, "HB")
	assert.Equal(t, protocol.Clustering, cc.MessageModel)
	resp = baInvoke(t, c1.cl, addr, bcReq(remoting.GetConsumerConnectionList, &protocol.GroupRequestHeader{ConsumerGroup: "nobody"}, nil))
	assert.Equal(t, int32(remoting.ConsumerNotOnline), resp.Code)

	// Closing c2's connection removes it at once and tells c1.
	c2.cl.CloseConn(addr)
	require.Eventually(t, func() bool { return c1.count() == 3 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"10.0.0.1@1"}, bcConsumerList(t, c1.cl, addr, "cg"))
	assert.Equal(t, 1, c2.count())

	// UNREGISTER_CLIENT (Java clients) removes the last member.
	resp = baInvoke(t, c1.cl, addr, bcReq(remoting.UnregisterClient, &protocol.UnregisterClientRequestHeader{ClientID: "10.0.0.1@1", ConsumerGroup: "cg"}, nil))
	require.Equal(t, int32(remoting.Success), resp.Code)
	resp = baInvoke(t, c1.cl, addr, bcReq(remoting.GetConsumerListByGroup, &protocol.GroupRequestHeader{ConsumerGroup: "cg"}, nil))
	assert.Equal(t, int32(remoting.SystemError), resp.Code, "no consumer for this group")

	// A heartbeat body that does not parse is refused, not fatal.
	resp = baInvoke(t, c1.cl, addr, remoting.NewRequest(remoting.HeartBeat, nil, []byte("{oops")))
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
}

func TestSilentClientsExpire(t *testing.T) {
	baVerifyNoLeaks(t)
	// The managers run on a fake clock, so a client expires when the test
	// moves the clock, not when a loaded machine pauses between two checks.
	clk := newFakeClock()
	const expiry = 2 * time.Minute
	b := bcStartBroker(t, func(b *Broker) {
		b.consume.cfg.channelExpiry = expiry
		b.consume.cfg.scanInterval = 10 * time.Millisecond
		b.consume.consumers = NewConsumerManager(clk.Now, b.consume.enqueueNotify)
		b.consume.producers = NewProducerManager(clk.Now)
	})
	cl := baClient(t)
	addr := b.Addr()
	hb := protocol.HeartbeatData{ClientID: "10.0.0.1@1", ProducerDataSet: []protocol.ProducerData{{GroupName: "pg"}}}
	body, _ := json.Marshal(&hb)
	heartbeat := func() {
		bcHeartbeat(t, cl, addr, "10.0.0.1@1", "cg", protocol.ConsumeFromLastOffset)
		require.Equal(t, int32(remoting.Success), baInvoke(t, cl, addr, remoting.NewRequest(remoting.HeartBeat, nil, body)).Code)
	}
	heartbeat()
	require.Equal(t, []string{"10.0.0.1@1"}, b.consume.consumers.ClientIDs("cg"))
	require.Len(t, b.consume.producers.Channels("pg"), 1)

	// A heartbeat halfway renews both: past the first heartbeat's expiry
	// but within the second's, several scans keep them.
	clk.Advance(expiry / 2)
	heartbeat()
	clk.Advance(expiry/2 + time.Second)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, []string{"10.0.0.1@1"}, b.consume.consumers.ClientIDs("cg"), "renewed by the second heartbeat")
	assert.Len(t, b.consume.producers.Channels("pg"), 1, "renewed by the second heartbeat")

	// Silent past the expiry: the next scan drops both.
	clk.Advance(expiry / 2)
	require.Eventually(t, func() bool {
		return len(b.consume.consumers.ClientIDs("cg")) == 0 && len(b.consume.producers.Channels("pg")) == 0
	}, 5*time.Second, 10*time.Millisecond)
}

func TestLockBatchMQ(t *testing.T) {
	baVerifyNoLeaks(t)
	// A fake clock: a lock lapses when the test moves the clock, not when
	// a loaded machine pauses between two requests.
	clk := newFakeClock()
	const life = time.Minute
	b := bcStartBroker(t, func(b *Broker) { b.consume.locks = NewRebalanceLockManager(life, clk.Now) })
	cl := baClient(t)
	addr := b.Addr()
	mq := func(q int32) protocol.MessageQueue {
		return protocol.MessageQueue{Topic: "OT", BrokerName: "broker-a", QueueID: q}
	}
	lock := func(client string, qs ...int32) []protocol.MessageQueue {
		body := protocol.LockBatchRequestBody{ConsumerGroup: "og", ClientID: client}
		for _, q := range qs {
			body.MQSet = append(body.MQSet, mq(q))
		}
		raw, _ := json.Marshal(&body)
		resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.LockBatchMQ, nil, raw))
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
		var out protocol.LockBatchResponseBody
		require.NoError(t, json.Unmarshal(resp.Body, &out))
		return out.LockOKMQSet
	}
	assert.Equal(t, []protocol.MessageQueue{mq(0), mq(1)}, lock("c1", 0, 1))
	assert.Equal(t, []protocol.MessageQueue{mq(2)}, lock("c2", 0, 1, 2), "c1's queues are not handed to c2")
	clk.Advance(life / 2)
	assert.Len(t, lock("c1", 0, 1), 2, "the holder renews")

	raw, _ := json.Marshal(&protocol.LockBatchRequestBody{ConsumerGroup: "og", ClientID: "c1", MQSet: []protocol.MessageQueue{mq(0)}})
	resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.UnlockBatchMQ, nil, raw))
	require.Equal(t, int32(remoting.Success), resp.Code)
	assert.Equal(t, []protocol.MessageQueue{mq(0)}, lock("c2", 0), "an unlocked queue is free")

	// Past the first lock's life but within the renewed one, c1 keeps
	// queue 1; once c1 stops renewing, the lock lapses and c2 gets it.
	clk.Advance(life/2 + time.Second)
	assert.Empty(t, lock("c2", 1), "renewed: still c1's")
	clk.Advance(life / 2)
	assert.Equal(t, []protocol.MessageQueue{mq(1)}, lock("c2", 1), "c1's lock lapsed")

	resp = baInvoke(t, cl, addr, remoting.NewRequest(remoting.LockBatchMQ, nil, []byte("not json")))
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
}

func TestSubscriptionGroupAdmin(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	cl := baClient(t)
	addr := b.Addr()
	c := protocol.NewSubscriptionGroupConfig("admin-group")
	c.RetryMaxTimes = 5
	body, _ := json.Marshal(c)
	resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.UpdateAndCreateSubscription, nil, body))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)

	resp = baInvoke(t, cl, addr, remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil))
	require.Equal(t, int32(remoting.Success), resp.Code)
	var w protocol.SubscriptionGroupWrapper
	require.NoError(t, json.Unmarshal(resp.Body, &w), "the official Go admin decodes it with encoding/json")
	require.Contains(t, w.SubscriptionGroupTable, "admin-group")
	assert.Equal(t, int32(5), w.SubscriptionGroupTable["admin-group"].RetryMaxTimes)
	assert.Contains(t, w.SubscriptionGroupTable, "TOOLS_CONSUMER")

	bcUpdateOffset(t, cl, addr, "admin-group", "T", 0, 4)
	resp = baInvoke(t, cl, addr, bcReq(remoting.DeleteSubscriptionGroup, &protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "admin-group", RemoveOffset: true}, nil))
	require.Equal(t, int32(remoting.Success), resp.Code)
	assert.Nil(t, b.consume.groups.Get("admin-group"))
	assert.Equal(t, int64(-1), b.consume.offsets.Query("admin-group", "T", 0))

	for _, bad := range [][]byte{[]byte("{"), []byte(`{"groupName":""}`)} {
		resp = baInvoke(t, cl, addr, remoting.NewRequest(remoting.UpdateAndCreateSubscription, nil, bad))
		assert.Equal(t, int32(remoting.SystemError), resp.Code, string(bad))
	}
	resp = baInvoke(t, cl, addr, remoting.NewRequest(remoting.DeleteSubscriptionGroup, nil, nil))
	assert.Equal(t, int32(remoting.SystemError), resp.Code, "groupName is required")
}

// TestConsumeCodesRejectBadInput sends every consume-side code without its
// header fields and with a garbage body: each gets an answer a person can
// act on, and no processor panics (the server would answer a panic with an
// "internal error" remark).
func TestConsumeCodesRejectBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	cl := baClient(t)
	codes := []remoting.RequestCode{
		remoting.HeartBeat, remoting.UnregisterClient, remoting.GetConsumerListByGroup,
		remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset, remoting.PullMessage,
		remoting.QueryMessage, remoting.ViewMessageByID, remoting.GetMaxOffset, remoting.GetMinOffset,
		remoting.SearchOffsetByTimestamp, remoting.GetEarliestMsgStoreTime, remoting.GetConsumeStats,
		remoting.GetConsumerConnectionList, remoting.LockBatchMQ, remoting.UnlockBatchMQ,
		remoting.UpdateAndCreateSubscription, remoting.DeleteSubscriptionGroup,
	}
	for _, code := range codes {
		for _, ext := range []map[string]string{nil, {"queueId": "x", "offset": "-", "consumerGroup": "", "topic": "\x00"}} {
			resp := baInvoke(t, cl, b.Addr(), remoting.NewRequest(code, ext, []byte("\x00garbage")))
			assert.NotEqual(t, int32(remoting.Success), resp.Code, "code %d ext %v", code, ext)
			assert.NotEmpty(t, resp.Remark, "code %d", code)
			assert.NotContains(t, resp.Remark, "internal error", "code %d panicked", code)
		}
	}
}
