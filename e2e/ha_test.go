package e2e

// Replication end to end: masters and slaves run as binaries (binCluster
// views sharing one nameserver), are killed and started again, and the
// checks look at what each one serves, its commitlog files, and what the
// official client gets. The helpers are here; the official-client failover
// tests are in ha_failover_test.go.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// haWait bounds a wait for replication: a slave connecting (its first dial
// may back off), catching up, or copying metadata (every 10 s).
const haWait = 60 * time.Second

// haBrokerConf is the replication config of the HA tests: fast heartbeats
// and reconnects, so a kill is noticed within a second or two.
func haBrokerConf(role string, extra map[string]string) map[string]string {
	kv := map[string]string{
		"brokerRole":              role,
		"flushDiskType":           "ASYNC_FLUSH",
		"haSendHeartbeatInterval": "500",
		"haHousekeepingInterval":  "5000",
		"haReconnectMinInterval":  "200",
		"haReconnectMaxInterval":  "1000",
		"slaveTimeout":            "3000",
	}
	for k, v := range extra {
		kv[k] = v
	}
	return kv
}

// haStatus is the part of GET_BROKER_HA_STATUS the tests read.
type haStatus struct {
	Master                   bool  `json:"master"`
	MasterCommitLogMaxOffset int64 `json:"masterCommitLogMaxOffset"`
	InSyncSlaveNums          int   `json:"inSyncSlaveNums"`
	HAConnectionInfo         []struct {
		Addr           string `json:"addr"`
		SlaveAckOffset int64  `json:"slaveAckOffset"`
	} `json:"haConnectionInfo"`
	HAClientRuntimeInfo struct {
		MasterAddr string `json:"masterAddr"`
		MaxOffset  int64  `json:"maxOffset"`
		State      string `json:"state"`
		LastError  string `json:"lastError"`
	} `json:"haClientRuntimeInfo"`
}

// haStatus is GET_BROKER_HA_STATUS of c's broker.
func (c *binCluster) haStatus() haStatus {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.GetBrokerHAStatus, nil, nil)
	require.Equal(c.t, int32(remoting.Success), resp.Code, resp.Remark)
	var st haStatus
	require.NoError(c.t, json.Unmarshal(resp.Body, &st), "HA status body %q", resp.Body)
	return st
}

// runtimeInfo is GET_BROKER_RUNTIME_INFO of c's broker.
func (c *binCluster) runtimeInfo() map[string]string {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.GetBrokerRuntimeInfo, nil, nil)
	require.Equal(c.t, int32(remoting.Success), resp.Code, resp.Remark)
	kv, err := protocol.DecodeKVTable(resp.Body)
	require.NoError(c.t, err)
	return kv.Table
}

// storeOffsets is a broker's commitlog max offset and how far its dispatch
// is behind it, from one runtime-info answer.
func (c *binCluster) storeOffsets() (maxOffset, behind int64) {
	c.t.Helper()
	kv := c.runtimeInfo()
	maxOffset, err := strconv.ParseInt(kv["commitLogMaxOffset"], 10, 64)
	require.NoError(c.t, err, "commitLogMaxOffset %q", kv["commitLogMaxOffset"])
	behind, err = strconv.ParseInt(kv["dispatchBehindBytes"], 10, 64)
	require.NoError(c.t, err, "dispatchBehindBytes %q", kv["dispatchBehindBytes"])
	return maxOffset, behind
}

// waitSlaveConnected waits until master counts an in-sync slave, so a
// SYNC_MASTER answers sends with SEND_OK rather than SLAVE_NOT_AVAILABLE.
func waitSlaveConnected(t *testing.T, master *binCluster) {
	t.Helper()
	require.Eventually(t, func() bool { return master.haStatus().InSyncSlaveNums > 0 }, haWait, 20*time.Millisecond,
		"no slave connected to %s", master.BrokerAddr)
}

