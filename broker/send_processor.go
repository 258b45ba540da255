package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// respond builds a response to req with code and remark.
func respond(req *remoting.Command, code remoting.ResponseCode, remark string) *remoting.Command {
	return remoting.NewResponse(req, code, remark)
}

// sendHeader is a send request's header, from either spelling
// (SendMessageRequestHeader or its one-letter V2 form).
type sendHeader struct {
	producerGroup         string
	topic                 string
	defaultTopic          string
	defaultTopicQueueNums int32
	queueID               int32
	sysFlag               int32
	bornTimestamp         int64
	flag                  int32
	properties            string
	reconsumeTimes        int32
	unitMode              bool
	maxReconsumeTimes     int32
}

// The fields of a send header, in the order of V2's one-letter keys (a..l).
const (
	sfProducerGroup = iota
	sfTopic
	sfDefaultTopic
	sfDefaultTopicQueueNums
	sfQueueID
	sfSysFlag
	sfBornTimestamp
	sfFlag
	sfProperties
	sfReconsumeTimes
	sfUnitMode
	sfMaxReconsumeTimes
	sfCount
)

// sendKeys names the extFields keys of one spelling of the send header.
type sendKeys [sfCount]string

var (
	sendKeysV1 = sendKeys{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes"}
	sendKeysV2 = sendKeys{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
)

// index returns the field that key names, or -1 for a field the send path
// does not read (the Java client adds others, such as batch and bname).
func (k *sendKeys) index(key string) int {
	if k == &sendKeysV2 {
		if len(key) == 1 && key[0] >= 'a' && key[0] < 'a'+sfCount {
			return int(key[0] - 'a')
		}
		return -1
	}
	for i, name := range k {
		if name == key {
			return i
		}
	}
	return -1
}

// sendFields holds a send header's raw values. It is the send path's
// hand-written alternative to protocol.DecodeHeader, which goes through
// reflection (and a map) for every request.
type sendFields struct {
	keys *sendKeys
	val  [sfCount]string
	set  [sfCount]bool
	err  error // the first bad field
}

func (f *sendFields) str(i int, required bool) string {
	if !f.set[i] && required && f.err == nil {
		f.err = fmt.Errorf("%w: the custom field <%s> is null", protocol.ErrBadHeader, f.keys[i])
	}
	return f.val[i]
}

func (f *sendFields) int(i int, required bool, bits int) int64 {
	v := f.str(i, required)
	if v == "" {
		if required && f.err == nil {
			f.err = fmt.Errorf("%w: the custom field <%s> is empty", protocol.ErrBadHeader, f.keys[i])
		}
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%w: the custom field <%s>=%q is not a %d-bit integer", protocol.ErrBadHeader, f.keys[i], truncate(v, 32), bits)
	}
	return n
}

// parseSendHeader decodes a send header with the keys of its spelling,
// from the request's binary fields (RawExt: one string copy of the block,
// which the header's strings share) or its ExtFields map (JSON).
func parseSendHeader(req *remoting.Command, keys *sendKeys) (sendHeader, error) {
	f := sendFields{keys: keys}
	if req.RawExt != nil {
		for k, v := range remoting.StringFields(string(req.RawExt)) {
			if i := keys.index(k); i >= 0 {
				f.val[i], f.set[i] = v, true
			}
		}
	}
	if len(req.ExtFields) > 0 {
		for i, k := range keys {
			if v, ok := req.ExtFields[k]; ok {
				f.val[i], f.set[i] = v, true
			}
		}
	}
	h := sendHeader{
		producerGroup:         f.str(sfProducerGroup, true),
		topic:                 f.str(sfTopic, true),
		defaultTopic:          f.str(sfDefaultTopic, true),
		defaultTopicQueueNums: int32(f.int(sfDefaultTopicQueueNums, true, 32)),
		queueID:               int32(f.int(sfQueueID, true, 32)),
		sysFlag:               int32(f.int(sfSysFlag, true, 32)),
		bornTimestamp:         f.int(sfBornTimestamp, true, 64),
		flag:                  int32(f.int(sfFlag, true, 32)),
		properties:            f.str(sfProperties, false),
		reconsumeTimes:        int32(f.int(sfReconsumeTimes, false, 32)),
		unitMode:              strings.EqualFold(f.str(sfUnitMode, false), "true"),
		maxReconsumeTimes:     int32(f.int(sfMaxReconsumeTimes, false, 32)),
	}
	return h, f.err
}

// registerSendProcessors routes the three send codes. A send to an existing
// topic is answered on the event loop that read it (the store's append is a
// copy into a mapped file; under SYNC_FLUSH the answer waits for the group
// commit off the loop); one that must create a topic, or is a retry or a
// transaction's half message, goes to the send pool.
func (b *Broker) registerSendProcessors() {
	for _, code := range []remoting.RequestCode{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage} {
		b.server.HandleInline(code, b.pools.Send, b.processSendInline, b.processSend)
		b.server.ReadRawFields(code)
	}
}

// processSendInline is processSend on the event loop: it hands the request
// to the pool (remoting.ErrRunOnPool) before doing anything that may block.
func (b *Broker) processSendInline(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return b.send(c, req, true)
}

// processSend answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
// on a send worker. req.Body is copied into the commitlog before it returns.
func (b *Broker) processSend(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return b.send(c, req, false)
}

// send stores one send request. Inline (on the event loop) it returns
// remoting.ErrRunOnPool, having changed nothing, for the sends that may block:
// the topic must be created (a metadata file written), the topic is a retry
// topic (its DLQ may need creating), or the message is a half message.
func (b *Broker) send(c *remoting.Conn, req *remoting.Command, inline bool) (*remoting.Command, error) {
	keys := &sendKeysV2
	if req.RequestCode() == remoting.SendMessage {
		keys = &sendKeysV1
	}
	h, err := parseSendHeader(req, keys)
	if err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	if inline && strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		return nil, remoting.ErrRunOnPool
	}
	tc, resp := b.checkSend(c, req, &h, inline)
	if tc == nil && resp == nil {
		return nil, remoting.ErrRunOnPool // the topic must be created
	}
	if resp != nil {
		return resp, nil
	}
	queueID, ok := sendQueue(h.queueID, tc)
	if !ok {
		return respond(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] has no write queues", h.topic)), nil
	}
	sysFlag := h.sysFlag
	if tc.TopicFilterType == protocol.MultiTag {
		sysFlag |= message.FlagMultiTags
	}
	bornHost := bornHostOf(c)
	ext := message.MessageExt{
		Message: message.Message{
			Topic: h.topic,
			Flag:  h.flag,
			Body:  req.Body,
		},
		QueueID:        queueID,
		SysFlag:        sysFlag,
		BornTimestamp:  h.bornTimestamp,
		BornHost:       bornHost,
		StoreHost:      b.StoreHost(),
		ReconsumeTimes: h.reconsumeTimes,
	}
	if req.RequestCode() != remoting.SendBatchMessage && !strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		if uniqKey, ok := plainProperties(h.properties); ok {
			// Most sends: stored with the properties string as it came.
			ext.PropertiesString = b.withCluster(h.properties)
			res, mustWait, err := b.appendMessage(&ext)
			if err != nil {
				return respond(req, remoting.MessageIllegal, err.Error()), nil
			}
			return b.answerPut(c, req, &h, res, mustWait, queueID, uniqKey), nil
		}
	}
	props := message.ParseProperties(h.properties)
	props[message.PropCluster] = b.cfg.BrokerClusterName
	ext.Properties = props
	if id := props[message.PropReplyToClient]; id != "" && props[message.PropMessageType] != replyMessageFlag {
		// A request (producer.Request): its reply may be pushed over this
		// connection even before the requester's first heartbeat.
		b.consume.producers.NoteRequester(id, c)
	}
	if req.RequestCode() == remoting.SendBatchMessage {
		return b.sendBatch(c, req, &h, &ext)
	}
	if strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		// The consumer's fallback for a failed send-back: DLQ once the
		// attempts are used up (handleRetryAndDLQ), else a delayed retry.
		if resp := b.handleRetryAndDLQ(req, &h, &ext); resp != nil {
			return resp, nil
		}
	}
	if strings.EqualFold(props[message.PropTransactionPrepared], "true") { // Boolean.parseBoolean
		if inline {
			return nil, remoting.ErrRunOnPool // nothing changed yet: checks and parsing only
		}
		if b.cfg.RejectTransactionMessage {
			return respond(req, remoting.NoPermission, fmt.Sprintf("the broker[%s] sending transaction message is forbidden (rejectTransactionMessage=true)", b.ip)), nil
		}
		// A half message: parked in the half topic, invisible to consumers
		// until END_TRANSACTION commits it. A delivery time it could not
		// be committed with is refused now.
		if _, _, err := b.checkDeliveryTime(props, time.Now()); err != nil {
			return respond(req, remoting.MessageIllegal, err.Error()), nil
		}
		b.trans.prepare(&ext)
		res, mustWait := b.store.AppendMessage(&ext)
		return b.answerPut(c, req, &h, res, mustWait, queueID, props[message.PropUniqKey]), nil
	}
	res, mustWait, err := b.appendMessage(&ext)
	if err != nil {
		return respond(req, remoting.MessageIllegal, err.Error()), nil
	}
	return b.answerPut(c, req, &h, res, mustWait, queueID, props[message.PropUniqKey]), nil
}

