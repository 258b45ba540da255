package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Admin calls that look into a running cluster: connections, consumers'
// own view, per-broker statistics, and reading a queue's messages in order.

// callClientTimeout bounds the requests a broker forwards to a client
// (the broker itself waits up to 10 s for the client).
const callClientTimeout = 15 * time.Second

// MasterAddrs returns the master addresses of cluster ("" for every
// cluster), sorted.
func (a *Admin) MasterAddrs(ctx context.Context, cluster string) ([]string, error) {
	return a.masters(ctx, cluster)
}

// topicMasters returns the master address of each broker serving topic.
func (a *Admin) topicMasters(ctx context.Context, topic string) ([]string, error) {
	tr, err := a.c.updateRoute(ctx, a.c.wrapName(topic))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, bd := range tr.data.BrokerDatas {
		if addr := bd.MasterAddr(); addr != "" {
			out = append(out, addr)
		}
	}
	sort.Strings(out)
	return out, nil
}

// groupBrokers returns the masters to ask about a consumer group: those of
// its retry topic's route, else every master.
func (a *Admin) groupBrokers(ctx context.Context, group string) ([]string, error) {
	if addrs, err := a.topicMasters(ctx, protocol.RetryTopic(group)); err == nil && len(addrs) > 0 {
		return addrs, nil
	}
	return a.masters(ctx, "")
}

// TopicConsumers returns the groups that consume topic (online or with
// offsets), from every broker serving it (QUERY_TOPIC_CONSUME_BY_WHO).
func (a *Admin) TopicConsumers(ctx context.Context, topic string) ([]string, error) {
	addrs, err := a.topicMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, addr := range addrs {
		resp, err := a.call(ctx, addr, remoting.QueryTopicConsumeByWho, &protocol.TopicRequestHeader{Topic: a.c.wrapName(topic)}, nil)
		if err != nil {
			return nil, err
		}
		var gl protocol.GroupList
		if err := json.Unmarshal(resp.Body, &gl); err != nil {
			return nil, fmt.Errorf("%w: group list: %w", protocol.ErrBadBody, err)
		}
		for _, g := range gl.GroupList {
			seen[a.c.unwrapName(g)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

// ProducerConnections returns the connections of producer group, gathered
// from every broker serving topic (GET_PRODUCER_CONNECTION_LIST), one per
// client id. A group no broker knows is an error.
func (a *Admin) ProducerConnections(ctx context.Context, group, topic string) ([]protocol.Connection, error) {
	addrs, err := a.topicMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	byID := map[string]protocol.Connection{}
	var lastErr error
	for _, addr := range addrs {
		resp, err := a.call(ctx, addr, remoting.GetProducerConnectionList, &protocol.GetProducerConnectionListRequestHeader{ProducerGroup: group}, nil)
		if err != nil {
			lastErr = err
			continue
		}
		var pc protocol.ProducerConnection
		if err := json.Unmarshal(resp.Body, &pc); err != nil {
			return nil, fmt.Errorf("%w: producer connection: %w", protocol.ErrBadBody, err)
		}
		for _, c := range pc.ConnectionSet {
			byID[c.ClientID] = c
		}
	}
	if len(byID) == 0 && lastErr != nil {
		return nil, lastErr
	}
	out := make([]protocol.Connection, 0, len(byID))
	for _, c := range byID {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out, nil
}

// ConsumerRunningInfo asks one client of group, through a broker it is
// connected to, for its running info (GET_CONSUMER_RUNNING_INFO); with
// jstack the client adds its goroutines' stacks.
func (a *Admin) ConsumerRunningInfo(ctx context.Context, group, clientID string, jstack bool) (*protocol.ConsumerRunningInfo, error) {
	addrs, err := a.groupBrokers(ctx, group)
	if err != nil {
		return nil, err
	}
	h := &protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: a.c.wrapName(group), ClientID: clientID, JstackEnable: jstack}
	var lastErr error = ErrBrokerNotFound
	for _, addr := range addrs {
		resp, err := a.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.GetConsumerRunningInfo, protocol.EncodeHeader(h, nil), nil), callClientTimeout)
		if err != nil {
			lastErr = err
			continue
		}
		return protocol.DecodeConsumerRunningInfo(resp.Body)
	}
	return nil, lastErr
}

// ConsumeMessageDirectly has one client of group run its listener on a
// stored message of topic and report the result (CONSUME_MESSAGE_DIRECTLY).
// msgID is an offset message id, or the producer's unique id (then looked
// up in topic). The message's queue offset is not touched.
func (a *Admin) ConsumeMessageDirectly(ctx context.Context, group, clientID, topic, msgID string) (*protocol.ConsumeMessageDirectlyResult, error) {
	offsetID := msgID
	host, _, err := message.ParseOffsetMsgID(msgID)
	if err != nil {
		msgs, qerr := a.QueryMessageByUniqKey(ctx, topic, msgID)
		if qerr != nil {
			return nil, qerr
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("%w: no message %s in %s", ErrMessageNotFound, msgID, topic)
		}
		offsetID = msgs[0].OffsetMsgID()
		host = msgs[0].StoreHost
	}
	h := &protocol.ConsumeMessageDirectlyResultRequestHeader{ConsumerGroup: a.c.wrapName(group), ClientID: clientID, MsgID: offsetID}
	resp, err := a.c.invokeOK(ctx, host.String(), remoting.NewRequest(remoting.ConsumeMessageDirectly, protocol.EncodeHeader(h, nil), nil), callClientTimeout)
	if err != nil {
		return nil, err
	}
	var res protocol.ConsumeMessageDirectlyResult
	if err := json.Unmarshal(resp.Body, &res); err != nil {
		return nil, fmt.Errorf("%w: consume result: %w", protocol.ErrBadBody, err)
	}
	return &res, nil
}

// ConsumerStatus asks the brokers serving topic to collect, from each
// online client of group (or the one clientID names), the offsets it holds
// in topic (INVOKE_BROKER_TO_GET_CONSUMER_STATUS). The answer is by client
// id.
func (a *Admin) ConsumerStatus(ctx context.Context, group, topic, clientID string) (map[string]map[MessageQueue]int64, error) {
	addrs, err := a.topicMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	h := &protocol.GetConsumerStatusRequestHeader{Topic: a.c.wrapName(topic), Group: a.c.wrapName(group), ClientAddr: clientID}
	out := map[string]map[MessageQueue]int64{}
	for _, addr := range addrs {
		resp, err := a.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.InvokeBrokerToGetConsumerStatus, protocol.EncodeHeader(h, nil), nil), callClientTimeout)
		if err != nil {
			return nil, err
		}
		body, err := protocol.DecodeGetConsumerStatusBody(resp.Body)
		if err != nil {
			return nil, err
		}
		for id, table := range body.ConsumerTable {
			if out[id] == nil {
				out[id] = map[MessageQueue]int64{}
			}
			for mq, off := range table {
				mq.Topic = a.c.unwrapName(mq.Topic)
				out[id][mq] = off
			}
		}
	}
	return out, nil
}

