package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/ianaindex"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/cmd/internal/progress"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// The commands that look into a running cluster: connections, consumers'
// own view, per-broker statistics, printing queues, offset cloning and the
// brokers' clean-up triggers (RocketMQ 4.9's names, options and tables).

// pullBatch is how many messages each read of a queue asks for (Java's 32).
const pullBatch = 32

// bar returns a progress line on stderr: drawn on a terminal only.
func (e *env) bar(label string, total int64) *progress.Bar {
	return progress.New(e.app.err, label, total)
}

// parseTimeOption reads a timestamp option: epoch millis or
// yyyy-MM-dd#HH:mm:ss:SSS in local time (UtilAll.parseDate), or "now".
func parseTimeOption(opt, s string) (time.Time, error) {
	t, err := parseResetTime(s, time.Now())
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: option -%s wants epoch millis or yyyy-MM-dd#HH:mm:ss:SSS, got %q", errUsage, opt, s)
	}
	return t, nil
}

func producerConnectionCmd() *command {
	return &command{
		name: "producerConnection", desc: "Query producer's socket connection and client version",
		opts: []option{
			{short: "g", long: "producerGroup", hasArg: true, required: true, desc: "producer group name"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			conns, err := a.ProducerConnections(e.ctx, e.vals.get("g"), e.vals.get("t"))
			if err != nil {
				return err
			}
			for i, c := range conns {
				e.printf("%04d  %-32s %-22s %-8s %s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version))
			}
			return nil
		},
	}
}

func consumerStatusCmd() *command {
	return &command{
		name: "consumerStatus", desc: "Query consumer's internal data structure",
		opts: []option{
			{short: "g", long: "consumerGroup", hasArg: true, required: true, desc: "consumer group name"},
			{short: "i", long: "clientId", hasArg: true, desc: "The consumer's client id"},
			{short: "b", long: "brokerAddr", hasArg: true, desc: "broker address"},
			{short: "s", long: "jstack", desc: "Run jstack command in the consumer progress"},
		},
		run: runConsumerStatus,
	}
}

// runConsumerStatus asks each client of the group for its running info
// (GET_CONSUMER_RUNNING_INFO through a broker). Without -i every client's
// is written to a file, as Java does, and the group's subscriptions are
// compared; with -i one client's is printed.
func runConsumerStatus(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	group, jstack := e.vals.get("g"), e.vals.has("s")
	if e.vals.has("i") {
		info, err := a.ConsumerRunningInfo(e.ctx, group, e.vals.get("i"), jstack)
		if err != nil {
			return err
		}
		e.printf("%s", formatRunningInfo(info))
		return nil
	}
	var cc *protocol.ConsumerConnection
	if e.vals.has("b") {
		cc, err = a.ConsumerConnectionsAt(e.ctx, group, e.vals.get("b"))
	} else {
		cc, err = a.ConsumerConnections(e.ctx, group)
	}
	if err != nil {
		return err
	}
	conns := append([]protocol.Connection(nil), cc.ConnectionSet...)
	sort.Slice(conns, func(i, j int) bool { return conns[i].ClientID < conns[j].ClientID })
	dir := filepath.Join(filepath.Dir(e.bodyDir), "consumerStatus", strconv.FormatInt(time.Now().UnixMilli(), 10))
	infos := map[string]*protocol.ConsumerRunningInfo{}
	bar := e.bar("asking the group's clients", int64(len(conns)))
	bar.SetUnit("clients")
	e.printf("%-10s %-40s %-20s %s\n", "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
	i := 1
	for _, c := range conns {
		info, err := a.ConsumerRunningInfo(e.ctx, group, c.ClientID, jstack)
		bar.Add(1)
		if err != nil {
			bar.Clear()
			fmt.Fprintf(e.app.err, "client %s: %v\n", c.ClientID, describe(err))
			continue
		}
		infos[c.ClientID] = info
		path := filepath.Join(dir, filepath.Base(c.ClientID))
		if err := os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(path, []byte(formatRunningInfo(info)), 0o644)
		}
		if err != nil {
			path = "(not written: " + err.Error() + ")"
		}
		bar.Clear()
		e.printf("%-10d %-40s %-20s %s\n", i, c.ClientID, versionDesc(c.Version), path)
		i++
	}
	bar.Done()
	if len(infos) == 0 {
		return nil
	}
	if !sameSubscriptions(infos) {
		e.printf("\n\nWARN: Different subscription in the same group of consumer!!!")
		return nil
	}
	e.printf("\n\nSame subscription in the same group of consumer")
	e.printf("\n\nRebalance %s\n", "OK")
	for _, id := range sortedKeys(infos) {
		e.printf("%s", analyzeProcessQueue(id, infos[id]))
	}
	return nil
}

// sameSubscriptions compares the clients' subscription sets (topic and
// expression), as ConsumerRunningInfo.analyzeSubscription does for push
// consumers.
func sameSubscriptions(infos map[string]*protocol.ConsumerRunningInfo) bool {
	key := func(ri *protocol.ConsumerRunningInfo) string {
		var parts []string
		for _, s := range ri.SubscriptionSet {
			parts = append(parts, s.Topic+"\x00"+s.SubString)
		}
		sort.Strings(parts)
		return strings.Join(parts, "\x01")
	}
	var first *string
	for _, ri := range infos {
		if ri.Properties["PROP_CONSUME_TYPE"] != string(protocol.ConsumePassively) {
			continue
		}
		k := key(ri)
		if k == "" {
			return false // a push consumer subscribing to nothing
		}
		if first == nil {
			first = &k
		} else if *first != k {
			return false
		}
	}
	return true
}

// analyzeProcessQueue reports queues an orderly push consumer cannot lock
// (ConsumerRunningInfo.analyzeProcessQueue); lastConsumeTimestamp, which
// the concurrent check needs, is not reported by every client.
func analyzeProcessQueue(clientID string, ri *protocol.ConsumerRunningInfo) string {
	if ri.Properties["PROP_CONSUME_TYPE"] != string(protocol.ConsumePassively) || ri.Properties["PROP_CONSUMEORDERLY"] != "true" {
		return ""
	}
	var sb strings.Builder
	for _, mq := range sortedQueues(ri.MQTable) {
		pq := ri.MQTable[mq]
		if !pq.Locked {
			fmt.Fprintf(&sb, "%s %s can't lock for a while, %dms\n", clientID, mqString(mq), time.Now().UnixMilli()-pq.LastLockTimestamp)
		}
	}
	return sb.String()
}

// mqString is MessageQueue.toString.
func mqString(mq protocol.MessageQueue) string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", mq.Topic, mq.BrokerName, mq.QueueID)
}

// formatRunningInfo renders running info as ConsumerRunningInfo.formatString.
func formatRunningInfo(ri *protocol.ConsumerRunningInfo) string {
	var sb strings.Builder
	sb.WriteString("#Consumer Properties#\n")
	for _, k := range sortedKeys(ri.Properties) {
		fmt.Fprintf(&sb, "%-40s: %s\n", k, ri.Properties[k])
	}
	sb.WriteString("\n\n#Consumer Subscription#\n")
	subs := append([]protocol.SubscriptionData(nil), ri.SubscriptionSet...)
	sort.Slice(subs, func(i, j int) bool { return subs[i].Topic < subs[j].Topic })
	for i, s := range subs {
		fmt.Fprintf(&sb, "%03d Topic: %-40s ClassFilter: %-8t SubExpression: %s\n", i+1, s.Topic, s.ClassFilterMode, s.SubString)
	}
	mqs := sortedQueues(ri.MQTable)
	sb.WriteString("\n\n#Consumer Offset#\n")
	fmt.Fprintf(&sb, "%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset")
	for _, mq := range mqs {
		fmt.Fprintf(&sb, "%-32s  %-32s  %-4d  %-20d\n", mq.Topic, mq.BrokerName, mq.QueueID, ri.MQTable[mq].CommitOffset)
	}
	sb.WriteString("\n\n#Consumer MQ Detail#\n")
	fmt.Fprintf(&sb, "%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo")
	for _, mq := range mqs {
		pq := ri.MQTable[mq]
		fmt.Fprintf(&sb, "%-64s  %-32s  %-4d  ProcessQueueInfo [commitOffset=%d, cachedMsgMinOffset=%d, cachedMsgMaxOffset=%d, cachedMsgCount=%d, cachedMsgSizeInMiB=%d, locked=%t, tryUnlockTimes=%d, lastLockTimestamp=%d, droped=%t]\n",
			mq.Topic, mq.BrokerName, mq.QueueID, pq.CommitOffset, pq.CachedMsgMinOffset, pq.CachedMsgMaxOffset, pq.CachedMsgCount,
			pq.CachedMsgSizeInMiB, pq.Locked, pq.TryUnlockTimes, pq.LastLockTimestamp, pq.Droped)
	}
	sb.WriteString("\n\n#Consumer RT&TPS#\n")
	fmt.Fprintf(&sb, "%-64s  %14s %14s %14s %14s %18s %25s\n", "#Topic", "#Pull RT", "#Pull TPS", "#Consume RT",
		"#ConsumeOK TPS", "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour")
	for _, t := range sortedKeys(ri.StatusTable) {
		s := ri.StatusTable[t]
		fmt.Fprintf(&sb, "%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d\n", t, s.PullRT, s.PullTPS, s.ConsumeRT, s.ConsumeOKTPS,
			s.ConsumeFailedTPS, s.ConsumeFailedMsgs)
	}
	if ri.Jstack != "" {
		sb.WriteString("\n\n#Consumer jstack#\n")
		sb.WriteString(ri.Jstack)
	}
	return sb.String()
}

func brokerConsumeStatsCmd() *command {
	return &command{
		name: "brokerConsumeStats", desc: "Fetch broker consume stats data",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, required: true, desc: "Broker address"},
			{short: "t", long: "timeoutMillis", hasArg: true, desc: "request timeout Millis"},
			{short: "l", long: "level", hasArg: true, desc: "threshold of print diff"},
			{short: "o", long: "order", hasArg: true, desc: "order topic"},
		},
		run: func(e *env) error {
			timeout, err := e.vals.int("t", 50000)
			if err != nil {
				return err
			}
			level, err := e.vals.int("l", 0)
			if err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("%w: -t must be a positive number of milliseconds", errUsage)
			}
			a, err := e.Admin()
			if err != nil {
				return err
			}
			l, err := a.BrokerConsumeStats(e.ctx, e.vals.get("b"), e.vals.bool("o", false), time.Duration(timeout)*time.Millisecond)
			if err != nil {
				return err
			}
			e.printf("%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n",
				"#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
			for _, m := range l.ConsumeStatsList {
				for _, group := range sortedKeys(m) {
					for _, cs := range m[group] {
						for _, mq := range sortedQueues(cs.OffsetTable) {
							w := cs.OffsetTable[mq]
							diff := w.BrokerOffset - w.ConsumerOffset
							if diff < level || w.LastTimestamp <= 0 {
								continue // Java prints queues consumed at least once
							}
							e.printf("%-64s  %-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s\n", front(mq.Topic, 64), group,
								front(mq.BrokerName, 32), mq.QueueID, w.BrokerOffset, w.ConsumerOffset, diff,
								time.UnixMilli(w.LastTimestamp).Format("2006-01-02 15:04:05"))
						}
					}
				}
			}
			e.printf("\nDiff Total: %d\n", l.TotalDiff)
			return nil
		},
	}
}

