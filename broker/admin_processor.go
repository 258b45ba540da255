package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// brokerVersionDesc is the version GET_BROKER_RUNTIME_INFO reports: we
// speak RocketMQ 4.9.8's protocol (remoting.ServerVersion).
const brokerVersionDesc = "V4_9_8"

// registerAdminProcessors routes the topic and broker admin codes to the
// admin pool.
func (b *Broker) registerAdminProcessors() {
	b.server.Handle(remoting.UpdateAndCreateTopic, b.pools.Admin, b.adminUpdateAndCreateTopic)
	b.server.Handle(remoting.DeleteTopicInBroker, b.pools.Admin, b.adminDeleteTopic)
	b.server.Handle(remoting.GetAllTopicConfig, b.pools.Admin, b.adminGetAllTopicConfig)
	b.server.Handle(remoting.GetTopicStatsInfo, b.pools.Admin, b.adminGetTopicStatsInfo)
	b.server.Handle(remoting.GetBrokerRuntimeInfo, b.pools.Admin, b.adminGetBrokerRuntimeInfo)
	b.server.Handle(remoting.GetBrokerHAStatus, b.pools.Admin, b.processGetHAStatus)
	b.server.Handle(remoting.GetBrokerConfig, b.pools.Admin, b.adminGetBrokerConfig)
	b.server.Handle(remoting.GetTopicConfig, b.pools.Admin, b.adminGetTopicConfig)
}

// adminDecode decodes a typed header; on failure it returns the
// SYSTEM_ERROR response naming the field, as Java's header decoding does.
func (b *Broker) adminDecode(c *remoting.Conn, req *remoting.Command, h any) *remoting.Command {
	if err := protocol.DecodeHeader(req.ExtFields, h); err != nil {
		b.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "code": req.Code, "reason": err}).Debug("bad admin request header")
		return respond(req, remoting.SystemError, err.Error())
	}
	return nil
}

// adminUpdateAndCreateTopic answers UPDATE_AND_CREATE_TOPIC: it validates
// the name and the numbers, refuses system topics, stores the topic and
// re-registers so the route appears at once.
func (b *Broker) adminUpdateAndCreateTopic(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.CreateTopicRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	tc := &protocol.TopicConfig{
		TopicName:       h.Topic,
		ReadQueueNums:   h.ReadQueueNums,
		WriteQueueNums:  h.WriteQueueNums,
		Perm:            h.Perm,
		TopicFilterType: protocol.TopicFilterType(h.TopicFilterType),
		TopicSysFlag:    h.TopicSysFlag,
		Order:           h.Order,
	}
	err := b.topics.Update(tc)
	switch {
	case err == nil:
		b.log.WithFields(logrus.Fields{"topic": h.Topic, "peer": c.RemoteAddr()}).Info("topic updated by admin")
		return respond(req, remoting.Success, ""), nil
	case errors.Is(err, ErrTopicInvalid), errors.Is(err, ErrTopicSystem), errors.Is(err, ErrTopicConfigInvalid):
		return respond(req, remoting.SystemError, err.Error()), nil
	default:
		// In memory but not on disk: say so, the admin may retry.
		return respond(req, remoting.SystemError, "topic updated but not persisted: "+err.Error()), nil
	}
}

// adminDeleteTopic answers DELETE_TOPIC_IN_BROKER. Deleting an unknown
// topic succeeds, as in RocketMQ. The topic's consume queues and consumer
// offsets go with it, so a topic created again under the same name starts at
// offset 0; its records stay in the commitlog until retention removes them.
func (b *Broker) adminDeleteTopic(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	if err := ValidateTopic(h.Topic); err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	existed, err := b.topics.Delete(h.Topic)
	if err != nil {
		if errors.Is(err, ErrTopicSystem) {
			return respond(req, remoting.SystemError, err.Error()), nil
		}
		return respond(req, remoting.SystemError, "topic deleted but not persisted: "+err.Error()), nil
	}
	if err := b.store.DeleteTopic(h.Topic); err != nil {
		return respond(req, remoting.SystemError, "topic config deleted but its consume queues were not: "+err.Error()), nil
	}
	b.consume.offsets.RemoveTopic(h.Topic)
	b.stats.removeTopic(h.Topic)
	b.log.WithFields(logrus.Fields{"topic": h.Topic, "existed": existed, "peer": c.RemoteAddr()}).Info("topic deleted by admin")
	return respond(req, remoting.Success, ""), nil
}

