package broker

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// TestSendBadInput drives every refusal of the send path through the wire
// and checks RocketMQ's code, a remark that says what is wrong, and that
// nothing was stored.
func TestSendBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	b := MustStartBroker(t, cfg)
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("ReadOnly", 2, 2, protocol.PermRead)).ResponseCode())
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("Normal", 2, 2, 6)).ResponseCode())

	missingTopic := sendReq("Normal", 0, []byte("x"), nil)
	delete(missingTopic.ExtFields, "topic")
	badQueueID := sendReq("Normal", 0, []byte("x"), nil)
	badQueueID.ExtFields["queueId"] = "zero"
	noDefault := sendReq("NewTopicNoTemplate", 0, []byte("x"), nil)
	noDefault.ExtFields["defaultTopic"] = "Normal" // exists but lacks the inherit perm
	batchBody, err := message.AppendBatch(nil, []*message.Message{{Body: []byte("a")}})
	require.NoError(t, err)

	cases := []struct {
		name   string
		req    *remoting.Command
		code   remoting.ResponseCode
		remark string
	}{
		{"blank topic", sendReq(" ", 0, []byte("x"), nil), remoting.SystemError, "blank"},
		{"illegal characters", sendReq("a/b", 0, []byte("x"), nil), remoting.SystemError, "illegal characters"},
		{"illegal unicode", sendReq("主题", 0, []byte("x"), nil), remoting.SystemError, "[%|a-zA-Z0-9_-]"},
		{"topic too long", sendReq(strings.Repeat("t", 128), 0, []byte("x"), nil), remoting.SystemError, "max length 127"},
		{"template topic", sendReq(AutoCreateTopicKey, 0, []byte("x"), nil), remoting.NoPermission, "forbidden"},
		{"schedule topic", sendReq(ScheduleTopic, 0, []byte("x"), nil), remoting.NoPermission, "SCHEDULE_TOPIC_XXXX] is forbidden"},
		{"half topic", sendReq(TransHalfTopic, 0, []byte("x"), nil), remoting.NoPermission, "forbidden"},
		{"body over maxMessageSize", sendReq("Normal", 0, make([]byte, cfg.MaxMessageSize+1), nil), remoting.MessageIllegal, "maxMessageSize"},
		{"queueId out of range", sendReq("Normal", 2, []byte("x"), nil), remoting.SystemError, "queueId[2] is illegal"},
		{"queueId far out of range", sendReq("Normal", 1<<30, []byte("x"), nil), remoting.SystemError, "is illegal"},
		{"read-only topic", sendReq("ReadOnly", 0, []byte("x"), nil), remoting.NoPermission, "no write"},
		{"template without inherit", noDefault, remoting.TopicNotExist, "inherit"},
		{"missing header field", missingTopic, remoting.SystemError, "<topic>"},
		{"unparsable header field", badQueueID, remoting.SystemError, "<queueId>"},
		{"batch to a retry topic", sendReqV2(remoting.SendBatchMessage, "%RETRY%g", 0, batchBody, nil), remoting.MessageIllegal, "retry"},
		{"malformed batch", sendReqV2(remoting.SendBatchMessage, "Normal", 0, []byte{0, 0, 0, 9, 1}, nil), remoting.MessageIllegal, "malformed"},
		{"empty batch", sendReqV2(remoting.SendBatchMessage, "Normal", 0, nil, nil), remoting.MessageIllegal, "illegal"},
		{"unknown request code", remoting.NewRequest(remoting.RequestCode(9999), nil, nil), remoting.RequestCodeNotSupported, "not supported"},
	}
	for _, tc := range cases {
		// Both header encodings: the binary one reaches the send path as
		// RawExt, JSON as ExtFields.
		for _, st := range []remoting.SerializeType{remoting.JSONSerialize, remoting.RocketMQSerialize} {
			t.Run(tc.name+"/"+st.String(), func(t *testing.T) {
				req := *tc.req
				req.SerializeType = st
				resp := baInvoke(t, cl, b.Addr(), &req)
				assert.Equal(t, tc.code, resp.ResponseCode(), resp.Remark)
				assert.Contains(t, resp.Remark, tc.remark)
			})
		}
	}
	assert.Zero(t, b.Store().CommitLogMaxOffset(), "a refused send stored something")
	assert.Nil(t, b.Topics().Get("NewTopicNoTemplate"))
}

