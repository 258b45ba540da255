package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// adminTimeout bounds one admin request.
const adminTimeout = 5 * time.Second

// Admin manages topics, groups, offsets and configuration of a cluster, and
// looks messages up. It is what the mqadmin command is built on. Create it
// with NewAdmin and Close it when done.
type Admin struct {
	c *core
}

// NewAdmin returns a running admin client.
func NewAdmin(opts ...Option) (*Admin, error) {
	o, err := buildOptions("TOOLS_CONSUMER", opts)
	if err != nil {
		return nil, err
	}
	a := &Admin{c: newCore(o, "admin")}
	if err := a.c.start(); err != nil {
		return nil, err
	}
	return a, nil
}

// Close stops the admin client and closes its connections. Safe to call twice.
func (a *Admin) Close() error {
	a.c.shutdown()
	return nil
}

func (a *Admin) call(ctx context.Context, addr string, code remoting.RequestCode, h any, body []byte) (*remoting.Command, error) {
	var ext map[string]string
	if h != nil {
		ext = protocol.EncodeHeader(h, nil)
	}
	return a.c.invokeOK(ctx, addr, remoting.NewRequest(code, ext, body), adminTimeout)
}

// callNameServers sends the request to every nameserver; the first error is
// returned after all were tried.
func (a *Admin) callNameServers(ctx context.Context, code remoting.RequestCode, h any, body []byte) error {
	var first error
	for _, ns := range a.c.o.nameServers {
		if _, err := a.call(ctx, ns, code, h, body); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ClusterInfo returns every broker group by name and the groups of every cluster.
func (a *Admin) ClusterInfo(ctx context.Context) (*protocol.ClusterInfo, error) {
	resp, _, err := a.c.invokeNameServer(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return nil, brokerError("nameserver", resp)
	}
	return protocol.DecodeClusterInfo(resp.Body)
}

// masters returns the master addresses of cluster ("" for every cluster).
func (a *Admin) masters(ctx context.Context, cluster string) ([]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	if cluster == "" {
		for n := range ci.BrokerAddrTable {
			names = append(names, n)
		}
	} else {
		names = ci.ClusterAddrTable[cluster]
		if names == nil {
			return nil, fmt.Errorf("%w: cluster %s", ErrBrokerNotFound, cluster)
		}
	}
	var out []string
	for _, n := range names {
		if bd := ci.BrokerAddrTable[n]; bd != nil && bd.MasterAddr() != "" {
			out = append(out, bd.MasterAddr())
		}
	}
	sort.Strings(out)
	return out, nil
}

// TopicConfig describes a topic to create or update.
type TopicConfig struct {
	Topic          string
	ReadQueueNums  int32 // default 8
	WriteQueueNums int32 // default 8
	Perm           int32 // default read|write
	Order          bool
	// BrokerAddr creates the topic on one broker only; else ClusterName
	// selects every master of a cluster; else every master of every cluster.
	BrokerAddr  string
	ClusterName string
}

// CreateTopic creates or updates a topic (UPDATE_AND_CREATE_TOPIC); the
// brokers then register it with the nameservers.
func (a *Admin) CreateTopic(ctx context.Context, tc TopicConfig) error {
	if err := checkTopic(tc.Topic); err != nil {
		return err
	}
	h := &protocol.CreateTopicRequestHeader{Topic: a.c.wrapName(tc.Topic), DefaultTopic: "TBW102", ReadQueueNums: tc.ReadQueueNums,
		WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, TopicFilterType: string(protocol.SingleTag), Order: tc.Order}
	if h.ReadQueueNums <= 0 {
		h.ReadQueueNums = 8
	}
	if h.WriteQueueNums <= 0 {
		h.WriteQueueNums = 8
	}
	if h.Perm == 0 {
		h.Perm = protocol.DefaultTopicPerm
	}
	addrs := []string{tc.BrokerAddr}
	if tc.BrokerAddr == "" {
		var err error
		if addrs, err = a.masters(ctx, tc.ClusterName); err != nil {
			return err
		}
	}
	for _, addr := range addrs {
		if _, err := a.call(ctx, addr, remoting.UpdateAndCreateTopic, h, nil); err != nil {
			return err
		}
	}
	return nil
}

// DeleteTopic deletes a topic from the masters of cluster ("" = every
// master serving it) and from every nameserver.
func (a *Admin) DeleteTopic(ctx context.Context, topic, cluster string) error {
	wrapped := a.c.wrapName(topic)
	addrs, err := a.masters(ctx, cluster)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if _, err := a.call(ctx, addr, remoting.DeleteTopicInBroker, &protocol.TopicRequestHeader{Topic: wrapped}, nil); err != nil {
			return err
		}
	}
	a.c.forgetRoute(wrapped)
	return a.callNameServers(ctx, remoting.DeleteTopicInNamesrv, &protocol.DeleteTopicFromNamesrvRequestHeader{Topic: wrapped, ClusterName: cluster}, nil)
}

// TopicList returns every topic the nameservers know.
func (a *Admin) TopicList(ctx context.Context) ([]string, error) {
	resp, _, err := a.c.invokeNameServer(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return nil, brokerError("nameserver", resp)
	}
	tl, err := protocol.DecodeTopicList(resp.Body)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(tl.Topics))
	for _, t := range tl.Topics {
		out = append(out, a.c.unwrapName(t))
	}
	sort.Strings(out)
	return out, nil
}

