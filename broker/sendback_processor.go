package broker

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Retry and dead-letter constants (MixAll, SubscriptionGroupConfig).
const (
	// dlqQueueNums is DLQ_NUMS_PER_GROUP: one dead-letter queue per group.
	dlqQueueNums = 1
	// defaultRetryMaxTimes applies when a group has no config (retryMaxTimes).
	defaultRetryMaxTimes = 16
	// retryFirstLevel is the delay level of the first retry: level 3 + reconsumeTimes
	// (10 s with the default levels).
	retryFirstLevel = 3
	// dlqPerm is the perm of an auto-created %DLQ% topic: read and write,
	// as RocketMQ 4.9 creates it, so an operator can read it back.
	dlqPerm = protocol.PermRead | protocol.PermWrite
)

// Dead letters, for operators: after a group's maxReconsumeTimes failed
// attempts (the consumer's setting when it sends one, else the group's
// retryMaxTimes, 16 by default) a message goes to the topic %DLQ%<group>,
// queue 0, with its original properties plus RETRY_TOPIC (the topic it was
// first sent to) and ORIGIN_MESSAGE_ID (its first msgId). The topic is
// created on the first dead letter with perm read+write and is registered
// with the nameservers like any topic, so it can be read with:
//   - any consumer (a group other than <group>) subscribed to %DLQ%<group>,
//     e.g. to inspect or to re-send the messages to their RETRY_TOPIC;
//   - QUERY_MESSAGE / VIEW_MESSAGE_BY_ID (mqadmin queryMsgByKey/ById) by key
//     or id, and GET_TOPIC_STATS_INFO (mqadmin topicStatus) for its size.
// Dead letters are never delivered to <group> again by the broker.

// registerSendBackProcessor routes CONSUMER_SEND_MSG_BACK to the send pool,
// where RocketMQ runs it.
func (b *Broker) registerSendBackProcessor() {
	b.server.Handle(remoting.ConsumerSendMsgBack, b.pools.Send, b.processSendBack)
}

// processSendBack answers CONSUMER_SEND_MSG_BACK (asyncConsumerSendMsgBack):
// the message at the request's commitlog offset is stored again in
// %RETRY%<group> with reconsumeTimes+1 and a delay level (the requested one,
// or 3 + reconsumeTimes), or, once reconsumeTimes reaches the maximum or the
// requested level is negative, in %DLQ%<group> without delay. It blocks on
// the store's put like a send.
func (b *Broker) processSendBack(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ConsumerSendMsgBackRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	if !b.acceptWrites.Load() || !protocol.IsWriteable(b.cfg.BrokerPermission) {
		return respond(req, remoting.NoPermission, fmt.Sprintf("the broker[%s] sending message is forbidden (slave or no write perm)", b.ip)), nil
	}
	group := b.findGroup(h.Group)
	if group == nil {
		return respond(req, remoting.SubscriptionGroupNotExist, fmt.Sprintf("subscription group[%s] not exist, apply first please! (autoCreateSubscriptionGroup is off)", h.Group)), nil
	}
	if group.RetryQueueNums <= 0 {
		// RocketMQ's way to switch retries off for a group: the message is dropped.
		return respond(req, remoting.Success, fmt.Sprintf("group[%s] has retryQueueNums=%d: retries are off, the message is dropped", h.Group, group.RetryQueueNums)), nil
	}
	msg, err := b.store.LookMessageByOffset(h.Offset)
	if err != nil {
		return respond(req, remoting.SystemError, fmt.Sprintf("look message by offset failed, %d: no message starts at this commitlog offset", h.Offset)), nil
	}
	if isHoldingTopic(msg.Topic) {
		// No consumer was ever given it: re-putting it would hand a
		// consumer an uncommitted half message or a delayed message early.
		return respond(req, remoting.SystemError, fmt.Sprintf("the message at commitlog offset %d is held in %s, not consumable: nothing to send back", h.Offset, msg.Topic)), nil
	}
	maxTimes := group.RetryMaxTimes
	if h.MaxReconsumeTimes > 0 {
		maxTimes = h.MaxReconsumeTimes
	}
	toDLQ := msg.ReconsumeTimes >= maxTimes || h.DelayLevel < 0
	next, tc, resp := b.retryMessage(req, msg, h.Group, group.RetryQueueNums, h.UnitMode, toDLQ)
	if resp != nil {
		return resp, nil
	}
	if !toDLQ {
		level := int(h.DelayLevel)
		if level == 0 {
			level = retryFirstLevel + int(msg.ReconsumeTimes)
		}
		next.SetProperty(message.PropDelayTimeLevel, strconv.Itoa(level))
	}
	res, err := b.putMessage(next)
	if err != nil {
		return respond(req, remoting.MessageIllegal, err.Error()), nil
	}
	if !res.OK() {
		remark := fmt.Sprintf("putMessageResult is %s", res.Status)
		if res.Err != nil {
			remark += ": " + res.Err.Error()
		}
		return respond(req, remoting.SystemError, remark), nil
	}
	b.stats.onPut(tc.TopicName, 1, res.WroteBytes)
	b.stats.onSendBack(h.Group, msg.Topic)
	if toDLQ {
		b.log.WithFields(logrus.Fields{"group": h.Group, "topic": tc.TopicName, "originMsgId": next.Property(message.PropOriginMessageID),
			"reconsumeTimes": msg.ReconsumeTimes, "peer": c.RemoteAddr()}).Info("message moved to the dead-letter queue")
	}
	return respond(req, remoting.Success, ""), nil
}

