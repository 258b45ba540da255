package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Topic name prefixes of the per-group retry and dead-letter topics.
const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
	// orderConfNamespace is the nameserver KV namespace holding the
	// brokerName:queueNums layout of ordered topics (NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
	orderConfNamespace = "ORDER_TOPIC_CONFIG"
)

// errNoCluster is Java's complaint when -c names no known cluster.
var errNoCluster = errors.New("mqadmin: make sure the specified clusterName exists or the name server connected to is correct")

// sortQueues orders queues as MessageQueue.compareTo: topic, broker, queue id.
func sortQueues(mqs []client.MessageQueue) {
	sort.Slice(mqs, func(i, j int) bool {
		a, b := mqs[i], mqs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
}

// clusterAddrs returns the addresses of cluster's brokers, masters only or
// masters and slaves, sorted; errNoCluster if the cluster is unknown.
func clusterAddrs(ci *protocol.ClusterInfo, cluster string, withSlaves bool) ([]string, error) {
	names, ok := ci.ClusterAddrTable[cluster]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNoCluster, cluster)
	}
	var out []string
	for _, n := range names {
		bd := ci.BrokerAddrTable[n]
		if bd == nil {
			continue
		}
		for id, addr := range bd.BrokerAddrs {
			if id == protocol.MasterID || withSlaves {
				out = append(out, addr)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// targetBrokers returns the brokers a -b/-c command acts on: -b's address,
// else the addresses clusterAddrs gives for -c. ci may be nil; it is then
// fetched, and only when -c needs it, so -b alone costs no cluster lookup.
func targetBrokers(e *env, a *client.Admin, ci *protocol.ClusterInfo, withSlaves bool) ([]string, error) {
	if e.vals.has("b") {
		return []string{e.vals.get("b")}, nil
	}
	if ci == nil {
		var err error
		if ci, err = a.ClusterInfo(e.ctx); err != nil {
			return nil, err
		}
	}
	return clusterAddrs(ci, e.vals.get("c"), withSlaves)
}

// brokerNameOf returns the name of the broker group holding addr.
func brokerNameOf(ci *protocol.ClusterInfo, addr string) (string, bool) {
	for name, bd := range ci.BrokerAddrTable {
		for _, a := range bd.BrokerAddrs {
			if a == addr {
				return name, true
			}
		}
	}
	return "", false
}

// clusterOfBroker returns the cluster brokerName belongs to.
func clusterOfBroker(ci *protocol.ClusterInfo, brokerName string) string {
	for _, c := range sortedKeys(ci.ClusterAddrTable) {
		for _, b := range ci.ClusterAddrTable[c] {
			if b == brokerName {
				return c
			}
		}
	}
	return ""
}

// topicConfigString renders a topic config as TopicConfig.toString does.
func topicConfigString(tc client.TopicConfig) string {
	return fmt.Sprintf("TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%s, topicFilterType=%s, topicSysFlag=0, order=%t]",
		tc.Topic, tc.ReadQueueNums, tc.WriteQueueNums, protocol.PermString(tc.Perm), protocol.SingleTag, tc.Order)
}

func updateTopicCmd() *command {
	return &command{
		name: "updateTopic", desc: "Update or create topic",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "create topic to which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "create topic to which cluster"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "r", long: "readQueueNums", hasArg: true, desc: "set read queue nums"},
			{short: "w", long: "writeQueueNums", hasArg: true, desc: "set write queue nums"},
			{short: "p", long: "perm", hasArg: true, desc: "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"},
			{short: "o", long: "order", hasArg: true, desc: "set topic's order(true|false)"},
		},
		needOneOf: []string{"b", "c"},
		run:       runUpdateTopic,
	}
}

func runUpdateTopic(e *env) error {
	tc := client.TopicConfig{Topic: e.vals.get("t"), Order: e.vals.bool("o", false)}
	for _, f := range []struct {
		short string
		dst   *int32
		def   int64
	}{{"r", &tc.ReadQueueNums, 8}, {"w", &tc.WriteQueueNums, 8}, {"p", &tc.Perm, int64(protocol.DefaultTopicPerm)}} {
		n, err := e.vals.int(f.short, f.def)
		if err != nil {
			return err
		}
		if n <= 0 || n > 1<<16 {
			return fmt.Errorf("%w: option -%s out of range: %d", errUsage, f.short, n)
		}
		*f.dst = int32(n)
	}
	a, err := e.Admin()
	if err != nil {
		return err
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	addrs, err := targetBrokers(e, a, ci, false)
	if err != nil {
		return err
	}
	var brokerNames []string
	if e.vals.has("b") {
		if tc.Order {
			name, ok := brokerNameOf(ci, addrs[0])
			if !ok {
				return fmt.Errorf("mqadmin: no broker with address %s is registered", addrs[0])
			}
			brokerNames = []string{name}
		}
	} else {
		brokerNames = append(brokerNames, ci.ClusterAddrTable[e.vals.get("c")]...)
		sort.Strings(brokerNames)
	}
	for _, addr := range addrs {
		one := tc
		one.BrokerAddr = addr
		if err := a.CreateTopic(e.ctx, one); err != nil {
			return err
		}
		e.printf("create topic to %s success.\n", addr)
	}
	if tc.Order {
		parts := make([]string, len(brokerNames))
		for i, n := range brokerNames {
			parts[i] = fmt.Sprintf("%s:%d", n, tc.WriteQueueNums)
		}
		orderConf := strings.Join(parts, ";")
		if err := a.PutKVConfig(e.ctx, orderConfNamespace, tc.Topic, orderConf); err != nil {
			return err
		}
		scope := "cluster"
		if e.vals.has("b") {
			scope = "broker"
		}
		e.printf("set %s orderConf. isOrder=%t, orderConf=[%s]\n", scope, tc.Order, orderConf)
	}
	e.printf("%s\n", topicConfigString(tc))
	return nil
}

func deleteTopicCmd() *command {
	return &command{
		name: "deleteTopic", desc: "Delete topic from broker and NameServer.",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "c", long: "clusterName", hasArg: true, required: true, desc: "delete topic from which cluster"},
		},
		run: func(e *env) error {
			return deleteTopic(e, e.vals.get("c"), e.vals.get("t"))
		},
	}
}

// deleteTopic removes topic from cluster's masters and the nameservers, and
// prints what DeleteTopicSubCommand.deleteTopic prints.
func deleteTopic(e *env, cluster, topic string) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	if _, ok := ci.ClusterAddrTable[cluster]; !ok {
		return fmt.Errorf("%w: %s", errNoCluster, cluster)
	}
	if err := a.DeleteTopic(e.ctx, topic, cluster); err != nil {
		return err
	}
	e.printf("delete topic [%s] from cluster [%s] success.\n", topic, cluster)
	e.printf("delete topic [%s] from NameServer success.\n", topic)
	return nil
}

func updateTopicPermCmd() *command {
	return &command{
		name: "updateTopicPerm", desc: "Update topic perm",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "create topic to which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "create topic to which cluster"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "p", long: "perm", hasArg: true, required: true, desc: "set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]"},
		},
		needOneOf: []string{"b", "c"},
		run:       runUpdateTopicPerm,
	}
}