// adminGetAllTopicConfig answers GET_ALL_TOPIC_CONFIG with the whole table
// and its version.
func (b *Broker) adminGetAllTopicConfig(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := b.topics.Wrapper().Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// adminGetTopicConfig answers GET_TOPIC_CONFIG with one topic's config.
func (b *Broker) adminGetTopicConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	tc := b.topics.Get(h.Topic)
	if tc == nil {
		return respond(req, remoting.TopicNotExist, "No topic in this broker. topic: "+h.Topic), nil
	}
	body, err := json.Marshal(tc)
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// adminGetTopicStatsInfo answers GET_TOPIC_STATS_INFO: min and max offset
// and the newest message's store time of each write queue.
func (b *Broker) adminGetTopicStatsInfo(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.TopicRequestHeader
	if resp := b.adminDecode(c, req, &h); resp != nil {
		return resp, nil
	}
	tc := b.topics.Get(h.Topic)
	if tc == nil {
		return respond(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist", h.Topic)), nil
	}
	table := protocol.TopicStatsTable{OffsetTable: make(map[protocol.MessageQueue]protocol.TopicOffset, tc.WriteQueueNums)}
	for i := range tc.WriteQueueNums {
		off := protocol.TopicOffset{
			MinOffset: max(b.store.MinOffsetInQueue(h.Topic, i), 0),
			MaxOffset: max(b.store.MaxOffsetInQueue(h.Topic, i), 0),
		}
		if off.MaxOffset > 0 {
			off.LastUpdateTimestamp = max(b.store.MessageStoreTime(h.Topic, i, off.MaxOffset-1), 0)
		}
		table.OffsetTable[protocol.MessageQueue{Topic: h.Topic, BrokerName: b.cfg.BrokerName, QueueID: i}] = off
	}
	body, err := table.Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// adminGetBrokerRuntimeInfo answers GET_BROKER_RUNTIME_INFO with a KVTable
// of the figures we track, under RocketMQ's key names.
func (b *Broker) adminGetBrokerRuntimeInfo(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	s := b.store
	kv := map[string]string{
		"brokerVersionDesc":        brokerVersionDesc,
		"brokerVersion":            strconv.Itoa(int(remoting.ServerVersion)),
		"bootTimestamp":            strconv.FormatInt(b.bootTime.UnixMilli(), 10),
		"runtime":                  time.Since(b.bootTime).Round(time.Second).String(),
		"msgPutTotalTodayNow":      strconv.FormatInt(b.stats.put.nums.Load(), 10),
		"putMessageSizeTotal":      strconv.FormatInt(b.stats.put.size.Load(), 10),
		"msgGetTotalTodayNow":      strconv.FormatInt(b.stats.get.nums.Load(), 10),
		"commitLogMinOffset":       strconv.FormatInt(s.CommitLogMinOffset(), 10),
		"commitLogMaxOffset":       strconv.FormatInt(s.CommitLogMaxOffset(), 10),
		"dispatchBehindBytes":      strconv.FormatInt(s.DispatchBehindBytes(), 10),
		"sendThreadPoolQueueSize":  strconv.Itoa(b.pools.Send.Queued()),
		"pullThreadPoolQueueSize":  strconv.Itoa(b.pools.Pull.Queued()),
		"queryThreadPoolQueueSize": strconv.Itoa(b.pools.Query.Queued()),
		"brokerRole":               b.roleName(),
		"flushDiskType":            b.cfg.FlushDiskType,
		"diskFull":                 strconv.FormatBool(s.DiskFull()),
		"topicCount":               strconv.Itoa(len(b.topics.Names())),
	}
	b.statsRuntimeFields(kv)
	b.haRuntimeFields(kv)
	body, err := (&protocol.KVTable{Table: kv}).Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// adminGetBrokerConfig answers GET_BROKER_CONFIG with the effective
// configuration as a properties text, and its version in the header.
func (b *Broker) adminGetBrokerConfig(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	dv, err := json.Marshal(protocol.DataVersion{Timestamp: b.bootTime.UnixMilli()})
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.SetExt("version", string(dv))
	resp.Body = []byte(conf.Format(b.cfg))
	return resp, nil
}