// isHoldingTopic reports whether topic holds messages no consumer may see
// yet or ever (half messages, their ops, delayed and timer messages).
func isHoldingTopic(topic string) bool {
	switch topic {
	case TransHalfTopic, TransOpHalfTopic, ScheduleTopic, TimerTopic:
		return true
	}
	return false
}

// findGroup returns the group's config, creating it with the defaults when
// autoCreateSubscriptionGroup is on; nil when it does not exist.
func (b *Broker) findGroup(group string) *protocol.SubscriptionGroupConfig {
	if b.consume == nil || b.consume.groups == nil {
		return protocol.NewSubscriptionGroupConfig(group)
	}
	c, created := b.consume.groups.Find(group)
	if created {
		if err := b.consume.groups.Persist(); err != nil {
			b.log.WithError(err).WithField("group", group).Error("persist subscription groups")
		}
	}
	return c
}

// retryMessage builds the message stored for a retry (toDLQ false) or a
// dead letter of group from the consumed msg, and the topic it goes to
// (created on demand); on failure it returns the response instead.
func (b *Broker) retryMessage(req *remoting.Command, msg *message.MessageExt, group string, retryQueues int32, unitMode, toDLQ bool) (*message.MessageExt, *protocol.TopicConfig, *remoting.Command) {
	topic, queues, perm := protocol.RetryTopic(group), retryQueues, protocol.PermRead|protocol.PermWrite
	if toDLQ {
		topic, queues, perm = protocol.DLQTopic(group), dlqQueueNums, dlqPerm
	}
	var sysFlag int32
	if unitMode {
		sysFlag = sendTopicSysFlagUnitSub
	}
	tc, err := b.topics.CreateTopicInSendBackMethod(topic, queues, perm, sysFlag)
	if tc == nil {
		return nil, nil, respond(req, remoting.SystemError, fmt.Sprintf("topic[%s] not exist and cannot be created: %v", topic, err))
	}
	if err != nil {
		b.log.WithError(err).WithField("topic", topic).Error("topic created but not persisted")
	}
	if !protocol.IsWriteable(tc.Perm) {
		return nil, nil, respond(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden: its perm is %s",
			topic, protocol.PermString(tc.Perm)))
	}
	props := make(map[string]string, len(msg.Properties)+3)
	for k, v := range msg.Properties {
		props[k] = v
	}
	if props[message.PropRetryTopic] == "" {
		props[message.PropRetryTopic] = msg.Topic
	}
	if props[message.PropOriginMessageID] == "" {
		// The offset id of the consumed record, as the Java broker's
		// msgExt.getMsgId() reads it.
		props[message.PropOriginMessageID] = msg.OffsetMsgID()
	}
	props[message.PropReconsumeTime] = strconv.Itoa(int(msg.ReconsumeTimes) + 1)
	props[message.PropWaitStoreMsgOK] = "false"
	delete(props, message.PropDelayTimeLevel)
	for _, k := range timerProps {
		delete(props, k)
	}
	queueID := int32(0)
	if !toDLQ && tc.WriteQueueNums > 0 {
		queueID = rand.Int32N(tc.WriteQueueNums)
	}
	next := &message.MessageExt{
		Message: message.Message{
			Topic:      topic,
			Flag:       msg.Flag,
			Properties: props,
			Body:       msg.Body,
		},
		QueueID:        queueID,
		SysFlag:        msg.SysFlag,
		BornTimestamp:  msg.BornTimestamp,
		BornHost:       msg.BornHost,
		StoreHost:      b.StoreHost(),
		ReconsumeTimes: msg.ReconsumeTimes + 1,
	}
	return next, tc, nil
}

// handleRetryAndDLQ applies RocketMQ's rule to a send into %RETRY%<group>
// (the consumer's fallback when CONSUMER_SEND_MSG_BACK failed): once the
// header's reconsumeTimes reaches the maximum (the header's
// maxReconsumeTimes, else the group's retryMaxTimes), the message goes to
// %DLQ%<group> without delay instead. It returns a refusal, or nil with msg
// rewritten as needed.
func (b *Broker) handleRetryAndDLQ(req *remoting.Command, h *sendHeader, msg *message.MessageExt) *remoting.Command {
	group := strings.TrimPrefix(h.topic, RetryGroupTopicPrefix)
	sg := b.findGroup(group)
	if sg == nil {
		return respond(req, remoting.SubscriptionGroupNotExist, fmt.Sprintf("subscription group[%s] not exist, apply first please!", group))
	}
	maxTimes := sg.RetryMaxTimes
	if h.maxReconsumeTimes > 0 {
		maxTimes = h.maxReconsumeTimes
	}
	if h.reconsumeTimes < maxTimes {
		return nil
	}
	tc, err := b.topics.CreateTopicInSendBackMethod(protocol.DLQTopic(group), dlqQueueNums, dlqPerm, 0)
	if tc == nil {
		return respond(req, remoting.SystemError, fmt.Sprintf("topic[%s] not exist and cannot be created: %v", protocol.DLQTopic(group), err))
	}
	if !protocol.IsWriteable(tc.Perm) {
		return respond(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden: its perm is %s",
			tc.TopicName, protocol.PermString(tc.Perm)))
	}
	msg.Topic = tc.TopicName
	msg.QueueID = 0
	msg.RemoveProperty(message.PropDelayTimeLevel)
	b.log.WithFields(logrus.Fields{"group": group, "reconsumeTimes": h.reconsumeTimes}).Info("retry send moved to the dead-letter queue")
	return nil
}