func statsAllCmd() *command {
	return &command{
		name: "statsAll", desc: "Topic and Consumer tps stats",
		opts: []option{
			{short: "a", long: "activeTopic", desc: "print active topic only"},
			{short: "t", long: "topic", hasArg: true, desc: "print select topic only"},
		},
		run: runStatsAll,
	}
}

// runStatsAll prints every topic's put rate and each consuming group's get
// rate, backlog and day's counts (VIEW_BROKER_STATS_DATA on the topic's
// masters), as StatsAllSubCommand does.
func runStatsAll(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	topics, err := a.TopicList(e.ctx)
	if err != nil {
		return err
	}
	selected := e.vals.get("t")
	var todo []string
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) || strings.HasPrefix(t, dlqPrefix) || (selected != "" && t != selected) {
			continue
		}
		todo = append(todo, t)
	}
	e.printf("%-64s  %-64s %12s %11s %11s %14s %14s\n", "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour")
	bar := e.bar("reading topic stats", int64(len(todo)))
	bar.SetUnit("topics")
	defer bar.Done()
	for _, t := range todo {
		lines := statsOfTopic(e, a, t, e.vals.has("a"))
		bar.Clear()
		for _, l := range lines {
			e.printf("%s", l)
		}
		bar.Add(1)
	}
	return nil
}

