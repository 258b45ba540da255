package protocol

// Headers of the requests clients send to brokers, and of the brokers'
// responses. Keys and required-ness follow RocketMQ 4.9's
// common/protocol/header classes (`required` = @CFNotNull there).

// SendMessageRequestHeader is SEND_MESSAGE's header (long keys).
type SendMessageRequestHeader struct {
	ProducerGroup         string `ext:"producerGroup,required"`
	Topic                 string `ext:"topic,required"`
	DefaultTopic          string `ext:"defaultTopic,required"`
	DefaultTopicQueueNums int32  `ext:"defaultTopicQueueNums,required"`
	QueueID               int32  `ext:"queueId,required"`
	SysFlag               int32  `ext:"sysFlag,required"`
	BornTimestamp         int64  `ext:"bornTimestamp,required"`
	Flag                  int32  `ext:"flag,required"`
	Properties            string `ext:"properties"`
	ReconsumeTimes        int32  `ext:"reconsumeTimes"`
	UnitMode              bool   `ext:"unitMode"`
	Batch                 bool   `ext:"batch"`
	MaxReconsumeTimes     int32  `ext:"maxReconsumeTimes"`
	BrokerName            string `ext:"bname,omitempty"` // RocketMQ 5 / Go client extra
}

// SendMessageRequestHeaderV2 is the short-key header of SEND_MESSAGE_V2 and
// SEND_BATCH_MESSAGE (one letter per field, to save bytes on every send).
type SendMessageRequestHeaderV2 struct {
	ProducerGroup         string `ext:"a,required"`
	Topic                 string `ext:"b,required"`
	DefaultTopic          string `ext:"c,required"`
	DefaultTopicQueueNums int32  `ext:"d,required"`
	QueueID               int32  `ext:"e,required"`
	SysFlag               int32  `ext:"f,required"`
	BornTimestamp         int64  `ext:"g,required"`
	Flag                  int32  `ext:"h,required"`
	Properties            string `ext:"i"`
	ReconsumeTimes        int32  `ext:"j"`
	UnitMode              bool   `ext:"k"`
	MaxReconsumeTimes     int32  `ext:"l"`
	Batch                 bool   `ext:"m"`
	BrokerName            string `ext:"n,omitempty"`
}

// ToV1 returns the long-key form of a V2 header.
func (h *SendMessageRequestHeaderV2) ToV1() SendMessageRequestHeader {
	return SendMessageRequestHeader{
		ProducerGroup: h.ProducerGroup, Topic: h.Topic, DefaultTopic: h.DefaultTopic,
		DefaultTopicQueueNums: h.DefaultTopicQueueNums, QueueID: h.QueueID, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, Flag: h.Flag, Properties: h.Properties,
		ReconsumeTimes: h.ReconsumeTimes, UnitMode: h.UnitMode, Batch: h.Batch,
		MaxReconsumeTimes: h.MaxReconsumeTimes, BrokerName: h.BrokerName,
	}
}

// FromV1 fills a V2 header from the long-key form.
func (h *SendMessageRequestHeaderV2) FromV1(v SendMessageRequestHeader) {
	*h = SendMessageRequestHeaderV2{
		ProducerGroup: v.ProducerGroup, Topic: v.Topic, DefaultTopic: v.DefaultTopic,
		DefaultTopicQueueNums: v.DefaultTopicQueueNums, QueueID: v.QueueID, SysFlag: v.SysFlag,
		BornTimestamp: v.BornTimestamp, Flag: v.Flag, Properties: v.Properties,
		ReconsumeTimes: v.ReconsumeTimes, UnitMode: v.UnitMode, Batch: v.Batch,
		MaxReconsumeTimes: v.MaxReconsumeTimes, BrokerName: v.BrokerName,
	}
}

// SendMessageResponseHeader answers every send. MsgID is the offsetMsgId (32
// upper-case hex for IPv4), comma-joined for batches; the official
// transaction producer parses it, so it must be well formed.
type SendMessageResponseHeader struct {
	MsgID         string `ext:"msgId,required"`
	QueueID       int32  `ext:"queueId,required"`
	QueueOffset   int64  `ext:"queueOffset,required"`
	TransactionID string `ext:"transactionId,omitempty"`
	MsgRegion     string `ext:"MSG_REGION,omitempty"`
	TraceOn       string `ext:"TRACE_ON,omitempty"`
}

