package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// replyMessageFlag is the MSG_TYPE of a reply (MixAll.REPLY_MESSAGE_FLAG).
const replyMessageFlag = "reply"

// pushReplyTimeout bounds the push of a reply to its requester
// (RocketMQ's Broker2Client.callClient waits 3 s too).
const pushReplyTimeout = 3 * time.Second

// ReplyTopic returns the reply topic of a cluster, "<cluster>_REPLY_TOPIC"
// (MixAll.getReplyTopic): every broker of the cluster creates it at start.
func ReplyTopic(cluster string) string { return cluster + replyTopicSuffix }

// replyConn is what pushing a reply needs of the requester's connection;
// *remoting.Conn has it.
type replyConn interface {
	Invoke(ctx context.Context, req *remoting.Command) (*remoting.Command, error)
}

// registerReplyProcessors routes SEND_REPLY_MESSAGE and its V2 spelling to
// the send pool (ReplyMessageProcessor). They never run on the event loop:
// the push to the requester waits for its answer.
func (b *Broker) registerReplyProcessors() {
	b.server.Handle(remoting.SendReplyMessage, b.pools.Send, b.processReply)
	b.server.Handle(remoting.SendReplyMessageV2, b.pools.Send, b.processReply)
}

// processReply answers a replier's SEND_REPLY_MESSAGE(_V2): it pushes the
// reply to the requester named by REPLY_TO_CLIENT over that client's
// connection to this broker (PUSH_REPLY_MESSAGE_TO_CLIENT) and, with
// storeReplyMessageEnable, stores it in the reply topic too. The answer's
// code is the push's: SYSTEM_ERROR when the requester is not connected here
// or did not take the reply, so the replier's producer retries on another
// broker of the cluster, where the requester may be connected (clients
// heartbeat to every broker of their routes). It blocks a send worker for at
// most pushReplyTimeout plus the store's put.
func (b *Broker) processReply(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	keys := &sendKeysV2
	if req.RequestCode() == remoting.SendReplyMessage {
		keys = &sendKeysV1
	}
	h, err := parseSendHeader(req, keys)
	if err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	tc, resp := b.checkSend(c, req, &h, false)
	if resp != nil {
		return resp, nil
	}
	queueID, ok := sendQueue(h.queueID, tc)
	if !ok {
		return respond(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] has no write queues", h.topic)), nil
	}
	ext := message.MessageExt{
		Message:        message.Message{Topic: h.topic, Flag: h.flag, Body: req.Body, Properties: message.ParseProperties(h.properties)},
		QueueID:        queueID,
		SysFlag:        h.sysFlag,
		BornTimestamp:  h.bornTimestamp,
		BornHost:       bornHostOf(c),
		StoreHost:      b.StoreHost(),
		ReconsumeTimes: h.reconsumeTimes,
	}
	resp = respond(req, remoting.Success, "")
	if err := b.pushReply(c, &h, &ext); err != nil {
		resp.Code, resp.Remark = int32(remoting.SystemError), err.Error()
		b.log.WithFields(logrus.Fields{"topic": h.topic, "replier": c.RemoteAddr(), "reason": err}).Debug("reply not pushed")
	}
	// Java answers msgId "0" and offset 0 for a pushed but unstored reply,
	// so the client's header decode succeeds either way.
	msgID, offset := "0", int64(0)
	if b.cfg.StoreReplyMessageEnable {
		res := b.store.PutMessage(context.Background(), &ext)
		if res.OK() { // stored, even if not yet flushed or replicated
			msgID, offset = res.MsgID, res.QueueOffset
			b.stats.onPut(h.topic, res.MsgNum, res.WroteBytes)
		} else {
			b.log.WithFields(logrus.Fields{"topic": h.topic, "status": res.Status, "reason": res.Err}).Warn("reply not stored")
		}
	}
	resp.RawExt = b.sendResponseFields(msgID, queueID, offset, "")
	return resp, nil
}

// Reasons a reply could not be pushed (the remark of the SYSTEM_ERROR).
var (
	// ErrReplyNoRequester means the reply names no REPLY_TO_CLIENT.
	ErrReplyNoRequester = errors.New("broker: reply message has no " + message.PropReplyToClient + " property")
	// ErrReplyRequesterGone means no producer connection of the requester's
	// client id is registered on this broker (it left, or heartbeats to
	// another broker only).
	ErrReplyRequesterGone = errors.New("broker: push reply message fail, channel of the requester not found")
	// ErrReplyPushFailed means the requester's connection did not take the
	// reply (closed, timed out, or answered with an error).
	ErrReplyPushFailed = errors.New("broker: push reply message to the requester failed")
)

// pushReply sends the reply to its requester's connection and waits for
// the client's answer (ReplyMessageProcessor.pushReplyMessage).
func (b *Broker) pushReply(c *remoting.Conn, h *sendHeader, ext *message.MessageExt) error {
	senderID := ext.Properties[message.PropReplyToClient]
	if senderID == "" {
		return ErrReplyNoRequester
	}
	cc := b.consume.producers.FindConn(senderID)
	rc, ok := cc.(replyConn)
	if cc == nil || !ok {
		return fmt.Errorf("%w: <%s>", ErrReplyRequesterGone, senderID)
	}
	now := time.Now().UnixMilli()
	ext.Properties[message.PropPushReplyTime] = strconv.FormatInt(now, 10)
	rh := protocol.ReplyMessageRequestHeader{
		ProducerGroup:         h.producerGroup,
		Topic:                 h.topic,
		DefaultTopic:          h.defaultTopic,
		DefaultTopicQueueNums: h.defaultTopicQueueNums,
		QueueID:               h.queueID,
		SysFlag:               h.sysFlag,
		BornTimestamp:         h.bornTimestamp,
		Flag:                  h.flag,
		Properties:            string(message.MarshalProperties(ext.Properties)),
		ReconsumeTimes:        h.reconsumeTimes,
		UnitMode:              h.unitMode,
		BornHost:              c.RemoteAddr(),
		StoreHost:             b.StoreHost().String(),
		StoreTimestamp:        now,
	}
	push := remoting.NewRequest(remoting.PushReplyMessageToClient, protocol.EncodeHeader(&rh, nil), ext.Body)
	push.Language = remoting.LangJava
	ctx, cancel := context.WithTimeout(context.Background(), pushReplyTimeout)
	defer cancel()
	resp, err := rc.Invoke(ctx, push)
	if err != nil {
		return fmt.Errorf("%w: <%s>: %w", ErrReplyPushFailed, senderID, err)
	}
	if resp.ResponseCode() != remoting.Success {
		return fmt.Errorf("%w: <%s> answered %d %s", ErrReplyPushFailed, senderID, resp.Code, resp.Remark)
	}
	return nil
}