func TestSendAutoCreateDisabled(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.AutoCreateTopicEnable = false
	b := MustStartBroker(t, cfg)
	resp := baInvoke(t, baClient(t), b.Addr(), sendReq("Unknown", 0, []byte("x"), nil))
	assert.Equal(t, remoting.TopicNotExist, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "autoCreateTopicEnable is false")
	assert.Nil(t, b.Topics().Get(AutoCreateTopicKey), "TBW102 is only advertised when auto-create is on")
}

func TestSendRefusedByBrokerRoleAndPerm(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.BrokerPermission = protocol.PermRead
	b := MustStartBroker(t, cfg)
	resp := baInvoke(t, baClient(t), b.Addr(), sendReq("T", 0, []byte("x"), nil))
	assert.Equal(t, remoting.NoPermission, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "brokerPermission")
}

// TestSendSingle checks the response headers and what is stored, with the
// header in JSON (ExtFields) and in the binary encoding (RawExt, answered
// on the event loop once the topic exists).
func TestSendSingle(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	props := map[string]string{message.PropUniqKey: "C0A8000100002A9F0000000000000001", message.PropTags: "tagA", message.PropKeys: "k1 k2", message.PropWaitStoreMsgOK: "true"}
	for _, st := range []remoting.SerializeType{remoting.JSONSerialize, remoting.RocketMQSerialize} {
		topic := "Single" + st.String()
		for i := range 3 {
			req := sendReq(topic, 1, []byte("hello"), props)
			req.SerializeType = st
			resp := baInvoke(t, cl, b.Addr(), req)
			require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
			assert.Equal(t, "1", resp.FieldMap()["queueId"])
			assert.Equal(t, strconv.Itoa(i), resp.FieldMap()["queueOffset"])
			assert.Equal(t, props[message.PropUniqKey], resp.FieldMap()["transactionId"])
			assert.Equal(t, "DefaultRegion", resp.FieldMap()["MSG_REGION"])
			assert.Equal(t, "true", resp.FieldMap()["TRACE_ON"])
			msgID := resp.FieldMap()["msgId"]
			require.Len(t, msgID, 32)
			host, off, err := message.ParseOffsetMsgID(msgID)
			require.NoError(t, err)
			assert.Equal(t, b.StoreHost(), host)
			m, err := b.Store().LookMessageByOffset(off)
			require.NoError(t, err)
			assert.Equal(t, topic, m.Topic)
			assert.Equal(t, []byte("hello"), m.Body)
			assert.Equal(t, int32(1), m.QueueID)
			assert.Equal(t, "DefaultCluster", m.Properties[message.PropCluster])
			for k, v := range props {
				assert.Equal(t, v, m.Properties[k], k)
			}
			assert.Equal(t, b.StoreHost(), m.StoreHost)
		}
		tc := b.Topics().Get(topic)
		require.NotNil(t, tc, "auto-created")
		assert.Equal(t, int32(4), tc.WriteQueueNums)
		assert.Equal(t, protocol.PermRead|protocol.PermWrite, tc.Perm)
	}
}

func TestSendV2AndRandomQueue(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("V2Topic", 3, 3, 6)).ResponseCode())
	seen := map[string]bool{}
	for range 40 {
		resp := baInvoke(t, cl, b.Addr(), sendReqV2(remoting.SendMessageV2, "V2Topic", -1, []byte("v2"), map[string]string{message.PropTags: "x"}))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		q, err := strconv.Atoi(resp.FieldMap()["queueId"])
		require.NoError(t, err)
		require.True(t, q >= 0 && q < 3, "queue %d", q)
		seen[resp.FieldMap()["queueId"]] = true
	}
	assert.Greater(t, len(seen), 1, "a negative queueId spreads over the write queues")
}

