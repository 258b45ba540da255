package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// roleSlave is brokerRole of a slave, as brokers report it in
// GET_BROKER_RUNTIME_INFO.
const roleSlave = "SLAVE"

// repeat runs round once, or with -i every interval seconds until the app's
// context ends (Ctrl-C in main), as Java's clusterList -i and haStatus -i
// do. Each round gets its own commandTimeout, so a long watch is not cut
// at two minutes. An empty -i means def seconds. Java also takes 0 and then
// polls the brokers in a busy loop; here the interval is at least 1 s.
func (e *env) repeat(def int64, round func() error) error {
	if !e.vals.has("i") {
		return round()
	}
	secs := def
	if e.vals.get("i") != "" {
		var err error
		if secs, err = e.vals.int("i", def); err != nil {
			return err
		}
	}
	if secs < 1 {
		return fmt.Errorf("%w: option -i wants an interval of at least 1 second, got %d", errUsage, secs)
	}
	for n := 1; ; n++ {
		ctx, cancel := context.WithTimeout(e.app.ctx, commandTimeout)
		e.ctx = ctx
		err := round()
		cancel()
		if e.app.ctx.Err() != nil {
			return nil // stopped by the operator
		}
		if err != nil {
			return err
		}
		if e.maxRounds > 0 && n >= e.maxRounds {
			return nil
		}
		t := time.NewTimer(time.Duration(secs) * time.Second)
		select {
		case <-e.app.ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func haStatusCmd() *command {
	return &command{
		name: "haStatus", desc: "Fetch ha runtime status data.",
		opts: []option{
			{short: "c", long: "clusterName", hasArg: true, desc: "which cluster"},
			{short: "b", long: "brokerAddr", hasArg: true, desc: "which broker to fetch"},
			{short: "i", long: "interval", hasArg: true, desc: "the interval(second) of get info"},
		},
		needOneOf: []string{"b", "c"},
		run:       runHAStatus,
	}
}

// runHAStatus prints GET_BROKER_HA_STATUS of one broker (-b), or of every
// broker of a cluster (-c), masters and slaves: Java's -c covers masters
// only, which hides the slaves' side. Under -c a broker that does not
// answer is reported on stderr and the others are still printed; the
// command fails only when none answered.
func runHAStatus(e *env) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	return e.repeat(3, func() error {
		if e.vals.has("b") {
			return printHAStatus(e, a, e.vals.get("b"))
		}
		ci, err := a.ClusterInfo(e.ctx)
		if err != nil {
			return err
		}
		cluster := e.vals.get("c")
		rows, err := clusterMembers(ci, cluster)
		if err != nil {
			return err
		}
		failed := 0
		for _, r := range rows {
			if err := printHAStatus(e, a, r.addr); err != nil {
				fmt.Fprintf(e.app.err, "broker %s ha status: %v\n", r.addr, describe(err))
				failed++
			}
		}
		if failed > 0 && failed == len(rows) {
			return fmt.Errorf("mqadmin: no broker of cluster %s answered GET_BROKER_HA_STATUS", cluster)
		}
		return nil
	})
}

// clusterMembers returns the rows of cluster's brokers, masters and slaves,
// by broker name then id; errNoCluster if the cluster is unknown.
func clusterMembers(ci *protocol.ClusterInfo, cluster string) ([]brokerRow, error) {
	if _, ok := ci.ClusterAddrTable[cluster]; !ok {
		return nil, fmt.Errorf("%w: %s", errNoCluster, cluster)
	}
	var out []brokerRow
	for _, r := range clusterRows(ci) {
		if r.cluster == cluster {
			out = append(out, r)
		}
	}
	return out, nil
}

// printHAStatus prints one broker's GET_BROKER_HA_STATUS (printHAInfo).
func printHAStatus(e *env, a *client.Admin, addr string) error {
	info, err := a.BrokerHAStatus(e.ctx, addr)
	if err != nil {
		return err
	}
	printHAInfo(e.out, addr, info)
	return nil
}

// printHAInfo prints the replication of the broker at addr as Java's
// HAStatusSubCommand lays it out. A slave's block then gets lines of ours:
// the broker's own address (Java's block names only the master), its HA
// state, the master's max offset and how many bytes it lacks, and why it
// refuses its master if it does; they are printed when the broker sent its
// state, which a Java broker does not.
func printHAInfo(w io.Writer, addr string, info *protocol.HARuntimeInfo) {
	if info.Master {
		fmt.Fprintf(w, "\n#MasterAddr\t%s\n#MasterCommitLogMaxOffset\t%d\n#SlaveNum\t%d\n#InSyncSlaveNum\t%d\n",
			addr, info.MasterCommitLogMaxOffset, len(info.HAConnectionInfo), info.InSyncSlaveNums)
		fmt.Fprintf(w, "%-32s  %-16s %16s %16s %16s %16s\n",
			"#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere")
		for _, c := range info.HAConnectionInfo {
			status := "OK"
			if !c.InSync {
				status = "Fall Behind"
			}
			fmt.Fprintf(w, "%-32s  %-16d %16d %16.2f %16s %16d\n",
				c.Addr, c.SlaveAckOffset, c.Diff, float64(c.TransferredByteInSecond)/1024, status, c.TransferFromWhere)
		}
		return
	}
	c := info.HAClientRuntimeInfo
	fmt.Fprintf(w, "\n#MasterAddr\t%s\n", c.MasterAddr)
	fmt.Fprintf(w, "#CommitLogMaxOffset\t%d\n", c.MaxOffset)
	fmt.Fprintf(w, "#TransferSpeed(KB/s)\t%.2f\n", float64(c.TransferredByteInSecond)/1024)
	fmt.Fprintf(w, "#LastReadTime\t%s\n", humanMillis(c.LastReadTimestamp))
	fmt.Fprintf(w, "#LastWriteTime\t%s\n", humanMillis(c.LastWriteTimestamp))
	fmt.Fprintf(w, "#MasterFlushOffset\t%d\n", c.MasterFlushOffset)
	if c.State == "" {
		return
	}
	fmt.Fprintf(w, "#SlaveAddr\t%s\n", addr)
	fmt.Fprintf(w, "#HAState\t%s\n", c.State)
	masterMax, behind := "-", "-" // -1: the master's offset is not known yet
	if info.MasterCommitLogMaxOffset >= 0 {
		masterMax = strconv.FormatInt(info.MasterCommitLogMaxOffset, 10)
		behind = strconv.FormatInt(max(0, info.MasterCommitLogMaxOffset-c.MaxOffset), 10)
	}
	fmt.Fprintf(w, "#MasterCommitLogMaxOffset\t%s\n", masterMax)
	fmt.Fprintf(w, "#FallBehind(bytes)\t%s\n", behind)
	if c.LastError != "" {
		fmt.Fprintf(w, "#LastError\t%s\n", c.LastError)
	}
}

// replication holds the clusterList columns of ours for one broker.
type replication struct {
	role    string // brokerRole: ASYNC_MASTER, SYNC_MASTER or SLAVE
	slaves  string // a master's connected slaves
	haState string // a slave's HA client state
	behind  string // bytes: a master's slowest slave, or a slave, behind its master
}

// replicationOf reads a broker's replication figures (replicationCells),
// asking a master with slaves for GET_BROKER_HA_STATUS.
func replicationOf(e *env, a *client.Admin, r brokerRow, kv map[string]string) replication {
	var info *protocol.HARuntimeInfo
	if roleOf(r, kv) != roleSlave && kv["slaveNum"] != "0" {
		info, _ = a.BrokerHAStatus(e.ctx, r.addr) // unknown figures print as "-"
	}
	return replicationCells(r, kv, info)
}

// replicationCells computes a broker's replication columns from its
// runtime stats kv (empty when they failed) and, for a master, its HA
// status (nil when not asked or not answered): the stats'
// slaveFallBehindMuch is measured against the slave that got furthest
// (push2SlaveMaxOffset), and an operator wants the slowest. Unknown
// figures are "-".
func replicationCells(r brokerRow, kv map[string]string, info *protocol.HARuntimeInfo) replication {
	get := func(k string) string {
		if v := kv[k]; v != "" {
			return v
		}
		return "-"
	}
	rep := replication{role: roleOf(r, kv), slaves: "-", haState: "-", behind: "-"}
	if rep.role == roleSlave {
		rep.haState, rep.behind = get("haState"), get("slaveFallBehindMuch")
		return rep
	}
	rep.slaves = get("slaveNum")
	if info == nil || !info.Master {
		return rep
	}
	rep.slaves = strconv.Itoa(len(info.HAConnectionInfo))
	if d, ok := info.MaxDiff(); ok {
		rep.behind = strconv.FormatInt(d, 10)
	}
	return rep
}
