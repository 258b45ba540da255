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

func TestQueryAndViewMessage(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "QM", 1)
	cl := baClient(t)
	addr := b.Addr()
	before := time.Now().UnixMilli()
	sent := bcSend(t, cl, addr, "QM", 0, "order-body", "tagA", "order-42")
	bcSend(t, cl, addr, "QM", 0, "other", "tagA", "order-43")
	bcWaitQueue(t, b, "QM", 0, 2)

	query := func(key string) *remoting.Command {
		return baInvoke(t, cl, addr, bcReq(remoting.QueryMessage, &protocol.QueryMessageRequestHeader{
			Topic: "QM", Key: key, MaxNum: 32, BeginTimestamp: before - 1000, EndTimestamp: time.Now().Add(time.Minute).UnixMilli(),
		}, nil))
	}
	var resp *remoting.Command
	require.Eventually(t, func() bool { resp = query("order-42"); return resp.Code == int32(remoting.Success) },
		5*time.Second, 5*time.Millisecond, "the index is built by the dispatch")
	var h protocol.QueryMessageResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	m, n, err := message.DecodeRecord(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, len(resp.Body), n, "exactly one record")
	assert.Equal(t, "order-body", string(m.Body))

	resp = query("no-such-key")
	assert.Equal(t, int32(remoting.QueryNotFound), resp.Code)
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h), "headers are sent with QUERY_NOT_FOUND too")

	// VIEW_MESSAGE_BY_ID takes the commitlog offset from the offsetMsgId.
	var sh protocol.SendMessageResponseHeader
	require.NoError(t, protocol.DecodeHeader(sent.ExtFields, &sh))
	require.Len(t, sh.MsgID, 32)
	off, err := strconv.ParseInt(sh.MsgID[16:], 16, 64)
	require.NoError(t, err)
	resp = baInvoke(t, cl, addr, bcReq(remoting.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: off}, nil))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	m, _, err = message.DecodeRecord(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "order-body", string(m.Body))

	for _, bad := range []int64{off + 3, -1, 1 << 40} {
		resp = baInvoke(t, cl, addr, bcReq(remoting.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: bad}, nil))
		assert.Equal(t, int32(remoting.SystemError), resp.Code, "offset %d", bad)
	}
}