// TestSendBatchGeneratesUniqKeys sends a batch as the Go client does (no
// UNIQ_KEY on the members) and checks every stored member got its own.
func TestSendBatchGeneratesUniqKeys(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	msgs := []*message.Message{
		{Body: []byte("m0"), Properties: map[string]string{message.PropTags: "t0"}},
		{Body: []byte("m1")},
		{Body: []byte("m2"), Properties: map[string]string{message.PropUniqKey: "OWNKEY", message.PropKeys: "k"}},
	}
	body, err := message.AppendBatch(nil, msgs)
	require.NoError(t, err)
	resp := baInvoke(t, cl, b.Addr(), sendReqV2(remoting.SendBatchMessage, "BatchTopic", 0, body, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, "0", resp.FieldMap()["queueOffset"])
	ids := strings.Split(resp.FieldMap()["msgId"], ",")
	require.Len(t, ids, 3)
	keys := map[string]bool{}
	for i, id := range ids {
		_, off, err := message.ParseOffsetMsgID(id)
		require.NoError(t, err)
		m, err := b.Store().LookMessageByOffset(off)
		require.NoError(t, err)
		assert.Equal(t, msgs[i].Body, m.Body)
		assert.Equal(t, int64(i), m.QueueOffset)
		assert.Equal(t, "DefaultCluster", m.Properties[message.PropCluster])
		k := m.Properties[message.PropUniqKey]
		require.NotEmpty(t, k, "member %d has no UNIQ_KEY", i)
		assert.False(t, keys[k], "duplicate UNIQ_KEY %s", k)
		keys[k] = true
	}
	assert.True(t, keys["OWNKEY"], "a member's own UNIQ_KEY is kept")
	assert.Equal(t, "t0", mustLook(t, b, ids[0]).Properties[message.PropTags])
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("BatchTopic", 0) == 3 },
		5*time.Second, 5*time.Millisecond, "the batch is dispatched as three consume-queue entries")
}

func mustLook(t *testing.T, b *Broker, id string) *message.MessageExt {
	t.Helper()
	_, off, err := message.ParseOffsetMsgID(id)
	require.NoError(t, err)
	m, err := b.Store().LookMessageByOffset(off)
	require.NoError(t, err)
	return m
}

func TestBatchWithUniqKeysRewrite(t *testing.T) {
	b := &Broker{uniqIDs: message.NewUniqIDGenerator(testBrokerIP)}
	withKey, err := message.AppendBatch(nil, []*message.Message{{Body: []byte("a"), Properties: map[string]string{message.PropUniqKey: "K"}}})
	require.NoError(t, err)
	out, err := b.batchWithUniqKeys(withKey)
	require.NoError(t, err)
	assert.True(t, &out[0] == &withKey[0], "no copy when every member has a key")

	// A member whose properties end in 0x02 (the Go client's style) keeps
	// a well-formed string.
	raw := []byte("TAGS\x01x\x02")
	body := binary.BigEndian.AppendUint32(nil, uint32(20+1+2+len(raw)))
	body = append(body, make([]byte, 8)...)
	body = binary.BigEndian.AppendUint32(body, 0)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = append(body, 'z')
	body = binary.BigEndian.AppendUint16(body, uint16(len(raw)))
	body = append(body, raw...)
	out, err = b.batchWithUniqKeys(body)
	require.NoError(t, err)
	msgs, err := message.UnmarshalBatch("T", out)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "x", msgs[0].Properties[message.PropTags])
	assert.Len(t, msgs[0].Properties[message.PropUniqKey], 32)
	assert.False(t, bytes.Contains(out, []byte("\x02\x02")))
}