// TopicRoute returns the route of topic, fresh from the nameservers.
func (a *Admin) TopicRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	tr, err := a.c.updateRoute(ctx, a.c.wrapName(topic))
	if err != nil {
		return nil, err
	}
	return tr.data, nil
}

// BrokerRuntimeStats returns GET_BROKER_RUNTIME_INFO of the broker at addr.
func (a *Admin) BrokerRuntimeStats(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.call(ctx, addr, remoting.GetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	kv, err := protocol.DecodeKVTable(resp.Body)
	if err != nil {
		return nil, err
	}
	return kv.Table, nil
}

// BrokerHAStatus returns the replication state of the broker at addr
// (GET_BROKER_HA_STATUS, RocketMQ 5's code 907): a master's slaves with
// their acks and lag, or a slave's master and how far it got. A RocketMQ 4
// broker answers REQUEST_CODE_NOT_SUPPORTED, as a *BrokerError.
func (a *Admin) BrokerHAStatus(ctx context.Context, addr string) (*protocol.HARuntimeInfo, error) {
	resp, err := a.call(ctx, addr, remoting.GetBrokerHAStatus, nil, nil)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeHARuntimeInfo(resp.Body)
}

// TopicStats returns every queue's min and max offsets, from every broker
// of topic's route.
func (a *Admin) TopicStats(ctx context.Context, topic string) (map[MessageQueue]protocol.TopicOffset, error) {
	tr, err := a.c.updateRoute(ctx, a.c.wrapName(topic))
	if err != nil {
		return nil, err
	}
	out := map[MessageQueue]protocol.TopicOffset{}
	for _, bd := range tr.data.BrokerDatas {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		resp, err := a.call(ctx, addr, remoting.GetTopicStatsInfo, &protocol.TopicRequestHeader{Topic: a.c.wrapName(topic)}, nil)
		if err != nil {
			return nil, err
		}
		ts, err := protocol.DecodeTopicStatsTable(resp.Body)
		if err != nil {
			return nil, err
		}
		for mq, off := range ts.OffsetTable {
			mq.Topic = a.c.unwrapName(mq.Topic)
			out[mq] = off
		}
	}
	return out, nil
}

// QueueProgress is one queue's consumption by a group.
type QueueProgress struct {
	Queue          MessageQueue
	BrokerOffset   int64 // next offset the broker will write
	ConsumerOffset int64 // next offset the group will consume
	Lag            int64 // BrokerOffset - ConsumerOffset
	LastTimestamp  int64 // store time of the last consumed message (ms), when known
}

// ConsumerProgress returns per-queue offsets and lag of group on topic
// ("" = every topic it consumes), sorted by queue.
func (a *Admin) ConsumerProgress(ctx context.Context, group, topic string) ([]QueueProgress, error) {
	addrs, err := a.masters(ctx, "")
	if err != nil {
		return nil, err
	}
	h := &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: a.c.wrapName(group)}
	if topic != "" {
		h.Topic = a.c.wrapName(topic)
	}
	var out []QueueProgress
	for _, addr := range addrs {
		resp, err := a.call(ctx, addr, remoting.GetConsumeStats, h, nil)
		if err != nil {
			if responseCode(err) >= 0 {
				continue // this broker has nothing of the group
			}
			return nil, err
		}
		cs, err := protocol.DecodeConsumeStats(resp.Body)
		if err != nil {
			return nil, err
		}
		for mq, w := range cs.OffsetTable {
			mq.Topic = a.c.unwrapName(mq.Topic)
			out = append(out, QueueProgress{Queue: mq, BrokerOffset: w.BrokerOffset, ConsumerOffset: w.ConsumerOffset,
				Lag: max(0, w.BrokerOffset-w.ConsumerOffset), LastTimestamp: w.LastTimestamp})
		}
	}
	sort.Slice(out, func(i, j int) bool { return queueLess(out[i].Queue, out[j].Queue) })
	return out, nil
}