// PullMessageRequestHeader is PULL_MESSAGE's header.
type PullMessageRequestHeader struct {
	ConsumerGroup        string `ext:"consumerGroup,required"`
	Topic                string `ext:"topic,required"`
	QueueID              int32  `ext:"queueId,required"`
	QueueOffset          int64  `ext:"queueOffset,required"`
	MaxMsgNums           int32  `ext:"maxMsgNums,required"`
	SysFlag              int32  `ext:"sysFlag,required"`
	CommitOffset         int64  `ext:"commitOffset,required"`
	SuspendTimeoutMillis int64  `ext:"suspendTimeoutMillis,required"`
	Subscription         string `ext:"subscription"`
	SubVersion           int64  `ext:"subVersion,required"`
	ExpressionType       string `ext:"expressionType"`
	BrokerName           string `ext:"bname,omitempty"`
}

// Pull request sysFlag bits (PullSysFlag.java).
const (
	PullFlagCommitOffset int32 = 0x1
	PullFlagSuspend      int32 = 0x2
	PullFlagSubscription int32 = 0x4
	PullFlagClassFilter  int32 = 0x8
	PullFlagLitePull     int32 = 0x10
)

// PullMessageResponseHeader must be sent in every status: clients copy
// nextBeginOffset into their next request.
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64 `ext:"suggestWhichBrokerId,required"`
	NextBeginOffset      int64 `ext:"nextBeginOffset,required"`
	MinOffset            int64 `ext:"minOffset,required"`
	MaxOffset            int64 `ext:"maxOffset,required"`
}

// QueryConsumerOffsetRequestHeader is QUERY_CONSUMER_OFFSET's header.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	BrokerName    string `ext:"bname,omitempty"`
}

// UpdateConsumerOffsetRequestHeader is UPDATE_CONSUMER_OFFSET's header.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	CommitOffset  int64  `ext:"commitOffset,required"`
	BrokerName    string `ext:"bname,omitempty"`
}

// OffsetResponseHeader carries one offset: the answer to QUERY_CONSUMER_OFFSET,
// GET_MAX_OFFSET, GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP.
type OffsetResponseHeader struct {
	Offset int64 `ext:"offset,required"`
}

// TopicQueueRequestHeader names one queue: GET_MAX_OFFSET, GET_MIN_OFFSET and
// GET_EARLIEST_MSG_STORETIME.
type TopicQueueRequestHeader struct {
	Topic      string `ext:"topic,required"`
	QueueID    int32  `ext:"queueId,required"`
	BrokerName string `ext:"bname,omitempty"`
}

// SearchOffsetRequestHeader is SEARCH_OFFSET_BY_TIMESTAMP's header (timestamp in ms).
type SearchOffsetRequestHeader struct {
	Topic      string `ext:"topic,required"`
	QueueID    int32  `ext:"queueId,required"`
	Timestamp  int64  `ext:"timestamp,required"`
	BrokerName string `ext:"bname,omitempty"`
}

// EarliestMsgStoretimeResponseHeader answers GET_EARLIEST_MSG_STORETIME.
type EarliestMsgStoretimeResponseHeader struct {
	Timestamp int64 `ext:"timestamp,required"`
}

// ConsumerSendMsgBackRequestHeader is CONSUMER_SEND_MSG_BACK's header.
type ConsumerSendMsgBackRequestHeader struct {
	Offset            int64  `ext:"offset,required"`
	Group             string `ext:"group,required"`
	DelayLevel        int32  `ext:"delayLevel,required"`
	OriginMsgID       string `ext:"originMsgId"`
	OriginTopic       string `ext:"originTopic"`
	UnitMode          bool   `ext:"unitMode"`
	MaxReconsumeTimes int32  `ext:"maxReconsumeTimes"`
	BrokerName        string `ext:"bname,omitempty"`
}

// EndTransactionRequestHeader is END_TRANSACTION's header.
type EndTransactionRequestHeader struct {
	ProducerGroup        string `ext:"producerGroup,required"`
	TranStateTableOffset int64  `ext:"tranStateTableOffset,required"`
	CommitLogOffset      int64  `ext:"commitLogOffset,required"`
	CommitOrRollback     int32  `ext:"commitOrRollback,required"`
	FromTransactionCheck bool   `ext:"fromTransactionCheck"`
	MsgID                string `ext:"msgId,required"`
	TransactionID        string `ext:"transactionId"`
	BrokerName           string `ext:"bname,omitempty"`
}

// CheckTransactionStateRequestHeader is the broker's CHECK_TRANSACTION_STATE header.
type CheckTransactionStateRequestHeader struct {
	TranStateTableOffset int64  `ext:"tranStateTableOffset,required"`
	CommitLogOffset      int64  `ext:"commitLogOffset,required"`
	MsgID                string `ext:"msgId"`
	TransactionID        string `ext:"transactionId"`
	OffsetMsgID          string `ext:"offsetMsgId"`
}

