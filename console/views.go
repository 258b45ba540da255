package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Topic and group name prefixes and the system topics RocketMQ creates.
const (
	retryPrefix = protocol.RetryGroupTopicPrefix
	dlqPrefix   = protocol.DLQGroupTopicPrefix
)

var systemTopics = map[string]bool{
	"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "RMQ_SYS_TRANS_HALF_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true,
	"TRANS_CHECK_MAX_TIME_TOPIC": true, "SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true, "BenchmarkTest": true,
	"RMQ_SYS_TRACE_TOPIC": true, "rmq_sys_wheel_timer": true,
}

// brokerRow is one broker on the cluster page.
type brokerRow struct {
	Cluster, Name, Addr, Role, Version string
	ID                                 int64
	InTPS, OutTPS                      string
	PutTotal, GetTotal                 string
	DiskRatio, Disk                    string
	Err                                string
}

// clusterPage is the brokers and how often the chart polls.
type clusterPage struct {
	Brokers      []brokerRow
	ChartEveryMS int64
}

// pageCluster lists every broker with its role, version, rates and disk.
func (s *Server) pageCluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	clusterOf := map[string]string{}
	for c, names := range ci.ClusterAddrTable {
		for _, n := range names {
			clusterOf[n] = c
		}
	}
	var rows []brokerRow
	for name, bd := range ci.BrokerAddrTable {
		for id, addr := range bd.BrokerAddrs {
			row := brokerRow{Cluster: clusterOf[name], Name: name, ID: id, Addr: addr}
			kv, err := s.admin.BrokerRuntimeStats(ctx, addr)
			if err != nil {
				row.Err = describe(err)
			} else {
				row.Role, row.Version = kv["brokerRole"], kv["brokerVersionDesc"]
				row.InTPS, row.OutTPS = firstField(kv["putTps"]), firstField(kv["getTransferedTps"])
				row.PutTotal, row.GetTotal = kv["msgPutTotalTodayNow"], kv["msgGetTotalTodayNow"]
				row.Disk = kv["commitLogDirCapacity"]
				if v, err := strconv.ParseFloat(kv["commitLogDiskRatio"], 64); err == nil {
					row.DiskRatio = fmt.Sprintf("%.1f%%", v*100)
				}
			}
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Cluster != rows[j].Cluster {
			return rows[i].Cluster < rows[j].Cluster
		}
		if rows[i].Name != rows[j].Name {
			return rows[i].Name < rows[j].Name
		}
		return rows[i].ID < rows[j].ID
	})
	s.render(w, r, "cluster", "Cluster", clusterPage{Brokers: rows, ChartEveryMS: s.cfg.ChartEvery.Milliseconds()})
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "-"
}

// statsPoint is what the live chart polls: each broker's message totals
// now; the page turns two polls into rates.
type statsPoint struct {
	Time    int64            `json:"time"` // ms
	Brokers []brokerCounters `json:"brokers"`
}

type brokerCounters struct {
	Addr string `json:"addr"`
	Put  int64  `json:"put"`
	Get  int64  `json:"get"`
}

// apiStats answers the chart's poll with every broker's put and get totals.
func (s *Server) apiStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		http.Error(w, describe(err), http.StatusBadGateway)
		return
	}
	pt := statsPoint{Time: time.Now().UnixMilli(), Brokers: []brokerCounters{}}
	for _, bd := range ci.BrokerAddrTable {
		for _, addr := range bd.BrokerAddrs {
			kv, err := s.admin.BrokerRuntimeStats(ctx, addr)
			if err != nil {
				continue
			}
			put, _ := strconv.ParseInt(kv["msgPutTotalTodayNow"], 10, 64)
			get, _ := strconv.ParseInt(kv["msgGetTotalTodayNow"], 10, 64)
			pt.Brokers = append(pt.Brokers, brokerCounters{Addr: addr, Put: put, Get: get})
		}
	}
	sort.Slice(pt.Brokers, func(i, j int) bool { return pt.Brokers[i].Addr < pt.Brokers[j].Addr })
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(pt)
}

