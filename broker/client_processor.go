package broker

import (
	"encoding/json"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// topicSysFlagUnit marks a unit topic (TopicSysFlag.FLAG_UNIT).
const topicSysFlagUnit int32 = 0x1

// processHeartbeat registers a client's producer and consumer groups
// (HEART_BEAT). For each consumer group it finds or auto-creates the
// subscription group config and creates the group's %RETRY% topic (so its
// route appears on the nameservers), then records the channel and
// subscriptions; a membership change notifies the group's members.
func (cs *consumeState) processHeartbeat(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	hb, err := protocol.DecodeHeartbeatData(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "the heartbeat body does not parse: "+err.Error()), nil
	}
	ch := ClientChannelInfo{Conn: c, ClientID: hb.ClientID, Language: req.Language, Version: req.Version}
	for i := range hb.ConsumerDataSet {
		cd := &hb.ConsumerDataSet[i]
		if validateGroupName(cd.GroupName) != nil {
			continue
		}
		notify := true
		gc, created := cs.groups.Find(cd.GroupName)
		if created {
			cs.log.WithField("group", cd.GroupName).Info("subscription group auto-created")
			if err := cs.groups.Persist(); err != nil {
				cs.log.WithError(err).Error("persist subscription groups")
			}
		}
		if gc != nil {
			notify = gc.NotifyConsumerIdsChangedEnable
			var sysFlag int32
			if cd.UnitMode {
				sysFlag = topicSysFlagUnit
			}
			retryQueues := max(gc.RetryQueueNums, 1)
			if _, err := cs.b.topics.CreateTopicInSendBackMethod(protocol.RetryTopic(cd.GroupName), retryQueues,
				protocol.PermRead|protocol.PermWrite, sysFlag); err != nil {
				cs.log.WithFields(logrus.Fields{"group": cd.GroupName}).WithError(err).Warn("cannot create the retry topic")
			}
		}
		changed := cs.consumers.Register(ConsumerRegistration{
			Group: cd.GroupName, Channel: ch, ConsumeType: cd.ConsumeType, MessageModel: cd.MessageModel,
			ConsumeFromWhere: cd.ConsumeFromWhere, Subscriptions: cd.SubscriptionDataSet, Notify: notify,
		})
		if changed {
			cs.log.WithFields(logrus.Fields{"group": cd.GroupName, "clientId": hb.ClientID, "peer": c.RemoteAddr()}).
				Info("consumer group changed")
		}
		if cs.bitmaps != nil {
			cs.bitmaps.register(cd.GroupName, cd.SubscriptionDataSet)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName != "" {
			cs.producers.Register(pd.GroupName, ch)
		}
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processUnregisterClient removes the connection from the named groups
// (UNREGISTER_CLIENT, sent by Java clients on shutdown).
func (cs *consumeState) processUnregisterClient(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.UnregisterClientRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if h.ProducerGroup != "" {
		cs.producers.Unregister(h.ProducerGroup, c.ID())
	}
	if h.ConsumerGroup != "" {
		cs.consumers.Unregister(h.ConsumerGroup, c.ID())
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processGetConsumerList answers the client ids of a group's members
// (GET_CONSUMER_LIST_BY_GROUP), which clients sort and split queues by.
func (cs *consumeState) processGetConsumerList(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GroupRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	ids := cs.consumers.ClientIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		return remoting.NewResponse(req, remoting.SystemError, "no consumer for this group, "+h.ConsumerGroup), nil
	}
	body, err := json.Marshal(&protocol.ConsumerListBody{ConsumerIDList: ids})
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// processGetConsumerConnectionList describes a group's live connections and
// subscriptions (GET_CONSUMER_CONNECTION_LIST, for admin tools).
func (cs *consumeState) processGetConsumerConnectionList(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GroupRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	snap, ok := cs.consumers.Snapshot(h.ConsumerGroup)
	if !ok {
		return remoting.NewResponse(req, remoting.ConsumerNotOnline, "the consumer group["+h.ConsumerGroup+"] not online"), nil
	}
	cc := protocol.ConsumerConnection{
		ConnectionSet:     make([]protocol.Connection, 0, len(snap.Channels)),
		SubscriptionTable: snap.Subscriptions,
		ConsumeType:       snap.ConsumeType,
		MessageModel:      snap.MessageModel,
		ConsumeFromWhere:  snap.ConsumeFromWhere,
	}
	for _, ch := range snap.Channels {
		cc.ConnectionSet = append(cc.ConnectionSet, protocol.Connection{
			ClientID: ch.ClientID, ClientAddr: ch.Conn.RemoteAddr(), Language: ch.Language.String(), Version: ch.Version,
		})
	}
	body, err := json.Marshal(&cc)
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}