// waitCaughtUp waits until the slave's commitlog ends where the master's
// does and both have dispatched everything (their consume queues serve it),
// and returns that offset. The master must not be taking sends.
func waitCaughtUp(t *testing.T, master, slave *binCluster) int64 {
	t.Helper()
	var m, s, mb, sb int64
	require.Eventually(t, func() bool {
		m, mb = master.storeOffsets()
		s, sb = slave.storeOffsets()
		return m == s && mb == 0 && sb == 0
	}, haWait, 20*time.Millisecond, "slave %s never caught up with master %s", slave.BrokerAddr, master.BrokerAddr)
	return m
}

// requireSameCommitLog compares the master's and the slave's commitlog
// files byte for byte up to upTo (both started empty, so the slave's files
// start at the same offsets).
func requireSameCommitLog(t *testing.T, master, slave *binCluster, upTo int64) {
	t.Helper()
	dir := filepath.Join(master.StoreDir, "commitlog")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := 0
	for _, e := range entries {
		start, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || len(e.Name()) != 20 || start >= upTo {
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(slave.StoreDir, "commitlog", e.Name()))
		require.NoError(t, err, "the slave has no commitlog file %s", e.Name())
		n := min(int64(len(want)), upTo-start)
		require.GreaterOrEqual(t, int64(len(got)), n, "slave file %s is short", e.Name())
		if !bytes.Equal(want[:n], got[:n]) {
			i := 0
			for i < int(n) && want[i] == got[i] {
				i++
			}
			require.Failf(t, "commitlogs differ", "file %s: first difference at offset %d (log offset %d), compared up to %d",
				e.Name(), i, start+int64(i), upTo)
		}
		files++
	}
	require.Positive(t, files, "no commitlog file below %d", upTo)
	t.Logf("commitlogs identical up to offset %d (%d files)", upTo, files)
}

// waitTopicOnSlave waits until the slave has copied topic from its master
// (the slave sync runs 3 s after start, then every 10 s).
func waitTopicOnSlave(t *testing.T, slave *binCluster, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp := slave.mustInvoke(slave.BrokerAddr, remoting.GetAllTopicConfig, nil, nil)
		if resp.Code != int32(remoting.Success) {
			return false
		}
		w, err := protocol.DecodeTopicConfigSerializeWrapper(resp.Body)
		require.NoError(t, err)
		return w.TopicConfigTable[topic] != nil
	}, haWait, 100*time.Millisecond, "slave %s never copied topic %s", slave.BrokerAddr, topic)
}

// statusLog records what raw senders got from a master that may answer
// SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT: SEND_OKs (acknowledged),
// stored-but-unacknowledged answers, and failed sends (unknown outcome).
type statusLog struct {
	*ackLog
	mu     sync.Mutex
	stored map[string]sendResult // codes 10/11/12: stored, not acknowledged
	codes  map[remoting.ResponseCode]int
}

func newStatusLog() *statusLog {
	return &statusLog{ackLog: newAckLog(), stored: map[string]sendResult{}, codes: map[remoting.ResponseCode]int{}}
}

// sendLoop sends up to n messages from one goroutine to queues round robin
// until stop is closed, recording each outcome; it pauses 1 ms after a
// failed send (the master is down) instead of spinning.
func (l *statusLog) sendLoop(c *binCluster, topic string, queues int32, prefix string, n int, stop <-chan struct{}) {
	for i := range n {
		select {
		case <-stop:
			return
		default:
		}
		id := fmt.Sprintf("%s-%05d", prefix, i)
		r, code, _, err := c.sendCode(topic, int32(i%int(queues)), id, crashBody(id), nil)
		l.mu.Lock()
		l.codes[code]++
		l.mu.Unlock()
		switch {
		case err != nil:
			l.failed(id)
			time.Sleep(time.Millisecond)
		case code == remoting.Success:
			l.ok(id, r)
		case code == remoting.FlushSlaveTimeout || code == remoting.SlaveNotAvailable || code == remoting.FlushDiskTimeout:
			l.mu.Lock()
			l.stored[id] = r
			l.mu.Unlock()
		default:
			l.failed(id)
			time.Sleep(time.Millisecond)
		}
	}
}