func runUpdateTopicPerm(e *env) error {
	topic := e.vals.get("t")
	perm, err := e.vals.int("p", 0)
	if err != nil {
		return err
	}
	if perm != 2 && perm != 4 && perm != 6 {
		return fmt.Errorf("%w: option -p must be 2, 4 or 6, got %d", errUsage, perm)
	}
	a, err := e.Admin()
	if err != nil {
		return err
	}
	route, err := a.TopicRoute(e.ctx, topic)
	if err != nil {
		return err
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	addrs, err := targetBrokers(e, a, ci, false)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		name, ok := brokerNameOf(ci, addr)
		if !ok {
			return fmt.Errorf("mqadmin: no broker with address %s is registered", addr)
		}
		var qd *protocol.QueueData
		for _, q := range route.QueueDatas {
			if q.BrokerName == name {
				qd = q
			}
		}
		if qd == nil {
			e.printf("topic %s does not exist in broker %s\n", topic, addr)
			continue
		}
		if int64(qd.Perm) == perm {
			e.printf("new perm equals to the old one!\n")
			continue
		}
		tc := client.TopicConfig{Topic: topic, ReadQueueNums: qd.ReadQueueNums, WriteQueueNums: qd.WriteQueueNums,
			Perm: int32(perm), Order: route.OrderTopicConf != "", BrokerAddr: addr}
		if err := a.CreateTopic(e.ctx, tc); err != nil {
			return err
		}
		e.printf("update topic perm from %d to %d in %s success.\n", qd.Perm, perm, addr)
		e.printf("%s\n", topicConfigString(tc))
	}
	return nil
}