// ConsumerConnections returns the clients of group connected to the broker
// serving its retry topic (or the first master that knows the group).
func (a *Admin) ConsumerConnections(ctx context.Context, group string) (*protocol.ConsumerConnection, error) {
	addrs, err := a.masters(ctx, "")
	if err != nil {
		return nil, err
	}
	var lastErr error = ErrBrokerNotFound
	for _, addr := range addrs {
		resp, err := a.call(ctx, addr, remoting.GetConsumerConnectionList, &protocol.GroupRequestHeader{ConsumerGroup: a.c.wrapName(group)}, nil)
		if err != nil {
			lastErr = err
			continue
		}
		var cc protocol.ConsumerConnection
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			return nil, fmt.Errorf("%w: consumer connection: %w", protocol.ErrBadBody, err)
		}
		return &cc, nil
	}
	return nil, lastErr
}

// ResetOffsetByTime moves group's offsets on topic to the first message
// stored at or after ts, on every master of the topic; online consumers are
// told by the broker (RESET_CONSUMER_CLIENT_OFFSET). It returns the new
// offsets. A broker without INVOKE_BROKER_TO_RESET_OFFSET gets the offsets
// written directly (mqadmin's resetOffsetByTimeOld): stop the group's
// consumers first then, or they overwrite them with their own.
func (a *Admin) ResetOffsetByTime(ctx context.Context, group, topic string, ts time.Time, force bool) (map[MessageQueue]int64, error) {
	return a.resetOffset(ctx, group, topic, ts.UnixMilli(), force)
}

// SkipAccumulated moves group's offsets on topic to the end of every queue
// (mqadmin skipAccumulatedMessage): the broker takes timestamp -1 as each
// queue's max offset, so no clock is compared and nothing stored before
// the call is left unconsumed. Without force an offset only moves back, so
// a skip without force changes nothing; mqadmin's default is force.
func (a *Admin) SkipAccumulated(ctx context.Context, group, topic string, force bool) (map[MessageQueue]int64, error) {
	return a.resetOffset(ctx, group, topic, -1, force)
}