// plainProperties reports whether a message's properties ask for nothing
// the broker acts on at put time (a delay level, a timer, a transaction's
// half, a CLUSTER of its own to replace), so the string can be stored as
// it came; it also returns UNIQ_KEY, the send answer's transactionId. A
// request (REPLY_TO_CLIENT) takes the map path too, to note its requester.
func plainProperties(props string) (uniqKey string, ok bool) {
	for k, v := range message.PropertyEntries(props) {
		switch k {
		case message.PropUniqKey:
			uniqKey = v
		case message.PropDelayTimeLevel, message.PropTransactionPrepared, message.PropCluster, message.PropReplyToClient:
			return "", false
		}
		if slices.Contains(timerProps[:], k) {
			return "", false
		}
	}
	return uniqKey, true
}

// clusterEntry starts the CLUSTER entry withCluster appends.
const clusterEntry = message.PropCluster + string(rune(message.NameValueSeparator))

// withCluster returns a send's properties string with this broker's
// cluster appended, as the map path stores it (SendMessageProcessor puts
// CLUSTER into every message).
func (b *Broker) withCluster(props string) string {
	name := b.cfg.BrokerClusterName
	switch {
	case name == "":
		return props // an empty value is not stored
	case props == "" || props[len(props)-1] == message.PropertySeparator:
		return props + clusterEntry + name
	}
	return props + string(rune(message.PropertySeparator)) + clusterEntry + name
}

