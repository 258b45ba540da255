package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// MustStartSlave starts a SLAVE (brokerId 1) of c's broker-a, registered
// with c's nameserver, which tells it its master; it stops at test end.
func (c *cluster) MustStartSlave(t *testing.T) *broker.Broker {
	t.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.NamesrvAddr = c.ns
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 1
	smallBroker(&cfg)
	cfg.BrokerRole = conf.RoleSlave
	cfg.BrokerID = 1
	b, err := broker.New(&cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, b.Shutdown(ctx))
	})
	return b
}

// last returns the last n fields of a table row.
func last(row string, n int) []string {
	f := fields(row)
	if len(f) < n {
		return f
	}
	return f[len(f)-n:]
}

// mqadminRounds runs a repeating command (-i) for at most rounds rounds.
func mqadminRounds(t *testing.T, rounds int, args ...string) result {
	t.Helper()
	var out, errw bytes.Buffer
	a := newApp(&out, &errw)
	a.getenv = func(string) string { return "" }
	a.maxRounds = rounds
	code := a.run(args)
	return result{code: code, out: out.String(), err: errw.String()}
}

// A SYNC_MASTER and its slave as the operator sees them: clusterList names
// both with their roles and the replication figures, brokerStatus shows
// the brokers' replication entries, haStatus shows the master's slaves and
// the slave's master, with offsets equal to the stores'. When the master
// stops, the slave is listed alone, no longer following.
func TestReplicationCommands(t *testing.T) {
	c := MustStartClusterWith(t, func(cfg *conf.BrokerConfig) { cfg.BrokerRole = conf.RoleSyncMaster })
	ctx := testCtx(t)

	t.Run("master alone", func(t *testing.T) {
		out := c.ok(t, "clusterList")
		t.Logf("mqadmin clusterList (master alone):\n%s", out)
		assert.Regexp(t, `^#Cluster Name\s+#Broker Name\s+#BID\s+#Addr\s+#Version\s+#InTPS\(LOAD\)\s+#OutTPS\(LOAD\)\s+#PCWait\(ms\)\s+#Hour\s+#SPACE\s+#Role\s+#Slaves\s+#HAState\s+#Behind\(B\)\n`, out)
		r := rows(out, "DefaultCluster")
		require.Len(t, r, 1, out)
		assert.Equal(t, []string{"DefaultCluster", "broker-a", "0", c.addr, "V4_9_8"}, fields(r[0])[:5])
		assert.Equal(t, []string{"SYNC_MASTER", "0", "-", "-"}, last(r[0], 4))

		out = c.ok(t, "haStatus", "-b", c.addr)
		assert.Contains(t, out, "\n#MasterAddr\t"+c.addr+"\n")
		assert.Contains(t, out, "#SlaveNum\t0\n#InSyncSlaveNum\t0\n")
	})

	slave := c.MustStartSlave(t)
	require.Eventually(t, func() bool {
		info, err := c.admin.BrokerHAStatus(ctx, c.addr)
		return err == nil && len(info.HAConnectionInfo) == 1
	}, 20*time.Second, 20*time.Millisecond, "the slave connects to its master")
	c.createTopic(t, "HATopic")
	p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { require.NoError(t, p.Shutdown()) }()
	for i := range 20 {
		res, err := p.SendSync(ctx, client.NewMessage("HATopic", []byte(fmt.Sprintf("replicated %d", i))))
		require.NoError(t, err)
		require.Equal(t, client.SendOK, res.Status, "a SYNC_MASTER answers SEND_OK once its slave has the message")
	}
	masterMax := c.broker.Store().CommitLog().MaxOffset()
	require.Eventually(t, func() bool {
		mi, err := c.admin.BrokerHAStatus(ctx, c.addr)
		if err != nil || len(mi.HAConnectionInfo) != 1 || mi.HAConnectionInfo[0].Diff != 0 {
			return false
		}
		si, err := c.admin.BrokerHAStatus(ctx, slave.Addr())
		return err == nil && si.HAClientRuntimeInfo.MaxOffset == masterMax && si.MasterCommitLogMaxOffset == masterMax
	}, 20*time.Second, 20*time.Millisecond, "the slave has the master's %d bytes and both know it", masterMax)
	require.Equal(t, masterMax, slave.Store().CommitLog().MaxOffset())
	max := strconv.FormatInt(masterMax, 10)
	kv, err := c.admin.BrokerRuntimeStats(ctx, c.addr)
	require.NoError(t, err)
	haServerAddr := kv["haServerAddr"]
	require.NotEmpty(t, haServerAddr)

	t.Run("clusterList", func(t *testing.T) {
		var out string
		require.Eventually(t, func() bool {
			out = c.ok(t, "clusterList")
			return len(rows(out, "DefaultCluster")) == 2
		}, 10*time.Second, 20*time.Millisecond, "both brokers registered:\n%s", out)
		t.Logf("mqadmin clusterList:\n%s", out)
		r := rows(out, "DefaultCluster")
		assert.Equal(t, []string{"DefaultCluster", "broker-a", "0", c.addr, "V4_9_8"}, fields(r[0])[:5])
		assert.Equal(t, []string{"SYNC_MASTER", "1", "-", "0"}, last(r[0], 4))
		assert.Equal(t, []string{"DefaultCluster", "broker-a", "1", slave.Addr(), "V4_9_8"}, fields(r[1])[:5])
		assert.Equal(t, []string{"SLAVE", "-", "following", "0"}, last(r[1], 4))

		out = c.ok(t, "clusterList", "-m")
		t.Logf("mqadmin clusterList -m:\n%s", out)
		assert.Regexp(t, `^#Cluster Name\s+#Broker Name\s+#InTotalYest\s+#OutTotalYest\s+#InTotalToday\s+#OutTotalToday\s+#BID\s+#Role\n`, out)
		r = rows(out, "DefaultCluster")
		require.Len(t, r, 2, out)
		assert.Equal(t, []string{"0", "SYNC_MASTER"}, last(r[0], 2))
		assert.Equal(t, []string{"1", "SLAVE"}, last(r[1], 2))
	})

	t.Run("brokerStatus", func(t *testing.T) {
		out := c.ok(t, "brokerStatus", "-b", c.addr)
		t.Logf("mqadmin brokerStatus -b master (replication entries):\n%s", grepLines(out, `^(brokerRole|haServerAddr|slaveNum|push2SlaveMaxOffset|slaveFallBehindMuch|commitLogMaxOffset)\s`))
		for k, v := range map[string]string{"brokerRole": "SYNC_MASTER", "haServerAddr": haServerAddr, "slaveNum": "1",
			"push2SlaveMaxOffset": max, "slaveFallBehindMuch": "0", "commitLogMaxOffset": max} {
			assert.Regexp(t, `(?m)^`+k+`\s+: `+regexp.QuoteMeta(v)+`$`, out)
		}
		out = c.ok(t, "brokerStatus", "-b", slave.Addr())
		t.Logf("mqadmin brokerStatus -b slave (replication entries):\n%s", grepLines(out, `^(brokerRole|masterAddr|haMasterAddr|haState|masterCommitLogMaxOffset|slaveFallBehindMuch|commitLogMaxOffset)\s`))
		for k, v := range map[string]string{"brokerRole": "SLAVE", "masterAddr": c.addr, "haMasterAddr": haServerAddr, "haState": "following",
			"masterCommitLogMaxOffset": max, "slaveFallBehindMuch": "0", "commitLogMaxOffset": max} {
			assert.Regexp(t, `(?m)^`+k+`\s+: `+regexp.QuoteMeta(v)+`$`, out)
		}
		out = c.ok(t, "brokerStatus", "-c", "DefaultCluster")
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(c.addr)+`\s+slaveNum\s+: 1$`, out)
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(slave.Addr())+`\s+haState\s+: following$`, out)
	})

	t.Run("haStatus", func(t *testing.T) {
		out := c.ok(t, "haStatus", "-b", c.addr)
		t.Logf("mqadmin haStatus -b master:\n%s", out)
		assert.Contains(t, out, "\n#MasterAddr\t"+c.addr+"\n#MasterCommitLogMaxOffset\t"+max+"\n#SlaveNum\t1\n#InSyncSlaveNum\t1\n")
		assert.Regexp(t, `#SlaveAddr\s+#SlaveAckOffset\s+#Diff\s+#TransferSpeed\(KB/s\)\s+#Status\s+#TransferFromWhere\n`, out)
		r := rows(out, "127.0.0.1:")
		require.Len(t, r, 1, out)
		f := fields(r[0])
		assert.Equal(t, []string{max, "0"}, f[1:3], "ack offset and diff")
		assert.Equal(t, "OK", f[4])

		out = c.ok(t, "haStatus", "-b", slave.Addr())
		t.Logf("mqadmin haStatus -b slave:\n%s", out)
		for _, line := range []string{"#MasterAddr\t" + haServerAddr, "#CommitLogMaxOffset\t" + max, "#SlaveAddr\t" + slave.Addr(),
			"#HAState\tfollowing", "#MasterCommitLogMaxOffset\t" + max, "#FallBehind(bytes)\t0"} {
			assert.Contains(t, out, "\n"+line+"\n")
		}

		out = c.ok(t, "haStatus", "-c", "DefaultCluster")
		t.Logf("mqadmin haStatus -c DefaultCluster:\n%s", out)
		assert.Equal(t, 2, strings.Count(out, "\n#MasterAddr\t"), out)
		im, is := strings.Index(out, "#MasterAddr\t"+c.addr), strings.Index(out, "#SlaveAddr\t"+slave.Addr())
		assert.True(t, im >= 0 && is > im, "the master's block, then the slave's:\n%s", out)

		fr := c.fail(t, "haStatus", "-c", "NoSuchCluster")
		assert.Contains(t, fr.err, "clusterName exists")
		fr = c.fail(t, "haStatus", "-b", "127.0.0.1:1")
		assert.Contains(t, fr.err, "haStatus command failed")
		c.fail(t, "haStatus")
	})

	t.Run("-i repeats", func(t *testing.T) {
		r := mqadminRounds(t, 2, "haStatus", "-b", c.addr, "-i", "1", "-n", c.ns)
		require.Equal(t, 0, r.code, r.err)
		assert.Equal(t, 2, strings.Count(r.out, "\n#MasterAddr\t"+c.addr+"\n"), r.out)
		r = mqadminRounds(t, 2, "clusterList", "-i", "1", "-n", c.ns)
		require.Equal(t, 0, r.code, r.err)
		assert.Equal(t, 2, strings.Count(r.out, "#Cluster Name"), r.out)
		assert.Len(t, rows(r.out, "DefaultCluster"), 4, r.out)
		r = mqadminRounds(t, 2, "clusterList", "-i", "0", "-n", c.ns)
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.err, "at least 1 second")
	})

	t.Run("the master stops", func(t *testing.T) {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.broker.Shutdown(sctx))
		var out string
		require.Eventually(t, func() bool {
			out = c.ok(t, "clusterList")
			r := rows(out, "DefaultCluster")
			return len(r) == 1 && fields(r[0])[2] == "1" && last(r[0], 2)[0] != "following"
		}, 20*time.Second, 50*time.Millisecond, "the slave alone, not following:\n%s", out)
		t.Logf("mqadmin clusterList (master stopped):\n%s", out)
		r := rows(out, "DefaultCluster")
		assert.Equal(t, []string{"SLAVE", "-"}, last(r[0], 4)[:2])
		assert.Contains(t, []string{"connecting", "retrying"}, last(r[0], 2)[0])

		out = c.ok(t, "haStatus", "-c", "DefaultCluster")
		t.Logf("mqadmin haStatus -c DefaultCluster (master stopped):\n%s", out)
		assert.Equal(t, 1, strings.Count(out, "\n#MasterAddr\t"), out)
		assert.Contains(t, out, "#SlaveAddr\t"+slave.Addr()+"\n")
		assert.NotContains(t, out, "#HAState\tfollowing\n")
	})
}

