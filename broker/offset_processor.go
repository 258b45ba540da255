package broker

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// processQueryConsumerOffset answers where a group resumes in a queue
// (QUERY_CONSUMER_OFFSET):
//
//  1. the committed offset, if there is one;
//  2. for a group with no offset there that registered
//     CONSUME_FROM_LAST_OFFSET (the official clients' default), the first
//     message stored at or after the broker first saw the group subscribe
//     to the topic. RocketMQ answers 0 here whenever the queue still starts
//     at 0, so a brand-new group replays the topic's whole history although
//     it asked for the last offset — the complaint of apache/rocketmq#334,
//     #1135 and rocketmq-client-go#558 (ecosystem pain point 13). Answering
//     the max offset instead (what the client does on QUERY_NOT_FOUND)
//     would race: messages sent between the consumer's start and its first
//     rebalance would be skipped. Starting at the group's first heartbeat
//     keeps both: no history, nothing sent after the consumer started is
//     lost. Retry topics are excluded (clients start those at 0);
//  3. for CONSUME_FROM_TIMESTAMP, QUERY_NOT_FOUND so the client searches by
//     its own timestamp (RocketMQ's 0 would ignore it);
//  4. otherwise RocketMQ's rule: 0 if the queue still starts at 0, else
//     QUERY_NOT_FOUND (22) and the client applies its ConsumeFromWhere.
//
// The first-seen time is kept in memory: after a broker restart it is the
// first heartbeat after the restart, which only matters for queues the
// group never committed an offset in (clients commit every 5 s).
func (cs *consumeState) processQueryConsumerOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.QueryConsumerOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if off := cs.offsets.Query(h.ConsumerGroup, h.Topic, h.QueueID); off >= 0 {
		return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: off}), nil
	}
	st := cs.b.store
	minOffset := st.MinOffsetInQueue(h.Topic, h.QueueID)
	if _, where, online := cs.consumers.GroupMode(h.ConsumerGroup); online && !isRetryTopic(h.Topic) {
		switch where {
		case protocol.ConsumeFromLastOffset:
			if first, ok := cs.consumers.FirstSeen(h.ConsumerGroup, h.Topic); ok {
				off := max(st.OffsetByTime(h.Topic, h.QueueID, first), minOffset)
				return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: off}), nil
			}
		case protocol.ConsumeFromTimestamp:
			return remoting.NewResponse(req, remoting.QueryNotFound, "no committed offset; search by the consumer's timestamp"), nil
		}
	}
	if minOffset <= 0 {
		return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: 0}), nil
	}
	return remoting.NewResponse(req, remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"), nil
}

// processUpdateConsumerOffset stores a group's offset (UPDATE_CONSUMER_OFFSET;
// the Go client sends it every 5 s per queue and does not wait). The names
// must be valid (a topic with '@' would corrupt the topic@group keys of the
// table and of consumerOffset.json, and unbounded names would grow them)
// and, for a topic this broker has, the queue must be one of its queues.
// A topic the broker does not have is accepted, as RocketMQ 4 does.
func (cs *consumeState) processUpdateConsumerOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.UpdateConsumerOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if h.QueueID < 0 || h.CommitOffset < 0 {
		return remoting.NewResponse(req, remoting.SystemError, "queueId and commitOffset must not be negative"), nil
	}
	if err := validateGroupName(h.ConsumerGroup); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	if err := ValidateTopic(h.Topic); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	if tc := cs.b.topics.Get(h.Topic); tc != nil && h.QueueID >= max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("queueId[%d] is illegal: topic[%s] has %d read and %d write queues",
			h.QueueID, h.Topic, tc.ReadQueueNums, tc.WriteQueueNums)), nil
	}
	cs.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processGetMaxOffset answers the offset the queue's next message gets
// (GET_MAX_OFFSET).
func (cs *consumeState) processGetMaxOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicQueueRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	off := cs.b.store.MaxOffsetInQueue(h.Topic, h.QueueID)
	return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: off}), nil
}

// processGetMinOffset answers the queue's first readable offset (GET_MIN_OFFSET).
func (cs *consumeState) processGetMinOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicQueueRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	off := cs.b.store.MinOffsetInQueue(h.Topic, h.QueueID)
	return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: off}), nil
}

// processSearchOffsetByTimestamp answers the first offset stored at or after
// a time (SEARCH_OFFSET_BY_TIMESTAMP).
func (cs *consumeState) processSearchOffsetByTimestamp(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.SearchOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	off := cs.b.store.OffsetByTime(h.Topic, h.QueueID, h.Timestamp)
	return consumeResp(req, remoting.Success, "", &protocol.OffsetResponseHeader{Offset: off}), nil
}

// processGetEarliestMsgStoreTime answers the store time of the queue's first
// message, -1 if it has none (GET_EARLIEST_MSG_STORETIME).
func (cs *consumeState) processGetEarliestMsgStoreTime(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicQueueRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	ts := cs.b.store.EarliestStoreTime(h.Topic, h.QueueID)
	return consumeResp(req, remoting.Success, "", &protocol.EarliestMsgStoretimeResponseHeader{Timestamp: ts}), nil
}

// processGetConsumeStats answers, per queue of the group's topics, the
// broker's max offset, the group's offset and the store time of the last
// consumed message (GET_CONSUME_STATS, for mqadmin consumerProgress).
func (cs *consumeState) processGetConsumeStats(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetConsumeStatsRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if err := validateGroupName(h.ConsumerGroup); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	topics := []string{h.Topic}
	if h.Topic == "" {
		topics = cs.offsets.TopicsOfGroup(h.ConsumerGroup)
	}
	st := cs.b.store
	stats := protocol.ConsumeStats{OffsetTable: make(map[protocol.MessageQueue]protocol.OffsetWrapper)}
	for _, topic := range topics {
		tc := cs.b.topics.Get(topic)
		if tc == nil {
			continue
		}
		// A group online without this topic among its subscriptions no
		// longer consumes it (RocketMQ skips it too).
		if _, _, found, online := cs.consumers.Subscription(h.ConsumerGroup, topic); online && !found {
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			w := protocol.OffsetWrapper{BrokerOffset: st.MaxOffsetInQueue(topic, q)}
			w.ConsumerOffset = max(cs.offsets.Query(h.ConsumerGroup, topic, q), 0)
			if w.ConsumerOffset > 0 {
				w.LastTimestamp = max(st.MessageStoreTime(topic, q, w.ConsumerOffset-1), 0)
			}
			stats.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: cs.b.cfg.BrokerName, QueueID: q}] = w
		}
		stats.ConsumeTps += cs.b.stats.groupRates(h.ConsumerGroup, topic).Nums60s
	}
	body, err := stats.Encode()
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// processGetAllConsumerOffset answers the whole offset table in
// consumerOffset.json's shape (GET_ALL_CONSUMER_OFFSET; slaves copy it from
// their master).
func (cs *consumeState) processGetAllConsumerOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, _ := cs.offsets.Encode()
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// processQueryTopicConsumeByWho answers the groups consuming a topic: those
// online with a subscription to it and those with offsets in it
// (QUERY_TOPIC_CONSUME_BY_WHO, for mqadmin topicStatus and friends).
func (cs *consumeState) processQueryTopicConsumeByWho(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	seen := map[string]bool{}
	groups := make([]string, 0, 4)
	for _, g := range append(cs.consumers.GroupsOfTopic(h.Topic), cs.offsets.GroupsOfTopic(h.Topic)...) {
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	sort.Strings(groups)
	body, err := json.Marshal(&protocol.GroupList{GroupList: groups})
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}
