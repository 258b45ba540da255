package client

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// This file holds a small in-memory broker speaking enough of the protocol
// for the SDK's tests to run without the real broker: sends (single, batch,
// half), pulls with tag filtering and short long-polling, offsets,
// heartbeats with member-change notifications, queue locks, send-back and
// END_TRANSACTION. It registers with a real nameserver.

func testLogger() logrus.FieldLogger {
	l, _ := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel) // run every log statement, for the race detector
	return l
}

// MustStartNameServer starts our nameserver on a free loopback port.
func MustStartNameServer(t testing.TB) *nameserver.NameServer {
	t.Helper()
	cfg := conf.DefaultNamesrvConfig()
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	cfg.ServerSelectorThreads = 1
	cfg.ServerWorkerThreads = 4
	ns, err := nameserver.New(cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, ns.Shutdown(ctx))
	})
	return ns
}

type fakeQueueKey struct {
	topic string
	id    int32
}

type fakeMember struct {
	conn *remoting.Conn
	subs map[string]protocol.SubscriptionData
}

type fakeHalf struct {
	ext *message.MessageExt
}

type fakeBroker struct {
	t       testing.TB
	name    string
	id      int64 // brokerId: 0 a master, else a slave of the master of name
	nsAddrs []string
	srv     *remoting.Server
	rc      *remoting.Client
	host    netip.AddrPort

	mu         sync.Mutex
	topics     map[string]int32 // topic -> queue count
	queues     map[fakeQueueKey][]*message.MessageExt
	byOffset   map[int64]*message.MessageExt
	nextPhys   int64
	offsets    map[string]int64 // group|topic|qid -> offset
	groups     map[string]map[string]*fakeMember
	locks      map[MessageQueue]fakeLock
	halves     map[int64]*message.MessageExt
	producers  map[string]*remoting.Conn // group -> a producer connection
	sendHook   func(req *remoting.Command) *remoting.Command
	hooks      map[remoting.RequestCode]func(req *remoting.Command) *remoting.Command
	noSendBack bool // CONSUMER_SEND_MSG_BACK answers SYSTEM_ERROR
	// version changes with every topic change: a nameserver ignores the
	// topics of a registration whose data version it has seen.
	version protocol.DataVersion
	regMu   sync.Mutex // serialises registrations, so the newest lands last
	sends   int
	endTx   []protocol.EndTransactionRequestHeader
	// pullsIn and pullsSeen count, per consumer group, the pulls being
	// answered (most of them parked) and all pulls received.
	pullsIn   map[string]int
	pullsSeen map[string]int
	// suggest is the suggestWhichBrokerId of every pull answer.
	suggest int64
	// commitFlags counts, per consumer group, pulls carrying the
	// commit-offset flag.
	commitFlags map[string]int
}

type fakeLock struct {
	client string
	until  time.Time
}

// MustStartFakeBroker starts a fake broker named name, registers it with the
// nameservers and stops it when the test ends.
func MustStartFakeBroker(t testing.TB, name string, nsAddrs ...string) *fakeBroker {
	t.Helper()
	return MustStartFakeBrokerID(t, name, protocol.MasterID, nsAddrs...)
}

