package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Timeouts of the requests the broker forwards to a client (RocketMQ's
// Broker2Client: 10 s for running info and direct consumption, 5 s per
// client for consumer status). They hold an admin worker meanwhile.
const (
	callClientTimeout    = 10 * time.Second
	consumerStatusTimeut = 5 * time.Second
)

// minClientVersionForCall is V3_1_8_SNAPSHOT's ordinal: older clients do
// not answer GET_CONSUMER_RUNNING_INFO or CONSUME_MESSAGE_DIRECTLY.
const minClientVersionForCall = 65

// invoker is a connection the broker can send a request on and wait for
// the answer; *remoting.Conn is one.
type invoker interface {
	Invoke(ctx context.Context, req *remoting.Command) (*remoting.Command, error)
}

// registerMonitorProcessors routes the admin codes that look into the
// running cluster, all on the admin pool.
func (b *Broker) registerMonitorProcessors() {
	s, p := b.server, b.pools.Admin
	s.Handle(remoting.GetProducerConnectionList, p, b.processGetProducerConnectionList)
	s.Handle(remoting.GetConsumerRunningInfo, p, b.processGetConsumerRunningInfo)
	s.Handle(remoting.ConsumeMessageDirectly, p, b.processConsumeMessageDirectly)
	s.Handle(remoting.InvokeBrokerToGetConsumerStatus, p, b.processGetConsumerStatus)
	s.Handle(remoting.GetBrokerConsumeStats, p, b.processGetBrokerConsumeStats)
	s.Handle(remoting.CloneGroupOffset, p, b.processCloneGroupOffset)
	s.Handle(remoting.ViewBrokerStatsData, p, b.processViewBrokerStatsData)
	s.Handle(remoting.CleanExpiredConsumeQueue, p, b.processCleanExpiredConsumeQueue)
	s.Handle(remoting.TriggerDeleteFiles, p, b.processTriggerDeleteFiles)
}

// processGetProducerConnectionList answers GET_PRODUCER_CONNECTION_LIST
// (mqadmin producerConnection) with the group's live connections.
func (b *Broker) processGetProducerConnectionList(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetProducerConnectionListRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	chans := b.consume.producers.Channels(h.ProducerGroup)
	if len(chans) == 0 {
		return respond(req, remoting.SystemError, "the producer group["+h.ProducerGroup+"] not exist"), nil
	}
	pc := protocol.ProducerConnection{ConnectionSet: make([]protocol.Connection, 0, len(chans))}
	for _, ch := range chans {
		pc.ConnectionSet = append(pc.ConnectionSet, protocol.Connection{
			ClientID: ch.ClientID, ClientAddr: ch.Conn.RemoteAddr(), Language: ch.Language.String(), Version: ch.Version,
		})
	}
	return jsonResponse(req, &pc)
}

// processGetConsumerRunningInfo forwards GET_CONSUMER_RUNNING_INFO to the
// named client of the group and returns its answer (mqadmin consumerStatus).
func (b *Broker) processGetConsumerRunningInfo(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetConsumerRunningInfoRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	return b.callConsumer(req, remoting.GetConsumerRunningInfo, h.ConsumerGroup, h.ClientID, req.Body), nil
}

// processConsumeMessageDirectly reads the message an offset msgId names
// from this broker's store and hands it to one client of the group, which
// runs its listener on it and says how it went (CONSUME_MESSAGE_DIRECTLY:
// mqadmin queryMsgById -g -d, the console's redelivery).
func (b *Broker) processConsumeMessageDirectly(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ConsumeMessageDirectlyResultRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	_, off, err := message.ParseOffsetMsgID(h.MsgID)
	if err != nil {
		return respond(req, remoting.SystemError, fmt.Sprintf("msgId %q is not an offset message id: %v", h.MsgID, err)), nil
	}
	sel, ok := b.store.SelectOneMessageByOffset(off)
	if !ok {
		return respond(req, remoting.SystemError, fmt.Sprintf("no message at commitlog offset %d of this broker (msgId %s)", off, h.MsgID)), nil
	}
	record := append([]byte(nil), sel.Bytes...)
	sel.Release()
	req.SetExt("brokerName", b.cfg.BrokerName)
	return b.callConsumer(req, remoting.ConsumeMessageDirectly, h.ConsumerGroup, h.ClientID, record), nil
}

// callConsumer sends a copy of req (its header fields, body) under code to
// the group's client clientID and returns the client's answer, as
// RocketMQ's AdminBrokerProcessor.callConsumer does.
func (b *Broker) callConsumer(req *remoting.Command, code remoting.RequestCode, group, clientID string, body []byte) *remoting.Command {
	ch, ok := b.findConsumerChannel(group, clientID)
	if !ok {
		return respond(req, remoting.SystemError, fmt.Sprintf("The Consumer <%s> <%s> not online", group, clientID))
	}
	if ch.Version < minClientVersionForCall {
		return respond(req, remoting.SystemError, fmt.Sprintf("The Consumer <%s> Version <%d> too low to finish, please upgrade it to V3_1_8_SNAPSHOT", clientID, ch.Version))
	}
	conn, ok := ch.Conn.(invoker)
	if !ok {
		return respond(req, remoting.SystemError, fmt.Sprintf("consumer <%s> <%s>: its connection cannot carry requests", group, clientID))
	}
	fwd := remoting.NewRequest(code, copyExt(req.ExtFields), body)
	ctx, cancel := context.WithTimeout(context.Background(), callClientTimeout)
	defer cancel()
	resp, err := conn.Invoke(ctx, fwd)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return respond(req, remoting.ConsumeMsgTimeout, fmt.Sprintf("consumer <%s> <%s> Timeout: %v", group, clientID, err))
	case err != nil:
		return respond(req, remoting.SystemError, fmt.Sprintf("invoke consumer <%s> <%s> Exception: %v", group, clientID, err))
	}
	out := remoting.NewResponse(req, resp.ResponseCode(), resp.Remark)
	out.Body = resp.Body
	out.ExtFields = resp.ExtFields
	return out
}

