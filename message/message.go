// Package message holds the RocketMQ 4.x message model and its byte encodings:
// the properties string, the commitlog record, the producer batch body,
// offsetMsgId and UNIQ_KEY, and the tag hash stored in consume queues.
//
// Every encoding here is RocketMQ's own, byte for byte, so records written by
// the store can be sliced straight into a pull response and decoded by the
// official clients. The package imports no other project package.
package message

import (
	"net/netip"
	"strconv"
)

// Property keys, spelled as RocketMQ's MessageConst spells them.
const (
	PropKeys                       = "KEYS"                           // PROPERTY_KEYS: space-separated business keys, indexed
	PropTags                       = "TAGS"                           // PROPERTY_TAGS: tag; its hash goes into the consume queue
	PropWaitStoreMsgOK             = "WAIT"                           // PROPERTY_WAIT_STORE_MSG_OK
	PropDelayTimeLevel             = "DELAY"                          // PROPERTY_DELAY_TIME_LEVEL (1-based)
	PropRetryTopic                 = "RETRY_TOPIC"                    // PROPERTY_RETRY_TOPIC
	PropRealTopic                  = "REAL_TOPIC"                     // PROPERTY_REAL_TOPIC
	PropRealQueueID                = "REAL_QID"                       // PROPERTY_REAL_QUEUE_ID
	PropTransactionPrepared        = "TRAN_MSG"                       // PROPERTY_TRANSACTION_PREPARED
	PropProducerGroup              = "PGROUP"                         // PROPERTY_PRODUCER_GROUP
	PropMinOffset                  = "MIN_OFFSET"                     // PROPERTY_MIN_OFFSET
	PropMaxOffset                  = "MAX_OFFSET"                     // PROPERTY_MAX_OFFSET
	PropBuyerID                    = "BUYER_ID"                       // PROPERTY_BUYER_ID
	PropOriginMessageID            = "ORIGIN_MESSAGE_ID"              // PROPERTY_ORIGIN_MESSAGE_ID
	PropTransferFlag               = "TRANSFER_FLAG"                  // PROPERTY_TRANSFER_FLAG
	PropCorrectionFlag             = "CORRECTION_FLAG"                // PROPERTY_CORRECTION_FLAG
	PropMQ2Flag                    = "MQ2_FLAG"                       // PROPERTY_MQ2_FLAG
	PropReconsumeTime              = "RECONSUME_TIME"                 // PROPERTY_RECONSUME_TIME
	PropMsgRegion                  = "MSG_REGION"                     // PROPERTY_MSG_REGION
	PropTraceSwitch                = "TRACE_ON"                       // PROPERTY_TRACE_SWITCH
	PropUniqKey                    = "UNIQ_KEY"                       // PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
	PropMaxReconsumeTimes          = "MAX_RECONSUME_TIMES"            // PROPERTY_MAX_RECONSUME_TIMES
	PropConsumeStartTime           = "CONSUME_START_TIME"             // PROPERTY_CONSUME_START_TIMESTAMP
	PropTranPreparedQueueOffset    = "TRAN_PREPARED_QUEUE_OFFSET"     // PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
	PropTransactionCheckTimes      = "TRANSACTION_CHECK_TIMES"        // PROPERTY_TRANSACTION_CHECK_TIMES
	PropCheckImmunityTimeInSeconds = "CHECK_IMMUNITY_TIME_IN_SECONDS" // PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS
	PropInstanceID                 = "INSTANCE_ID"                    // PROPERTY_INSTANCE_ID
	PropCorrelationID              = "CORRELATION_ID"                 // PROPERTY_CORRELATION_ID
	PropReplyToClient              = "REPLY_TO_CLIENT"                // PROPERTY_MESSAGE_REPLY_TO_CLIENT
	PropMessageTTL                 = "TTL"                            // PROPERTY_MESSAGE_TTL
	PropReplyMessageArriveTime     = "ARRIVE_TIME"                    // PROPERTY_REPLY_MESSAGE_ARRIVE_TIME
	PropPushReplyTime              = "PUSH_REPLY_TIME"                // PROPERTY_PUSH_REPLY_TIME
	PropCluster                    = "CLUSTER"                        // PROPERTY_CLUSTER: added by the broker
	PropMessageType                = "MSG_TYPE"                       // PROPERTY_MESSAGE_TYPE
	PropInnerMultiDispatch         = "INNER_MULTI_DISPATCH"           // PROPERTY_INNER_MULTI_DISPATCH
	PropInnerMultiQueueOffset      = "INNER_MULTI_QUEUE_OFFSET"       // PROPERTY_INNER_MULTI_QUEUE_OFFSET
	PropShardingKey                = "SHARDING_KEY"                   // the Go client's spelling (5.x Java: __SHARDINGKEY)
	PropTransactionID              = "__transactionId__"              // PROPERTY_TRANSACTION_ID (5.x)
	PropTimerDeliverMS             = "TIMER_DELIVER_MS"               // 5.x timer: absolute delivery time in ms
	PropTimerDelaySec              = "TIMER_DELAY_SEC"                // 5.x timer: relative delay in seconds
	PropTimerDelayMS               = "TIMER_DELAY_MS"                 // 5.x timer: relative delay in ms
	PropTimerOutMS                 = "TIMER_OUT_MS"                   // 5.x timer: computed delivery time
	PropTimerDelUniqKey            = "TIMER_DEL_UNIQKEY"              // 5.x timer: this message cancels the timer message it names ("topic+uniqKey", or the uniq key alone before 5.2)
	PropCRC32                      = "__CRC32#"                       // PROPERTY_CRC32 (5.x): whole-record CRC, see EncodeRecordWithCRC
)