// MustStartFakeBrokerID is MustStartFakeBroker registering as brokerId id:
// a slave of name's master when id > 0. Its messages are its own: a test
// that wants a slave to hold its master's puts them into both.
func MustStartFakeBrokerID(t testing.TB, name string, id int64, nsAddrs ...string) *fakeBroker {
	t.Helper()
	fb := &fakeBroker{
		t: t, name: name, id: id, nsAddrs: nsAddrs, commitFlags: map[string]int{},
		topics:    map[string]int32{"TBW102": 8},
		queues:    map[fakeQueueKey][]*message.MessageExt{},
		byOffset:  map[int64]*message.MessageExt{},
		offsets:   map[string]int64{},
		groups:    map[string]map[string]*fakeMember{},
		locks:     map[MessageQueue]fakeLock{},
		halves:    map[int64]*message.MessageExt{},
		producers: map[string]*remoting.Conn{},
		pullsIn:   map[string]int{},
		pullsSeen: map[string]int{},
		version:   protocol.NewDataVersion(),
	}
	fb.srv = remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", Logger: testLogger(), NumEventLoops: 1})
	pool := fb.srv.NewPool("all", 32, 1024)
	handlers := map[remoting.RequestCode]remoting.ProcessorFunc{
		remoting.SendMessage: fb.send, remoting.SendMessageV2: fb.send, remoting.SendBatchMessage: fb.send,
		remoting.HeartBeat: fb.heartbeat, remoting.PullMessage: fb.pull,
		remoting.QueryConsumerOffset: fb.queryOffset, remoting.UpdateConsumerOffset: fb.updateOffset,
		remoting.GetMaxOffset: fb.maxOffset, remoting.GetMinOffset: fb.minOffset,
		remoting.SearchOffsetByTimestamp: fb.searchOffset,
		remoting.GetConsumerListByGroup:  fb.consumerList, remoting.LockBatchMQ: fb.lock, remoting.UnlockBatchMQ: fb.unlock,
		remoting.ConsumerSendMsgBack: fb.sendBack, remoting.EndTransaction: fb.endTransaction,
	}
	for code, h := range handlers {
		fb.srv.Handle(code, pool, fb.hooked(code, h))
	}
	fb.srv.OnConnClose(fb.connClosed)
	require.NoError(t, fb.srv.Start())
	fb.host = netip.MustParseAddrPort(fb.srv.Addr())
	fb.rc = remoting.NewClient(remoting.ClientConfig{Logger: testLogger()})
	fb.register()
	t.Cleanup(fb.stop)
	return fb
}

func (fb *fakeBroker) stop() {
	_ = fb.rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = fb.srv.Shutdown(ctx)
}

func (fb *fakeBroker) Addr() string { return fb.srv.Addr() }

// AddTopic creates a topic with n queues and re-registers.
func (fb *fakeBroker) AddTopic(topic string, n int32) {
	fb.mu.Lock()
	fb.topics[topic] = n
	fb.version = fb.version.Next()
	fb.mu.Unlock()
	fb.register()
}

func (fb *fakeBroker) register() {
	fb.regMu.Lock()
	defer fb.regMu.Unlock()
	fb.mu.Lock()
	body := &protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]*protocol.TopicConfig{}, DataVersion: fb.version,
	}}
	for name, n := range fb.topics {
		tc := protocol.NewTopicConfig(name)
		tc.ReadQueueNums, tc.WriteQueueNums = n, n
		body.TopicConfigSerializeWrapper.TopicConfigTable[name] = tc
	}
	fb.mu.Unlock()
	enc, err := body.Encode(false)
	require.NoError(fb.t, err)
	h := &protocol.RegisterBrokerRequestHeader{BrokerName: fb.name, BrokerAddr: fb.Addr(), ClusterName: "TestCluster",
		HaServerAddr: fb.Addr(), BrokerID: fb.id, BodyCrc32: protocol.BodyCRC32(enc)}
	for _, ns := range fb.nsAddrs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := fb.rc.InvokeSync(ctx, ns, remoting.NewRequest(remoting.RegisterBroker, protocol.EncodeHeader(h, nil), enc))
		cancel()
		require.NoError(fb.t, err)
		require.Equal(fb.t, remoting.Success, resp.ResponseCode(), resp.Remark)
	}
}

// unregister tells the nameservers this broker left (UNREGISTER_BROKER), as
// a broker shutting down does; register brings it back.
func (fb *fakeBroker) unregister() {
	h := &protocol.UnRegisterBrokerRequestHeader{BrokerName: fb.name, BrokerAddr: fb.Addr(), ClusterName: "TestCluster", BrokerID: fb.id}
	for _, ns := range fb.nsAddrs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := fb.rc.InvokeSync(ctx, ns, remoting.NewRequest(remoting.UnregisterBroker, protocol.EncodeHeader(h, nil), nil))
		cancel()
		require.NoError(fb.t, err)
		require.Equal(fb.t, remoting.Success, resp.ResponseCode(), resp.Remark)
	}
}

