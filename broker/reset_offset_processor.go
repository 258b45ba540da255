package broker

import (
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func (b *Broker) registerResetOffsetProcessor() {
	b.server.Handle(remoting.InvokeBrokerToResetOffset, b.pools.Admin, b.processResetOffset)
}

// processResetOffset answers INVOKE_BROKER_TO_RESET_OFFSET (mqadmin
// resetOffsetByTime, skipAccumulatedMessage): for each queue of the topic
// the new offset is the first message stored at or after the timestamp (-1:
// the queue's end); without isForce an offset only moves back, as in
// RocketMQ's Broker2Client.resetOffset.
//
// Unlike RocketMQ 4.9, which only asks the online consumers to reset (and
// fails with "consumer not online" otherwise), the broker also stores the new
// offsets itself: the reset holds for a group that is offline now, and for
// consumers that ignore RESET_CONSUMER_CLIENT_OFFSET. Online members are
// sent RESET_CONSUMER_CLIENT_OFFSET (oneway) so they drop the offsets they
// hold in memory; otherwise their next commit would undo the reset.
func (b *Broker) processResetOffset(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ResetOffsetRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	tc := b.topics.Get(h.Topic)
	if tc == nil {
		return respond(req, remoting.TopicNotExist, fmt.Sprintf("[reset-offset] topic config not exist, %s", h.Topic)), nil
	}
	if h.Timestamp < -1 {
		return respond(req, remoting.SystemError, fmt.Sprintf("[reset-offset] timestamp %d is neither -1 (the end) nor a time in ms", h.Timestamp)), nil
	}
	body := protocol.ResetOffsetBody{OffsetTable: make(map[protocol.MessageQueue]int64, tc.WriteQueueNums)}
	for q := range tc.WriteQueueNums {
		target := b.store.MaxOffsetInQueue(h.Topic, q)
		if h.Timestamp != -1 {
			target = b.store.OffsetByTime(h.Topic, q, h.Timestamp)
		}
		if current := b.consume.offsets.Query(h.Group, h.Topic, q); current >= 0 && !h.IsForce && target > current {
			target = current // not forced: never skip messages the group has not consumed
		}
		body.OffsetTable[protocol.MessageQueue{Topic: h.Topic, BrokerName: b.cfg.BrokerName, QueueID: q}] = target
	}
	encoded, err := body.Encode()
	if err != nil {
		return nil, err
	}
	for mq, off := range body.OffsetTable {
		b.consume.offsets.Commit(h.Group, h.Topic, mq.QueueID, off)
	}
	notified := 0
	if snap, ok := b.consume.consumers.Snapshot(h.Group); ok {
		for _, ch := range snap.Channels {
			push := remoting.NewRequest(remoting.ResetConsumerClientOffset, protocol.EncodeHeader(&h, nil), encoded)
			if err := ch.Conn.InvokeOneway(push); err != nil {
				b.log.WithFields(logrus.Fields{"group": h.Group, "client": ch.ClientID, "reason": err}).Warn("cannot push an offset reset")
				continue
			}
			notified++
		}
	}
	b.log.WithFields(logrus.Fields{"group": h.Group, "topic": h.Topic, "timestamp": h.Timestamp, "force": h.IsForce,
		"consumersNotified": notified, "peer": c.RemoteAddr()}).Info("consumer offsets reset")
	resp := respond(req, remoting.Success, "")
	resp.Body = encoded
	return resp, nil
}
