package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// t5SendBack sends CONSUMER_SEND_MSG_BACK for the message at commitlog offset.
func t5SendBack(t *testing.T, cl *remoting.Client, b *Broker, group string, offset int64, level, maxTimes int32) *remoting.Command {
	t.Helper()
	h := protocol.ConsumerSendMsgBackRequestHeader{Offset: offset, Group: group, DelayLevel: level, OriginMsgID: "ignored", MaxReconsumeTimes: maxTimes}
	return baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.ConsumerSendMsgBack, protocol.EncodeHeader(&h, nil), nil))
}

// t5Offset returns the commitlog offset inside a send response's msgId.
func t5Offset(t *testing.T, resp *remoting.Command) int64 {
	t.Helper()
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	_, off, err := message.ParseOffsetMsgID(resp.FieldMap()["msgId"])
	require.NoError(t, err)
	return off
}

func TestSendBackRetriesThenDeadLetters(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "sbT", 1)
	resp := t5Send(t, cl, b, "sbT", 0, "payload", map[string]string{message.PropKeys: "order-1"})
	origin := resp.FieldMap()["msgId"]
	off := t5Offset(t, resp)

	// First failure: level 3 + 0 = 100 ms here, into %RETRY%g.
	sent := time.Now()
	back := t5SendBack(t, cl, b, "g", off, 0, 0)
	require.Equal(t, int32(remoting.Success), back.Code, back.Remark)
	retry := protocol.RetryTopic("g")
	tc := b.topics.Get(retry)
	require.NotNil(t, tc, "retry topic created on demand")
	assert.Equal(t, int32(1), tc.WriteQueueNums, "the group's retryQueueNums")
	t5WaitArrival(t, b, ScheduleTopic, 2, 1, 5*time.Second)
	t5WaitArrival(t, b, retry, 0, 1, 5*time.Second)
	assert.GreaterOrEqual(t, time.Since(sent), 100*time.Millisecond)
	msgs := t5Read(t, b, retry, 0)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "payload", string(m.Body))
	assert.Equal(t, "sbT", m.Property(message.PropRetryTopic))
	assert.Equal(t, origin, m.Property(message.PropOriginMessageID))
	assert.Equal(t, "1", m.Property(message.PropReconsumeTime))
	assert.Equal(t, int32(1), m.ReconsumeTimes)
	assert.Equal(t, "order-1", m.Keys())
	assert.NotContains(t, m.Properties, message.PropDelayTimeLevel)

	// Second failure with maxReconsumeTimes 1: dead letter, no delay.
	back = t5SendBack(t, cl, b, "g", m.CommitLogOffset, 0, 1)
	require.Equal(t, int32(remoting.Success), back.Code, back.Remark)
	dlq := protocol.DLQTopic("g")
	tc = b.topics.Get(dlq)
	require.NotNil(t, tc)
	assert.Equal(t, protocol.PermRead|protocol.PermWrite, tc.Perm)
	assert.Equal(t, int32(1), tc.WriteQueueNums)
	t5WaitArrival(t, b, dlq, 0, 1, 5*time.Second)
	d := t5Read(t, b, dlq, 0)[0]
	assert.Equal(t, int32(2), d.ReconsumeTimes)
	assert.Equal(t, "sbT", d.Property(message.PropRetryTopic))
	assert.Equal(t, origin, d.Property(message.PropOriginMessageID), "the first msgId is kept")
	assert.Equal(t, int64(1), b.store.MaxOffsetInQueue(retry, 0), "not retried again")
}

func TestSendBackNegativeLevelAndGroupSettings(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "sbN", 1)
	off := t5Offset(t, t5Send(t, cl, b, "sbN", 0, "x", nil))

	back := t5SendBack(t, cl, b, "gneg", off, -1, 0)
	require.Equal(t, int32(remoting.Success), back.Code, back.Remark)
	t5WaitArrival(t, b, protocol.DLQTopic("gneg"), 0, 1, 5*time.Second)
	assert.Nil(t, b.topics.Get(protocol.RetryTopic("gneg")))

	g := protocol.NewSubscriptionGroupConfig("g3")
	g.RetryQueueNums = 3
	g.RetryMaxTimes = 0
	require.NoError(t, b.consume.groups.Update(g))
	back = t5SendBack(t, cl, b, "g3", off, 0, 0)
	require.Equal(t, int32(remoting.Success), back.Code, back.Remark)
	assert.Nil(t, b.topics.Get(protocol.RetryTopic("g3")), "retryMaxTimes 0: straight to the dead letters")
	t5WaitArrival(t, b, protocol.DLQTopic("g3"), 0, 1, 5*time.Second)

	g4 := protocol.NewSubscriptionGroupConfig("g4")
	g4.RetryQueueNums = 3
	require.NoError(t, b.consume.groups.Update(g4))
	back = t5SendBack(t, cl, b, "g4", off, 1, 0)
	require.Equal(t, int32(remoting.Success), back.Code, back.Remark)
	assert.Equal(t, int32(3), b.topics.Get(protocol.RetryTopic("g4")).WriteQueueNums)
	t5WaitArrival(t, b, ScheduleTopic, 0, 1, 5*time.Second) // the requested level 1
}

func TestSendBackBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	b, cl := t5Start(t, cfg)
	back := t5SendBack(t, cl, b, "gx", 123456, 0, 0)
	assert.Equal(t, int32(remoting.SystemError), back.Code)
	assert.Contains(t, back.Remark, "look message by offset failed, 123456")
	assert.Zero(t, b.store.MaxOffsetInQueue(protocol.RetryTopic("gx"), 0))

	resp := baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{"group": "gx"}, nil))
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
	assert.Contains(t, resp.Remark, "offset")

	g := protocol.NewSubscriptionGroupConfig("goff")
	g.RetryQueueNums = 0
	require.NoError(t, b.consume.groups.Update(g))
	bcCreateTopic(t, b, "sbB", 1)
	off := t5Offset(t, t5Send(t, cl, b, "sbB", 0, "x", nil))
	back = t5SendBack(t, cl, b, "goff", off, 0, 0)
	assert.Equal(t, int32(remoting.Success), back.Code)
	assert.Contains(t, back.Remark, "retryQueueNums=0")
}

func TestRetryTopicSendGoesToDLQWhenExhausted(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	retry := protocol.RetryTopic("gs")
	send := func(reconsume int32, level string) *remoting.Command {
		h := sendHeaderFor(retry, 0, map[string]string{message.PropDelayTimeLevel: level, message.PropRetryTopic: "orig",
			message.PropUniqKey: strconv.FormatInt(time.Now().UnixNano(), 16)})
		h.ProducerGroup = "CLIENT_INNER_PRODUCER"
		h.ReconsumeTimes = reconsume
		h.MaxReconsumeTimes = 2
		return baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.SendMessage, protocol.EncodeHeader(h, nil), []byte("r")))
	}
	resp := send(1, "3")
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, ScheduleTopic, 2, 1, 5*time.Second)
	t5WaitArrival(t, b, retry, 0, 1, 5*time.Second)

	resp = send(2, "4")
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, protocol.DLQTopic("gs"), 0, 1, 5*time.Second)
	assert.Equal(t, int64(1), b.store.MaxOffsetInQueue(ScheduleTopic, 2))
	assert.Zero(t, b.store.MaxOffsetInQueue(ScheduleTopic, 3), "a dead letter is not delayed")
}

// TestSendBackRefusesHeldMessages: CONSUMER_SEND_MSG_BACK names a commitlog
// offset, and one of a half message (or a parked delay message) used to be
// re-put to %RETRY%<group>, delivering an uncommitted transaction to the
// group's consumers. It is refused and nothing reaches the retry topic.
func TestSendBackRefusesHeldMessages(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5NoCheckConfig(t))
	bcCreateTopic(t, b, "sbHeld", 1)
	half := t5SendHalf(t, cl, b, "pgHeld", "sbHeld", "uncommitted", nil)
	delayed := t5Offset(t, t5Send(t, cl, b, "sbHeld", 0, "later", map[string]string{message.PropDelayTimeLevel: "18"}))
	for name, off := range map[string]int64{"half": half.clOffset, "delayed": delayed} {
		back := t5SendBack(t, cl, b, "gHeld", off, 0, 0)
		assert.Equal(t, int32(remoting.SystemError), back.Code, "%s: %s", name, back.Remark)
		assert.Contains(t, back.Remark, "not consumable", name)
	}
	assert.Zero(t, b.store.MaxOffsetInQueue(protocol.RetryTopic("gHeld"), 0))
	assert.Nil(t, b.topics.Get(protocol.RetryTopic("gHeld")))
}