// statsOfTopic returns statsAll's lines for one topic (none when it cannot
// be read, as Java skips it).
func statsOfTopic(e *env, a *client.Admin, topic string, activeOnly bool) []string {
	masters, err := topicMasters(e, a, topic)
	if err != nil {
		return nil
	}
	var inTPS float64
	var inToday int64
	for _, addr := range masters {
		if d, err := a.ViewBrokerStatsData(e.ctx, addr, broker.StatsTopicPutNums, topic); err == nil {
			inTPS += d.StatsMinute.TPS
			inToday += sum24h(d)
		}
	}
	groups, _ := a.TopicConsumers(e.ctx, topic)
	var out []string
	if len(groups) == 0 {
		if !activeOnly || inToday > 0 {
			out = append(out, fmt.Sprintf("%-64s  %-64s %12d %11.2f %11s %14d %14s\n", front(topic, 64), "", 0, inTPS, "", inToday, "NO_CONSUMER"))
		}
		return out
	}
	for _, g := range groups {
		var outTPS float64
		var outToday int64
		for _, addr := range masters {
			if d, err := a.ViewBrokerStatsData(e.ctx, addr, broker.StatsGroupGetNums, topic+"@"+g); err == nil {
				outTPS += d.StatsMinute.TPS
				outToday += sum24h(d)
			}
		}
		var accumulate int64
		if rows, err := a.ConsumerProgress(e.ctx, g, topic); err == nil {
			for _, r := range rows {
				accumulate += r.BrokerOffset - r.ConsumerOffset
			}
		}
		if !activeOnly || inToday > 0 || outToday > 0 {
			out = append(out, fmt.Sprintf("%-64s  %-64s %12d %11.2f %11.2f %14d %14d\n", front(topic, 64), front(g, 64),
				max(accumulate, 0), inTPS, outTPS, inToday, outToday))
		}
	}
	return out
}