// topicsPage lists topics by kind and offers the create form.
type topicsPage struct {
	Filter   string
	Topics   []string
	Clusters []string
	Brokers  []string
}

func (s *Server) pageTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	all, err := s.admin.TopicList(ctx)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	names := map[string]bool{}
	var clusters, brokers []string
	for c := range ci.ClusterAddrTable {
		clusters = append(clusters, c)
		names[c] = true
	}
	for n, bd := range ci.BrokerAddrTable {
		names[n] = true
		if m := bd.MasterAddr(); m != "" {
			brokers = append(brokers, m)
		}
	}
	sort.Strings(clusters)
	sort.Strings(brokers)
	filter := r.URL.Query().Get("filter")
	p := topicsPage{Filter: filter, Clusters: clusters, Brokers: brokers}
	for _, t := range all {
		kind := "normal"
		switch {
		case strings.HasPrefix(t, retryPrefix):
			kind = "retry"
		case strings.HasPrefix(t, dlqPrefix):
			kind = "dlq"
		case systemTopics[t] || names[t] || strings.HasPrefix(strings.ToLower(t), "rmq_sys_"):
			kind = "system"
		}
		if filter == "" && kind == "normal" || filter == kind || filter == "all" {
			p.Topics = append(p.Topics, t)
		}
	}
	s.render(w, r, "topics", "Topics", p)
}

