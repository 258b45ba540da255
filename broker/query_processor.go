package broker

import (
	"strconv"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Message query settings (RocketMQ's defaultQueryMaxNum and the extField
// Java clients add for unique-key lookups).
const (
	defaultQueryMaxNum = 32
	uniqueKeyQueryExt  = "_UNIQUE_KEY_QUERY"
)

// processQueryMessage looks messages up by key or unique key through the
// index (QUERY_MESSAGE) and answers the stored records, newest first, or
// QUERY_NOT_FOUND.
func (cs *consumeState) processQueryMessage(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.QueryMessageRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if v, _ := strconv.ParseBool(req.ExtFields[uniqueKeyQueryExt]); v {
		h.MaxNum = defaultQueryMaxNum
	}
	res := cs.b.store.QueryMessage(h.Topic, h.Key, int(h.MaxNum), h.BeginTimestamp, h.EndTimestamp)
	defer res.Release()
	hdr := &protocol.QueryMessageResponseHeader{
		IndexLastUpdateTimestamp: res.IndexLastUpdateTimestamp,
		IndexLastUpdatePhyoffset: res.IndexLastUpdatePhyOffset,
	}
	if res.BufferTotalSize == 0 {
		return consumeResp(req, remoting.QueryNotFound, "can not find message, maybe time range not correct", hdr), nil
	}
	resp := consumeResp(req, remoting.Success, "", hdr)
	body := make([]byte, 0, res.BufferTotalSize)
	for i := range res.Messages {
		body = append(body, res.Messages[i].Bytes...)
	}
	resp.Body = body
	return resp, nil
}

// processViewMessageByID answers the stored record at a commitlog offset
// (VIEW_MESSAGE_BY_ID; the offset comes from an offsetMsgId).
func (cs *consumeState) processViewMessageByID(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ViewMessageRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	rec, ok := cs.b.store.SelectOneMessageByOffset(h.Offset)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, "can not find message by the offset, "+strconv.FormatInt(h.Offset, 10)), nil
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = append(make([]byte, 0, len(rec.Bytes)), rec.Bytes...)
	rec.Release()
	return resp, nil
}