// sum24h is StatsAllSubCommand.compute24HourSum: the day's count, else the
// hour's, else the minute's.
func sum24h(d *protocol.BrokerStatsData) int64 {
	switch {
	case d.StatsDay.Sum != 0:
		return d.StatsDay.Sum
	case d.StatsHour.Sum != 0:
		return d.StatsHour.Sum
	}
	return d.StatsMinute.Sum
}

// topicMasters returns the master address of each broker in topic's route.
func topicMasters(e *env, a *client.Admin, topic string) ([]string, error) {
	tr, err := a.TopicRoute(e.ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, bd := range tr.BrokerDatas {
		if m := bd.MasterAddr(); m != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// charsetDecoder returns a function turning a body in the named charset
// into UTF-8 text (-c charsetName, UTF-8 by default).
func charsetDecoder(name string) (func([]byte) string, error) {
	if name == "" || strings.EqualFold(name, "UTF-8") || strings.EqualFold(name, "UTF8") {
		return func(b []byte) string { return string(b) }, nil
	}
	enc, err := ianaindex.IANA.Encoding(name)
	if err != nil || enc == nil {
		return nil, fmt.Errorf("%w: unknown charset %q (-c)", errUsage, name)
	}
	dec := enc.NewDecoder()
	return func(b []byte) string {
		s, err := dec.Bytes(b)
		if err != nil {
			return string(b)
		}
		return string(s)
	}, nil
}

// messageString is MessageExt.toString, the line printMsg prints (the
// broker name, not in a stored record, is left out).
func messageString(m *client.MessageExt) string {
	return fmt.Sprintf("MessageExt [queueId=%d, storeSize=%d, queueOffset=%d, sysFlag=%d, bornTimestamp=%d, bornHost=/%s, "+
		"storeTimestamp=%d, storeHost=/%s, msgId=%s, commitLogOffset=%d, bodyCRC=%d, reconsumeTimes=%d, preparedTransactionOffset=%d, "+
		"toString()=Message{topic='%s', flag=%d, properties=%s, body=[%d bytes]}]",
		m.QueueID, m.StoreSize, m.QueueOffset, m.SysFlag, m.BornTimestamp, m.BornHost, m.StoreTimestamp, m.StoreHost,
		m.OffsetMsgID(), m.CommitLogOffset, m.BodyCRC, m.ReconsumeTimes, m.PreparedTransactionOffset, m.Topic, m.Flag,
		javaProps(m.Properties), len(m.Body))
}

// queueRange is a queue's offsets to read: [from, to).
func queueRange(e *env, a *client.Admin, mq client.MessageQueue, begin, end string) (from, to int64, err error) {
	if from, err = a.MinOffset(e.ctx, mq); err != nil {
		return 0, 0, err
	}
	if to, err = a.MaxOffset(e.ctx, mq); err != nil {
		return 0, 0, err
	}
	if begin != "" {
		ts, err := parseTimeOption("b", begin)
		if err != nil {
			return 0, 0, err
		}
		if from, err = a.SearchOffset(e.ctx, mq, ts); err != nil {
			return 0, 0, err
		}
	}
	if end != "" {
		ts, err := parseTimeOption("e", end)
		if err != nil {
			return 0, 0, err
		}
		if to, err = a.SearchOffset(e.ctx, mq, ts); err != nil {
			return 0, 0, err
		}
	}
	return from, to, nil
}

// readQueue pulls [from, to) of mq in batches, calling found with each
// batch; it stops early when the queue has nothing more. It returns the
// offset it stopped at and why ("" when it reached to).
func readQueue(e *env, a *client.Admin, mq client.MessageQueue, expr string, from, to int64, found func([]*client.MessageExt)) (int64, string, error) {
	off := from
	for off < to {
		if err := e.ctx.Err(); err != nil {
			return off, "", err
		}
		r, err := a.Pull(e.ctx, mq, expr, off, int32(min(int64(pullBatch), to-off)))
		if err != nil {
			return off, "", err
		}
		next := r.NextOffset
		switch {
		case r.Found && len(r.Messages) > 0:
			var in []*client.MessageExt
			for _, m := range r.Messages {
				if m.QueueOffset < to {
					in = append(in, m)
				}
			}
			found(in)
		case r.Found:
			// Records came back but none matched the expression.
		case next > off:
			// Nothing matched in the scanned range; carry on past it.
		default:
			return off, "NO_NEW_MSG", nil
		}
		if next <= off {
			return off, "OFFSET_ILLEGAL", nil
		}
		off = next
	}
	return off, "", nil
}

func printMsgCmd() *command {
	return &command{
		name: "printMsg", desc: "Print Message Detail",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "c", long: "charsetName", hasArg: true, desc: "CharsetName(eg: UTF-8,GBK)"},
			{short: "s", long: "subExpression", hasArg: true, desc: "Subscribe Expression(eg: TagA || TagB)"},
			{short: "b", long: "beginTimestamp", hasArg: true, desc: "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "e", long: "endTimestamp", hasArg: true, desc: "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "d", long: "printBody", hasArg: true, desc: "print body"},
		},
		run: runPrintMsg,
	}
}

// runPrintMsg prints every message of every queue of the topic, from the
// first (or the one stored at -b) to the end (or -e), as
// PrintMessageSubCommand does.
func runPrintMsg(e *env) error {
	decode, err := charsetDecoder(e.vals.get("c"))
	if err != nil {
		return err
	}
	printBody := e.vals.bool("d", true)
	expr := e.vals.get("s")
	a, err := e.Admin()
	if err != nil {
		return err
	}
	topic := e.vals.get("t")
	tr, err := a.TopicRoute(e.ctx, topic)
	if err != nil {
		return err
	}
	mqs := readableQueues(topic, tr)
	bar := e.bar("printing "+topic, int64(len(mqs)))
	bar.SetUnit("queues")
	defer bar.Done()
	for _, mq := range mqs {
		from, to, err := queueRange(e, a, mq, e.vals.get("b"), e.vals.get("e"))
		if err != nil {
			return err
		}
		bar.Clear()
		e.printf("minOffset=%d, maxOffset=%d, %s\n", from, to, mqString(mq))
		off, why, err := readQueue(e, a, mq, expr, from, to, func(msgs []*client.MessageExt) {
			bar.Clear()
			for _, m := range msgs {
				printOne(e, m, decode, printBody)
			}
		})
		if err != nil {
			return err
		}
		if why != "" {
			e.printf("%s print msg finished. status=%s, offset=%d\n", mqString(mq), why, off)
		}
		e.printf("--------------------------------------------------------\n")
		bar.Add(1)
	}
	return nil
}

// printOne prints a message as PrintMessageByQueueCommand.printMessage.
func printOne(e *env, m *client.MessageExt, decode func([]byte) string, printBody bool) {
	body := "NOT PRINT BODY"
	if printBody {
		body = decode(m.Body)
	}
	e.printf("MSGID: %s %s BODY: %s\n", m.MsgID(), messageString(m), body)
}

// readableQueues lists the readable queues of a route, sorted.
func readableQueues(topic string, tr *protocol.TopicRouteData) []client.MessageQueue {
	var out []client.MessageQueue
	for _, qd := range tr.QueueDatas {
		if !protocol.IsReadable(qd.Perm) {
			continue
		}
		for i := range qd.ReadQueueNums {
			out = append(out, client.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
		}
	}
	protocol.SortMessageQueues(out)
	return out
}

func printMsgByQueueCmd() *command {
	return &command{
		name: "printMsgByQueue", desc: "Print Message Detail",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "a", long: "brokerName", hasArg: true, required: true, desc: "broker name"},
			{short: "i", long: "queueId", hasArg: true, required: true, desc: "queue id"},
			{short: "c", long: "charsetName", hasArg: true, desc: "CharsetName(eg: UTF-8,GBK)"},
			{short: "s", long: "subExpression", hasArg: true, desc: "Subscribe Expression(eg: TagA || TagB)"},
			{short: "b", long: "beginTimestamp", hasArg: true, desc: "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "e", long: "endTimestamp", hasArg: true, desc: "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "p", long: "print msg", hasArg: true, desc: "print msg. eg: true | false(default)"},
			{short: "d", long: "printBody", hasArg: true, desc: "print body. eg: true | false(default)"},
			{short: "f", long: "calculate", hasArg: true, desc: "calculate by tag. eg: true | false(default)"},
		},
		run: runPrintMsgByQueue,
	}
}

