package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// sortedKeys returns m's keys in ascending order: the tables here print
// maps the way Java's sorted views do, not in Go's random order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// sortedQueues returns m's queues in MessageQueue.compareTo order.
func sortedQueues[V any](m map[client.MessageQueue]V) []client.MessageQueue {
	mqs := slices.Collect(maps.Keys(m))
	sortQueues(mqs)
	return mqs
}

func clusterListCmd() *command {
	return &command{
		name: "clusterList", desc: "List all of clusters",
		opts: []option{
			{short: "m", long: "moreStats", desc: "Print more stats"},
			{short: "i", long: "interval", hasArg: true, desc: "specify intervals numbers, it is in seconds"},
		},
		run: runClusterList,
	}
}

// brokerRow is one broker member of the cluster table.
type brokerRow struct {
	cluster, name string
	id            int64
	addr          string
}

func clusterRows(ci *protocol.ClusterInfo) []brokerRow {
	var rows []brokerRow
	for _, c := range sortedKeys(ci.ClusterAddrTable) {
		names := append([]string(nil), ci.ClusterAddrTable[c]...)
		sort.Strings(names)
		for _, n := range names {
			bd := ci.BrokerAddrTable[n]
			if bd == nil {
				continue
			}
			for _, id := range sortedKeys(bd.BrokerAddrs) {
				rows = append(rows, brokerRow{cluster: c, name: n, id: id, addr: bd.BrokerAddrs[id]})
			}
		}
	}
	return rows
}

// firstFloat reads the leading number of a stats value like "12.5 11.0 10.2".
func firstFloat(s string) float64 {
	f, _ := strconv.ParseFloat(strings.Fields(s + " 0")[0], 64)
	return f
}

// runClusterList prints every broker of every cluster, masters and slaves,
// in Java's columns; ours follow at the end of each row: the broker's role
// and its replication (see replicationOf). -m keeps Java's traffic table
// and adds each row's broker id and role, so a master's row and its
// slave's can be told apart.
func runClusterList(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	return e.repeat(0, func() error {
		ci, err := a.ClusterInfo(e.ctx)
		if err != nil {
			return err
		}
		if e.vals.has("m") {
			printClusterMoreStats(e, a, ci)
			return nil
		}
		printClusterBaseInfo(e, a, ci)
		return nil
	})
}

func printClusterMoreStats(e *env, a *client.Admin, ci *protocol.ClusterInfo) {
	e.printf("%-16s  %-32s %14s %14s %14s %14s  %-4s  %s\n",
		"#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday", "#BID", "#Role")
	for _, r := range clusterRows(ci) {
		var inYest, outYest, inToday, outToday int64
		kv, err := a.BrokerRuntimeStats(e.ctx, r.addr)
		if err == nil {
			n := func(k string) int64 { v, _ := strconv.ParseInt(kv[k], 10, 64); return v }
			inYest = n("msgPutTotalTodayMorning") - n("msgPutTotalYesterdayMorning")
			outYest = n("msgGetTotalTodayMorning") - n("msgGetTotalYesterdayMorning")
			inToday = n("msgPutTotalTodayNow") - n("msgPutTotalTodayMorning")
			outToday = n("msgGetTotalTodayNow") - n("msgGetTotalTodayMorning")
		}
		e.printf("%-16s  %-32s %14d %14d %14d %14d  %-4d  %s\n", r.cluster, r.name, inYest, outYest, inToday, outToday,
			r.id, roleOf(r, kv))
	}
}

// roleOf is a broker's brokerRole from its runtime stats, else RocketMQ's
// rule: id 0 is the master.
func roleOf(r brokerRow, kv map[string]string) string {
	if role := kv["brokerRole"]; role != "" {
		return role
	}
	if r.id == protocol.MasterID {
		return "MASTER"
	}
	return roleSlave
}

func printClusterBaseInfo(e *env, a *client.Admin, ci *protocol.ClusterInfo) {
	e.printf("%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s  %-12s %7s %-10s %12s\n",
		"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE",
		"#Role", "#Slaves", "#HAState", "#Behind(B)")
	for _, r := range clusterRows(ci) {
		kv, err := a.BrokerRuntimeStats(e.ctx, r.addr)
		if err != nil {
			fmt.Fprintf(e.app.err, "broker %s runtime stats: %v\n", r.addr, describe(err))
			kv = map[string]string{}
		}
		hour, space := 0.0, 0.0
		if ts, err := strconv.ParseInt(kv["earliestMessageTimeStamp"], 10, 64); err == nil && ts > 0 {
			hour = float64(time.Now().UnixMilli()-ts) / 1000 / 3600
		}
		if f, err := strconv.ParseFloat(kv["commitLogDiskRatio"], 64); err == nil {
			space = f
		}
		rep := replicationOf(e, a, r, kv)
		e.printf("%-16s  %-22s  %-4d  %-22s %-16s %19s %19s %10s %5s %6s  %-12s %7s %-10s %12s\n", r.cluster, r.name, r.id, r.addr, kv["brokerVersionDesc"],
			fmt.Sprintf("%9.2f(%s,%sms)", firstFloat(kv["putTps"]), kv["sendThreadPoolQueueSize"], kv["sendThreadPoolQueueHeadWaitTimeMills"]),
			fmt.Sprintf("%9.2f(%s,%sms)", firstFloat(kv["getTransferedTps"]), kv["pullThreadPoolQueueSize"], kv["pullThreadPoolQueueHeadWaitTimeMills"]),
			kv["pageCacheLockTimeMills"], fmt.Sprintf("%2.2f", hour), fmt.Sprintf("%.4f", space),
			rep.role, rep.slaves, rep.haState, rep.behind)
	}
}