// TestPutResultResponse checks the store outcome -> RocketMQ code mapping:
// stored statuses answer with the send headers, refusals with a remark.
func TestPutResultResponse(t *testing.T) {
	cfg := testBrokerConfig(t)
	b := &Broker{cfg: cfg, log: baLogger(), stats: newBrokerStats()}
	req := sendReq("T", 0, nil, nil)
	h := &sendHeader{topic: "T"}
	cases := []struct {
		status  store.PutStatus
		err     error
		code    remoting.ResponseCode
		headers bool
		remark  string
	}{
		{store.PutOK, nil, remoting.Success, true, ""},
		{store.FlushDiskTimeout, store.ErrFlushTimeout, remoting.FlushDiskTimeout, true, ""},
		{store.FlushSlaveTimeout, nil, remoting.FlushSlaveTimeout, true, ""},
		{store.SlaveNotAvailable, nil, remoting.SlaveNotAvailable, true, ""},
		{store.ServiceNotAvailable, store.ErrShutdown, remoting.ServiceNotAvailable, false, "shut down"},
		{store.ServiceNotAvailable, store.ErrDiskFull, remoting.ServiceNotAvailable, false, "disk is full"},
		{store.MessageIllegal, store.ErrMessageTooLarge, remoting.MessageIllegal, false, "msg body length limit 65536B"},
		{store.PropertiesSizeExceeded, store.ErrPropertiesTooLarge, remoting.MessageIllegal, false, "properties"},
		{store.CreateMappedFileFailed, store.ErrCreateMappedFile, remoting.SystemError, false, "create mapped file failed"},
		{store.OSPageCacheBusy, nil, remoting.SystemError, false, "[PC_SYNCHRONIZED]"},
		{store.UnknownError, nil, remoting.SystemError, false, "UNKNOWN_ERROR"},
		{store.PutStatus(99), nil, remoting.SystemError, false, "UNKNOWN_ERROR DEFAULT"},
	}
	for _, tc := range cases {
		t.Run(tc.status.String(), func(t *testing.T) {
			res := store.PutResult{Status: tc.status, Err: tc.err, MsgID: "7F000001000051AF0000000000000000", QueueOffset: 7, MsgNum: 1}
			resp := b.putResultResponse(req, h, res, 3, "UK")
			assert.Equal(t, tc.code, resp.ResponseCode())
			assert.Contains(t, resp.Remark, tc.remark)
			if tc.headers {
				assert.Equal(t, map[string]string{"msgId": res.MsgID, "queueId": "3", "queueOffset": "7", "transactionId": "UK",
					"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}, resp.FieldMap())
			} else {
				assert.Empty(t, resp.ExtFields)
			}
		})
	}
}

// TestBatchWithDelayedMemberIsRefused: the Go client sends a batch whose
// members carry DELAY or a timer property; they used to be stored at once,
// delivered without the delay asked for. The batch is refused, nothing
// stored.
func TestBatchWithDelayedMemberIsRefused(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	require.Equal(t, int32(remoting.Success), baInvoke(t, cl, b.Addr(), createTopicReq("BatchDelay", 1, 1, 6)).Code)
	for _, props := range []map[string]string{
		{message.PropDelayTimeLevel: "3"},
		{message.PropTimerDelaySec: "10"},
		{message.PropTimerDeliverMS: "99999999999999"},
	} {
		body, err := message.AppendBatch(nil, []*message.Message{
			{Body: []byte("now")},
			{Body: []byte("later"), Properties: props},
		})
		require.NoError(t, err)
		resp := baInvoke(t, cl, b.Addr(), sendReqV2(remoting.SendBatchMessage, "BatchDelay", 0, body, nil))
		assert.Equal(t, int32(remoting.MessageIllegal), resp.Code, "%v: %s", props, resp.Remark)
		assert.Contains(t, resp.Remark, "cannot carry a delay", "%v", props)
	}
	body, err := message.AppendBatch(nil, []*message.Message{{Body: []byte("a"), Properties: map[string]string{message.PropDelayTimeLevel: "0"}}, {Body: []byte("b")}})
	require.NoError(t, err)
	resp := baInvoke(t, cl, b.Addr(), sendReqV2(remoting.SendBatchMessage, "BatchDelay", 0, body, nil))
	require.Equal(t, int32(remoting.Success), resp.Code, "DELAY=0 is no delay: %s", resp.Remark)
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("BatchDelay", 0) == 2 }, 5*time.Second, 5*time.Millisecond,
		"only the batch without a delay was stored")
}