// resetOffset sends INVOKE_BROKER_TO_RESET_OFFSET for tsMillis (-1: the
// end of each queue) to every master of topic.
func (a *Admin) resetOffset(ctx context.Context, group, topic string, tsMillis int64, force bool) (map[MessageQueue]int64, error) {
	wrapped := a.c.wrapName(topic)
	tr, err := a.c.updateRoute(ctx, wrapped)
	if err != nil {
		return nil, err
	}
	out := map[MessageQueue]int64{}
	h := &protocol.ResetOffsetRequestHeader{Topic: wrapped, Group: a.c.wrapName(group), Timestamp: tsMillis, IsForce: force}
	for _, bd := range tr.data.BrokerDatas {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		resp, err := a.call(ctx, addr, remoting.InvokeBrokerToResetOffset, h, nil)
		if responseCode(err) == remoting.RequestCodeNotSupported {
			if err := a.resetOffsetDirect(ctx, tr, bd.BrokerName, addr, h, out); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(resp.Body) == 0 {
			continue
		}
		table, err := decodeResetOffsetBody(resp.Body)
		if err != nil {
			return nil, err
		}
		for mq, off := range table {
			mq.Topic = a.c.unwrapName(mq.Topic)
			out[mq] = off
		}
	}
	return out, nil
}

// resetOffsetDirect searches each of brokerName's queues of the topic for
// the timestamp (-1: asks for the queue's max offset) and stores the result
// as the group's offset.
func (a *Admin) resetOffsetDirect(ctx context.Context, tr *topicRoute, brokerName, addr string, h *protocol.ResetOffsetRequestHeader, out map[MessageQueue]int64) error {
	for _, mq := range tr.subscribe {
		if mq.BrokerName != brokerName {
			continue
		}
		var resp *remoting.Command
		var err error
		if h.Timestamp == -1 {
			resp, err = a.call(ctx, addr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: mq.Topic, QueueID: mq.QueueID, BrokerName: brokerName}, nil)
		} else {
			resp, err = a.call(ctx, addr, remoting.SearchOffsetByTimestamp,
				&protocol.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: mq.QueueID, Timestamp: h.Timestamp, BrokerName: brokerName}, nil)
		}
		if err != nil {
			return err
		}
		var oh protocol.OffsetResponseHeader
		if err := protocol.DecodeHeader(resp.ExtFields, &oh); err != nil {
			return err
		}
		uh := &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: h.Group, Topic: mq.Topic, QueueID: mq.QueueID,
			CommitOffset: oh.Offset, BrokerName: brokerName}
		if _, err := a.call(ctx, addr, remoting.UpdateConsumerOffset, uh, nil); err != nil {
			return err
		}
		mq.Topic = a.c.unwrapName(mq.Topic)
		out[mq] = oh.Offset
	}
	return nil
}

// decodeMessages decodes stored records and uncompresses their bodies.
func (a *Admin) decodeMessages(body []byte) ([]*MessageExt, error) {
	msgs, err := message.DecodeRecords(body)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.SysFlag&message.FlagCompressed != 0 {
			if plain, err := message.UncompressBody(m.SysFlag, m.Body); err == nil {
				m.Body = plain
				m.SysFlag &^= message.FlagCompressed
			}
		}
		m.Topic = a.c.unwrapName(m.Topic)
	}
	return msgs, nil
}

// ViewMessage returns the message with an offset message id (as
// SendResult.OffsetMsgID), read from the broker the id names.
func (a *Admin) ViewMessage(ctx context.Context, offsetMsgID string) (*MessageExt, error) {
	host, off, err := message.ParseOffsetMsgID(offsetMsgID)
	if err != nil {
		return nil, err
	}
	resp, err := a.call(ctx, host.String(), remoting.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: off}, nil)
	if err != nil {
		return nil, err
	}
	msgs, err := a.decodeMessages(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no message at %s", protocol.ErrBadBody, offsetMsgID)
	}
	return msgs[0], nil
}