func brokerStatusCmd() *command {
	return &command{
		name: "brokerStatus", desc: "Fetch broker runtime status data",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "Broker address"},
			{short: "c", long: "clusterName", hasArg: true, desc: "which cluster"},
		},
		needOneOf: []string{"b", "c"},
		run:       runBrokerStatus,
	}
}

func runBrokerStatus(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	if e.vals.has("b") {
		kv, err := a.BrokerRuntimeStats(e.ctx, e.vals.get("b"))
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(kv) {
			e.printf("%-32s: %s\n", k, kv[k])
		}
		return nil
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	addrs, err := clusterAddrs(ci, e.vals.get("c"), true)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		kv, err := a.BrokerRuntimeStats(e.ctx, addr)
		if err != nil {
			fmt.Fprintf(e.app.err, "broker %s runtime stats: %v\n", addr, describe(err))
			continue
		}
		for _, k := range sortedKeys(kv) {
			e.printf("%-24s %-32s: %s\n", addr, k, kv[k])
		}
	}
	return nil
}

func getBrokerConfigCmd() *command {
	return &command{
		name: "getBrokerConfig", desc: "Get broker config by cluster or special broker!",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "get which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "get which cluster"},
		},
		needOneOf: []string{"b", "c"},
		run:       runGetBrokerConfig,
	}
}

func runGetBrokerConfig(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	show := func(prefix, addr string) error {
		cfg, err := a.BrokerConfig(e.ctx, addr)
		if err != nil {
			return err
		}
		e.printf("%s", prefix)
		for _, k := range sortedKeys(cfg) {
			e.printf("%-50s=  %s\n", k, cfg[k])
		}
		e.printf("\n")
		return nil
	}
	if e.vals.has("b") {
		addr := e.vals.get("b")
		return show(fmt.Sprintf("============%s============\n", addr), addr)
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return err
	}
	if _, err := clusterAddrs(ci, e.vals.get("c"), false); err != nil {
		return err
	}
	for _, r := range clusterRows(ci) {
		if r.cluster != e.vals.get("c") {
			continue
		}
		prefix := fmt.Sprintf("============Master: %s============\n", r.addr)
		if r.id != protocol.MasterID {
			prefix = fmt.Sprintf("============My Master: %s=====Slave: %s============\n", ci.BrokerAddrTable[r.name].MasterAddr(), r.addr)
		}
		if err := show(prefix, r.addr); err != nil {
			return err
		}
	}
	return nil
}

func updateBrokerConfigCmd() *command {
	return &command{
		name: "updateBrokerConfig", desc: "Update broker's config",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "update which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "update which cluster"},
			{short: "k", long: "key", hasArg: true, required: true, desc: "config key"},
			{short: "v", long: "value", hasArg: true, required: true, desc: "config value"},
		},
		needOneOf: []string{"b", "c"},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			addrs, err := targetBrokers(e, a, nil, true)
			if err != nil {
				return err
			}
			kv := map[string]string{e.vals.get("k"): e.vals.get("v")}
			for _, addr := range addrs {
				if err := a.UpdateBrokerConfig(e.ctx, addr, kv); err != nil {
					return err
				}
				e.printf("update broker config success, %s\n", addr)
			}
			return nil
		},
	}
}

func getNamesrvConfigCmd() *command {
	return &command{
		name: "getNamesrvConfig", desc: "Get configs of name server.",
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			for _, ns := range e.nameServers() {
				cfg, err := a.NameServerConfig(e.ctx, ns)
				if err != nil {
					return err
				}
				e.printf("============%s============\n", ns)
				for _, k := range sortedKeys(cfg) {
					e.printf("%-50s=  %s\n", k, cfg[k])
				}
			}
			return nil
		},
	}
}

func updateNamesrvConfigCmd() *command {
	return &command{
		name: "updateNamesrvConfig", desc: "Update configs of name server.",
		opts: []option{
			{short: "k", long: "key", hasArg: true, required: true, desc: "config key"},
			{short: "v", long: "value", hasArg: true, required: true, desc: "config value"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			k, v := e.vals.get("k"), e.vals.get("v")
			if err := a.UpdateNameServerConfig(e.ctx, map[string]string{k: v}); err != nil {
				return err
			}
			e.printf("update name server config success![%s]\n%s : %s\n", strings.Join(e.nameServers(), ", "), k, v)
			return nil
		},
	}
}

func updateKvConfigCmd() *command {
	return &command{
		name: "updateKvConfig", desc: "Create or update KV config.",
		opts: []option{
			{short: "s", long: "namespace", hasArg: true, required: true, desc: "set the namespace"},
			{short: "k", long: "key", hasArg: true, required: true, desc: "set the key name"},
			{short: "v", long: "value", hasArg: true, required: true, desc: "set the key value"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			if err := a.PutKVConfig(e.ctx, e.vals.get("s"), e.vals.get("k"), e.vals.get("v")); err != nil {
				return err
			}
			e.printf("create or update kv config to namespace success.\n")
			return nil
		},
	}
}

func deleteKvConfigCmd() *command {
	return &command{
		name: "deleteKvConfig", desc: "Delete KV config.",
		opts: []option{
			{short: "s", long: "namespace", hasArg: true, required: true, desc: "set the namespace"},
			{short: "k", long: "key", hasArg: true, required: true, desc: "set the key name"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			if err := a.DeleteKVConfig(e.ctx, e.vals.get("s"), e.vals.get("k")); err != nil {
				return err
			}
			e.printf("delete kv config from namespace success.\n")
			return nil
		},
	}
}
