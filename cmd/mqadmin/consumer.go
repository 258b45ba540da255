package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// errNoConsumeStats is Java's answer when a group has no offsets anywhere.
var errNoConsumeStats = errors.New("mqadmin: not found the consumer group consume stats, because return offset table is empty, maybe the consumer not consume any message")

// subGroupString renders a group config as SubscriptionGroupConfig.toString.
func subGroupString(c *protocol.SubscriptionGroupConfig) string {
	return fmt.Sprintf("SubscriptionGroupConfig [groupName=%s, consumeEnable=%t, consumeFromMinEnable=%t, consumeBroadcastEnable=%t, "+
		"retryQueueNums=%d, retryMaxTimes=%d, brokerId=%d, whichBrokerWhenConsumeSlowly=%d, notifyConsumerIdsChangedEnable=%t]",
		c.GroupName, c.ConsumeEnable, c.ConsumeFromMinEnable, c.ConsumeBroadcastEnable, c.RetryQueueNums, c.RetryMaxTimes,
		c.BrokerID, c.WhichBrokerWhenConsumeSlowly, c.NotifyConsumerIdsChangedEnable)
}

func updateSubGroupCmd() *command {
	return &command{
		name: "updateSubGroup", desc: "Update or create subscription group",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "create subscription group to which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "create subscription group to which cluster"},
			{short: "g", long: "groupName", hasArg: true, required: true, desc: "consumer group name"},
			{short: "s", long: "consumeEnable", hasArg: true, desc: "consume enable"},
			{short: "m", long: "consumeFromMinEnable", hasArg: true, desc: "from min offset"},
			{short: "d", long: "consumeBroadcastEnable", hasArg: true, desc: "broadcast"},
			{short: "q", long: "retryQueueNums", hasArg: true, desc: "retry queue nums"},
			{short: "r", long: "retryMaxTimes", hasArg: true, desc: "retry max times"},
			{short: "i", long: "brokerId", hasArg: true, desc: "consumer from which broker id"},
			{short: "w", long: "whichBrokerWhenConsumeSlowly", hasArg: true, desc: "which broker id when consume slowly"},
			{short: "a", long: "notifyConsumerIdsChanged", hasArg: true, desc: "notify consumerId changed"},
		},
		needOneOf: []string{"b", "c"},
		run:       runUpdateSubGroup,
	}
}

func runUpdateSubGroup(e *env) error {
	cfg := protocol.NewSubscriptionGroupConfig(e.vals.get("g"))
	defaultRetryQueues := cfg.RetryQueueNums
	// mqadmin starts from these two off, unlike the broker's defaults.
	cfg.ConsumeBroadcastEnable = false
	cfg.ConsumeFromMinEnable = false
	cfg.ConsumeEnable = e.vals.bool("s", cfg.ConsumeEnable)
	cfg.ConsumeFromMinEnable = e.vals.bool("m", cfg.ConsumeFromMinEnable)
	cfg.ConsumeBroadcastEnable = e.vals.bool("d", cfg.ConsumeBroadcastEnable)
	cfg.NotifyConsumerIdsChangedEnable = e.vals.bool("a", cfg.NotifyConsumerIdsChangedEnable)
	q, err := e.vals.int("q", int64(cfg.RetryQueueNums))
	if err != nil {
		return err
	}
	r, err := e.vals.int("r", int64(cfg.RetryMaxTimes))
	if err != nil {
		return err
	}
	if q < 0 || q > 1<<16 || r < -1 || r > 1<<16 {
		return fmt.Errorf("%w: -q or -r out of range", errUsage)
	}
	cfg.RetryQueueNums, cfg.RetryMaxTimes = int32(q), int32(r)
	if cfg.BrokerID, err = e.vals.int("i", cfg.BrokerID); err != nil {
		return err
	}
	if cfg.WhichBrokerWhenConsumeSlowly, err = e.vals.int("w", cfg.WhichBrokerWhenConsumeSlowly); err != nil {
		return err
	}
	a, err := e.Admin()
	if err != nil {
		return err
	}
	var ci *protocol.ClusterInfo
	if !e.vals.has("b") || cfg.RetryQueueNums != defaultRetryQueues {
		if ci, err = a.ClusterInfo(e.ctx); err != nil {
			return err
		}
	}
	addrs, err := targetBrokers(e, a, ci, false)
	if err != nil {
		return err
	}
	// A changed retry queue count is applied to the group's existing retry
	// topic too, as Java's command does.
	var retryRoute *protocol.TopicRouteData
	retryTopic := retryPrefix + cfg.GroupName
	if cfg.RetryQueueNums != defaultRetryQueues {
		if retryRoute, err = a.TopicRoute(e.ctx, retryTopic); err != nil {
			e.printf("get subscription retry topic route info null %v\n", err)
		}
	}
	for _, addr := range addrs {
		if err := a.CreateSubscriptionGroup(e.ctx, addr, cfg); err != nil {
			return err
		}
		if retryRoute != nil {
			name, _ := brokerNameOf(ci, addr)
			for _, qd := range retryRoute.QueueDatas {
				if qd.BrokerName != name || qd.WriteQueueNums == cfg.RetryQueueNums {
					continue
				}
				tc := client.TopicConfig{Topic: retryTopic, ReadQueueNums: cfg.RetryQueueNums, WriteQueueNums: cfg.RetryQueueNums,
					Perm: qd.Perm, BrokerAddr: addr}
				if err := a.CreateTopic(e.ctx, tc); err != nil {
					e.printf("update subscription retry topic %s queue nums to %s failed\n", retryTopic, addr)
				}
			}
		}
		e.printf("create subscription group to %s success.\n", addr)
	}
	e.printf("%s\n", subGroupString(cfg))
	return nil
}