// TestSendInlineHandsOffWhatMayBlock checks which sends the event loop answers
// itself and which it hands to the send pool, and that a handed-off send has
// changed nothing.
func TestSendInlineHandsOffWhatMayBlock(t *testing.T) {
	baVerifyNoLeaks(t)
	b := MustStartBroker(t, testBrokerConfig(t))
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("InlineTopic", 2, 2, 6)).ResponseCode())
	maxBefore := b.Store().CommitLogMaxOffset()

	handedOff := map[string]*remoting.Command{
		"unknown topic": sendReq("NotYetCreated", 0, []byte("x"), nil),
		"retry topic":   sendReq(RetryGroupTopicPrefix+"g1", 0, []byte("x"), map[string]string{message.PropReconsumeTime: "1"}),
		"half message":  sendReq("InlineTopic", 0, []byte("x"), map[string]string{message.PropTransactionPrepared: "true"}),
	}
	for name, req := range handedOff {
		resp, err := b.processSendInline(&remoting.Conn{}, req)
		assert.ErrorIs(t, err, remoting.ErrRunOnPool, name)
		assert.Nil(t, resp, name)
	}
	assert.Nil(t, b.Topics().Get("NotYetCreated"), "a handed-off send created nothing")
	assert.Equal(t, maxBefore, b.Store().CommitLogMaxOffset(), "a handed-off send stored nothing")

	resp, err := b.processSendInline(&remoting.Conn{}, sendReqV2(remoting.SendMessageV2, "InlineTopic", 1, []byte("inline"), nil))
	require.NoError(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Greater(t, b.Store().CommitLogMaxOffset(), maxBefore)

	// Only a real half message is handed off, not one that merely names it.
	resp, err = b.processSendInline(&remoting.Conn{}, sendReqV2(remoting.SendMessageV2, "InlineTopic", 1, []byte("inline"),
		map[string]string{"note": message.PropTransactionPrepared, message.PropTransactionPrepared: "false"}))
	require.NoError(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
}

// TestParseSendHeaderRawMatchesMap checks the two ways a send header
// arrives (binary fields in RawExt, JSON in ExtFields) parse alike, in both
// spellings, with fields the send path ignores and with bad fields.
func TestParseSendHeaderRawMatchesMap(t *testing.T) {
	asRaw := func(req *remoting.Command) *remoting.Command {
		raw := *req
		raw.ExtFields = nil
		for k, v := range req.ExtFields {
			raw.RawExt = remoting.AppendField(raw.RawExt, k, v)
		}
		return &raw
	}
	props := map[string]string{message.PropUniqKey: "id", message.PropTags: "t"}
	v1 := sendReq("T", 3, nil, props)
	v1.ExtFields["unknownField"] = "x"
	v2 := sendReqV2(remoting.SendMessageV2, "T", 3, nil, props)
	v2.ExtFields["m"] = "true" // batch: not read by the send path
	missing := sendReqV2(remoting.SendMessageV2, "T", 3, nil, props)
	delete(missing.ExtFields, "b")
	bad := sendReq("T", 3, nil, props)
	bad.ExtFields["bornTimestamp"] = "soon"
	for _, tc := range []struct {
		name string
		req  *remoting.Command
		keys *sendKeys
		err  string
	}{
		{"v1", v1, &sendKeysV1, ""},
		{"v2", v2, &sendKeysV2, ""},
		{"missing topic", missing, &sendKeysV2, "<b> is null"},
		{"bad number", bad, &sendKeysV1, "<bornTimestamp>=\"soon\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fromMap, errMap := parseSendHeader(tc.req, tc.keys)
			fromRaw, errRaw := parseSendHeader(asRaw(tc.req), tc.keys)
			assert.Equal(t, fromMap, fromRaw)
			if tc.err != "" {
				require.Error(t, errMap)
				assert.Contains(t, errMap.Error(), tc.err)
				assert.Equal(t, errMap, errRaw)
				return
			}
			require.NoError(t, errMap)
			require.NoError(t, errRaw)
			assert.Equal(t, "T", fromRaw.topic)
			assert.Equal(t, int32(3), fromRaw.queueID)
			assert.Equal(t, tc.req.ExtFields[tc.keys[sfProperties]], fromRaw.properties)
		})
	}
}

// TestPlainProperties checks which sends may store their properties string
// as it came: none that asks for a delay, a timer, a half message or names
// a CLUSTER.
func TestPlainProperties(t *testing.T) {
	enc := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return string(message.MarshalProperties(m))
	}
	uniq, ok := plainProperties(enc(message.PropUniqKey, "U1", message.PropTags, "t", message.PropWaitStoreMsgOK, "false"))
	assert.True(t, ok)
	assert.Equal(t, "U1", uniq)
	uniq, ok = plainProperties("")
	assert.True(t, ok)
	assert.Empty(t, uniq)
	uniq, ok = plainProperties("UNIQ_KEY\x01a\x02UNIQ_KEY\x01b\x02")
	assert.True(t, ok)
	assert.Equal(t, "b", uniq, "the last one, as the map keeps")
	for _, k := range append([]string{message.PropDelayTimeLevel, message.PropTransactionPrepared, message.PropCluster}, timerProps[:]...) {
		_, ok := plainProperties(enc(message.PropUniqKey, "U1", k, "1"))
		assert.False(t, ok, k)
	}
	_, ok = plainProperties(message.PropDelayTimeLevel + "\x01")
	assert.True(t, ok, "an entry without a value is not read as one")
}

// TestWithClusterParsesLikeTheMapPath checks the appended CLUSTER entry
// reads back as the map path stores it, whatever the string's ending.
func TestWithClusterParsesLikeTheMapPath(t *testing.T) {
	b := &Broker{cfg: &conf.BrokerConfig{BrokerClusterName: "C1"}}
	for _, props := range []string{"", "TAGS\x01t", "TAGS\x01t\x02", "KEYS\x01k\x02TAGS\x01t"} {
		want := message.ParseProperties(props)
		want[message.PropCluster] = "C1"
		assert.Equal(t, want, message.ParseProperties(b.withCluster(props)), "%q", props)
	}
	b.cfg.BrokerClusterName = ""
	assert.Equal(t, "TAGS\x01t", b.withCluster("TAGS\x01t"))
}
