package main

import (
	"sort"
	"strconv"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

// traceTimeLayout is Java's "yyyy-MM-dd HH:mm:ss", in local time as Java's
// DateFormatUtils prints it.
const traceTimeLayout = "2006-01-02 15:04:05"

// queryMsgTraceByIDCmd prints a message's trace as Java's
// QueryMsgTraceByIdSubCommand: a block per send (Pub) and a block per
// consumer group (its SubAfter records). The Pub block has two columns
// Java's lacks: the broker that stored the message and its store time,
// read from the message itself ("-" when it is gone).
func queryMsgTraceByIDCmd() *command {
	return &command{
		name: "queryMsgTraceById", aliases: []string{"QueryMsgTraceById"}, desc: "query a message trace",
		opts: []option{
			{short: "i", long: "msgId", hasArg: true, required: true, desc: "Message Id"},
			{short: "t", long: "traceTopic", hasArg: true, desc: "The name value of message trace topic"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			msgID := e.vals.get("i")
			views, err := a.QueryTrace(e.ctx, e.vals.get("t"), msgID)
			if err != nil {
				return err
			}
			byGroup := map[string][]client.TraceView{}
			for _, v := range views {
				switch v.Type {
				case client.TracePub:
					broker, stored := v.StoreHost, "-"
					if ms, err := a.QueryMessageByUniqKey(e.ctx, v.Topic, msgID); err == nil && len(ms) > 0 {
						broker = ms[0].StoreHost.String()
						stored = time.UnixMilli(ms[0].StoreTimestamp).Format(traceTimeLayout)
					}
					e.printf("%-10s %-20s %-20s %-20s %-10s %-10s %-22s %-20s\n",
						"#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status", "#BrokerAddr", "#StoreTime")
					e.printf("%-10s %-20s %-20s %-20s %-10s %-10s %-22s %-20s\n",
						"Pub", v.Group, v.ClientHost, time.UnixMilli(v.Timestamp).Format(traceTimeLayout),
						strconv.FormatInt(v.CostTime, 10)+"ms", v.Status(), broker, stored)
					e.printf("\n")
				case client.TraceSubAfter:
					byGroup[v.Group] = append(byGroup[v.Group], v)
				}
			}
			groups := make([]string, 0, len(byGroup))
			for g := range byGroup {
				groups = append(groups, g)
			}
			sort.Strings(groups) // Java's order is a HashMap's; a sorted one is reproducible
			for _, g := range groups {
				e.printf("%-10s %-20s %-20s %-20s %-10s %-10s\n", "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
				for _, v := range byGroup[g] {
					e.printf("%-10s %-20s %-20s %-20s %-10s %-10s\n", "Sub", v.Group, v.ClientHost,
						time.UnixMilli(v.Timestamp).Format(traceTimeLayout), strconv.FormatInt(v.CostTime, 10)+"ms", v.Status())
				}
				e.printf("\n")
			}
			return nil
		},
	}
}