// grepLines returns the lines of out matching re, for logs.
func grepLines(out, re string) string {
	rx := regexp.MustCompile(re)
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if rx.MatchString(l) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// The replication columns from figures a live pair rarely shows: a master
// with a slow slave shows the slowest one's lag, not slaveFallBehindMuch
// (the fastest's); brokers that report nothing of replication (RocketMQ
// 4) get their role from the broker id and "-" elsewhere.
func TestReplicationCells(t *testing.T) {
	master := brokerRow{cluster: "C", name: "b", id: 0, addr: "10.0.0.1:10911"}
	slave := brokerRow{cluster: "C", name: "b", id: 1, addr: "10.0.0.2:10911"}
	lagging := &protocol.HARuntimeInfo{Master: true, MasterCommitLogMaxOffset: 1000, HAConnectionInfo: []protocol.HAConnectionRuntimeInfo{
		{Addr: "10.0.0.2:40001", SlaveAckOffset: 900, Diff: 100, InSync: true},
		{Addr: "10.0.0.3:40002", SlaveAckOffset: 300, Diff: 700},
	}}
	cases := []struct {
		name string
		r    brokerRow
		kv   map[string]string
		info *protocol.HARuntimeInfo
		want replication
	}{
		{"master, slowest of two", master, map[string]string{"brokerRole": "ASYNC_MASTER", "slaveNum": "2", "slaveFallBehindMuch": "100"}, lagging,
			replication{"ASYNC_MASTER", "2", "-", "700"}},
		{"master without slaves", master, map[string]string{"brokerRole": "SYNC_MASTER", "slaveNum": "0"}, nil,
			replication{"SYNC_MASTER", "0", "-", "-"}},
		{"master, HA status not answered", master, map[string]string{"brokerRole": "SYNC_MASTER", "slaveNum": "1"}, nil,
			replication{"SYNC_MASTER", "1", "-", "-"}},
		{"slave behind", slave, map[string]string{"brokerRole": "SLAVE", "haState": "retrying", "slaveFallBehindMuch": "4096"}, nil,
			replication{"SLAVE", "-", "retrying", "4096"}},
		{"slave, master's offset unknown", slave, map[string]string{"brokerRole": "SLAVE", "haState": "idle"}, nil,
			replication{"SLAVE", "-", "idle", "-"}},
		{"RocketMQ 4 master", master, map[string]string{"brokerVersionDesc": "V4_9_7"}, nil, replication{"MASTER", "-", "-", "-"}},
		{"RocketMQ 4 slave", slave, map[string]string{}, nil, replication{"SLAVE", "-", "-", "-"}},
		{"stats failed", slave, nil, nil, replication{"SLAVE", "-", "-", "-"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, replicationCells(tc.r, tc.kv, tc.info))
		})
	}
}