// answerPut returns a send's response, or nil when the store must still
// flush the message (SYNC_FLUSH): then the group commit loop answers once it
// is durable, and the send worker is free meanwhile. Only that path
// allocates a callback.
func (b *Broker) answerPut(c *remoting.Conn, req *remoting.Command, h *sendHeader, res store.PutResult, mustWait bool,
	queueID int32, uniqKey string) *remoting.Command {
	if !mustWait {
		return b.putResultResponse(req, h, res, queueID, uniqKey)
	}
	hc := *h
	// Both may alias the connection's input buffer (an inline send).
	req.Body, req.RawExt = nil, nil
	b.store.OnDurable(res, func(r store.PutResult) {
		b.replyLate(c, req, b.putResultResponse(req, &hc, r, queueID, uniqKey))
	})
	return nil
}

// replyLate writes a send's response from the flush goroutine. It must not
// block or panic there: a panic would take the whole broker down.
func (b *Broker) replyLate(c *remoting.Conn, req *remoting.Command, resp *remoting.Command) {
	defer func() {
		if p := recover(); p != nil {
			b.log.WithFields(logrus.Fields{"code": req.Code, "panic": p}).Error("answering a flushed send panicked")
		}
	}()
	if c == nil {
		return
	}
	if err := c.Reply(req, resp); err != nil && !errors.Is(err, remoting.ErrConnClosed) {
		b.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "reason": err}).Warn("cannot answer a send")
	}
}

