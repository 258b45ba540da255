package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// MessageQueue names one queue of a topic on one broker.
type MessageQueue = protocol.MessageQueue

// MessageExt is a message as a consumer receives it: the body (already
// uncompressed), properties, and where and when it was stored. MsgID()
// returns the producer's unique id, OffsetMsgID() the broker's.
type MessageExt = message.MessageExt

// Message is what a producer sends. Build it with NewMessage and the With...
// helpers, which return the message so calls chain:
//
//	msg := client.NewMessage("orders", body).WithTag("paid").WithKeys("order-42")
type Message struct {
	message.Message
	// Queue is the target of a send when the producer uses NewManualSelector.
	Queue *MessageQueue
}

// NewMessage returns a message for topic carrying body.
func NewMessage(topic string, body []byte) *Message {
	return &Message{Message: message.Message{Topic: topic, Body: body}}
}

// WithTag sets the message's tag, which consumers filter on.
func (m *Message) WithTag(tag string) *Message {
	m.SetProperty(message.PropTags, tag)
	return m
}

// WithKeys sets the business keys the broker indexes for QueryMessage.
func (m *Message) WithKeys(keys ...string) *Message {
	m.SetProperty(message.PropKeys, strings.Join(keys, message.KeySeparator))
	return m
}

// WithProperty sets a user property.
func (m *Message) WithProperty(key, value string) *Message {
	m.SetProperty(key, value)
	return m
}

// WithDelayTimeLevel delays delivery by one of the broker's levels
// (1..18 = 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h by default).
func (m *Message) WithDelayTimeLevel(level int) *Message {
	m.SetProperty(message.PropDelayTimeLevel, strconv.Itoa(level))
	return m
}

// WithDeliveryTime asks for delivery at t (RocketMQ 5's timer property;
// brokers without timer support deliver at once).
func (m *Message) WithDeliveryTime(t time.Time) *Message {
	m.SetProperty(message.PropTimerDeliverMS, strconv.FormatInt(t.UnixMilli(), 10))
	return m
}

// WithShardingKey makes every message with the same key go to the same queue,
// so an orderly consumer sees them in send order.
func (m *Message) WithShardingKey(key string) *Message {
	m.SetProperty(message.PropShardingKey, key)
	return m
}

// WithFlag sets the user flag stored with the message.
func (m *Message) WithFlag(flag int32) *Message {
	m.Flag = flag
	return m
}

// ShardingKey returns the key set by WithShardingKey.
func (m *Message) ShardingKey() string { return m.Property(message.PropShardingKey) }

// SendStatus is the outcome of a send the broker accepted.
type SendStatus int

const (
	// SendOK means the message is stored as configured.
	SendOK SendStatus = iota
	// SendFlushDiskTimeout means stored but a SYNC_FLUSH broker could not
	// flush it in time.
	SendFlushDiskTimeout
	// SendFlushSlaveTimeout means stored on the master but a SYNC_MASTER could
	// not replicate it in time.
	SendFlushSlaveTimeout
	// SendSlaveNotAvailable means stored on the master but a SYNC_MASTER has
	// no slave.
	SendSlaveNotAvailable
)

// String names the status as RocketMQ does.
func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "UNKNOWN"
}

// SendResult describes a stored message (or batch).
type SendResult struct {
	Status SendStatus
	// MsgID is the producer's unique id (UNIQ_KEY); for a batch the ids of
	// its messages joined by commas.
	MsgID string
	// OffsetMsgID is the broker's id (store host + commitlog offset); for a
	// batch, comma-joined.
	OffsetMsgID string
	// Queue is where the message went.
	Queue MessageQueue
	// QueueOffset is the message's index in the queue (the first one of a batch).
	QueueOffset   int64
	TransactionID string
	RegionID      string
	TraceOn       bool
}

// ConsumeResult is a push-consumer handler's verdict on its messages.
type ConsumeResult int

const (
	// ConsumeSuccess acknowledges the messages.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater asks for redelivery later (through the group's retry
	// topic for concurrent consumers; after a pause, in place, for orderly ones).
	ConsumeRetryLater
)

// String renders the result for logs.
func (r *SendResult) String() string {
	return fmt.Sprintf("SendResult [status=%s, msgId=%s, offsetMsgId=%s, queue=%s/%s/%d, queueOffset=%d]",
		r.Status, r.MsgID, r.OffsetMsgID, r.Queue.Topic, r.Queue.BrokerName, r.Queue.QueueID, r.QueueOffset)
}