// haStatus's layout for what a live pair rarely shows: a slave falling
// behind, a slave refusing its master, and a Java slave (no state of ours).
func TestPrintHAInfo(t *testing.T) {
	var b bytes.Buffer
	printHAInfo(&b, "10.0.0.1:10911", &protocol.HARuntimeInfo{Master: true, MasterCommitLogMaxOffset: 1000, InSyncSlaveNums: 1,
		HAConnectionInfo: []protocol.HAConnectionRuntimeInfo{
			{Addr: "10.0.0.2:40001", SlaveAckOffset: 1000, Diff: 0, InSync: true, TransferredByteInSecond: 2048, TransferFromWhere: 1000},
			{Addr: "10.0.0.3:40002", SlaveAckOffset: 300, Diff: 700, TransferFromWhere: 300},
		}})
	want := "\n#MasterAddr\t10.0.0.1:10911\n#MasterCommitLogMaxOffset\t1000\n#SlaveNum\t2\n#InSyncSlaveNum\t1\n" +
		fmt.Sprintf("%-32s  %-16s %16s %16s %16s %16s\n", "#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere") +
		fmt.Sprintf("%-32s  %-16d %16d %16s %16s %16d\n", "10.0.0.2:40001", 1000, 0, "2.00", "OK", 1000) +
		fmt.Sprintf("%-32s  %-16d %16d %16s %16s %16d\n", "10.0.0.3:40002", 300, 700, "0.00", "Fall Behind", 300)
	assert.Equal(t, want, b.String())

	b.Reset()
	printHAInfo(&b, "10.0.0.2:10911", &protocol.HARuntimeInfo{MasterCommitLogMaxOffset: -1, HAClientRuntimeInfo: protocol.HAClientRuntimeInfo{
		MasterAddr: "10.0.0.1:10912", MaxOffset: 5000, State: "refused", LastError: "ha: the slave holds data its master does not"}})
	out := b.String()
	for _, line := range []string{"#MasterAddr\t10.0.0.1:10912", "#CommitLogMaxOffset\t5000", "#SlaveAddr\t10.0.0.2:10911", "#HAState\trefused",
		"#MasterCommitLogMaxOffset\t-", "#FallBehind(bytes)\t-", "#LastError\tha: the slave holds data its master does not"} {
		assert.Contains(t, out, "\n"+line+"\n")
	}

	b.Reset()
	printHAInfo(&b, "10.0.0.2:10911", &protocol.HARuntimeInfo{MasterCommitLogMaxOffset: 6000, HAClientRuntimeInfo: protocol.HAClientRuntimeInfo{
		MasterAddr: "10.0.0.1:10912", MaxOffset: 5000, State: "following"}})
	assert.Contains(t, b.String(), "\n#FallBehind(bytes)\t1000\n")

	b.Reset()
	printHAInfo(&b, "10.0.0.2:10911", &protocol.HARuntimeInfo{HAClientRuntimeInfo: protocol.HAClientRuntimeInfo{MasterAddr: "10.0.0.1:10912", MaxOffset: 5000}})
	assert.NotContains(t, b.String(), "#HAState", "a Java slave sends no state: no lines of ours")
	assert.Equal(t, 7, strings.Count(b.String(), "\n"))
}