// checkSend applies RocketMQ's checks before a message is built
// (msgCheck + msgContentCheck): broker role and perm, topic name, system
// topics, sizes, the topic (created from the template when allowed), topic
// perm and queue id. It returns the topic config, or the refusal; on the
// event loop (inline) a topic that must be created returns neither, for the
// caller to hand the send to the pool.
func (b *Broker) checkSend(c *remoting.Conn, req *remoting.Command, h *sendHeader, inline bool) (*protocol.TopicConfig, *remoting.Command) {
	if !b.acceptWrites.Load() {
		return nil, respond(req, remoting.ServiceNotAvailable, b.notWritable())
	}
	if !protocol.IsWriteable(b.cfg.BrokerPermission) {
		return nil, respond(req, remoting.NoPermission, fmt.Sprintf("the broker[%s] sending message is forbidden (brokerPermission=%d has no write bit)",
			b.ip, b.cfg.BrokerPermission))
	}
	if err := ValidateTopic(h.topic); err != nil {
		return nil, respond(req, remoting.SystemError, err.Error())
	}
	if IsNotAllowedSendTopic(h.topic) || h.topic == TimerTopic {
		return nil, respond(req, remoting.NoPermission, fmt.Sprintf("Sending message to topic[%s] is forbidden: it is a system topic", h.topic))
	}
	if len(req.Body) > b.cfg.MaxMessageSize {
		return nil, respond(req, remoting.MessageIllegal, fmt.Sprintf("the message body is %d bytes, over this broker's maxMessageSize of %d bytes",
			len(req.Body), b.cfg.MaxMessageSize))
	}
	if len(h.properties) > message.MaxPropertiesLength {
		return nil, respond(req, remoting.MessageIllegal, fmt.Sprintf("the message properties are %d bytes, over the limit of %d bytes",
			len(h.properties), message.MaxPropertiesLength))
	}
	tc := b.topics.Get(h.topic)
	if tc == nil && inline {
		return nil, nil
	}
	if tc == nil {
		var sysFlag int32
		if h.unitMode {
			sysFlag = sendTopicSysFlagUnit
			if strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
				sysFlag = sendTopicSysFlagUnitSub
			}
		}
		var err error
		tc, err = b.topics.CreateTopicInSendMessageMethod(h.topic, h.defaultTopic, h.defaultTopicQueueNums, sysFlag)
		if tc == nil && strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
			tc, err = b.topics.CreateTopicInSendBackMethod(h.topic, 1, protocol.PermRead|protocol.PermWrite, sysFlag)
		}
		if tc == nil {
			b.log.WithFields(logrus.Fields{"topic": h.topic, "producer": c.RemoteAddr(), "reason": err}).Debug("send to an unknown topic")
			return nil, respond(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please! (%s)", h.topic, topicCreateHint(err)))
		}
		if err != nil {
			b.log.WithError(err).WithField("topic", h.topic).Error("topic created but not persisted")
		}
	}
	if !protocol.IsWriteable(tc.Perm) {
		return nil, respond(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden: its perm is %s (no write)",
			h.topic, protocol.PermString(tc.Perm)))
	}
	if limit := max(tc.WriteQueueNums, tc.ReadQueueNums); h.queueID >= limit {
		return nil, respond(req, remoting.SystemError, fmt.Sprintf("request queueId[%d] is illegal: topic[%s] has %d write and %d read queues. Producer: %s",
			h.queueID, h.topic, tc.WriteQueueNums, tc.ReadQueueNums, c.RemoteAddr()))
	}
	return tc, nil
}

// topicCreateHint says why a send could not create its topic.
func topicCreateHint(err error) string {
	switch {
	case err == nil:
		return "the topic does not exist"
	case errors.Is(err, ErrNoDefaultTopic):
		return strings.TrimPrefix(err.Error(), ErrNoDefaultTopic.Error()+": ") + "; create the topic first (mqadmin updateTopic)"
	default:
		return err.Error()
	}
}