// queryMessage runs QUERY_MESSAGE on every master of topic.
func (a *Admin) queryMessage(ctx context.Context, topic, key string, unique bool, maxNum int32, begin, end time.Time) ([]*MessageExt, error) {
	wrapped := a.c.wrapName(topic)
	tr, err := a.c.updateRoute(ctx, wrapped)
	if err != nil {
		return nil, err
	}
	h := &protocol.QueryMessageRequestHeader{Topic: wrapped, Key: key, MaxNum: maxNum, BeginTimestamp: begin.UnixMilli(), EndTimestamp: end.UnixMilli()}
	var out []*MessageExt
	for _, bd := range tr.data.BrokerDatas {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		req := remoting.NewRequest(remoting.QueryMessage, protocol.EncodeHeader(h, nil), nil)
		if unique {
			req.SetExt(uniqueKeyQuery, "true")
		}
		resp, err := a.c.invoke(ctx, addr, req, adminTimeout)
		if err != nil {
			return nil, err
		}
		switch resp.ResponseCode() {
		case remoting.QueryNotFound:
			continue
		case remoting.Success:
		default:
			return nil, brokerError(addr, resp)
		}
		msgs, err := a.decodeMessages(resp.Body)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Topic != topic {
				continue
			}
			if unique && m.UniqKey() == key {
				out = append(out, m)
				continue
			}
			if !unique && containsKey(m.Keys(), key) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func containsKey(keys, key string) bool {
	for _, k := range strings.Split(keys, message.KeySeparator) {
		if k == key {
			return true
		}
	}
	return false
}

// QueryMessageByKey returns up to maxNum messages of topic whose KEYS hold
// key, stored between begin and end.
func (a *Admin) QueryMessageByKey(ctx context.Context, topic, key string, maxNum int32, begin, end time.Time) ([]*MessageExt, error) {
	return a.queryMessage(ctx, topic, key, false, maxNum, begin, end)
}

// QueryMessageByUniqKey returns the message of topic with the producer's
// unique id (SendResult.MsgID); a message retried by consumers can be
// stored more than once, so it may return several.
func (a *Admin) QueryMessageByUniqKey(ctx context.Context, topic, uniqKey string) ([]*MessageExt, error) {
	return a.queryMessage(ctx, topic, uniqKey, true, 32, time.Unix(0, 0), time.Now().Add(time.Hour))
}

// QueryMessageByQueueOffset returns the message at offset in mq.
func (a *Admin) QueryMessageByQueueOffset(ctx context.Context, mq MessageQueue, offset int64) (*MessageExt, error) {
	wrapped := a.c.wrapName(mq.Topic)
	addr, err := a.c.findMaster(ctx, wrapped, mq.BrokerName)
	if err != nil {
		return nil, err
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: "TOOLS_CONSUMER", Topic: wrapped, QueueID: mq.QueueID, QueueOffset: offset,
		MaxMsgNums: 1, SysFlag: protocol.PullFlagSubscription, Subscription: protocol.SubAll, ExpressionType: protocol.ExpressionTag,
		BrokerName: mq.BrokerName}
	resp, err := a.c.invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(h, nil), nil), adminTimeout)
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return nil, brokerError(addr, resp)
	}
	msgs, err := a.decodeMessages(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no message at %d", protocol.ErrBadBody, offset)
	}
	return msgs[0], nil
}

// SubscriptionGroups returns the subscription groups of the broker at addr.
func (a *Admin) SubscriptionGroups(ctx context.Context, addr string) (*protocol.SubscriptionGroupWrapper, error) {
	resp, err := a.call(ctx, addr, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	var w protocol.SubscriptionGroupWrapper
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return nil, fmt.Errorf("%w: subscription groups: %w", protocol.ErrBadBody, err)
	}
	return &w, nil
}

// CreateSubscriptionGroup creates or updates a subscription group on the
// broker at addr.
func (a *Admin) CreateSubscriptionGroup(ctx context.Context, addr string, cfg *protocol.SubscriptionGroupConfig) error {
	c := *cfg
	c.GroupName = a.c.wrapName(c.GroupName)
	body, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	_, err = a.call(ctx, addr, remoting.UpdateAndCreateSubscription, nil, body)
	return err
}