// BrokerConsumeStats returns the consume stats of every subscription
// group on the broker at addr (GET_BROKER_CONSUME_STATS); with orderOnly
// only ordered topics.
func (a *Admin) BrokerConsumeStats(ctx context.Context, addr string, orderOnly bool, timeout time.Duration) (*protocol.ConsumeStatsList, error) {
	if timeout <= 0 {
		timeout = adminTimeout
	}
	req := remoting.NewRequest(remoting.GetBrokerConsumeStats, protocol.EncodeHeader(&protocol.GetConsumeStatsInBrokerHeader{IsOrder: orderOnly}, nil), nil)
	resp, err := a.c.invokeOK(ctx, addr, req, timeout)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeConsumeStatsList(resp.Body)
}

// ViewBrokerStatsData returns one statistic of the broker at addr over the
// last minute, hour and day (VIEW_BROKER_STATS_DATA): name is one of
// TOPIC_PUT_NUMS, TOPIC_PUT_SIZE (key: topic), GROUP_GET_NUMS,
// GROUP_GET_SIZE, SNDBCK_PUT_NUMS (key: "topic@group"), BROKER_PUT_NUMS,
// BROKER_GET_NUMS (key: the cluster name).
func (a *Admin) ViewBrokerStatsData(ctx context.Context, addr, name, key string) (*protocol.BrokerStatsData, error) {
	resp, err := a.call(ctx, addr, remoting.ViewBrokerStatsData, &protocol.ViewBrokerStatsDataRequestHeader{StatsName: name, StatsKey: key}, nil)
	if err != nil {
		return nil, err
	}
	var d protocol.BrokerStatsData
	if err := json.Unmarshal(resp.Body, &d); err != nil {
		return nil, fmt.Errorf("%w: broker stats data: %w", protocol.ErrBadBody, err)
	}
	return &d, nil
}

// CloneGroupOffset copies srcGroup's committed offsets in topic to
// destGroup on every broker serving topic (CLONE_GROUP_OFFSET). Unless
// offline, a broker skips the topic while srcGroup is online without
// subscribing to it.
func (a *Admin) CloneGroupOffset(ctx context.Context, srcGroup, destGroup, topic string, offline bool) error {
	addrs, err := a.topicMasters(ctx, topic)
	if err != nil {
		return err
	}
	h := &protocol.CloneGroupOffsetRequestHeader{SrcGroup: a.c.wrapName(srcGroup), DestGroup: a.c.wrapName(destGroup), Topic: a.c.wrapName(topic), Offline: offline}
	for _, addr := range addrs {
		if _, err := a.call(ctx, addr, remoting.CloneGroupOffset, h, nil); err != nil {
			return err
		}
	}
	return nil
}

// CleanExpiredConsumeQueue has the broker at addr delete consume-queue and
// index files that only point at deleted commitlog (CLEAN_EXPIRED_CONSUMEQUEUE).
func (a *Admin) CleanExpiredConsumeQueue(ctx context.Context, addr string) error {
	_, err := a.call(ctx, addr, remoting.CleanExpiredConsumeQueue, nil, nil)
	return err
}