// setSuggest makes pull answers suggest brokerId id for the next pull.
func (fb *fakeBroker) setSuggest(id int64) {
	fb.mu.Lock()
	fb.suggest = id
	fb.mu.Unlock()
}

// commitFlagged returns how many of group's pulls carried the
// commit-offset flag.
func (fb *fakeBroker) commitFlagged(group string) int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.commitFlags[group]
}

func resp(req *remoting.Command, code remoting.ResponseCode, remark string) *remoting.Command {
	return remoting.NewResponse(req, code, remark)
}

// store appends m to its queue; the caller holds fb.mu.
func (fb *fakeBroker) storeLocked(m *message.MessageExt) {
	k := fakeQueueKey{m.Topic, m.QueueID}
	m.QueueOffset = int64(len(fb.queues[k]))
	m.CommitLogOffset = fb.nextPhys
	m.StoreHost = fb.host
	m.StoreTimestamp = time.Now().UnixMilli()
	rec, err := message.EncodeRecord(nil, m)
	require.NoError(fb.t, err)
	fb.nextPhys += int64(len(rec))
	m.StoreSize = int32(len(rec))
	fb.queues[k] = append(fb.queues[k], m)
	fb.byOffset[m.CommitLogOffset] = m
}

func (fb *fakeBroker) send(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	fb.mu.Lock()
	fb.sends++
	hook := fb.sendHook
	fb.mu.Unlock()
	if hook != nil {
		if r := hook(req); r != nil {
			return r, nil
		}
	}
	var h protocol.SendMessageRequestHeader
	if req.RequestCode() == remoting.SendMessage {
		if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
			return nil, err
		}
	} else {
		var v2 protocol.SendMessageRequestHeaderV2
		if err := protocol.DecodeHeader(req.ExtFields, &v2); err != nil {
			return nil, err
		}
		h = v2.ToV1()
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if _, ok := fb.topics[h.Topic]; !ok {
		if strings.HasPrefix(h.Topic, retryPrefix) {
			fb.topics[h.Topic] = 1
		} else {
			return resp(req, remoting.TopicNotExist, "topic "+h.Topic+" not exist"), nil
		}
	}
	born := netip.MustParseAddrPort(c.RemoteAddr())
	var msgs []*message.MessageExt
	if h.Batch {
		plain, err := message.UnmarshalBatch(h.Topic, req.Body)
		if err != nil {
			return resp(req, remoting.MessageIllegal, err.Error()), nil
		}
		for _, p := range plain {
			msgs = append(msgs, &message.MessageExt{Message: *p})
		}
	} else {
		msgs = []*message.MessageExt{{Message: message.Message{Topic: h.Topic, Flag: h.Flag,
			Properties: message.UnmarshalProperties([]byte(h.Properties)), Body: append([]byte(nil), req.Body...)}}}
	}
	var ids []string
	var first int64 = -1
	for _, m := range msgs {
		m.QueueID = h.QueueID
		m.SysFlag = h.SysFlag
		m.BornTimestamp = h.BornTimestamp
		m.BornHost = born
		m.ReconsumeTimes = h.ReconsumeTimes
		if message.TransactionType(h.SysFlag) == message.TransactionPreparedType {
			m.CommitLogOffset = fb.nextPhys
			fb.nextPhys += 100
			m.StoreHost = fb.host
			fb.halves[m.CommitLogOffset] = m
			fb.producers[h.ProducerGroup] = c
		} else {
			fb.storeLocked(m)
		}
		if first < 0 {
			first = m.QueueOffset
		}
		ids = append(ids, m.OffsetMsgID())
	}
	r := resp(req, remoting.Success, "")
	r.ExtFields = protocol.EncodeHeader(&protocol.SendMessageResponseHeader{MsgID: strings.Join(ids, ","), QueueID: h.QueueID,
		QueueOffset: first, MsgRegion: "DefaultRegion", TraceOn: "true"}, r.ExtFields)
	return r, nil
}

