package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func bcQueryOffset(t *testing.T, cl *remoting.Client, addr, group, topic string, queueID int32) *remoting.Command {
	t.Helper()
	return baInvoke(t, cl, addr, bcReq(remoting.QueryConsumerOffset,
		&protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: queueID}, nil))
}

func bcUpdateOffset(t *testing.T, cl *remoting.Client, addr, group, topic string, queueID int32, off int64) {
	t.Helper()
	resp := baInvoke(t, cl, addr, bcReq(remoting.UpdateConsumerOffset,
		&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: queueID, CommitOffset: off}, nil))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
}

func TestQueryConsumerOffsetStartPoints(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "QO", 1)
	cl := baClient(t)
	addr := b.Addr()
	for range 3 {
		bcSend(t, cl, addr, "QO", 0, "old", "", "")
	}
	bcWaitQueue(t, b, "QO", 0, 3)
	// Store times are in ms: make sure the heartbeat is strictly later.
	time.Sleep(5 * time.Millisecond)

	// A brand-new group with CONSUME_FROM_LAST_OFFSET skips the history...
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "last", protocol.ConsumeFromLastOffset, bcTagSub("QO", "*"), bcTagSub("%RETRY%last", "*"))
	assert.Equal(t, int64(3), bcOffset(t, bcQueryOffset(t, cl, addr, "last", "QO", 0)))
	// ...but not what was sent after it came online, even before its first query.
	bcSend(t, cl, addr, "QO", 0, "new", "", "")
	bcWaitQueue(t, b, "QO", 0, 4)
	assert.Equal(t, int64(3), bcOffset(t, bcQueryOffset(t, cl, addr, "last", "QO", 0)))
	// Retry topics start at 0 (RocketMQ's rule).
	assert.Equal(t, int64(0), bcOffset(t, bcQueryOffset(t, cl, addr, "last", "%RETRY%last", 0)))

	// FIRST_OFFSET, and groups without a heartbeat, get RocketMQ's 0.
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "first", protocol.ConsumeFromFirstOffset, bcTagSub("QO", "*"))
	assert.Equal(t, int64(0), bcOffset(t, bcQueryOffset(t, cl, addr, "first", "QO", 0)))
	assert.Equal(t, int64(0), bcOffset(t, bcQueryOffset(t, cl, addr, "offline", "QO", 0)))

	// TIMESTAMP gets QUERY_NOT_FOUND so the client searches by its time.
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "ts", protocol.ConsumeFromTimestamp, bcTagSub("QO", "*"))
	assert.Equal(t, int32(remoting.QueryNotFound), bcQueryOffset(t, cl, addr, "ts", "QO", 0).Code)

	// A committed offset always wins.
	bcUpdateOffset(t, cl, addr, "last", "QO", 0, 1)
	assert.Equal(t, int64(1), bcOffset(t, bcQueryOffset(t, cl, addr, "last", "QO", 0)))

	// Bad input.
	resp := baInvoke(t, cl, addr, bcReq(remoting.QueryConsumerOffset, &protocol.TopicRequestHeader{Topic: "QO"}, nil))
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
	resp = baInvoke(t, cl, addr, bcReq(remoting.UpdateConsumerOffset,
		&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "g", Topic: "QO", QueueID: 0, CommitOffset: -5}, nil))
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
}