func deleteSubGroupCmd() *command {
	return &command{
		name: "deleteSubGroup", desc: "Delete subscription group from broker.",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "delete subscription group from which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "delete subscription group from which cluster"},
			{short: "g", long: "groupName", hasArg: true, required: true, desc: "subscription group name"},
			{short: "r", long: "removeOffset", hasArg: true, desc: "remove offset"},
		},
		needOneOf: []string{"b", "c"},
		run:       runDeleteSubGroup,
	}
}

func runDeleteSubGroup(e *env) error {
	group := e.vals.get("g")
	removeOffset := e.vals.bool("r", false)
	a, err := e.Admin()
	if err != nil {
		return err
	}
	if e.vals.has("b") {
		addr := e.vals.get("b")
		if err := a.DeleteSubscriptionGroup(e.ctx, addr, group, removeOffset); err != nil {
			return err
		}
		e.printf("delete subscription group [%s] from broker [%s] success.\n", group, addr)
		return nil
	}
	cluster := e.vals.get("c")
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	addrs, err := clusterAddrs(ci, cluster, false)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if err := a.DeleteSubscriptionGroup(e.ctx, addr, group, removeOffset); err != nil {
			return err
		}
		e.printf("delete subscription group [%s] from broker [%s] in cluster [%s] success.\n", group, addr, cluster)
	}
	// The group's retry and dead-letter topics go with it.
	for _, t := range []string{retryPrefix + group, dlqPrefix + group} {
		if err := deleteTopic(e, cluster, t); err != nil {
			fmt.Fprintf(e.app.err, "delete topic [%s] failed: %v\n", t, describe(err))
		}
	}
	return nil
}

func consumerConnectionCmd() *command {
	return &command{
		name: "consumerConnection", desc: "Query consumer's socket connection, client version and subscription",
		opts: []option{{short: "g", long: "consumerGroup", hasArg: true, required: true, desc: "consumer group name"}},
		run:  runConsumerConnection,
	}
}