// runPrintMsgByQueue reads one queue, printing its messages with -p true
// and counting them by tag with -f true (PrintMessageByQueueCommand).
func runPrintMsgByQueue(e *env) error {
	decode, err := charsetDecoder(e.vals.get("c"))
	if err != nil {
		return err
	}
	qid, err := e.vals.int("i", 0)
	if err != nil {
		return err
	}
	if qid < 0 || qid > 1<<16 {
		return fmt.Errorf("%w: -i must be a queue id", errUsage)
	}
	printMsgs, printBody, byTag := e.vals.bool("p", false), e.vals.bool("d", false), e.vals.bool("f", false)
	a, err := e.Admin()
	if err != nil {
		return err
	}
	mq := client.MessageQueue{Topic: e.vals.get("t"), BrokerName: e.vals.get("a"), QueueID: int32(qid)}
	if _, err := a.TopicRoute(e.ctx, mq.Topic); err != nil {
		return err
	}
	from, to, err := queueRange(e, a, mq, e.vals.get("b"), e.vals.get("e"))
	if err != nil {
		return err
	}
	bar := e.bar(fmt.Sprintf("reading %s", mqString(mq)), max(0, to-from))
	bar.SetUnit("offsets")
	defer bar.Done()
	tags := map[string]int64{}
	last := from
	_, _, err = readQueue(e, a, mq, e.vals.get("s"), from, to, func(msgs []*client.MessageExt) {
		for _, m := range msgs {
			if byTag {
				tags[m.Tags()]++
			}
		}
		if printMsgs {
			bar.Clear()
			for _, m := range msgs {
				printOne(e, m, decode, printBody)
			}
		}
		if n := len(msgs); n > 0 {
			bar.Add(msgs[n-1].QueueOffset + 1 - last)
			last = msgs[n-1].QueueOffset + 1
		}
	})
	if err != nil {
		return err
	}
	if byTag {
		bar.Clear()
		type tc struct {
			tag   string
			count int64
		}
		var list []tc
		for t, c := range tags {
			list = append(list, tc{t, c})
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].count != list[j].count {
				return list[i].count > list[j].count
			}
			return list[i].tag < list[j].tag
		})
		for _, x := range list {
			e.printf("Tag: %-30s Count: %s\n", x.tag, strconv.FormatInt(x.count, 10))
		}
	}
	return nil
}