// KeySeparator joins several KEYS values (MessageConst.KEY_SEPARATOR).
const KeySeparator = " "

// Separators of the properties string (MessageDecoder.NAME_VALUE_SEPARATOR and
// PROPERTY_SEPARATOR).
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// SYSFLAG bits (MessageSysFlag). They are part of the on-disk format.
const (
	FlagCompressed          int32 = 0x1  // COMPRESSED_FLAG: body is compressed
	FlagMultiTags           int32 = 0x2  // MULTI_TAGS_FLAG
	TransactionNotType      int32 = 0x0  // TRANSACTION_NOT_TYPE
	TransactionPreparedType int32 = 0x4  // TRANSACTION_PREPARED_TYPE (half message)
	TransactionCommitType   int32 = 0x8  // TRANSACTION_COMMIT_TYPE
	TransactionRollbackType int32 = 0xC  // TRANSACTION_ROLLBACK_TYPE, also the transaction-type mask
	FlagBornHostV6          int32 = 0x10 // BORNHOST_V6_FLAG: born host is 16+4 bytes
	FlagStoreHostV6         int32 = 0x20 // STOREHOSTADDRESS_V6_FLAG: store host is 16+4 bytes
	FlagNeedUnwrap          int32 = 0x40 // NEED_UNWRAP_FLAG (5.x)
	FlagInnerBatch          int32 = 0x80 // INNER_BATCH_FLAG (5.x)

	CompressionZlibDefault int32 = 0x000 // type bits 0: read as zlib, for old clients
	CompressionLZ4         int32 = 0x100 // COMPRESSION_LZ4_TYPE
	CompressionZstd        int32 = 0x200 // COMPRESSION_ZSTD_TYPE
	CompressionZlib        int32 = 0x300 // COMPRESSION_ZLIB_TYPE
	CompressionTypeMask    int32 = 0x700 // COMPRESSION_TYPE_COMPARATOR
)

// TransactionType returns the transaction bits of sysFlag (MessageSysFlag.getTransactionValue).
func TransactionType(sysFlag int32) int32 { return sysFlag & TransactionRollbackType }

// ResetTransactionType replaces the transaction bits of sysFlag with t.
func ResetTransactionType(sysFlag, t int32) int32 {
	return sysFlag&^TransactionRollbackType | t&TransactionRollbackType
}

// CompressionType returns the compression type bits of sysFlag (0x000 means zlib).
func CompressionType(sysFlag int32) int32 { return sysFlag & CompressionTypeMask }

// Message is what a producer sends: a topic, a user flag, properties and a body.
type Message struct {
	Topic      string
	Flag       int32
	Properties map[string]string
	Body       []byte
}

// Property returns the value of key, or "".
func (m *Message) Property(key string) string { return m.Properties[key] }