func (fb *fakeBroker) heartbeat(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	hb, err := protocol.DecodeHeartbeatData(req.Body)
	if err != nil {
		return nil, err
	}
	var notify []*remoting.Conn
	var notifyGroups []string
	created := false
	fb.mu.Lock()
	for _, p := range hb.ProducerDataSet {
		fb.producers[p.GroupName] = c
	}
	for _, cd := range hb.ConsumerDataSet {
		g := fb.groups[cd.GroupName]
		if g == nil {
			g = map[string]*fakeMember{}
			fb.groups[cd.GroupName] = g
		}
		_, known := g[hb.ClientID]
		subs := map[string]protocol.SubscriptionData{}
		for _, s := range cd.SubscriptionDataSet {
			subs[s.Topic] = s
			if _, ok := fb.topics[s.Topic]; !ok && strings.HasPrefix(s.Topic, retryPrefix) {
				fb.topics[s.Topic] = 1
				fb.version = fb.version.Next()
				created = true
			}
		}
		g[hb.ClientID] = &fakeMember{conn: c, subs: subs}
		if !known {
			for _, m := range g {
				notify = append(notify, m.conn)
				notifyGroups = append(notifyGroups, cd.GroupName)
			}
		}
	}
	fb.mu.Unlock()
	if created {
		fb.register() // as a broker does after creating a retry topic
	}
	fb.notify(notify, notifyGroups)
	return resp(req, remoting.Success, ""), nil
}

func (fb *fakeBroker) notify(conns []*remoting.Conn, groups []string) {
	for i, c := range conns {
		_ = c.InvokeOneway(remoting.NewRequest(remoting.NotifyConsumerIdsChanged,
			protocol.EncodeHeader(&protocol.GroupRequestHeader{ConsumerGroup: groups[i]}, nil), nil))
	}
}

func (fb *fakeBroker) connClosed(c *remoting.Conn) {
	var notify []*remoting.Conn
	var groups []string
	fb.mu.Lock()
	for name, g := range fb.groups {
		changed := false
		for id, m := range g {
			if m.conn == c {
				delete(g, id)
				changed = true
			}
		}
		if changed {
			for _, m := range g {
				notify = append(notify, m.conn)
				groups = append(groups, name)
			}
		}
	}
	fb.mu.Unlock()
	go fb.notify(notify, groups)
}

// Disconnect drops the member with clientID as if its connection closed.
func (fb *fakeBroker) members(group string) []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	var ids []string
	for id := range fb.groups[group] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (fb *fakeBroker) consumerList(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GroupRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	ids := fb.members(h.ConsumerGroup)
	if len(ids) == 0 {
		return resp(req, remoting.SystemError, "no consumer for this group"), nil
	}
	r := resp(req, remoting.Success, "")
	r.Body, _ = json.Marshal(protocol.ConsumerListBody{ConsumerIDList: ids})
	return r, nil
}

func tagMatch(sub protocol.SubscriptionData, m *message.MessageExt) bool {
	if sub.SubString == "" || sub.SubString == protocol.SubAll || len(sub.TagsSet) == 0 {
		return true
	}
	for _, t := range sub.TagsSet {
		if t == m.Tags() {
			return true
		}
	}
	return false
}