func runConsumerConnection(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	cc, err := a.ConsumerConnections(e.ctx, e.vals.get("g"))
	if err != nil {
		return err
	}
	conns := append([]protocol.Connection(nil), cc.ConnectionSet...)
	sort.Slice(conns, func(i, j int) bool { return conns[i].ClientID < conns[j].ClientID })
	for i, c := range conns {
		e.printf("%03d  %-32s %-22s %-8s %s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version))
	}
	e.printf("\nBelow is subscription:\n")
	for i, t := range sortedKeys(cc.SubscriptionTable) {
		sd := cc.SubscriptionTable[t]
		e.printf("%03d  Topic: %-40s SubExpression: %s\n", i+1, sd.Topic, sd.SubString)
	}
	e.printf("\n")
	e.printf("ConsumeType: %s\n", cc.ConsumeType)
	e.printf("MessageModel: %s\n", cc.MessageModel)
	e.printf("ConsumeFromWhere: %s\n", cc.ConsumeFromWhere)
	return nil
}

// versionDesc names a client's version ordinal as MQVersion.getVersionDesc:
// 4.x.y and 5.x.y are a SNAPSHOT/release pair per patch, from V4_0_0_SNAPSHOT
// = 212 and V5_0_0_SNAPSHOT = 412 (so V4_9_8 = 409).
func versionDesc(v int32) string {
	base, major := int32(212), 4
	switch {
	case v >= 412 && v < 612:
		base, major = 412, 5
	case v >= 212 && v < 412:
	default:
		return "UNKNOWN_VERSION(" + strconv.Itoa(int(v)) + ")"
	}
	i := (v - base) / 2
	s := fmt.Sprintf("V%d_%d_%d", major, i/10, i%10)
	if (v-base)%2 == 0 {
		s += "_SNAPSHOT"
	}
	return s
}

func consumerProgressCmd() *command {
	return &command{
		name: "consumerProgress", desc: "Query consumers's progress, speed",
		opts: []option{
			{short: "g", long: "groupName", hasArg: true, desc: "consumer group name"},
			{short: "t", long: "topicName", hasArg: true, desc: "topic name"},
		},
		run: runConsumerProgress,
	}
}

func runConsumerProgress(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	if !e.vals.has("g") {
		return listGroups(e, a)
	}
	group := e.vals.get("g")
	rows, err := a.ConsumerProgress(e.ctx, group, e.vals.get("t"))
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%w (group %s)", errNoConsumeStats, group)
	}
	// Java fills #Client IP from each client's running info; the SDK does not
	// fetch that (GET_CONSUMER_RUNNING_INFO), so the column says NA, as Java
	// does when the lookup fails.
	e.printf("%-32s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s\n",
		"#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#LastTime")
	var total int64
	for _, r := range rows {
		diff := r.BrokerOffset - r.ConsumerOffset
		total += diff
		last := ""
		if r.LastTimestamp > 0 {
			last = time.UnixMilli(r.LastTimestamp).Format("2006-01-02 15:04:05")
		}
		e.printf("%-32s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s\n", front(r.Queue.Topic, 32), front(r.Queue.BrokerName, 32),
			r.Queue.QueueID, r.BrokerOffset, r.ConsumerOffset, "NA", diff, last)
	}
	e.printf("\n")
	e.printf("Diff Total: %d\n", total)
	return nil
}

// listGroups prints every group known by its retry topic, as
// consumerProgress without -g does. #TPS is NA: the SDK's ConsumerProgress
// does not return the broker's consume TPS.
func listGroups(e *env, a *client.Admin) error {
	topics, err := a.TopicList(e.ctx)
	if err != nil {
		return err
	}
	e.printf("%-32s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n", "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
	var groups []string
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) {
			groups = append(groups, strings.TrimPrefix(t, retryPrefix))
		}
	}
	bar := e.bar("reading consumer groups", int64(len(groups)))
	bar.SetUnit("groups")
	defer bar.Done()
	for _, group := range groups {
		bar.Add(1)
		var diff int64
		if rows, err := a.ConsumerProgress(e.ctx, group, ""); err == nil {
			for _, r := range rows {
				diff += r.BrokerOffset - r.ConsumerOffset
			}
		}
		count, version, typ, model := 0, "OFFLINE", "", ""
		if cc, err := a.ConsumerConnections(e.ctx, group); err == nil && len(cc.ConnectionSet) > 0 {
			count = len(cc.ConnectionSet)
			minV := cc.ConnectionSet[0].Version
			for _, c := range cc.ConnectionSet {
				minV = min(minV, c.Version)
			}
			version = versionDesc(minV)
			typ = "PUSH"
			if cc.ConsumeType == protocol.ConsumeActively {
				typ = "PULL"
			} else {
				model = string(cc.MessageModel)
			}
		}
		bar.Clear()
		e.printf("%-32s  %-6d  %-24s %-5s  %-14s  %-7s  %d\n", front(group, 32), count, version, typ, model, "NA", diff)
	}
	return nil
}

func resetOffsetByTimeCmd() *command {
	return &command{
		name: "resetOffsetByTime", desc: "Reset consumer offset by timestamp(without client restart).",
		opts: []option{
			{short: "g", long: "group", hasArg: true, required: true, desc: "set the consumer group"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "set the topic"},
			{short: "s", long: "timestamp", hasArg: true, required: true, desc: "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "f", long: "force", hasArg: true, desc: "set the force rollback by timestamp switch[true|false]"},
		},
		run: runResetOffsetByTime,
	}
}

// parseResetTime reads -s: "now", epoch millis, or yyyy-MM-dd#HH:mm:ss:SSS
// in local time.
func parseResetTime(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, fmt.Errorf("%w: option -s: negative timestamp %d", errUsage, ms)
		}
		return time.UnixMilli(ms), nil
	}
	// Go reads fractional seconds only after '.' or ',': swap the last ':'.
	var t time.Time
	err := errUsage
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		t, err = time.ParseInLocation("2006-01-02#15:04:05.000", s[:i]+"."+s[i+1:], time.Local)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: option -s wants now, epoch millis or yyyy-MM-dd#HH:mm:ss:SSS, got %q", errUsage, s)
	}
	return t, nil
}