// TestHASlaveKill9AndMasterRestartCatchUp: a SYNC_MASTER takes sends from
// 4 raw senders while its slave is kill -9ed and started again: the slave
// resumes from its own store, catches up (same commitlog max offset as the
// master, byte-identical files) and serves every message the master
// stored (SEND_OK, and the SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT answers
// given while it was down) at the master's queue offsets. Then the master
// is stopped (SIGTERM) and started again: the slave follows it again and
// catches up with what it takes next.
func TestHASlaveKill9AndMasterRestartCatchUp(t *testing.T) {
	t.Parallel()
	started := time.Now()
	ns := startBinNamesrv(t)
	master := ns.addBroker("master", "broker-ha", 0, haBrokerConf("SYNC_MASTER", nil))
	slave := ns.addBroker("slave", "broker-ha", 1, haBrokerConf("SLAVE", nil))
	waitSlaveConnected(t, master)
	topic := uniq("HASlaveKill")
	const queues = 4
	master.createTopic(topic, queues)

	log := newStatusLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.sendLoop(master, topic, queues, fmt.Sprintf("k%d", s), 20000, stop)
		}()
	}
	acked := func() int64 { return log.n.Load() }
	// Kill the slave mid-stream (past the first 1 MiB file), keep sending
	// while it is down, start it again, keep sending while it catches up.
	require.Eventually(t, func() bool { return acked() >= 1200 }, haWait, time.Millisecond, "sends stalled: %d acked", acked())
	slave.killBroker()
	killedAt := acked()
	require.Eventually(t, func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.stored) >= 300
	}, haWait, time.Millisecond, "the master never answered without its slave")
	slave.startBroker()
	assert.Contains(t, slave.broker.lastRunLog(), "normal=false", "a killed slave must recover as after an abnormal exit")
	waitSlaveConnected(t, master)
	resumed := acked()
	require.Eventually(t, func() bool { return acked() >= resumed+600 }, haWait, time.Millisecond,
		"SEND_OK never came back after the slave's restart (%d acked)", acked())
	close(stop)
	wg.Wait()

	end := waitCaughtUp(t, master, slave)
	requireSameCommitLog(t, master, slave, end)
	log.mu.Lock()
	stored := len(log.stored)
	codes := fmt.Sprint(log.codes)
	log.mu.Unlock()
	requireSlaveServesAll(t, slave, topic, queues, log)
	t.Logf("slave kill -9: %d SEND_OK before the kill, %d stored without a slave, %d SEND_OK in all; answers by code %s",
		killedAt, stored, acked(), codes)

	// The master restarts (graceful) while nothing is sent; the slave must
	// follow it again and copy what it takes next.
	master.stopBroker()
	require.Equal(t, 0, master.broker.exitCode(), "graceful stop exit code")
	master.startBroker()
	waitSlaveConnected(t, master)
	for i := range 300 {
		id := fmt.Sprintf("after-restart-%04d", i)
		r, err := master.send(topic, int32(i%queues), id, crashBody(id), nil)
		require.NoError(t, err, "a SYNC_MASTER with its slave back must answer SEND_OK")
		log.ok(id, r)
	}
	end = waitCaughtUp(t, master, slave)
	requireSameCommitLog(t, master, slave, end)
	requireSlaveServesAll(t, slave, topic, queues, log)
	st := slave.haStatus().HAClientRuntimeInfo
	assert.Equal(t, "following", st.State, "slave state after the master's restart (%+v)", st)
	t.Logf("TestHASlaveKill9AndMasterRestartCatchUp took %v", time.Since(started).Round(time.Millisecond))
}