func topicRouteCmd() *command {
	return &command{
		name: "topicRoute", desc: "Examine topic route info",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "l", long: "list", desc: "Use list format to print data"},
		},
		run: runTopicRoute,
	}
}

func runTopicRoute(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	route, err := a.TopicRoute(e.ctx, e.vals.get("t"))
	if err != nil {
		return err
	}
	if !e.vals.has("l") {
		b, err := json.MarshalIndent(route, "", "\t")
		if err != nil {
			return err
		}
		e.printf("%s\n", b)
		return nil
	}
	const format = "%-45s %-32s %-50s %-10s %-11s %-5s\n"
	qds := map[string]*protocol.QueueData{}
	for _, q := range route.QueueDatas {
		qds[q.BrokerName] = q
	}
	bds := append([]*protocol.BrokerData(nil), route.BrokerDatas...)
	sort.Slice(bds, func(i, j int) bool { return bds[i].BrokerName < bds[j].BrokerName })
	e.printf(format, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
	var totalRead, totalWrite int32
	for _, bd := range bds {
		q := qds[bd.BrokerName]
		if q == nil {
			continue
		}
		totalRead += q.ReadQueueNums
		totalWrite += q.WriteQueueNums
		e.printf(format, bd.Cluster, bd.BrokerName, javaMap(bd.BrokerAddrs), fmt.Sprint(q.ReadQueueNums),
			fmt.Sprint(q.WriteQueueNums), fmt.Sprint(q.Perm))
	}
	e.printf("%s\n", strings.Repeat("-", 158))
	e.printf(format, "Total:", fmt.Sprint(len(qds)), "", fmt.Sprint(totalRead), fmt.Sprint(totalWrite), "")
	return nil
}

// javaMap renders broker addresses as Java's HashMap.toString: {0=a, 1=b}.
func javaMap(m map[int64]string) string {
	ids := sortedKeys(m)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%s", id, m[id])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func topicStatusCmd() *command {
	return &command{
		name: "topicStatus", desc: "Examine topic Status info",
		opts: []option{{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"}},
		run:  runTopicStatus,
	}
}

func runTopicStatus(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	stats, err := a.TopicStats(e.ctx, e.vals.get("t"))
	if err != nil {
		return err
	}
	mqs := sortedQueues(stats)
	e.printf("%-32s  %-4s  %-20s  %-20s    %s\n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
	for _, mq := range mqs {
		off := stats[mq]
		last := ""
		if off.LastUpdateTimestamp > 0 {
			last = humanMillis(off.LastUpdateTimestamp)
		}
		e.printf("%-32s  %-4d  %-20d  %-20d    %s\n", front(mq.BrokerName, 32), mq.QueueID, off.MinOffset, off.MaxOffset, last)
	}
	return nil
}

// humanMillis renders ms like UtilAll.timeMillisToHumanString2.
func humanMillis(ms int64) string {
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05,000")
}

func topicClusterListCmd() *command {
	return &command{
		name: "topicClusterList", desc: "get cluster info for topic",
		opts: []option{{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"}},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			route, err := a.TopicRoute(e.ctx, e.vals.get("t"))
			if err != nil {
				return err
			}
			ci, err := a.ClusterInfo(e.ctx)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, bd := range route.BrokerDatas {
				c := bd.Cluster
				if c == "" {
					c = clusterOfBroker(ci, bd.BrokerName)
				}
				if c != "" && !seen[c] {
					seen[c] = true
					e.printf("%s\n", c)
				}
			}
			return nil
		},
	}
}

func topicListCmd() *command {
	return &command{
		name: "topicList", desc: "Fetch all topic list from name server",
		opts: []option{{short: "c", long: "clusterModel", desc: "clusterModel"}},
		run:  runTopicList,
	}
}

func runTopicList(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	topics, err := a.TopicList(e.ctx)
	if err != nil {
		return err
	}
	if !e.vals.has("c") {
		for _, t := range topics {
			e.printf("%s\n", t)
		}
		return nil
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	// Which groups consume a topic: the SDK has no QUERY_TOPIC_CONSUME_BY_WHO,
	// so ask each group (known by its retry topic) for its offsets once and
	// invert. That finds groups that committed offsets, which is what the
	// broker's answer is built from too.
	byTopic := map[string][]string{}
	for _, t := range topics {
		if !strings.HasPrefix(t, retryPrefix) {
			continue
		}
		group := strings.TrimPrefix(t, retryPrefix)
		rows, err := a.ConsumerProgress(e.ctx, group, "")
		if err != nil {
			continue // as Java: a failing lookup leaves the column empty
		}
		seen := map[string]bool{}
		for _, r := range rows {
			if !seen[r.Queue.Topic] {
				seen[r.Queue.Topic] = true
				byTopic[r.Queue.Topic] = append(byTopic[r.Queue.Topic], group)
			}
		}
	}
	e.printf("%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group")
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) || strings.HasPrefix(t, dlqPrefix) {
			continue
		}
		cluster := ""
		if route, err := a.TopicRoute(e.ctx, t); err == nil && len(route.BrokerDatas) > 0 {
			cluster = clusterOfBroker(ci, route.BrokerDatas[0].BrokerName)
		}
		groups := byTopic[t]
		sort.Strings(groups)
		if len(groups) == 0 {
			groups = []string{""}
		}
		for _, g := range groups {
			e.printf("%-20s  %-48s  %-48s\n", front(cluster, 20), front(t, 48), front(g, 48))
		}
	}
	return nil
}

func updateOrderConfCmd() *command {
	return &command{
		name: "updateOrderConf", desc: "Create or update or delete order conf",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "v", long: "orderConf", hasArg: true, desc: "set order conf [eg. brokerName1:num;brokerName2:num]"},
			{short: "m", long: "method", hasArg: true, required: true, desc: "option type [eg. put|get|delete"},
		},
		run: func(e *env) error {
			topic, method := e.vals.get("t"), e.vals.get("m")
			if method != "get" && method != "put" && method != "delete" {
				return fmt.Errorf("%w: option -m must be put, get or delete, got %q", errUsage, method)
			}
			if method == "put" && e.vals.get("v") == "" {
				return fmt.Errorf("%w: please set orderConf with option -v", errUsage)
			}
			a, err := e.Admin()
			if err != nil {
				return err
			}
			switch method {
			case "get":
				v, err := a.GetKVConfig(e.ctx, orderConfNamespace, topic)
				if err != nil {
					return err
				}
				e.printf("get orderConf success. topic=[%s], orderConf=[%s]\n", topic, v)
			case "put":
				if err := a.PutKVConfig(e.ctx, orderConfNamespace, topic, e.vals.get("v")); err != nil {
					return err
				}
				e.printf("update orderConf success. topic=[%s], orderConf=[%s]\n", topic, e.vals.get("v"))
			default:
				if err := a.DeleteKVConfig(e.ctx, orderConfNamespace, topic); err != nil {
					return err
				}
				e.printf("delete orderConf success. topic=[%s]\n", topic)
			}
			return nil
		},
	}
}