func (fb *fakeBroker) pull(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.PullMessageRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	fb.pullsIn[h.ConsumerGroup]++
	fb.pullsSeen[h.ConsumerGroup]++
	fb.mu.Unlock()
	defer func() {
		fb.mu.Lock()
		fb.pullsIn[h.ConsumerGroup]--
		fb.mu.Unlock()
	}()
	deadline := time.Now().Add(min(time.Duration(h.SuspendTimeoutMillis)*time.Millisecond, 300*time.Millisecond))
	if h.SysFlag&protocol.PullFlagCommitOffset != 0 && h.CommitOffset > 0 {
		// Once, on arrival, as Java's PullMessageProcessor.
		fb.mu.Lock()
		fb.commitFlags[h.ConsumerGroup]++
		fb.offsets[h.ConsumerGroup+"|"+h.Topic+"|"+strconv.Itoa(int(h.QueueID))] = h.CommitOffset
		fb.mu.Unlock()
	}
	for {
		fb.mu.Lock()
		var sub protocol.SubscriptionData
		if h.SysFlag&protocol.PullFlagSubscription != 0 {
			sub = parseSubscription(h.Topic, h.Subscription)
		} else if m := fb.groups[h.ConsumerGroup]; m != nil {
			for _, mem := range m {
				if s, ok := mem.subs[h.Topic]; ok {
					sub = s
				}
			}
		}
		q := fb.queues[fakeQueueKey{h.Topic, h.QueueID}]
		max := int64(len(q))
		var body []byte
		next := h.QueueOffset
		for i := h.QueueOffset; i < max && int32(i-h.QueueOffset) < h.MaxMsgNums; i++ {
			next = i + 1
			if !tagMatch(sub, q[i]) {
				continue
			}
			body, _ = message.EncodeRecord(body, q[i])
		}
		fb.mu.Unlock()
		code := remoting.Success
		switch {
		case h.QueueOffset > max:
			code, next = remoting.PullOffsetMoved, max
		case len(body) == 0 && next > h.QueueOffset:
			code = remoting.PullRetryImmediately
		case len(body) == 0:
			code = remoting.PullNotFound
		}
		if code == remoting.PullNotFound && h.SysFlag&protocol.PullFlagSuspend != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r := resp(req, code, "")
		r.Body = body
		fb.mu.Lock()
		suggest := fb.suggest
		fb.mu.Unlock()
		r.ExtFields = protocol.EncodeHeader(&protocol.PullMessageResponseHeader{SuggestWhichBrokerID: suggest, NextBeginOffset: next,
			MinOffset: 0, MaxOffset: max}, r.ExtFields)
		return r, nil
	}
}

func (fb *fakeBroker) queryOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.QueryConsumerOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	off, ok := fb.offsets[h.ConsumerGroup+"|"+h.Topic+"|"+strconv.Itoa(int(h.QueueID))]
	fb.mu.Unlock()
	if !ok {
		return resp(req, remoting.QueryNotFound, "not found"), nil
	}
	r := resp(req, remoting.Success, "")
	r.ExtFields = protocol.EncodeHeader(&protocol.OffsetResponseHeader{Offset: off}, r.ExtFields)
	return r, nil
}

func (fb *fakeBroker) updateOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.UpdateConsumerOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	fb.offsets[h.ConsumerGroup+"|"+h.Topic+"|"+strconv.Itoa(int(h.QueueID))] = h.CommitOffset
	fb.mu.Unlock()
	return resp(req, remoting.Success, ""), nil
}

func (fb *fakeBroker) storedOffset(group, topic string, qid int32) (int64, bool) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	off, ok := fb.offsets[group+"|"+topic+"|"+strconv.Itoa(int(qid))]
	return off, ok
}

func (fb *fakeBroker) offsetReply(req *remoting.Command, f func(h protocol.TopicQueueRequestHeader, q []*message.MessageExt) int64) (*remoting.Command, error) {
	var h protocol.TopicQueueRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	off := f(h, fb.queues[fakeQueueKey{h.Topic, h.QueueID}])
	fb.mu.Unlock()
	r := resp(req, remoting.Success, "")
	r.ExtFields = protocol.EncodeHeader(&protocol.OffsetResponseHeader{Offset: off}, r.ExtFields)
	return r, nil
}