// sendBatch stores a SEND_BATCH_MESSAGE body: one record per member, all in
// one commitlog file with consecutive queue offsets. Members without a
// UNIQ_KEY (the Go client sends none) get one here, so every stored message
// has an id a consumer and QUERY_MESSAGE can use.
func (b *Broker) sendBatch(c *remoting.Conn, req *remoting.Command, h *sendHeader, ext *message.MessageExt) (*remoting.Command, error) {
	if strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		return respond(req, remoting.MessageIllegal, "batch request does not support retry group "+h.topic), nil
	}
	body, err := b.batchWithUniqKeys(req.Body)
	switch {
	case errors.Is(err, ErrBatchDelay):
		return respond(req, remoting.MessageIllegal, err.Error()), nil
	case err != nil:
		return respond(req, remoting.MessageIllegal, "the batch body is malformed: "+err.Error()), nil
	}
	batch := message.MessageExtBatch{MessageExt: *ext}
	batch.Body = body
	res, mustWait := b.store.AppendMessages(&batch)
	return b.answerPut(c, req, h, res, mustWait, ext.QueueID, ""), nil
}

// uniqKeyEntryLen is the length of "UNIQ_KEY" 0x01 plus a 32-character id
// (IPv4 prefix) and a separator; ids of IPv6 brokers are longer and grow the
// buffer.
const uniqKeyEntryLen = len(message.PropUniqKey) + 1 + 32 + 1

// ErrBatchDelay means a batch member asks for a delay level or a delivery
// time: batches are stored as they come (RocketMQ's clients refuse such a
// batch; the Go client sends it), and silently delivering the member at
// once would break what its sender relies on.
var ErrBatchDelay = errors.New("broker: a batch message cannot carry a delay level or delivery time")

// batchWithUniqKeys returns body unchanged when every member carries a
// UNIQ_KEY, else a copy in which each member without one has a fresh id
// appended to its properties. A member asking for a delay is refused
// (ErrBatchDelay).
func (b *Broker) batchWithUniqKeys(body []byte) ([]byte, error) {
	missing := 0
	err := message.WalkBatch(body, func(it message.BatchItem) error {
		if v, ok := message.PropertyValue(it.Properties, message.PropDelayTimeLevel); ok {
			if n, err := strconv.Atoi(string(v)); err == nil && n > 0 {
				return fmt.Errorf("%w: %s=%d; send it alone", ErrBatchDelay, message.PropDelayTimeLevel, n)
			}
		}
		for _, k := range timerProps {
			if _, ok := message.PropertyValue(it.Properties, k); ok {
				return fmt.Errorf("%w: %s; send it alone", ErrBatchDelay, k)
			}
		}
		if _, ok := message.PropertyValue(it.Properties, message.PropUniqKey); !ok {
			missing++
		}
		return nil
	})
	if err != nil || missing == 0 {
		return body, err
	}
	be := binary.BigEndian
	out := make([]byte, 0, len(body)+missing*uniqKeyEntryLen)
	err = message.WalkBatch(body, func(it message.BatchItem) error {
		start := len(out)
		out = be.AppendUint32(out, 0) // TOTALSIZE, patched below
		out = be.AppendUint32(out, 0) // MAGICCODE
		out = be.AppendUint32(out, 0) // BODYCRC
		out = be.AppendUint32(out, uint32(it.Flag))
		out = be.AppendUint32(out, uint32(len(it.Body)))
		out = append(out, it.Body...)
		out = be.AppendUint16(out, 0) // PROPLEN, patched below
		propsStart := len(out)
		out = append(out, it.Properties...)
		if _, ok := message.PropertyValue(it.Properties, message.PropUniqKey); !ok {
			if len(it.Properties) > 0 && it.Properties[len(it.Properties)-1] != message.PropertySeparator {
				out = append(out, message.PropertySeparator)
			}
			out = append(out, message.PropUniqKey...)
			out = append(out, message.NameValueSeparator)
			out = b.uniqIDs.AppendNext(out)
		}
		propsLen := len(out) - propsStart
		if propsLen > message.MaxPropertiesLength {
			return fmt.Errorf("%w: properties of %d bytes with the generated UNIQ_KEY", message.ErrPropertiesTooLong, propsLen)
		}
		be.PutUint16(out[propsStart-2:], uint16(propsLen))
		be.PutUint32(out[start:], uint32(len(out)-start))
		return nil
	})
	return out, err
}

