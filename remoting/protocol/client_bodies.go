package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// ConsumeType says whether a consumer pulls by itself or is pushed to.
type ConsumeType string

// Consume types as RocketMQ spells them.
const (
	ConsumeActively  ConsumeType = "CONSUME_ACTIVELY"  // pull consumer
	ConsumePassively ConsumeType = "CONSUME_PASSIVELY" // push consumer
)

// MessageModel is clustering (a group shares the queues) or broadcasting.
type MessageModel string

// Message models as RocketMQ spells them.
const (
	Clustering   MessageModel = "CLUSTERING"
	Broadcasting MessageModel = "BROADCASTING"
)

// ConsumeFromWhere says where a group with no stored offset starts.
type ConsumeFromWhere string

// Start points as RocketMQ spells them.
const (
	ConsumeFromLastOffset  ConsumeFromWhere = "CONSUME_FROM_LAST_OFFSET"
	ConsumeFromFirstOffset ConsumeFromWhere = "CONSUME_FROM_FIRST_OFFSET"
	ConsumeFromTimestamp   ConsumeFromWhere = "CONSUME_FROM_TIMESTAMP"
)

// Expression types of a subscription.
const (
	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
	// SubAll is the tag expression matching every message.
	SubAll = "*"
)

// HeartbeatData is HEART_BEAT's body.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
}

// ProducerData names a producer group of a client.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// ConsumerData is one consumer group of a client with its subscriptions.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         ConsumeType        `json:"consumeType"`
	MessageModel        MessageModel       `json:"messageModel"`
	ConsumeFromWhere    ConsumeFromWhere   `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// SubscriptionData is one topic subscription: the expression and, for tag
// expressions, the tags and their hash codes.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         CodeSet  `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

// CodeSet holds tag hash codes. Java sends them as numbers, the official Go
// client as strings; both decode. It encodes as numbers, as Java does.
type CodeSet []int32

// UnmarshalJSON accepts numbers and numeric strings.
func (c *CodeSet) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*c = nil
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(CodeSet, 0, len(raw))
	for _, r := range raw {
		s := string(bytes.Trim(r, `"`))
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return &json.UnmarshalTypeError{Value: "codeSet element " + string(r), Type: nil}
		}
		out = append(out, int32(n))
	}
	*c = out
	return nil
}

// DecodeHeartbeatData parses a HEART_BEAT body.
func DecodeHeartbeatData(b []byte) (*HeartbeatData, error) {
	var hb HeartbeatData
	if err := json.Unmarshal(b, &hb); err != nil {
		return nil, wrapBody("HeartbeatData", err)
	}
	return &hb, nil
}

// CheckClientRequestBody is CHECK_CLIENT_CONFIG's body: a consumer asks
// whether the broker can serve a subscription before it starts.
type CheckClientRequestBody struct {
	ClientID         string            `json:"clientId"`
	Group            string            `json:"group"`
	SubscriptionData *SubscriptionData `json:"subscriptionData"`
}

// DecodeCheckClientRequestBody parses CHECK_CLIENT_CONFIG's body.
func DecodeCheckClientRequestBody(b []byte) (*CheckClientRequestBody, error) {
	var body CheckClientRequestBody
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, wrapBody("CheckClientRequestBody", err)
	}
	return &body, nil
}

// Encode renders the heartbeat as JSON.
func (hb *HeartbeatData) Encode() ([]byte, error) { return json.Marshal(hb) }

// ConsumerListBody answers GET_CONSUMER_LIST_BY_GROUP.
type ConsumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// MessageQueue names one queue of a topic on one broker.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// LockBatchRequestBody is LOCK_BATCH_MQ's body (and UNLOCK_BATCH_MQ's, which
// Java names UnlockBatchRequestBody with the same fields).
type LockBatchRequestBody struct {
	ConsumerGroup  string         `json:"consumerGroup"`
	ClientID       string         `json:"clientId"`
	OnlyThisBroker bool           `json:"onlyThisBroker,omitempty"`
	MQSet          []MessageQueue `json:"mqSet"`
}

// DecodeLockBatchRequestBody parses a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ body.
func DecodeLockBatchRequestBody(b []byte) (*LockBatchRequestBody, error) {
	var body LockBatchRequestBody
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, wrapBody("LockBatchRequestBody", err)
	}
	return &body, nil
}

// LockBatchResponseBody answers LOCK_BATCH_MQ with the queues now held.
type LockBatchResponseBody struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}

// SubscriptionGroupConfig is a consumer group's settings (subscriptionGroup.json).
type SubscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
}

// NewSubscriptionGroupConfig returns RocketMQ's defaults for a group.
func NewSubscriptionGroupConfig(group string) *SubscriptionGroupConfig {
	return &SubscriptionGroupConfig{
		GroupName:                      group,
		ConsumeEnable:                  true,
		ConsumeFromMinEnable:           true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  16,
		BrokerID:                       0,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
	}
}

// SubscriptionGroupWrapper answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG; the
// official Go admin decodes it with encoding/json.
type SubscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]*SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	DataVersion            DataVersion                         `json:"dataVersion"`
}

// Connection describes one client connection in GET_CONSUMER_CONNECTION_LIST.
type Connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection answers GET_CONSUMER_CONNECTION_LIST.
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
	ConsumeType       ConsumeType                 `json:"consumeType"`
	MessageModel      MessageModel                `json:"messageModel"`
	ConsumeFromWhere  ConsumeFromWhere            `json:"consumeFromWhere"`
}