// DeleteExpiredCommitLog has the broker at addr delete commitlog files
// older than its fileReservedTime now, whatever deleteWhen says
// (TRIGGER_DELETE_FILES).
func (a *Admin) DeleteExpiredCommitLog(ctx context.Context, addr string) error {
	_, err := a.call(ctx, addr, remoting.TriggerDeleteFiles, nil, nil)
	return err
}

// MinOffset returns the first offset still readable in mq.
func (a *Admin) MinOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	return a.queueOffset(ctx, mq, remoting.GetMinOffset)
}

// SearchOffset returns the offset of the first message of mq stored at or
// after ts (the queue's max offset when there is none).
func (a *Admin) SearchOffset(ctx context.Context, mq MessageQueue, ts time.Time) (int64, error) {
	wrapped := a.c.wrapName(mq.Topic)
	addr, err := a.c.findMaster(ctx, wrapped, mq.BrokerName)
	if err != nil {
		return -1, err
	}
	resp, err := a.call(ctx, addr, remoting.SearchOffsetByTimestamp,
		&protocol.SearchOffsetRequestHeader{Topic: wrapped, QueueID: mq.QueueID, Timestamp: ts.UnixMilli(), BrokerName: mq.BrokerName}, nil)
	if err != nil {
		return -1, err
	}
	var h protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return -1, err
	}
	return h.Offset, nil
}

// queueOffset asks mq's master for one of its offsets (GET_MIN_OFFSET...).
func (a *Admin) queueOffset(ctx context.Context, mq MessageQueue, code remoting.RequestCode) (int64, error) {
	wrapped := a.c.wrapName(mq.Topic)
	addr, err := a.c.findMaster(ctx, wrapped, mq.BrokerName)
	if err != nil {
		return -1, err
	}
	resp, err := a.call(ctx, addr, code, &protocol.TopicQueueRequestHeader{Topic: wrapped, QueueID: mq.QueueID, BrokerName: mq.BrokerName}, nil)
	if err != nil {
		return -1, err
	}
	var h protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return -1, err
	}
	return h.Offset, nil
}

// PullResult is what a queue read found.
type PullResult struct {
	// Found says messages came back; otherwise the queue has none at the
	// offset (the end, or none matching the expression in the scanned
	// range).
	Found bool
	// NextOffset is where to read next; MinOffset and MaxOffset bound the
	// queue.
	NextOffset, MinOffset, MaxOffset int64
	Messages                         []*MessageExt
}

// Pull reads up to maxNums messages of mq from offset, filtered by a tag
// expression ("*" or "" for all), without a consumer group's offset
// changing: a tool's read (mqadmin consumeMessage, printMsg).
func (a *Admin) Pull(ctx context.Context, mq MessageQueue, expression string, offset int64, maxNums int32) (*PullResult, error) {
	wrapped := a.c.wrapName(mq.Topic)
	addr, err := a.c.findMaster(ctx, wrapped, mq.BrokerName)
	if err != nil {
		return nil, err
	}
	if expression == "" {
		expression = protocol.SubAll
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: a.c.wrapName(a.c.o.group), Topic: wrapped, QueueID: mq.QueueID, QueueOffset: offset,
		MaxMsgNums: maxNums, SysFlag: protocol.PullFlagSubscription, Subscription: expression, ExpressionType: protocol.ExpressionTag,
		BrokerName: mq.BrokerName}
	resp, err := a.c.invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(h, nil), nil), adminTimeout)
	if err != nil {
		return nil, err
	}
	var rh protocol.PullMessageResponseHeader
	switch resp.ResponseCode() {
	case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
		if err := protocol.DecodeHeader(resp.ExtFields, &rh); err != nil {
			return nil, err
		}
	default:
		return nil, brokerError(addr, resp)
	}
	out := &PullResult{NextOffset: rh.NextBeginOffset, MinOffset: rh.MinOffset, MaxOffset: rh.MaxOffset}
	if resp.ResponseCode() != remoting.Success {
		return out, nil
	}
	msgs, err := a.decodeMessages(resp.Body)
	if err != nil {
		return nil, err
	}
	sd := subscriptionData(wrapped, MessageSelector{Type: TAG, Expression: expression})
	for _, m := range msgs {
		if matchTags(&sd, m) {
			out.Messages = append(out.Messages, m)
		}
	}
	out.Found = true
	return out, nil
}

// ConsumerConnectionsAt returns the clients of group connected to the
// broker at addr (GET_CONSUMER_CONNECTION_LIST on that broker).
func (a *Admin) ConsumerConnectionsAt(ctx context.Context, group, addr string) (*protocol.ConsumerConnection, error) {
	resp, err := a.call(ctx, addr, remoting.GetConsumerConnectionList, &protocol.GroupRequestHeader{ConsumerGroup: a.c.wrapName(group)}, nil)
	if err != nil {
		return nil, err
	}
	var cc protocol.ConsumerConnection
	if err := json.Unmarshal(resp.Body, &cc); err != nil {
		return nil, fmt.Errorf("%w: consumer connection: %w", protocol.ErrBadBody, err)
	}
	return &cc, nil
}