func (fb *fakeBroker) maxOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return fb.offsetReply(req, func(_ protocol.TopicQueueRequestHeader, q []*message.MessageExt) int64 { return int64(len(q)) })
}

func (fb *fakeBroker) minOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return fb.offsetReply(req, func(protocol.TopicQueueRequestHeader, []*message.MessageExt) int64 { return 0 })
}

func (fb *fakeBroker) searchOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.SearchOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	q := fb.queues[fakeQueueKey{h.Topic, h.QueueID}]
	off := int64(len(q))
	for i, m := range q {
		if m.StoreTimestamp >= h.Timestamp {
			off = int64(i)
			break
		}
	}
	fb.mu.Unlock()
	r := resp(req, remoting.Success, "")
	r.ExtFields = protocol.EncodeHeader(&protocol.OffsetResponseHeader{Offset: off}, r.ExtFields)
	return r, nil
}

func (fb *fakeBroker) lock(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := protocol.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return nil, err
	}
	fb.mu.Lock()
	var ok []MessageQueue
	now := time.Now()
	for _, q := range body.MQSet {
		l, held := fb.locks[q]
		if !held || l.client == body.ClientID || now.After(l.until) {
			fb.locks[q] = fakeLock{client: body.ClientID, until: now.Add(60 * time.Second)}
			ok = append(ok, q)
		}
	}
	fb.mu.Unlock()
	r := resp(req, remoting.Success, "")
	r.Body, _ = json.Marshal(protocol.LockBatchResponseBody{LockOKMQSet: ok})
	return r, nil
}

func (fb *fakeBroker) unlock(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := protocol.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return nil, err
	}
	fb.mu.Lock()
	for _, q := range body.MQSet {
		if fb.locks[q].client == body.ClientID {
			delete(fb.locks, q)
		}
	}
	fb.mu.Unlock()
	return resp(req, remoting.Success, ""), nil
}

func (fb *fakeBroker) lockHolder(q MessageQueue) string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.locks[q].client
}

func (fb *fakeBroker) sendBack(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ConsumerSendMsgBackRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.noSendBack {
		return resp(req, remoting.SystemError, "send back disabled"), nil
	}
	orig := fb.byOffset[h.Offset]
	if orig == nil {
		return resp(req, remoting.SystemError, "no message at offset"), nil
	}
	m := &message.MessageExt{Message: message.Message{Topic: retryPrefix + h.Group, Flag: orig.Flag,
		Properties: map[string]string{}, Body: orig.Body}}
	for k, v := range orig.Properties {
		m.Properties[k] = v
	}
	if m.Properties[message.PropRetryTopic] == "" {
		m.Properties[message.PropRetryTopic] = orig.Topic
	}
	m.SysFlag = orig.SysFlag
	m.ReconsumeTimes = orig.ReconsumeTimes + 1
	m.BornHost, m.BornTimestamp = orig.BornHost, orig.BornTimestamp
	if _, ok := fb.topics[m.Topic]; !ok {
		fb.topics[m.Topic] = 1
	}
	fb.storeLocked(m)
	return resp(req, remoting.Success, ""), nil
}

func (fb *fakeBroker) endTransaction(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.EndTransactionRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return nil, err
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.endTx = append(fb.endTx, h)
	half := fb.halves[h.CommitLogOffset]
	if half == nil {
		return resp(req, remoting.SystemError, "no half message"), nil
	}
	switch h.CommitOrRollback {
	case message.TransactionCommitType:
		delete(fb.halves, h.CommitLogOffset)
		half.SysFlag = message.ResetTransactionType(half.SysFlag, message.TransactionCommitType)
		fb.storeLocked(half)
	case message.TransactionRollbackType:
		delete(fb.halves, h.CommitLogOffset)
	}
	return resp(req, remoting.Success, ""), nil
}