func TestOffsetQueries(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "OQ", 2)
	cl := baClient(t)
	addr := b.Addr()
	before := time.Now().UnixMilli()
	for range 5 {
		bcSend(t, cl, addr, "OQ", 1, "x", "", "")
	}
	bcWaitQueue(t, b, "OQ", 1, 5)
	q := func(code remoting.RequestCode, h any) *remoting.Command {
		return baInvoke(t, cl, addr, bcReq(code, h, nil))
	}

	assert.Equal(t, int64(5), bcOffset(t, q(remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: "OQ", QueueID: 1})))
	assert.Equal(t, int64(0), bcOffset(t, q(remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: "OQ", QueueID: 0})))
	assert.Equal(t, int64(0), bcOffset(t, q(remoting.GetMinOffset, &protocol.TopicQueueRequestHeader{Topic: "OQ", QueueID: 1})))
	assert.Equal(t, int64(0), bcOffset(t, q(remoting.SearchOffsetByTimestamp, &protocol.SearchOffsetRequestHeader{Topic: "OQ", QueueID: 1, Timestamp: before - 1000})))
	assert.Equal(t, int64(5), bcOffset(t, q(remoting.SearchOffsetByTimestamp, &protocol.SearchOffsetRequestHeader{Topic: "OQ", QueueID: 1, Timestamp: time.Now().Add(time.Hour).UnixMilli()})))

	resp := q(remoting.GetEarliestMsgStoreTime, &protocol.TopicQueueRequestHeader{Topic: "OQ", QueueID: 1})
	require.Equal(t, int32(remoting.Success), resp.Code)
	var eh protocol.EarliestMsgStoretimeResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &eh))
	assert.GreaterOrEqual(t, eh.Timestamp, before)
	assert.LessOrEqual(t, eh.Timestamp, time.Now().UnixMilli())

	resp = q(remoting.GetMaxOffset, &protocol.TopicRequestHeader{Topic: "OQ"})
	assert.Equal(t, int32(remoting.SystemError), resp.Code, "queueId is required")

	// GET_CONSUME_STATS for a group with offsets.
	bcUpdateOffset(t, cl, addr, "cg", "OQ", 1, 2)
	resp = q(remoting.GetConsumeStats, &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: "cg"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	stats, err := protocol.DecodeConsumeStats(resp.Body)
	require.NoError(t, err)
	require.Len(t, stats.OffsetTable, 2)
	w := stats.OffsetTable[protocol.MessageQueue{Topic: "OQ", BrokerName: "broker-a", QueueID: 1}]
	assert.Equal(t, int64(5), w.BrokerOffset)
	assert.Equal(t, int64(2), w.ConsumerOffset)
	assert.GreaterOrEqual(t, w.LastTimestamp, before)

	// QUERY_TOPIC_CONSUME_BY_WHO: groups with offsets and groups online.
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "live", protocol.ConsumeFromLastOffset, bcTagSub("OQ", "*"))
	resp = q(remoting.QueryTopicConsumeByWho, &protocol.TopicRequestHeader{Topic: "OQ"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	var gl protocol.GroupList
	require.NoError(t, json.Unmarshal(resp.Body, &gl))
	assert.Equal(t, []string{"cg", "live"}, gl.GroupList)

	// GET_ALL_CONSUMER_OFFSET is consumerOffset.json's content.
	resp = q(remoting.GetAllConsumerOffset, nil)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	copied := NewConsumerOffsetManager(filepath.Join(t.TempDir(), "x.json"), baLogger())
	require.NoError(t, copied.Restore(resp.Body))
	assert.Equal(t, int64(2), copied.Query("cg", "OQ", 1))
}

func TestOffsetsAndGroupsPersistAcrossRestart(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg2 := *cfg
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	b.consume.cfg.offsetFlushInterval = 20 * time.Millisecond
	require.NoError(t, b.Start())
	bcCreateTopic(t, b, "PR", 2)
	cl := baClient(t)
	addr := b.Addr()
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("PR", "*"))
	bcUpdateOffset(t, cl, addr, "cg", "PR", 0, 7)
	bcUpdateOffset(t, cl, addr, "cg", "PR", 1, 9)

	// The periodic flush writes consumerOffset.json in RocketMQ's shape.
	path := filepath.Join(cfg.StorePathRootDir, "config", "consumerOffset.json")
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(path)
		return err == nil && string(data) == `{"offsetTable":{"PR@cg":{"0":7,"1":9}}}`
	}, 5*time.Second, 5*time.Millisecond)

	bcUpdateOffset(t, cl, addr, "cg", "PR", 1, 10) // the shutdown persists the latest offsets
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.Shutdown(ctx))
	cl.CloseConn(addr)

	b2, err := New(&cfg2, baLogger())
	require.NoError(t, err)
	require.NoError(t, b2.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b2) })
	addr2 := b2.Addr()
	assert.Equal(t, int64(7), bcOffset(t, bcQueryOffset(t, cl, addr2, "cg", "PR", 0)))
	assert.Equal(t, int64(10), bcOffset(t, bcQueryOffset(t, cl, addr2, "cg", "PR", 1)))
	assert.NotNil(t, b2.consume.groups.Get("cg"), "the auto-created group was persisted")
	assert.NotNil(t, b2.topics.Get("%RETRY%cg"), "the retry topic was persisted")
}

// TestUpdateConsumerOffsetRefusesBadNames: a commit with a topic holding
// '@' (the table's key separator) or an over-long name, or for a queue
// beyond the topic's, is refused and stores nothing; it used to be stored
// under a key that splits into another topic and group.
func TestUpdateConsumerOffsetRefusesBadNames(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "UO", 2)
	cl := baClient(t)
	addr := b.Addr()
	update := func(group, topic string, queueID int32) *remoting.Command {
		return baInvoke(t, cl, addr, bcReq(remoting.UpdateConsumerOffset,
			&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: queueID, CommitOffset: 7}, nil))
	}
	for _, tc := range []struct {
		name, group, topic string
		queueID            int32
	}{
		{"topic with the key separator", "g", "UO@x", 0},
		{"over-long topic", "g", strings.Repeat("t", 200), 0},
		{"over-long group", strings.Repeat("g", 300), "UO", 0},
		{"queue beyond the topic", "g", "UO", 2},
	} {
		resp := update(tc.group, tc.topic, tc.queueID)
		assert.Equal(t, int32(remoting.SystemError), resp.Code, "%s: %s", tc.name, resp.Remark)
	}
	assert.Empty(t, b.consume.offsets.GroupsOfTopic("UO"), "nothing stored by a refused commit")
	bcUpdateOffset(t, cl, addr, "g", "UO", 1, 7)
	assert.Equal(t, []string{"g"}, b.consume.offsets.GroupsOfTopic("UO"))
}