// findConsumerChannel finds a client of the group by client id.
func (b *Broker) findConsumerChannel(group, clientID string) (ClientChannelInfo, bool) {
	snap, ok := b.consume.consumers.Snapshot(group)
	if !ok {
		return ClientChannelInfo{}, false
	}
	for _, ch := range snap.Channels {
		if ch.ClientID == clientID {
			return ch, true
		}
	}
	return ClientChannelInfo{}, false
}

// processGetConsumerStatus answers INVOKE_BROKER_TO_GET_CONSUMER_STATUS:
// each online client of the group (or the one clientAddr names) is asked
// for its offsets in the topic (GET_CONSUMER_STATUS_FROM_CLIENT), and the
// answers are returned by client id. A client that does not answer is left
// out, as in RocketMQ's Broker2Client.getConsumeStatus.
func (b *Broker) processGetConsumerStatus(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetConsumerStatusRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	snap, ok := b.consume.consumers.Snapshot(h.Group)
	if !ok || len(snap.Channels) == 0 {
		return respond(req, remoting.SystemError, fmt.Sprintf("No Any Consumer online in the consumer group: [%s]", h.Group)), nil
	}
	body := protocol.GetConsumerStatusBody{ConsumerTable: map[string]map[protocol.MessageQueue]int64{}}
	ask := protocol.EncodeHeader(&protocol.GetConsumerStatusRequestHeader{Topic: h.Topic, Group: h.Group}, nil)
	for _, ch := range snap.Channels {
		if !protocol.IsBlank(h.ClientAddr) && h.ClientAddr != ch.ClientID {
			continue
		}
		conn, ok := ch.Conn.(invoker)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), consumerStatusTimeut)
		resp, err := conn.Invoke(ctx, remoting.NewRequest(remoting.GetConsumerStatusFromClient, copyExt(ask), nil))
		cancel()
		if err != nil || resp.ResponseCode() != remoting.Success || len(resp.Body) == 0 {
			b.log.WithFields(logrus.Fields{"group": h.Group, "client": ch.ClientID, "reason": err}).Debug("get consumer status from client")
			continue
		}
		st, err := protocol.DecodeGetConsumerStatusBody(resp.Body)
		if err != nil {
			b.log.WithFields(logrus.Fields{"group": h.Group, "client": ch.ClientID}).WithError(err).Warn("bad consumer status from client")
			continue
		}
		body.ConsumerTable[ch.ClientID] = st.MessageQueueTable
	}
	enc, err := body.Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = enc
	return resp, nil
}

// processGetBrokerConsumeStats answers GET_BROKER_CONSUME_STATS (mqadmin
// brokerConsumeStats): for every subscription group, the per-queue offsets
// and lag of each topic it has offsets in, and the broker's total lag.
// With isOrder only ordered topics count.
func (b *Broker) processGetBrokerConsumeStats(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetConsumeStatsInBrokerHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	st := b.store
	list := protocol.ConsumeStatsList{BrokerAddr: b.Addr()}
	groups := b.consume.groups.names()
	for _, group := range groups {
		var statsOfGroup []protocol.ConsumeStats
		for _, topic := range b.consume.offsets.TopicsOfGroup(group) {
			tc := b.topics.Get(topic)
			if tc == nil || (h.IsOrder && !tc.Order) {
				continue
			}
			if _, _, found, online := b.consume.consumers.Subscription(group, topic); online && !found {
				continue // online, no longer subscribed to it
			}
			cs := protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
			for q := range tc.WriteQueueNums {
				w := protocol.OffsetWrapper{BrokerOffset: max(0, st.MaxOffsetInQueue(topic, q)),
					ConsumerOffset: max(0, b.consume.offsets.Query(group, topic, q))}
				if w.ConsumerOffset > 0 {
					w.LastTimestamp = max(0, st.MessageStoreTime(topic, q, w.ConsumerOffset-1))
				}
				cs.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: b.cfg.BrokerName, QueueID: q}] = w
				list.TotalDiff += w.BrokerOffset - w.ConsumerOffset
			}
			cs.ConsumeTps = b.stats.groupRates(group, topic).Nums60s
			statsOfGroup = append(statsOfGroup, cs)
		}
		list.ConsumeStatsList = append(list.ConsumeStatsList, map[string][]protocol.ConsumeStats{group: statsOfGroup})
	}
	enc, err := list.Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = enc
	return resp, nil
}