func runResetOffsetByTime(e *env) error {
	group, topic, tsStr := e.vals.get("g"), e.vals.get("t"), e.vals.get("s")
	// "now" means the end of every queue; searching for the current time
	// gives that on brokers that answer by search as well as on those that
	// special-case it.
	ts, err := parseResetTime(tsStr, time.Now())
	if err != nil {
		return err
	}
	force := e.vals.bool("f", true)
	a, err := e.Admin()
	if err != nil {
		return err
	}
	var offsets map[client.MessageQueue]int64
	err = e.spin(fmt.Sprintf("resetting the offsets of %s on %s", group, topic), func() error {
		offsets, err = a.ResetOffsetByTime(e.ctx, group, topic, ts, force)
		return err
	})
	if err != nil {
		return err
	}
	e.printf("rollback consumer offset by specified group[%s], topic[%s], force[%t], timestamp(string)[%s], timestamp(long)[%d]\n",
		group, topic, force, tsStr, ts.UnixMilli())
	printOffsets(e, offsets)
	return nil
}

func skipAccumulatedMessageCmd() *command {
	return &command{
		name: "skipAccumulatedMessage", desc: "Skip all messages that are accumulated (not consumed) currently",
		opts: []option{
			{short: "g", long: "group", hasArg: true, required: true, desc: "set the consumer group"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "set the topic"},
			{short: "f", long: "force", hasArg: true, desc: "set the force rollback by timestamp switch[true|false]"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			// As Java's: timestamp -1, each queue's max offset.
			var offsets map[client.MessageQueue]int64
			err = e.spin(fmt.Sprintf("skipping the backlog of %s on %s", e.vals.get("g"), e.vals.get("t")), func() error {
				offsets, err = a.SkipAccumulated(e.ctx, e.vals.get("g"), e.vals.get("t"), e.vals.bool("f", true))
				return err
			})
			if err != nil {
				return err
			}
			printOffsets(e, offsets)
			return nil
		},
	}
}

// printOffsets prints a reset's new offsets as the offset commands do.
func printOffsets(e *env, offsets map[client.MessageQueue]int64) {
	e.printf("%-40s  %-40s  %-40s\n", "#brokerName", "#queueId", "#offset")
	for _, mq := range sortedQueues(offsets) {
		e.printf("%-40s  %-40d  %-40d\n", front(mq.BrokerName, 32), mq.QueueID, offsets[mq])
	}
}

func getConsumerConfigCmd() *command {
	return &command{
		name: "getConsumerConfig", desc: "Get consumer config by subscription group name!",
		opts: []option{{short: "g", long: "groupName", hasArg: true, required: true, desc: "subscription group name"}},
		run:  runGetConsumerConfig,
	}
}

func runGetConsumerConfig(e *env) error {
	group := e.vals.get("g")
	a, err := e.Admin()
	if err != nil {
		return err
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	found := false
	for _, n := range sortedKeys(ci.BrokerAddrTable) {
		bd := ci.BrokerAddrTable[n]
		// The master, else the member with the lowest id (selectBrokerAddr).
		addr, lowest := "", int64(-1)
		for id, a := range bd.BrokerAddrs {
			if lowest < 0 || id < lowest {
				addr, lowest = a, id
			}
		}
		if addr == "" {
			continue
		}
		w, err := a.SubscriptionGroups(e.ctx, addr)
		if err != nil {
			return err
		}
		c := w.SubscriptionGroupTable[group]
		if c == nil {
			continue
		}
		found = true
		e.printf("=============================%s:%s=============================\n", clusterOfBroker(ci, n), n)
		for _, f := range []struct {
			name  string
			value any
		}{
			{"groupName", c.GroupName}, {"consumeEnable", c.ConsumeEnable}, {"consumeFromMinEnable", c.ConsumeFromMinEnable},
			{"consumeBroadcastEnable", c.ConsumeBroadcastEnable}, {"retryQueueNums", c.RetryQueueNums},
			{"retryMaxTimes", c.RetryMaxTimes}, {"brokerId", c.BrokerID},
			{"whichBrokerWhenConsumeSlowly", c.WhichBrokerWhenConsumeSlowly},
			{"notifyConsumerIdsChangedEnable", c.NotifyConsumerIdsChangedEnable},
		} {
			e.printf("%-40s=  %v\n", f.name, f.value)
		}
	}
	if !found {
		return fmt.Errorf("mqadmin: subscription group %s not found on any broker", group)
	}
	return nil
}