// checkHalves sends CHECK_TRANSACTION_STATE for every open half message to
// its producer group's connection, as the broker's check service does.
func (fb *fakeBroker) checkHalves() int {
	fb.mu.Lock()
	type check struct {
		conn *remoting.Conn
		m    *message.MessageExt
	}
	var checks []check
	for _, m := range fb.halves {
		if c := fb.producers[m.Property(message.PropProducerGroup)]; c != nil {
			checks = append(checks, check{c, m})
		}
	}
	fb.mu.Unlock()
	for _, ck := range checks {
		rec, err := message.EncodeRecord(nil, ck.m)
		require.NoError(fb.t, err)
		h := &protocol.CheckTransactionStateRequestHeader{CommitLogOffset: ck.m.CommitLogOffset, MsgID: ck.m.UniqKey(),
			TransactionID: ck.m.UniqKey(), OffsetMsgID: ck.m.OffsetMsgID()}
		_ = ck.conn.InvokeOneway(remoting.NewRequest(remoting.CheckTransactionState, protocol.EncodeHeader(h, nil), rec))
	}
	return len(checks)
}

// messages returns the stored messages of topic, all queues, in store order.
func (fb *fakeBroker) messages(topic string) []*message.MessageExt {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	var out []*message.MessageExt
	for k, q := range fb.queues {
		if k.topic == topic {
			out = append(out, q...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CommitLogOffset < out[j].CommitLogOffset })
	return out
}

// hooked lets a hook set with setHook answer code's requests in place of h.
func (fb *fakeBroker) hooked(code remoting.RequestCode, h remoting.ProcessorFunc) remoting.ProcessorFunc {
	return func(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		fb.mu.Lock()
		hook := fb.hooks[code]
		fb.mu.Unlock()
		if hook != nil {
			if r := hook(req); r != nil {
				return r, nil
			}
		}
		return h(c, req)
	}
}

// setHook has h see every request with code first; an answer it returns is
// sent instead of the fake broker's own.
func (fb *fakeBroker) setHook(code remoting.RequestCode, h func(req *remoting.Command) *remoting.Command) {
	fb.mu.Lock()
	if fb.hooks == nil {
		fb.hooks = map[remoting.RequestCode]func(req *remoting.Command) *remoting.Command{}
	}
	fb.hooks[code] = h
	fb.mu.Unlock()
}

func (fb *fakeBroker) setSendHook(h func(req *remoting.Command) *remoting.Command) {
	fb.mu.Lock()
	fb.sendHook = h
	fb.mu.Unlock()
}

// pulls returns how many of group's pulls are being answered now and how
// many arrived in all.
func (fb *fakeBroker) pulls(group string) (in, seen int) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.pullsIn[group], fb.pullsSeen[group]
}

func (fb *fakeBroker) sendCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.sends
}

// memberConns returns the connections of group's members.
func (fb *fakeBroker) memberConns(group string) []*remoting.Conn {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	var out []*remoting.Conn
	for _, m := range fb.groups[group] {
		out = append(out, m.conn)
	}
	return out
}

// pushResetOffset sends RESET_CONSUMER_CLIENT_OFFSET with a fastjson-style
// body to every member of group, as a Java broker does.
func (fb *fakeBroker) pushResetOffset(group, topic string, offsets map[MessageQueue]int64) {
	var b strings.Builder
	b.WriteString(`{"offsetTable":{`)
	i := 0
	for mq, off := range offsets {
		if i > 0 {
			b.WriteByte(',')
		}
		i++
		key, _ := json.Marshal(mq)
		b.Write(key)
		b.WriteString(":" + strconv.FormatInt(off, 10))
	}
	b.WriteString(`}}`)
	h := &protocol.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: time.Now().UnixMilli(), IsForce: true}
	for _, c := range fb.memberConns(group) {
		_ = c.InvokeOneway(remoting.NewRequest(remoting.ResetConsumerClientOffset, protocol.EncodeHeader(h, nil), []byte(b.String())))
	}
}