// SetProperty sets key to value, creating the map when needed.
func (m *Message) SetProperty(key, value string) {
	if m.Properties == nil {
		m.Properties = make(map[string]string, 4)
	}
	m.Properties[key] = value
}

// RemoveProperty deletes key.
func (m *Message) RemoveProperty(key string) { delete(m.Properties, key) }

// Tags returns the TAGS property.
func (m *Message) Tags() string { return m.Properties[PropTags] }

// Keys returns the KEYS property (space-separated).
func (m *Message) Keys() string { return m.Properties[PropKeys] }

// UniqKey returns the client-generated message id (UNIQ_KEY), or "".
func (m *Message) UniqKey() string { return m.Properties[PropUniqKey] }

// DelayTimeLevel returns the DELAY property as a number, 0 when absent or not a number.
func (m *Message) DelayTimeLevel() int { return delayLevel(m.Properties[PropDelayTimeLevel]) }

func delayLevel(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// MessageExt is a stored message: the Message plus everything the commitlog
// record carries.
type MessageExt struct {
	Message
	QueueID                   int32
	StoreSize                 int32 // TOTALSIZE of the record
	QueueOffset               int64 // index in the consume queue
	SysFlag                   int32
	BornTimestamp             int64 // ms
	BornHost                  netip.AddrPort
	StoreTimestamp            int64 // ms
	StoreHost                 netip.AddrPort
	CommitLogOffset           int64 // the record's own physical offset
	BodyCRC                   int32 // crc32 IEEE of the stored body & 0x7FFFFFFF
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	// PropertiesString, when Properties is nil, is the properties already
	// encoded: EncodeRecord stores it as it is. A broker passes a plain
	// send's string on this way (with its CLUSTER entry appended) instead of
	// parsing it into a map and encoding the map again.
	PropertiesString string
}

// A MessageExt's property accessors read either form. The setters turn a
// PropertiesString into the map first, so nothing in it is lost.

// Tags returns the TAGS property.
func (m *MessageExt) Tags() string { return m.Property(PropTags) }

// Keys returns the KEYS property (space-separated).
func (m *MessageExt) Keys() string { return m.Property(PropKeys) }

// UniqKey returns the client-generated message id (UNIQ_KEY), or "".
func (m *MessageExt) UniqKey() string { return m.Property(PropUniqKey) }

// DelayTimeLevel returns the DELAY property as a number, 0 when absent or not a number.
func (m *MessageExt) DelayTimeLevel() int { return delayLevel(m.Property(PropDelayTimeLevel)) }

// SetProperty sets key to value.
func (m *MessageExt) SetProperty(key, value string) {
	m.propertiesToMap()
	m.Message.SetProperty(key, value)
}

// RemoveProperty deletes key.
func (m *MessageExt) RemoveProperty(key string) {
	m.propertiesToMap()
	m.Message.RemoveProperty(key)
}

// propertiesToMap moves a PropertiesString into Properties.
func (m *MessageExt) propertiesToMap() {
	if m.Properties == nil && m.PropertiesString != "" {
		m.Properties = ParseProperties(m.PropertiesString)
		m.PropertiesString = ""
	}
}

// Property returns the value of key, from Properties or, when that is nil,
// from PropertiesString.
func (m *MessageExt) Property(key string) string {
	if m.Properties != nil {
		return m.Properties[key]
	}
	val := ""
	for k, v := range PropertyEntries(m.PropertiesString) {
		if k == key {
			val = v // the last one, as in a map
		}
	}
	return val
}

// OffsetMsgID returns the broker-side message id (store host + commitlog offset).
func (m *MessageExt) OffsetMsgID() string { return CreateOffsetMsgID(m.StoreHost, m.CommitLogOffset) }

// MsgID returns the id clients show: UNIQ_KEY when present, else OffsetMsgID,
// as the official clients compute it.
func (m *MessageExt) MsgID() string {
	if k := m.UniqKey(); k != "" {
		return k
	}
	return m.OffsetMsgID()
}

// MessageExtBatch is a producer batch on its way into the commitlog. Body holds
// the producer batch encoding (see UnmarshalBatch); every other field applies to
// each sub-message: topic, queue id, sysflag, hosts, born time, reconsume times.
// Properties are the batch-level properties appended to each sub-message's own.
type MessageExtBatch struct {
	MessageExt
}