func consumeMessageCmd() *command {
	return &command{
		name: "consumeMessage", desc: "Consume message",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "Topic name"},
			{short: "b", long: "brokerName", hasArg: true, desc: "Broker name"},
			{short: "i", long: "queueId", hasArg: true, desc: "Queue Id"},
			{short: "o", long: "offset", hasArg: true, desc: "Queue offset"},
			{short: "g", long: "consumerGroup", hasArg: true, desc: "Consumer group name"},
			{short: "s", long: "beginTimestamp", hasArg: true, desc: "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "e", long: "endTimestamp", hasArg: true, desc: "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"},
			{short: "c", long: "MessageNumber", hasArg: true, desc: "Number of message to be consumed"},
		},
		run: runConsumeMessage,
	}
}

// runConsumeMessage reads and prints up to -c messages: of every queue of
// the topic, of one queue (-b -i), or of one queue from an offset (-o),
// bounded by -s/-e in time, as ConsumeMessageCommand does. It is a tool's
// read: no group's committed offset moves (-g only names the pulling group).
func runConsumeMessage(e *env) error {
	count, err := e.vals.int("c", 128)
	if err != nil {
		return err
	}
	if count <= 0 {
		return fmt.Errorf("%w: please input a positive messageNumber (-c)", errUsage)
	}
	if e.vals.has("i") && !e.vals.has("b") {
		return fmt.Errorf("%w: please set the brokerName (-b) before queueId (-i)", errUsage)
	}
	if e.vals.has("o") && !e.vals.has("i") {
		return fmt.Errorf("%w: please set queueId (-i) before offset (-o)", errUsage)
	}
	startOff, err := e.vals.int("o", 0)
	if err != nil {
		return err
	}
	now := time.Now()
	var begin, end time.Time
	if e.vals.has("s") {
		if begin, err = parseTimeOption("s", e.vals.get("s")); err != nil {
			return err
		}
		if begin.After(now) {
			return fmt.Errorf("%w: please set the beginTimestamp before now", errUsage)
		}
	}
	if e.vals.has("e") {
		if end, err = parseTimeOption("e", e.vals.get("e")); err != nil {
			return err
		}
		if end.After(now) {
			return fmt.Errorf("%w: please set the endTimestamp before now", errUsage)
		}
		if !begin.IsZero() && begin.After(end) {
			return fmt.Errorf("%w: please make sure that the beginTimestamp is less than or equal to the endTimestamp", errUsage)
		}
	}
	a, err := e.consumeAdmin()
	if err != nil {
		return err
	}
	topic := e.vals.get("t")
	tr, err := a.TopicRoute(e.ctx, topic)
	if err != nil {
		return err
	}
	mqs := readableQueues(topic, tr)
	if e.vals.has("i") {
		qid, err := e.vals.int("i", 0)
		if err != nil {
			return err
		}
		if qid < 0 || qid > 1<<16 {
			return fmt.Errorf("%w: -i must be a queue id", errUsage)
		}
		mqs = []client.MessageQueue{{Topic: topic, BrokerName: e.vals.get("b"), QueueID: int32(qid)}}
	}
	bar := e.bar("consuming "+topic, count)
	bar.SetUnit("messages")
	defer bar.Done()
	left := count
	for _, mq := range mqs {
		if left <= 0 {
			break
		}
		from, to, err := queueRange(e, a, mq, "", "")
		if err != nil {
			return err
		}
		if !begin.IsZero() {
			if from, err = a.SearchOffset(e.ctx, mq, begin); err != nil {
				return err
			}
		}
		if !end.IsZero() {
			if to, err = a.SearchOffset(e.ctx, mq, end); err != nil {
				return err
			}
		}
		if e.vals.has("o") {
			if startOff > to {
				bar.Clear()
				e.printf("%s no matched msg, offset=%d\n", mqString(mq), startOff)
				continue
			}
			from = max(from, startOff)
		}
		if to-from > left {
			bar.Clear()
			e.printf("The oldest %d messages of queue %d will be provided\n", left, mq.QueueID)
			to = from + left
		}
		off, why, err := readQueue(e, a, mq, "", from, to, func(msgs []*client.MessageExt) {
			bar.Clear()
			e.printf("Consume ok\n")
			for _, m := range msgs {
				printOne(e, m, func(b []byte) string { return string(b) }, true)
			}
			left -= int64(len(msgs))
			bar.Add(int64(len(msgs)))
		})
		if err != nil {
			return err
		}
		if why != "" {
			bar.Clear()
			e.printf("%s print msg finished. status=%s, offset=%d\n", mqString(mq), why, off)
		}
	}
	return nil
}