// processCloneGroupOffset answers CLONE_GROUP_OFFSET (mqadmin
// cloneGroupOffset): the destination group gets the source group's
// committed offsets in the topic (every topic of the source when none is
// named). Unless offline, a topic the source group is online without
// subscribing to is skipped, as RocketMQ does.
func (b *Broker) processCloneGroupOffset(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.CloneGroupOffsetRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	for _, g := range []string{h.SrcGroup, h.DestGroup} {
		if err := validateGroupName(g); err != nil {
			return respond(req, remoting.SystemError, err.Error()), nil
		}
	}
	topics := []string{h.Topic}
	if protocol.IsBlank(h.Topic) {
		topics = b.consume.offsets.TopicsOfGroup(h.SrcGroup)
	}
	cloned := 0
	for _, topic := range topics {
		if b.topics.Get(topic) == nil {
			continue
		}
		if !h.Offline {
			if _, _, found, online := b.consume.consumers.Subscription(h.SrcGroup, topic); online && !found {
				continue
			}
		}
		for q, off := range b.consume.offsets.QueryAll(h.SrcGroup, topic) {
			b.consume.offsets.Commit(h.DestGroup, topic, q, off)
			cloned++
		}
	}
	if err := b.consume.offsets.Persist(); err != nil {
		return respond(req, remoting.SystemError, "offsets cloned in memory but not persisted: "+err.Error()), nil
	}
	b.log.WithFields(logrus.Fields{"src": h.SrcGroup, "dest": h.DestGroup, "topic": h.Topic, "queues": cloned, "peer": c.RemoteAddr()}).
		Info("consumer offsets cloned")
	return respond(req, remoting.Success, ""), nil
}

// processViewBrokerStatsData answers VIEW_BROKER_STATS_DATA (mqadmin
// statsAll): one statistic's count and rate over the last minute, hour and
// day.
func (b *Broker) processViewBrokerStatsData(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ViewBrokerStatsDataRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	w, ok := b.stats.view(h.StatsName, h.StatsKey, b.cfg.BrokerClusterName, time.Now())
	if !ok {
		return respond(req, remoting.SystemError, fmt.Sprintf("The stats <%s> <%s> not exist", h.StatsName, h.StatsKey)), nil
	}
	item := func(s WindowStat) protocol.BrokerStatsItem { return protocol.BrokerStatsItem{Sum: s.Sum, TPS: s.TPS} }
	return jsonResponse(req, &protocol.BrokerStatsData{StatsMinute: item(w.Minute), StatsHour: item(w.Hour), StatsDay: item(w.Day)})
}

// processCleanExpiredConsumeQueue answers CLEAN_EXPIRED_CONSUMEQUEUE
// (mqadmin cleanExpiredCQ): consume-queue and index files pointing only
// below the commitlog's min offset are deleted now.
func (b *Broker) processCleanExpiredConsumeQueue(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	b.log.WithField("peer", c.RemoteAddr()).Warn("cleaning expired consume queues on request")
	b.store.CleanExpiredConsumeQueues()
	return respond(req, remoting.Success, ""), nil
}

// processTriggerDeleteFiles answers TRIGGER_DELETE_FILES (mqadmin
// deleteExpiredCommitLog): the next clean rounds delete commitlog files
// older than fileReservedTime whatever deleteWhen says.
func (b *Broker) processTriggerDeleteFiles(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	b.log.WithField("peer", c.RemoteAddr()).Warn("deleting expired commitlog files on request")
	b.store.ExecuteDeleteFilesManually()
	return respond(req, remoting.Success, ""), nil
}

// jsonResponse answers SUCCESS with v as JSON.
func jsonResponse(req *remoting.Command, v any) (*remoting.Command, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// names returns the subscription groups, sorted.
func (m *SubscriptionGroupManager) names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.table))
	for g := range m.table {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