// DeleteSubscriptionGroup deletes a subscription group (and, with
// removeOffset, its offsets) on the broker at addr.
func (a *Admin) DeleteSubscriptionGroup(ctx context.Context, addr, group string, removeOffset bool) error {
	_, err := a.call(ctx, addr, remoting.DeleteSubscriptionGroup,
		&protocol.DeleteSubscriptionGroupRequestHeader{GroupName: a.c.wrapName(group), RemoveOffset: removeOffset}, nil)
	return err
}

// PutKVConfig stores a KV config entry on every nameserver.
func (a *Admin) PutKVConfig(ctx context.Context, namespace, key, value string) error {
	return a.callNameServers(ctx, remoting.PutKVConfig, &protocol.PutKVConfigRequestHeader{Namespace: namespace, Key: key, Value: value}, nil)
}

// GetKVConfig reads a KV config entry from the nameservers.
func (a *Admin) GetKVConfig(ctx context.Context, namespace, key string) (string, error) {
	resp, addr, err := a.c.invokeNameServer(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetKVConfig, protocol.EncodeHeader(&protocol.GetKVConfigRequestHeader{Namespace: namespace, Key: key}, nil), nil)
	})
	if err != nil {
		return "", err
	}
	if resp.ResponseCode() != remoting.Success {
		return "", brokerError(addr, resp)
	}
	var h protocol.GetKVConfigResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return "", err
	}
	return h.Value, nil
}

// DeleteKVConfig deletes a KV config entry on every nameserver.
func (a *Admin) DeleteKVConfig(ctx context.Context, namespace, key string) error {
	return a.callNameServers(ctx, remoting.DeleteKVConfig, &protocol.DeleteKVConfigRequestHeader{Namespace: namespace, Key: key}, nil)
}

// KVList returns every KV config entry of namespace.
func (a *Admin) KVList(ctx context.Context, namespace string) (map[string]string, error) {
	resp, addr, err := a.c.invokeNameServer(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetKVListByNamespace, protocol.EncodeHeader(&protocol.GetKVListByNamespaceRequestHeader{Namespace: namespace}, nil), nil)
	})
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return nil, brokerError(addr, resp)
	}
	kv, err := protocol.DecodeKVTable(resp.Body)
	if err != nil {
		return nil, err
	}
	return kv.Table, nil
}

// parseProperties reads Java properties text as brokers and nameservers
// send their configuration ("key=value" lines).
func parseProperties(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

func formatProperties(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + "\n")
	}
	return []byte(b.String())
}

// BrokerConfig returns the configuration of the broker at addr.
func (a *Admin) BrokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.call(ctx, addr, remoting.GetBrokerConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	return parseProperties(resp.Body), nil
}

// UpdateBrokerConfig changes configuration keys of the broker at addr.
func (a *Admin) UpdateBrokerConfig(ctx context.Context, addr string, kv map[string]string) error {
	_, err := a.call(ctx, addr, remoting.UpdateBrokerConfig, nil, formatProperties(kv))
	return err
}

// NameServerConfig returns the configuration of the nameserver at addr.
func (a *Admin) NameServerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.call(ctx, addr, remoting.GetNamesrvConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	return parseProperties(resp.Body), nil
}

// UpdateNameServerConfig changes configuration keys of every nameserver.
func (a *Admin) UpdateNameServerConfig(ctx context.Context, kv map[string]string) error {
	return a.callNameServers(ctx, remoting.UpdateNamesrvConfig, nil, formatProperties(kv))
}

// MaxOffset returns the next offset the broker will write in mq.
func (a *Admin) MaxOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	wrapped := a.c.wrapName(mq.Topic)
	addr, err := a.c.findMaster(ctx, wrapped, mq.BrokerName)
	if err != nil {
		return -1, err
	}
	resp, err := a.call(ctx, addr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: wrapped, QueueID: mq.QueueID, BrokerName: mq.BrokerName}, nil)
	if err != nil {
		return -1, err
	}
	var h protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return -1, err
	}
	return h.Offset, nil
}