// consumeAdmin is the admin client, pulling as -g's group when given
// (Java's DefaultMQPullConsumer takes the group name), else TOOLS_CONSUMER.
func (e *env) consumeAdmin() (*client.Admin, error) {
	if !e.vals.has("g") {
		return e.Admin()
	}
	e.adminGroup = e.vals.get("g")
	return e.Admin()
}

func cloneGroupOffsetCmd() *command {
	return &command{
		name: "cloneGroupOffset", desc: "clone offset from other group.",
		opts: []option{
			{short: "s", long: "srcGroup", hasArg: true, required: true, desc: "set source consumer group"},
			{short: "d", long: "destGroup", hasArg: true, required: true, desc: "set destination consumer group"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "set the topic"},
			{short: "o", long: "offline", hasArg: true, desc: "the group or the topic is offline"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			src, dst, topic := e.vals.get("s"), e.vals.get("d"), e.vals.get("t")
			if err := a.CloneGroupOffset(e.ctx, src, dst, topic, e.vals.bool("o", false)); err != nil {
				return err
			}
			e.printf("clone group offset success. srcGroup[%s], destGroup=[%s], topic[%s]\n", src, dst, topic)
			return nil
		},
	}
}

func cleanExpiredCQCmd() *command {
	return &command{
		name: "cleanExpiredCQ", desc: "Clean expired ConsumeQueue on broker.",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "Broker address"},
			{short: "c", long: "cluster", hasArg: true, desc: "clustername"},
		},
		run: func(e *env) error {
			return eachBroker(e, func(a *client.Admin, addr string) error { return a.CleanExpiredConsumeQueue(e.ctx, addr) })
		},
	}
}