// requireSlaveServesAll pulls every queue of topic from the slave and
// checks checkPromise's rules: every message stored at the master (SEND_OK
// and the stored-unacknowledged answers) is served once, at the queue and
// offset the master named, with its body; nothing else is served but sends
// whose outcome is unknown.
func requireSlaveServesAll(t *testing.T, slave *binCluster, topic string, queues int32, log *statusLog) {
	t.Helper()
	// checkPromise takes the stored-unacknowledged ones as sent (unknown
	// outcome); they must be served too.
	log.mu.Lock()
	stored := make(map[string]sendResult, len(log.stored))
	for id, r := range log.stored {
		stored[id] = r
		log.unknown[id] = true
	}
	log.mu.Unlock()
	p := checkPromise(t, slave, topic, queues, log.ackLog, false)
	assert.Empty(t, p.missing, "%d acknowledged messages not served by the slave: %v", len(p.missing), head(p.missing, 10))
	var notServed []string
	for id, r := range stored {
		m, ok := p.served[id]
		if !ok {
			notServed = append(notServed, id)
			continue
		}
		assert.Equal(t, r.QueueID, m.QueueID, "message %s moved queue", id)
		assert.Equal(t, r.QueueOffset, m.QueueOffset, "message %s moved offset", id)
	}
	sort.Strings(notServed)
	assert.Empty(t, notServed, "%d messages the master stored (code 11/12) not served by the slave: %v", len(notServed), head(notServed, 10))
}

// head returns at most n elements of s.
func head(s []string, n int) []string { return s[:min(n, len(s))] }

// TestHASyncMasterStatusesOfficialClient: the official producer reports a
// SYNC_MASTER's stored-but-not-replicated answers as send statuses, not
// errors: SendSlaveNotAvailable without a slave (code 11), and
// SendFlushSlaveTimeout (code 12) with a slave that is connected but
// stalled (a peer that reports its offset once and never acks again, as a
// slave with a stuck disk would). The messages are stored either way.
func TestHASyncMasterStatusesOfficialClient(t *testing.T) {
	t.Parallel()
	started := time.Now()
	ns := startBinNamesrv(t)
	master := ns.addBroker("master", "broker-sm", 0, haBrokerConf("SYNC_MASTER", map[string]string{
		"slaveTimeout":           "500",
		"haHousekeepingInterval": "60000", // the stalled peer must stay counted
	}))
	topic := uniq("HAStatus")
	master.createTopic(topic, 2)
	master.waitRoute(topic)
	d := startDriver(t, ns.NamesrvAddr)
	p := d.NewProducer(t, "")

	r, err := p.TrySendSync(t, Msg(topic, "no-slave"))
	require.NoError(t, err, "SLAVE_NOT_AVAILABLE must be a status, not an error")
	assert.Equal(t, primitive.SendSlaveNotAvailable, r.Status, "%+v", r)

	// The stalled slave: RocketMQ's slave handshake is its max offset (8
	// bytes); this one reports the master's max offset and then nothing.
	maxOff, _ := master.storeOffsets()
	haAddr := master.runtimeInfo()["haServerAddr"]
	require.NotEmpty(t, haAddr)
	conn, err := net.DialTimeout("tcp", haAddr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, binary.Write(conn, binary.BigEndian, maxOff))
	require.Eventually(t, func() bool { return len(master.haStatus().HAConnectionInfo) == 1 }, haWait, 20*time.Millisecond,
		"the master never counted the stalled slave")

	start := time.Now()
	r, err = p.TrySendSync(t, Msg(topic, "stalled-slave"))
	took := time.Since(start)
	require.NoError(t, err, "FLUSH_SLAVE_TIMEOUT must be a status, not an error")
	assert.Equal(t, primitive.SendFlushSlaveTimeout, r.Status, "%+v", r)
	assert.GreaterOrEqual(t, took, 500*time.Millisecond, "answered before slaveTimeout")

	// Both were stored: the queues serve them.
	var bodies []string
	for q := range int32(2) {
		for _, m := range master.pullAll(topic, q) {
			bodies = append(bodies, string(m.Body))
		}
	}
	assert.ElementsMatch(t, []string{"no-slave", "stalled-slave"}, bodies)
	t.Logf("TestHASyncMasterStatusesOfficialClient took %v (FLUSH_SLAVE_TIMEOUT after %v)",
		time.Since(started).Round(time.Millisecond), took.Round(time.Millisecond))
}