// postCreateTopic creates or updates a topic on a broker or a cluster.
func (s *Server) postCreateTopic(r *http.Request) (string, string, error) {
	f := r.PostForm
	topic, err := checkName("topic", f.Get("topic"))
	if err != nil {
		return "", "", err
	}
	read, err := checkInt("read queues", f.Get("read"), 1, 1024)
	if err != nil {
		return "", "", err
	}
	write, err := checkInt("write queues", f.Get("write"), 1, 1024)
	if err != nil {
		return "", "", err
	}
	perm, err := checkInt("permission", f.Get("perm"), 2, 6)
	if err != nil || perm%2 != 0 {
		return "", "", fmt.Errorf("%w: permission must be 2 (write), 4 (read) or 6 (read and write)", ErrBadInput)
	}
	tc := client.TopicConfig{Topic: topic, ReadQueueNums: int32(read), WriteQueueNums: int32(write), Perm: int32(perm), Order: f.Get("order") == "on"}
	where := f.Get("target")
	switch {
	case strings.HasPrefix(where, "broker:"):
		if tc.BrokerAddr, err = checkAddr(strings.TrimPrefix(where, "broker:")); err != nil {
			return "", "", err
		}
	case strings.HasPrefix(where, "cluster:"):
		if tc.ClusterName, err = checkName("cluster", strings.TrimPrefix(where, "cluster:")); err != nil {
			return "", "", err
		}
	default:
		return "", "", fmt.Errorf("%w: choose a cluster or a broker to create the topic on", ErrBadInput)
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	if err := s.admin.CreateTopic(ctx, tc); err != nil {
		return "", "", err
	}
	s.waitRoute(ctx, topic)
	return "/topic?" + url.Values{"topic": {topic}}.Encode(), fmt.Sprintf("Topic %s created (%d read, %d write queues).", topic, read, write), nil
}

// routeWait bounds how long a created topic's page waits for its route:
// the broker registers it with the nameservers right after creating it.
const routeWait = 10 * time.Second

// waitRoute waits until the nameservers route topic, so the page the
// browser goes to next finds it; it gives up quietly after routeWait.
func (s *Server) waitRoute(ctx context.Context, topic string) {
	ctx, cancel := context.WithTimeout(ctx, routeWait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := s.admin.TopicRoute(ctx, topic); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// topicPage is one topic: its queues, route and consumers.
type topicPage struct {
	Topic    string
	Queues   []queueRow
	Route    *protocol.TopicRouteData
	Groups   []string
	Total    int64
	CanSend  bool
	IsDLQ    bool
	DLQGroup string
}

type queueRow struct {
	Broker     string
	QueueID    int32
	Min, Max   int64
	LastUpdate int64
}

func (s *Server) pageTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := checkName("topic", r.URL.Query().Get("topic"))
	if err != nil {
		s.renderError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	route, err := s.admin.TopicRoute(ctx, topic)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	stats, err := s.admin.TopicStats(ctx, topic)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	p := topicPage{Topic: topic, Route: route, CanSend: !strings.HasPrefix(topic, retryPrefix) && !strings.HasPrefix(topic, dlqPrefix)}
	if strings.HasPrefix(topic, dlqPrefix) {
		p.IsDLQ, p.DLQGroup = true, strings.TrimPrefix(topic, dlqPrefix)
	}
	for mq, off := range stats {
		p.Queues = append(p.Queues, queueRow{Broker: mq.BrokerName, QueueID: mq.QueueID, Min: off.MinOffset, Max: off.MaxOffset, LastUpdate: off.LastUpdateTimestamp})
		p.Total += off.MaxOffset - off.MinOffset
	}
	sort.Slice(p.Queues, func(i, j int) bool {
		if p.Queues[i].Broker != p.Queues[j].Broker {
			return p.Queues[i].Broker < p.Queues[j].Broker
		}
		return p.Queues[i].QueueID < p.Queues[j].QueueID
	})
	p.Groups, _ = s.admin.TopicConsumers(ctx, topic)
	s.render(w, r, "topic", "Topic "+topic, p)
}

func (s *Server) postDeleteTopic(r *http.Request) (string, string, error) {
	topic, err := checkName("topic", r.PostForm.Get("topic"))
	if err != nil {
		return "", "", err
	}
	if r.PostForm.Get("confirm") != topic {
		return "", "", fmt.Errorf("%w: type the topic's name to confirm deleting it", ErrBadInput)
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	if err := s.admin.DeleteTopic(ctx, topic, ""); err != nil {
		return "", "", err
	}
	return "/topics", fmt.Sprintf("Topic %s deleted from every broker and name server.", topic), nil
}

// postSendMessage sends one message to a topic with the console's producer.
func (s *Server) postSendMessage(r *http.Request) (string, string, error) {
	f := r.PostForm
	topic, err := checkName("topic", f.Get("topic"))
	if err != nil {
		return "", "", err
	}
	body, err := checkText("body", f.Get("body"), 4<<20, true)
	if err != nil {
		return "", "", err
	}
	tag, err := checkPropText("tag", strings.TrimSpace(f.Get("tag")), 255)
	if err != nil {
		return "", "", err
	}
	keys, err := checkPropText("keys", strings.TrimSpace(f.Get("keys")), 1024)
	if err != nil {
		return "", "", err
	}
	m := client.NewMessage(topic, []byte(body))
	if tag != "" {
		m.WithTag(tag)
	}
	if keys != "" {
		m.WithKeys(strings.Fields(keys)...)
	}
	p, err := s.getProducer()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	res, err := p.SendSync(ctx, m)
	if err != nil {
		return "", "", err
	}
	return "/topic?" + url.Values{"topic": {topic}}.Encode(),
		fmt.Sprintf("Sent: %s to %s queue %d, msgId %s, offsetMsgId %s.", res.Status, res.Queue.BrokerName, res.Queue.QueueID, res.MsgID, res.OffsetMsgID), nil
}

// groupRow is one consumer group in the list.
type groupRow struct {
	Group   string
	Online  int
	Model   string
	Lag     int64
	Topics  int
	Offline bool
}

// pageGroups lists the groups known by their retry topics and the brokers'
// subscription groups, with members online and lag.
func (s *Server) pageGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	topics, err := s.admin.TopicList(ctx)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	names := map[string]bool{}
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) {
			names[strings.TrimPrefix(t, retryPrefix)] = true
		}
	}
	if masters, err := s.admin.MasterAddrs(ctx, ""); err == nil {
		for _, m := range masters {
			if w, err := s.admin.SubscriptionGroups(ctx, m); err == nil {
				for g := range w.SubscriptionGroupTable {
					if !systemGroup(g) {
						names[g] = true
					}
				}
			}
		}
	}
	var rows []groupRow
	for g := range names {
		row := groupRow{Group: g, Offline: true}
		if cc, err := s.admin.ConsumerConnections(ctx, g); err == nil && len(cc.ConnectionSet) > 0 {
			row.Online, row.Model, row.Offline = len(cc.ConnectionSet), string(cc.MessageModel), false
		}
		if prog, err := s.admin.ConsumerProgress(ctx, g, ""); err == nil {
			seen := map[string]bool{}
			for _, q := range prog {
				row.Lag += q.Lag
				seen[q.Queue.Topic] = true
			}
			row.Topics = len(seen)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Group < rows[j].Group })
	s.render(w, r, "groups", "Consumer groups", rows)
}

// systemGroup reports RocketMQ's own groups, kept out of the list.
func systemGroup(g string) bool {
	switch g {
	case "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
		"CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_SYS_RMQ_TRANS", "CID_RMQ_SYS_TRANS":
		return true
	}
	return false
}

// groupPage is one group: members, subscriptions, lag per queue.
type groupPage struct {
	Group     string
	Conn      *protocol.ConsumerConnection
	ConnErr   string
	Subs      []protocol.SubscriptionData
	Queues    []client.QueueProgress
	Lag       int64
	Topics    []string
	DefaultAt string // the reset form's default time
}

func (s *Server) pageGroup(w http.ResponseWriter, r *http.Request) {
	group, err := checkName("group", r.URL.Query().Get("group"))
	if err != nil {
		s.renderError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	p := groupPage{Group: group, DefaultAt: time.Now().Add(-time.Hour).Format("2006-01-02T15:04")}
	if cc, err := s.admin.ConsumerConnections(ctx, group); err != nil {
		p.ConnErr = describe(err)
	} else {
		p.Conn = cc
		for _, t := range sortedKeys(cc.SubscriptionTable) {
			p.Subs = append(p.Subs, cc.SubscriptionTable[t])
		}
	}
	prog, err := s.admin.ConsumerProgress(ctx, group, "")
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	seen := map[string]bool{}
	for _, q := range prog {
		p.Lag += q.Lag
		if !seen[q.Queue.Topic] && !strings.HasPrefix(q.Queue.Topic, retryPrefix) {
			seen[q.Queue.Topic] = true
			p.Topics = append(p.Topics, q.Queue.Topic)
		}
	}
	sort.Strings(p.Topics)
	p.Queues = prog
	s.render(w, r, "group", "Group "+group, p)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// postResetOffset moves a group's offsets on a topic to a time (mqadmin
// resetOffsetByTime, forced).
func (s *Server) postResetOffset(r *http.Request) (string, string, error) {
	group, topic, err := groupAndTopic(r)
	if err != nil {
		return "", "", err
	}
	at, err := parseWhen(r.PostForm.Get("time"))
	if err != nil {
		return "", "", err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	offs, err := s.admin.ResetOffsetByTime(ctx, group, topic, at, true)
	if err != nil {
		return "", "", err
	}
	return "/group?" + url.Values{"group": {group}}.Encode(),
		fmt.Sprintf("Offsets of %s on %s reset to %s (%d queues).", group, topic, at.Format("2006-01-02 15:04:05"), len(offs)), nil
}

// postSkipBacklog moves a group's offsets on a topic to the end (mqadmin
// skipAccumulatedMessage).
func (s *Server) postSkipBacklog(r *http.Request) (string, string, error) {
	group, topic, err := groupAndTopic(r)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	offs, err := s.admin.SkipAccumulated(ctx, group, topic, true)
	if err != nil {
		return "", "", err
	}
	return "/group?" + url.Values{"group": {group}}.Encode(), fmt.Sprintf("Backlog of %s on %s skipped (%d queues).", group, topic, len(offs)), nil
}

func groupAndTopic(r *http.Request) (string, string, error) {
	group, err := checkName("group", r.PostForm.Get("group"))
	if err != nil {
		return "", "", err
	}
	topic, err := checkName("topic", r.PostForm.Get("topic"))
	if err != nil {
		return "", "", err
	}
	return group, topic, nil
}

// messagesPage is a search and its results.
type messagesPage struct {
	By, Topic, Key, ID, Broker, Queue, Offset string
	Searched                                  bool
	Results                                   []msgRow
	Err                                       string
}

type msgRow struct {
	OffsetID, UniqKey, Topic, Tags, Keys string
	QueueID                              int32
	QueueOffset, StoreTime               int64
	Size                                 int
}

func rowOf(m *client.MessageExt) msgRow {
	return msgRow{OffsetID: m.OffsetMsgID(), UniqKey: m.UniqKey(), Topic: m.Topic, Tags: m.Tags(), Keys: m.Keys(),
		QueueID: m.QueueID, QueueOffset: m.QueueOffset, StoreTime: m.StoreTimestamp, Size: len(m.Body)}
}

// pageMessages searches by topic and key, by message id, or by queue and
// offset.
func (s *Server) pageMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := messagesPage{By: q.Get("by"), Topic: q.Get("topic"), Key: q.Get("key"), ID: q.Get("id"),
		Broker: q.Get("broker"), Queue: q.Get("queue"), Offset: q.Get("offset")}
	if p.By == "" {
		p.By = "key"
		s.render(w, r, "messages", "Messages", p)
		return
	}
	p.Searched = true
	msgs, err := s.search(r, p)
	if err != nil {
		p.Err = describe(err)
	}
	for _, m := range msgs {
		p.Results = append(p.Results, rowOf(m))
	}
	s.render(w, r, "messages", "Messages", p)
}

func (s *Server) search(r *http.Request, p messagesPage) ([]*client.MessageExt, error) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	switch p.By {
	case "key":
		topic, err := checkName("topic", p.Topic)
		if err != nil {
			return nil, err
		}
		key, err := checkText("key", strings.TrimSpace(p.Key), 1024, true)
		if err != nil {
			return nil, err
		}
		return s.admin.QueryMessageByKey(ctx, topic, key, 64, time.UnixMilli(0), time.Now().Add(24*time.Hour))
	case "id":
		id, err := checkMsgID(p.ID)
		if err != nil {
			return nil, err
		}
		if m, err := s.admin.ViewMessage(ctx, id); err == nil {
			return []*client.MessageExt{m}, nil
		}
		// Not an offset id: a producer's unique id, looked up in the topic.
		topic, err := checkName("topic (needed to look a unique id up)", p.Topic)
		if err != nil {
			return nil, err
		}
		return s.admin.QueryMessageByUniqKey(ctx, topic, id)
	case "offset":
		topic, err := checkName("topic", p.Topic)
		if err != nil {
			return nil, err
		}
		broker, err := checkName("broker name", p.Broker)
		if err != nil {
			return nil, err
		}
		qid, err := checkInt("queue id", p.Queue, 0, 65535)
		if err != nil {
			return nil, err
		}
		off, err := checkInt("offset", p.Offset, 0, 1<<62)
		if err != nil {
			return nil, err
		}
		m, err := s.admin.QueryMessageByQueueOffset(ctx, client.MessageQueue{Topic: topic, BrokerName: broker, QueueID: int32(qid)}, off)
		if err != nil {
			return nil, err
		}
		return []*client.MessageExt{m}, nil
	}
	return nil, fmt.Errorf("%w: search by key, id or offset", ErrBadInput)
}

// messagePage is one message in full.
type messagePage struct {
	Msg        msgRow
	Ext        *client.MessageExt
	Body       bodyView
	Props      [][2]string
	BornHost   string
	StoreHost  string
	DLQ        bool
	DLQGroup   string
	RetryTopic string
	Groups     []string
}

func (s *Server) pageMessage(w http.ResponseWriter, r *http.Request) {
	id, err := checkMsgID(r.URL.Query().Get("id"))
	if err != nil {
		s.renderError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	m, err := s.admin.ViewMessage(ctx, id)
	if err != nil {
		s.renderError(w, http.StatusBadGateway, err)
		return
	}
	p := messagePage{Msg: rowOf(m), Ext: m, Body: viewBody(m.Body), BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String()}
	for _, k := range sortedKeys(m.Properties) {
		p.Props = append(p.Props, [2]string{k, m.Properties[k]})
	}
	if strings.HasPrefix(m.Topic, dlqPrefix) {
		p.DLQ, p.DLQGroup, p.RetryTopic = true, strings.TrimPrefix(m.Topic, dlqPrefix), m.Property(message.PropRetryTopic)
	}
	topic := m.Topic
	if rt := m.Property(message.PropRetryTopic); rt != "" {
		topic = rt
	}
	p.Groups, _ = s.admin.TopicConsumers(ctx, topic)
	s.render(w, r, "message", "Message "+id, p)
}

// postResend sends a dead-lettered message back to its group: to the
// group's retry topic, which only that group consumes, with the topic it
// was first sent to, so the group's listener for that topic gets it again.
// Other groups of the topic are not sent a duplicate.
func (s *Server) postResend(r *http.Request) (string, string, error) {
	id, err := checkMsgID(r.PostForm.Get("id"))
	if err != nil {
		return "", "", err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	m, err := s.admin.ViewMessage(ctx, id)
	if err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(m.Topic, dlqPrefix) {
		return "", "", fmt.Errorf("%w: %s is in %s, not a dead-letter topic", ErrBadInput, id, m.Topic)
	}
	group := strings.TrimPrefix(m.Topic, dlqPrefix)
	out := redelivery(m, retryPrefix+group)
	p, err := s.getProducer()
	if err != nil {
		return "", "", err
	}
	res, err := p.SendSync(ctx, out)
	if err != nil {
		return "", "", err
	}
	return "/message?" + url.Values{"id": {res.OffsetMsgID}}.Encode(),
		fmt.Sprintf("Resent to %s (group %s retries it as %s): new offsetMsgId %s.", retryPrefix+group, group, out.Properties[message.PropRetryTopic], res.OffsetMsgID), nil
}

// redelivery is a stored message as a new one for topic: its body, flag,
// tags, keys and user properties; the broker's and the previous delivery's
// bookkeeping is dropped, and RETRY_TOPIC keeps the topic it was first
// sent to.
func redelivery(m *client.MessageExt, topic string) *client.Message {
	out := client.NewMessage(topic, m.Body)
	out.Flag = m.Flag
	for k, v := range m.Properties {
		switch k {
		case message.PropUniqKey, message.PropCluster, message.PropMsgRegion, message.PropTraceSwitch, message.PropRealTopic,
			message.PropRealQueueID, message.PropOriginMessageID, message.PropReconsumeTime, message.PropMaxReconsumeTimes,
			message.PropDelayTimeLevel, message.PropConsumeStartTime, message.PropWaitStoreMsgOK, message.PropTransactionPrepared,
			message.PropCRC32, message.PropTimerDeliverMS, message.PropTimerDelayMS, message.PropTimerDelaySec, message.PropTimerOutMS:
			continue
		}
		out.WithProperty(k, v)
	}
	if out.Properties[message.PropRetryTopic] == "" {
		out.WithProperty(message.PropRetryTopic, m.Topic)
	}
	return out
}

// postDeliver has one client of a group run its listener on the message
// (CONSUME_MESSAGE_DIRECTLY, mqadmin queryMsgById -g -d).
func (s *Server) postDeliver(r *http.Request) (string, string, error) {
	id, err := checkMsgID(r.PostForm.Get("id"))
	if err != nil {
		return "", "", err
	}
	group, err := checkName("group", r.PostForm.Get("group"))
	if err != nil {
		return "", "", err
	}
	clientID, err := checkText("client id", strings.TrimSpace(r.PostForm.Get("client")), 255, false)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	if clientID == "" {
		cc, err := s.admin.ConsumerConnections(ctx, group)
		if err != nil {
			return "", "", err
		}
		if len(cc.ConnectionSet) == 0 {
			return "", "", fmt.Errorf("%w: group %s has no client online", ErrBadInput, group)
		}
		clientID = cc.ConnectionSet[0].ClientID
	}
	res, err := s.admin.ConsumeMessageDirectly(ctx, group, clientID, "", id)
	if err != nil {
		return "", "", err
	}
	return "/message?" + url.Values{"id": {id}}.Encode(),
		fmt.Sprintf("Delivered to %s of %s: %s in %d ms. %s", clientID, group, res.ConsumeResult, res.SpentTimeMills, res.Remark), nil
}