// GroupRequestHeader names a consumer group: GET_CONSUMER_LIST_BY_GROUP,
// NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_CONNECTION_LIST.
type GroupRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
}

// UnregisterClientRequestHeader is UNREGISTER_CLIENT's header (Java clients only).
type UnregisterClientRequestHeader struct {
	ClientID      string `ext:"clientID,required"`
	ProducerGroup string `ext:"producerGroup"`
	ConsumerGroup string `ext:"consumerGroup"`
}

// CreateTopicRequestHeader is UPDATE_AND_CREATE_TOPIC's header.
type CreateTopicRequestHeader struct {
	Topic           string `ext:"topic,required"`
	DefaultTopic    string `ext:"defaultTopic,required"`
	ReadQueueNums   int32  `ext:"readQueueNums,required"`
	WriteQueueNums  int32  `ext:"writeQueueNums,required"`
	Perm            int32  `ext:"perm,required"`
	TopicFilterType string `ext:"topicFilterType,required"`
	TopicSysFlag    int32  `ext:"topicSysFlag"`
	Order           bool   `ext:"order,required"`
}

// TopicRequestHeader names a topic: DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO,
// GET_TOPIC_CONFIG.
type TopicRequestHeader struct {
	Topic string `ext:"topic,required"`
}

// GetConsumeStatsRequestHeader is GET_CONSUME_STATS's header; an empty topic
// means every topic the group subscribes to.
type GetConsumeStatsRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic"`
}

// DeleteSubscriptionGroupRequestHeader is DELETE_SUBSCRIPTIONGROUP's header.
type DeleteSubscriptionGroupRequestHeader struct {
	GroupName    string `ext:"groupName,required"`
	RemoveOffset bool   `ext:"removeOffset"`
}

// QueryMessageRequestHeader is QUERY_MESSAGE's header (lookup by key).
type QueryMessageRequestHeader struct {
	Topic          string `ext:"topic,required"`
	Key            string `ext:"key,required"`
	MaxNum         int32  `ext:"maxNum,required"`
	BeginTimestamp int64  `ext:"beginTimestamp,required"`
	EndTimestamp   int64  `ext:"endTimestamp,required"`
}

// QueryMessageResponseHeader answers QUERY_MESSAGE.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64 `ext:"indexLastUpdateTimestamp,required"`
	IndexLastUpdatePhyoffset int64 `ext:"indexLastUpdatePhyoffset,required"`
}

// ViewMessageRequestHeader is VIEW_MESSAGE_BY_ID's header: a commitlog offset
// decoded from an offsetMsgId.
type ViewMessageRequestHeader struct {
	Offset int64 `ext:"offset,required"`
}

// ResetOffsetRequestHeader is RESET_CONSUMER_CLIENT_OFFSET's and
// INVOKE_BROKER_TO_RESET_OFFSET's header.
type ResetOffsetRequestHeader struct {
	Topic     string `ext:"topic,required"`
	Group     string `ext:"group,required"`
	Timestamp int64  `ext:"timestamp,required"`
	IsForce   bool   `ext:"isForce,required"`
}

// GetConsumerRunningInfoRequestHeader is GET_CONSUMER_RUNNING_INFO's header.
type GetConsumerRunningInfoRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	ClientID      string `ext:"clientId,required"`
	JstackEnable  bool   `ext:"jstackEnable"`
}

// ReplyMessageRequestHeader is PUSH_REPLY_MESSAGE_TO_CLIENT's header: the
// replier's send header plus where and when the broker took the reply
// (ReplyMessageRequestHeader.java). The body is the reply's body.
type ReplyMessageRequestHeader struct {
	ProducerGroup         string `ext:"producerGroup,required"`
	Topic                 string `ext:"topic,required"`
	DefaultTopic          string `ext:"defaultTopic,required"`
	DefaultTopicQueueNums int32  `ext:"defaultTopicQueueNums,required"`
	QueueID               int32  `ext:"queueId,required"`
	SysFlag               int32  `ext:"sysFlag,required"`
	BornTimestamp         int64  `ext:"bornTimestamp,required"`
	Flag                  int32  `ext:"flag,required"`
	Properties            string `ext:"properties"`
	ReconsumeTimes        int32  `ext:"reconsumeTimes"`
	UnitMode              bool   `ext:"unitMode"`
	BornHost              string `ext:"bornHost,required"`
	StoreHost             string `ext:"storeHost,required"`
	StoreTimestamp        int64  `ext:"storeTimestamp,required"`
}