func deleteExpiredCommitLogCmd() *command {
	return &command{
		name: "deleteExpiredCommitLog", desc: "Delete expired CommitLog files",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "Broker address"},
			{short: "c", long: "cluster", hasArg: true, desc: "clustername"},
		},
		run: func(e *env) error {
			return eachBroker(e, func(a *client.Admin, addr string) error { return a.DeleteExpiredCommitLog(e.ctx, addr) })
		},
	}
}

// eachBroker runs do on every target broker and prints "success" when all
// accepted, "false" otherwise (Java's output), naming each failure on stderr.
func eachBroker(e *env, do func(*client.Admin, string) error) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	var addrs []string
	if e.vals.has("b") || e.vals.has("c") {
		addrs, err = targetBrokers(e, a, nil, false)
	} else {
		addrs, err = a.MasterAddrs(e.ctx, "") // every master of every cluster
	}
	if err != nil {
		return err
	}
	ok := len(addrs) > 0
	for _, addr := range addrs {
		if err := do(a, addr); err != nil {
			ok = false
			fmt.Fprintf(e.app.err, "broker %s: %v\n", addr, describe(err))
		}
	}
	if !ok {
		e.printf("false\n")
		return errors.New("mqadmin: not every broker accepted the request")
	}
	e.printf("success\n")
	return nil
}

// spin runs do while a progress line with the elapsed time is drawn (on a
// terminal only), for one long call with nothing to count.
func (e *env) spin(label string, do func() error) error {
	bar := e.bar(label, 0)
	if !bar.On() {
		return do()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // spinLoop: ends when do returns
		defer close(done)
		bar.Spin(stop)
	}()
	err := do()
	close(stop)
	<-done
	bar.Done()
	return err
}