// putResultResponse maps a store outcome to RocketMQ's response
// (handlePutMessageResult): the stored statuses answer with msgId (the
// offsetMsgId, comma-joined for a batch), queueId and queueOffset; the
// others with a code and a remark saying what to do.
func (b *Broker) putResultResponse(req *remoting.Command, h *sendHeader, res store.PutResult, queueID int32, uniqKey string) *remoting.Command {
	var code remoting.ResponseCode
	remark := ""
	switch res.Status {
	case store.PutOK:
		code = remoting.Success
	case store.FlushDiskTimeout:
		code = remoting.FlushDiskTimeout
	case store.FlushSlaveTimeout:
		code = remoting.FlushSlaveTimeout
	case store.SlaveNotAvailable:
		code = remoting.SlaveNotAvailable
	case store.CreateMappedFileFailed:
		code, remark = remoting.SystemError, "create mapped file failed, server is busy or broken."
	case store.MessageIllegal, store.PropertiesSizeExceeded:
		code = remoting.MessageIllegal
		remark = fmt.Sprintf("the message is illegal, maybe msg body or properties length not matched. msg body length limit %dB, msg properties length limit 32KB.",
			b.cfg.MaxMessageSize)
	case store.ServiceNotAvailable:
		code = remoting.ServiceNotAvailable
		remark = "service not available now. It may be caused by one of the following reasons: the broker's disk is full, " +
			"messages are put to the slave, message store has been shut down, etc."
	case store.OSPageCacheBusy:
		code, remark = remoting.SystemError, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
	case store.UnknownError:
		code, remark = remoting.SystemError, "UNKNOWN_ERROR"
	default:
		code, remark = remoting.SystemError, "UNKNOWN_ERROR DEFAULT"
	}
	if res.Err != nil && code != remoting.FlushDiskTimeout {
		remark += " (" + res.Err.Error() + ")"
	}
	resp := respond(req, code, remark)
	if !res.OK() {
		b.log.WithFields(logrus.Fields{"topic": h.topic, "status": res.Status, "reason": res.Err}).Warn("send refused by the store")
		return resp
	}
	b.stats.onPut(h.topic, res.MsgNum, res.WroteBytes)
	resp.RawExt = b.sendResponseFields(res.MsgID, queueID, res.QueueOffset, uniqKey)
	return resp
}

// sendResponseFields is a SendMessageResponseHeader (a send's or a
// reply's), built without a map (remoting.RawExt); transactionId only when
// uniqKey is set.
func (b *Broker) sendResponseFields(msgID string, queueID int32, queueOffset int64, uniqKey string) []byte {
	f := make([]byte, 0, 160+len(msgID)+len(uniqKey)+len(b.cfg.RegionID))
	f = remoting.AppendField(f, "msgId", msgID)
	f = remoting.AppendIntField(f, "queueId", int64(queueID))
	f = remoting.AppendIntField(f, "queueOffset", queueOffset)
	if uniqKey != "" {
		f = remoting.AppendField(f, "transactionId", uniqKey)
	}
	f = remoting.AppendField(f, message.PropMsgRegion, b.cfg.RegionID)
	return remoting.AppendField(f, message.PropTraceSwitch, strconv.FormatBool(b.cfg.TraceOn))
}

// sendQueue is the queue a send (or a reply) goes to: the one the header
// names, or a random writable one when it names none (-1); ok is false
// when the topic has no write queues.
func sendQueue(named int32, tc *protocol.TopicConfig) (queueID int32, ok bool) {
	if named >= 0 {
		return named, true
	}
	if tc.WriteQueueNums < 1 {
		return 0, false
	}
	return rand.Int32N(tc.WriteQueueNums), true
}

// bornHostOf is a sender's address as a record's BORNHOST (0.0.0.0:0 when
// the connection's address does not parse).
func bornHostOf(c *remoting.Conn) netip.AddrPort {
	if ra := c.RemoteAddr(); ra != "" {
		if hp, err := netip.ParseAddrPort(ra); err == nil {
			return hp
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}
