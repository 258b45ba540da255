package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// requesterClient is a client whose PUSH_REPLY_MESSAGE_TO_CLIENT handler
// hands each push to pushes and answers with code.
func requesterClient(t *testing.T, code remoting.ResponseCode) (*remoting.Client, chan *remoting.Command) {
	cl := baClient(t)
	pushes := make(chan *remoting.Command, 8)
	cl.RegisterHandler(remoting.PushReplyMessageToClient, func(_ string, req *remoting.Command) *remoting.Command {
		pushes <- req
		return remoting.NewResponse(req, code, "")
	})
	return cl, pushes
}

func heartbeatAs(t *testing.T, cl *remoting.Client, addr, clientID string) {
	t.Helper()
	body, err := (&protocol.HeartbeatData{ClientID: clientID, ProducerDataSet: []protocol.ProducerData{{GroupName: "req-pg"}}}).Encode()
	require.NoError(t, err)
	resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
}

func replyProps(clientID, corr string) map[string]string {
	return map[string]string{message.PropReplyToClient: clientID, message.PropCorrelationID: corr, message.PropMessageType: "reply"}
}

// TestReplyProcessor: SEND_REPLY_MESSAGE(_V2) pushes the reply over the
// requester's connection and stores it; the push failing or impossible is
// the replier's SYSTEM_ERROR with the reason.
func TestReplyProcessor(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	b := MustStartBroker(t, cfg)
	addr := b.Addr()
	replyTopic := ReplyTopic(cfg.BrokerClusterName)
	require.NotNil(t, b.topics.Get(replyTopic), "created at start")

	req, pushes := requesterClient(t, remoting.Success)
	heartbeatAs(t, req, addr, "req-1")
	replier := baClient(t)

	// V1 header (the official Go client), then V2 (ours).
	for i, r := range []*remoting.Command{
		replyReq(remoting.SendReplyMessage, replyTopic, []byte("pong-1"), replyProps("req-1", "c1")),
		replyReq(remoting.SendReplyMessageV2, replyTopic, []byte("pong-2"), replyProps("req-1", "c2")),
	} {
		resp := baInvoke(t, replier, addr, r)
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		require.Len(t, pushes, 1)
		push := <-pushes
		var h protocol.ReplyMessageRequestHeader
		require.NoError(t, protocol.DecodeHeader(push.ExtFields, &h))
		assert.Equal(t, replyTopic, h.Topic)
		assert.Equal(t, addr, h.StoreHost)
		props := message.ParseProperties(h.Properties)
		assert.Equal(t, []string{"c1", "c2"}[i], props[message.PropCorrelationID])
		assert.NotEmpty(t, props[message.PropPushReplyTime])
		assert.Equal(t, []string{"pong-1", "pong-2"}[i], string(push.Body))
		sh, err := decodeSendRespForTest(resp)
		require.NoError(t, err)
		assert.NotEqual(t, "0", sh.MsgID, "stored (storeReplyMessageEnable)")
	}

	resp := baInvoke(t, replier, addr, replyReq(remoting.SendReplyMessage, replyTopic, []byte("x"), replyProps("nobody", "c3")))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "channel of the requester not found: <nobody>")
	resp = baInvoke(t, replier, addr, replyReq(remoting.SendReplyMessage, replyTopic, []byte("x"), map[string]string{message.PropCorrelationID: "c4"}))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, message.PropReplyToClient)

	refusing, _ := requesterClient(t, remoting.SystemBusy)
	heartbeatAs(t, refusing, addr, "req-busy")
	resp = baInvoke(t, replier, addr, replyReq(remoting.SendReplyMessage, replyTopic, []byte("x"), replyProps("req-busy", "c5")))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "push reply message to the requester failed")

	// A requester that never heartbeated is known from its request.
	early, earlyPushes := requesterClient(t, remoting.Success)
	sent := baInvoke(t, early, addr, sendReqV2(remoting.SendMessageV2, "ReqTopic", 0, []byte("ping"),
		map[string]string{message.PropReplyToClient: "req-early", message.PropCorrelationID: "c6"}))
	require.Equal(t, remoting.Success, sent.ResponseCode(), sent.Remark)
	resp = baInvoke(t, replier, addr, replyReq(remoting.SendReplyMessage, replyTopic, []byte("pong"), replyProps("req-early", "c6")))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, "pong", string((<-earlyPushes).Body))
	_ = early.Close()
	require.Eventually(t, func() bool { return b.consume.producers.FindConn("req-early") == nil }, 10*time.Second, 10*time.Millisecond, "gone with its connection")

}

// TestReplyProcessorNoStore: with storeReplyMessageEnable=false the reply
// is pushed and not stored (msgId "0", as Java answers).
func TestReplyProcessorNoStore(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.StoreReplyMessageEnable = false
	b := MustStartBroker(t, cfg)
	req, pushes := requesterClient(t, remoting.Success)
	heartbeatAs(t, req, b.Addr(), "req-1")
	resp := baInvoke(t, baClient(t), b.Addr(), replyReq(remoting.SendReplyMessage, ReplyTopic(cfg.BrokerClusterName), []byte("pong"), replyProps("req-1", "c1")))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	sh, err := decodeSendRespForTest(resp)
	require.NoError(t, err)
	assert.Equal(t, "0", sh.MsgID)
	assert.Equal(t, "pong", string((<-pushes).Body))
}

// replyReq is a SEND_REPLY_MESSAGE (long header) or _V2 (one-letter) request.
func replyReq(code remoting.RequestCode, topic string, body []byte, props map[string]string) *remoting.Command {
	if code == remoting.SendReplyMessage {
		r := sendReq(topic, -1, body, props)
		r.Code = int32(code)
		return r
	}
	return sendReqV2(code, topic, -1, body, props)
}

// decodeSendRespForTest reads a send response header from either form.
func decodeSendRespForTest(resp *remoting.Command) (protocol.SendMessageResponseHeader, error) {
	var h protocol.SendMessageResponseHeader
	ext := resp.ExtFields
	if resp.RawExt != nil {
		ext = map[string]string{}
		for k, v := range remoting.StringFields(string(resp.RawExt)) {
			ext[k] = v
		}
	}
	err := protocol.DecodeHeader(ext, &h)
	return h, err
}
