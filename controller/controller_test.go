package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's global ants pool (the remoting client's package imports it).
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

// wait bounds every poll: generous, for -race on a loaded 2-core machine.
const wait = 30 * time.Second

// brokerTimeout is the test brokers' brokerNotActiveTimeoutMillis.
const brokerTimeout = 600 * time.Millisecond

// testGroup is n controllers joined by raft's in-memory transport.
type testGroup struct {
	t     *testing.T
	mu    sync.Mutex // guards ctls: heartbeaters read it
	ctls  []*Controller
	trans []*raft.InmemTransport
	cfgs  []Config
}

// startGroup starts n controllers (in-memory log unless dirs are given).
func startGroup(t *testing.T, n int, mod func(*Config), dirs ...string) *testGroup {
	t.Helper()
	tg := &testGroup{t: t}
	var peers []Peer
	for i := range n {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 19000+i)})
	}
	tg.trans = make([]*raft.InmemTransport, n)
	for i := range n {
		cfg := Config{
			Group: "test", Peers: peers, SelfID: peers[i].ID, ScanInterval: 50 * time.Millisecond,
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond,
			inmemStore: len(dirs) == 0,
		}
		if len(dirs) > 0 {
			cfg.StorePath = dirs[i]
		}
		if mod != nil {
			mod(&cfg)
		}
		tg.cfgs = append(tg.cfgs, cfg)
	}
	tg.ctls = make([]*Controller, n)
	for i := range n {
		tg.set(i, tg.startOne(i))
	}
	t.Cleanup(func() {
		for _, c := range tg.all() {
			if c != nil {
				assert.NoError(t, c.Shutdown(context.Background()))
			}
		}
	})
	return tg
}

// startOne starts controller i on a new in-memory transport, joined both
// ways to the others'.
func (tg *testGroup) startOne(i int) *Controller {
	addr := raft.ServerAddress(tg.cfgs[i].Peers[i].Addr)
	_, tr := raft.NewInmemTransport(addr)
	for j, o := range tg.trans {
		if o != nil && j != i {
			tr.Connect(raft.ServerAddress(tg.cfgs[j].Peers[j].Addr), o)
			o.Connect(addr, tr)
		}
	}
	tg.trans[i] = tr
	cfg := tg.cfgs[i]
	cfg.transport = tr
	c, err := New(cfg, nil)
	require.NoError(tg.t, err)
	require.NoError(tg.t, c.Start(fmt.Sprintf("127.0.0.1:%d", 29000+i)))
	return c
}

func (tg *testGroup) set(i int, c *Controller) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.ctls[i] = c
}

// all returns the controllers (nil: stopped).
func (tg *testGroup) all() []*Controller {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]*Controller(nil), tg.ctls...)
}

// leader waits for a leader that serves and returns it.
func (tg *testGroup) leader() *Controller {
	tg.t.Helper()
	var l *Controller
	require.Eventually(tg.t, func() bool {
		for _, c := range tg.all() {
			if c != nil && c.IsLeader() {
				l = c
				return true
			}
		}
		return false
	}, wait, 10*time.Millisecond, "no controller leader")
	return l
}

// call runs a processor as the remoting server would.
func call(c *Controller, code remoting.RequestCode, hdr any, body []byte) *remoting.Command {
	var ext map[string]string
	if hdr != nil {
		ext = protocol.EncodeHeader(hdr, nil)
	}
	req := remoting.NewRequest(code, ext, body)
	var fn remoting.ProcessorFunc
	switch code {
	case remoting.BrokerHeartbeat:
		fn = c.processHeartbeat
	case remoting.ControllerRegisterBroker:
		fn = c.processRegister
	case remoting.ControllerGetReplicaInfo:
		fn = c.processGetReplicaInfo
	case remoting.ControllerGetMetadataInfo:
		fn = c.processGetMetadata
	case remoting.ControllerGetSyncStateData:
		fn = c.processGetSyncStateData
	case remoting.ControllerAlterSyncStateSet:
		fn = c.processAlterSyncStateSet
	case remoting.ControllerElectMaster:
		fn = c.processElectMaster
	}
	resp, err := fn(nil, req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return resp
}

func addrOf(id int64) string { return fmt.Sprintf("127.0.0.1:%d", 10900+id) }

func registerBroker(t *testing.T, c *Controller, name string, id int64) protocol.ReplicaInfoHeader {
	t.Helper()
	resp := call(c, remoting.ControllerRegisterBroker, &protocol.RegisterBrokerToControllerRequestHeader{
		ClusterName: "c", BrokerName: name, BrokerID: id, BrokerAddress: addrOf(id), HaAddress: addrOf(id + 50),
		HeartbeatTimeoutMills: brokerTimeout.Milliseconds(),
	}, nil)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	return replicaInfo(t, resp)
}

func replicaInfo(t *testing.T, resp *remoting.Command) protocol.ReplicaInfoHeader {
	t.Helper()
	var h protocol.ReplicaInfoHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h
}

// heartbeater sends a broker's heartbeats to whichever controller leads,
// every 50 ms, until stopped.
type heartbeater struct {
	tg        *testGroup
	name      string
	id        int64
	maxOffset int64
	stop      chan struct{}
	done      chan struct{}
	mu        sync.Mutex
	last      protocol.ReplicaInfoHeader
}

func (tg *testGroup) heartbeat(name string, id, maxOffset int64) *heartbeater {
	h := &heartbeater{tg: tg, name: name, id: id, maxOffset: maxOffset, stop: make(chan struct{}), done: make(chan struct{})}
	go h.loop()
	tg.t.Cleanup(h.halt)
	return h
}

func (h *heartbeater) loop() {
	defer close(h.done)
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	for {
		for _, c := range h.tg.all() {
			if c == nil || !c.IsLeader() {
				continue
			}
			resp := call(c, remoting.BrokerHeartbeat, &protocol.BrokerHeartbeatRequestHeader{
				ClusterName: "c", BrokerAddr: addrOf(h.id), BrokerName: h.name, BrokerID: h.id, MaxOffset: h.maxOffset,
				HeartbeatTimeoutMills: brokerTimeout.Milliseconds(),
			}, nil)
			if resp.ResponseCode() == remoting.Success {
				var ri protocol.ReplicaInfoHeader
				if protocol.DecodeHeader(resp.ExtFields, &ri) == nil {
					h.mu.Lock()
					h.last = ri
					h.mu.Unlock()
				}
			}
		}
		select {
		case <-h.stop:
			return
		case <-tk.C:
		}
	}
}

func (h *heartbeater) halt() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// seen is the master the heartbeat answers name.
func (h *heartbeater) seen() protocol.ReplicaInfoHeader {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func syncStateData(t *testing.T, c *Controller, name string) *protocol.ReplicasInfo {
	t.Helper()
	body, _ := json.Marshal([]string{name})
	resp := call(c, remoting.ControllerGetSyncStateData, nil, body)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	var out protocol.BrokerReplicasInfo
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	require.Contains(t, out.ReplicasInfoTable, name)
	return out.ReplicasInfoTable[name]
}

func alterSyncStateSet(c *Controller, name string, master int64, epoch, ssEpoch int32, set ...int64) *remoting.Command {
	return call(c, remoting.ControllerAlterSyncStateSet,
		&protocol.AlterSyncStateSetRequestHeader{BrokerName: name, MasterBrokerID: master, MasterEpoch: epoch},
		protocol.SyncStateSet{SyncStateSet: set, SyncStateSetEpoch: ssEpoch}.Encode())
}

// TestControllerElectsFirstAndFailsOver: one controller (the development
// layout). The first replica to register becomes master; the master
// widens the in-sync set; when its heartbeats stop, the in-sync replica
// with the most data takes over at a new epoch, with the set reset to it;
// the old master's next heartbeat learns it.
func TestControllerElectsFirstAndFailsOver(t *testing.T) {
	tg := startGroup(t, 1, nil)
	c := tg.leader()
	ri := registerBroker(t, c, "b", 1)
	assert.Equal(t, int64(1), ri.MasterBrokerID, "the first replica of a new group is its master")
	assert.Equal(t, int32(1), ri.MasterEpoch)
	assert.Equal(t, addrOf(1), ri.MasterAddress)
	assert.Equal(t, addrOf(51), ri.MasterHaAddress)
	for id := int64(2); id <= 3; id++ {
		assert.Equal(t, int64(1), registerBroker(t, c, "b", id).MasterBrokerID)
	}
	h1 := tg.heartbeat("b", 1, 1000)
	tg.heartbeat("b", 2, 900)
	tg.heartbeat("b", 3, 1000)

	resp := alterSyncStateSet(c, "b", 1, 1, 1, 1, 2, 3)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	ss := syncStateData(t, c, "b")
	assert.Len(t, ss.InSyncReplicas, 3)
	for _, r := range ss.InSyncReplicas {
		assert.True(t, r.Alive, "replica %d alive", r.BrokerID)
	}

	h1.halt()
	require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID != 1 }, wait, 10*time.Millisecond)
	ss = syncStateData(t, c, "b")
	assert.Equal(t, int64(3), ss.MasterBrokerID, "the in-sync replica with the most data")
	assert.Equal(t, int32(2), ss.MasterEpoch)
	require.Len(t, ss.InSyncReplicas, 1)
	assert.Equal(t, int64(3), ss.InSyncReplicas[0].BrokerID)

	// The old master is back: its heartbeat's answer names the new master.
	h1 = tg.heartbeat("b", 1, 1500)
	require.Eventually(t, func() bool { return h1.seen().MasterBrokerID == 3 }, wait, 10*time.Millisecond)
	assert.Equal(t, int32(2), h1.seen().MasterEpoch)
	// A deposed master cannot change the set.
	resp = alterSyncStateSet(c, "b", 1, 1, 2, 1, 2)
	assert.Equal(t, remoting.ControllerFencedMasterEpoch, resp.ResponseCode(), resp.Remark)
}

// TestControllerNeverElectsOutOfSyncReplica: with the in-sync set {1, 2},
// replica 3 (more data, alive) is never elected while 2 lives; with both
// in-sync replicas dead the group stays without a master, keeping the set,
// until one of them returns. enableElectUncleanMaster elects 3 instead.
func TestControllerNeverElectsOutOfSyncReplica(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(fmt.Sprintf("unclean=%v", unclean), func(t *testing.T) {
			tg := startGroup(t, 1, func(c *Config) { c.EnableElectUncleanMaster = unclean })
			c := tg.leader()
			for id := int64(1); id <= 3; id++ {
				registerBroker(t, c, "b", id)
			}
			h1 := tg.heartbeat("b", 1, 100)
			h2 := tg.heartbeat("b", 2, 100)
			tg.heartbeat("b", 3, 5000)
			resp := alterSyncStateSet(c, "b", 1, 1, 1, 1, 2)
			require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)

			h1.halt()
			require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID != 1 }, wait, 10*time.Millisecond)
			assert.Equal(t, int64(2), syncStateData(t, c, "b").MasterBrokerID, "the in-sync replica, not the one with more data")
			// 2 widens the set to itself and 1 (1 is dead: refused), then dies.
			resp = alterSyncStateSet(c, "b", 2, 2, 2, 1, 2)
			assert.Equal(t, remoting.ControllerBrokerNotAlive, resp.ResponseCode(), resp.Remark)
			h2.halt()
			if unclean {
				require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID == 3 }, wait, 10*time.Millisecond)
				return
			}
			require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID == protocol.NoMaster }, wait, 10*time.Millisecond)
			ss := syncStateData(t, c, "b")
			assert.Equal(t, int32(3), ss.MasterEpoch)
			require.Len(t, ss.InSyncReplicas, 1, "the set is kept without a master")
			assert.Equal(t, int64(2), ss.InSyncReplicas[0].BrokerID)
			// Replica 3 stays alive for several scans and is never elected:
			// an absence, so it is watched for a while rather than polled for.
			time.Sleep(3 * brokerTimeout)
			assert.Equal(t, protocol.NoMaster, syncStateData(t, c, "b").MasterBrokerID)
			resp = call(c, remoting.ControllerElectMaster, &protocol.ElectMasterRequestHeader{BrokerName: "b", BrokerID: 3, DesignateElect: true}, nil)
			assert.Equal(t, remoting.ControllerElectMasterFailed, resp.ResponseCode(), resp.Remark)
			// The in-sync replica returns: it is elected at once.
			tg.heartbeat("b", 2, 100)
			require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID == 2 }, wait, 10*time.Millisecond)
		})
	}
}

// TestControllerElectMasterHandsOver: mqadmin electMaster hands a group
// over to a live in-sync replica, refuses an out-of-sync one, and answers
// MASTER_STILL_EXIST without a designated replica while the master lives.
func TestControllerElectMasterHandsOver(t *testing.T) {
	tg := startGroup(t, 1, nil)
	c := tg.leader()
	for id := int64(1); id <= 3; id++ {
		registerBroker(t, c, "b", id)
		tg.heartbeat("b", id, 10)
	}
	require.Equal(t, remoting.Success, alterSyncStateSet(c, "b", 1, 1, 1, 1, 2).ResponseCode())
	elect := func(id int64, designate bool) *remoting.Command {
		return call(c, remoting.ControllerElectMaster, &protocol.ElectMasterRequestHeader{BrokerName: "b", BrokerID: id, DesignateElect: designate}, nil)
	}
	assert.Equal(t, remoting.ControllerMasterStillExist, elect(0, false).ResponseCode())
	assert.Equal(t, remoting.ControllerElectMasterFailed, elect(3, true).ResponseCode())
	assert.Equal(t, remoting.ControllerElectMasterFailed, elect(9, true).ResponseCode())
	resp := elect(2, true)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, int64(2), replicaInfo(t, resp).MasterBrokerID)
	assert.Equal(t, int32(2), replicaInfo(t, resp).MasterEpoch)
	resp = call(c, remoting.ControllerElectMaster, &protocol.ElectMasterRequestHeader{BrokerName: "nope", BrokerID: 2, DesignateElect: true}, nil)
	assert.Equal(t, remoting.ControllerBrokerMetadataNotExist, resp.ResponseCode())
}

// TestControllerGroupSurvivesLeaderLoss: three controllers. Followers
// refuse broker requests with the leader's address; when the leader stops,
// another takes over with the whole state, gives every replica a fresh
// timeout, then replaces the master that stays silent; restarted, the old
// leader rejoins as a follower and catches up.
func TestControllerGroupSurvivesLeaderLoss(t *testing.T) {
	tg := startGroup(t, 3, nil)
	l := tg.leader()
	for id := int64(1); id <= 2; id++ {
		registerBroker(t, l, "b", id)
	}
	require.Equal(t, remoting.Success, alterSyncStateSet(l, "b", 1, 1, 1, 1, 2).ResponseCode())
	for i, c := range tg.all() {
		if c == l {
			continue
		}
		// The leader's address reaches the followers through the log.
		var md protocol.GetMetaDataResponseHeader
		require.Eventually(t, func() bool {
			resp := call(c, remoting.BrokerHeartbeat, &protocol.BrokerHeartbeatRequestHeader{ClusterName: "c", BrokerAddr: addrOf(1), BrokerName: "b", BrokerID: 1}, nil)
			require.Equal(t, remoting.ControllerNotLeader, resp.ResponseCode(), "follower %d", i)
			require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &md))
			return md.ControllerLeaderAddress == l.Addr()
		}, wait, 10*time.Millisecond)
		resp := call(c, remoting.ControllerGetMetadataInfo, nil, nil)
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &md))
		assert.False(t, md.IsLeader)
		assert.Equal(t, l.Addr(), md.ControllerLeaderAddress)
		assert.Equal(t, FormatPeers(tg.cfgs[0].Peers), md.Peers)
	}
	// Replica 2 heartbeats throughout; the master (1) never does.
	tg.heartbeat("b", 2, 10)
	var li int
	for i, c := range tg.all() {
		if c == l {
			li = i
		}
	}
	require.NoError(t, l.Shutdown(context.Background()))
	tg.set(li, nil)
	nl := tg.leader()
	require.NotSame(t, l, nl)
	require.Eventually(t, func() bool { return syncStateData(t, nl, "b").MasterBrokerID == 2 }, wait, 10*time.Millisecond)
	assert.Equal(t, int32(2), syncStateData(t, nl, "b").MasterEpoch)

	// The old leader returns with an empty log and catches up as a follower.
	tg.trans[li].Close()
	back := tg.startOne(li)
	tg.set(li, back)
	require.Eventually(t, func() bool {
		g := back.fsm.group("b")
		return g != nil && g.MasterID == 2 && g.MasterEpoch == 2
	}, wait, 10*time.Millisecond)
}

// TestControllerRestartKeepsState: a controller on disk (raft-boltdb)
// restarts with its groups, masters and epochs.
func TestControllerRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	tg := startGroup(t, 1, nil, dir)
	c := tg.leader()
	registerBroker(t, c, "b", 1)
	registerBroker(t, c, "b", 2)
	require.Equal(t, remoting.Success, alterSyncStateSet(c, "b", 1, 1, 1, 1, 2).ResponseCode())
	require.NoError(t, c.Shutdown(context.Background()))
	tg.set(0, nil)

	tg.trans[0].Close()
	tg.set(0, tg.startOne(0))
	c = tg.leader()
	ss := syncStateData(t, c, "b")
	assert.Equal(t, int64(1), ss.MasterBrokerID)
	assert.Equal(t, int32(1), ss.MasterEpoch)
	assert.Len(t, ss.InSyncReplicas, 2)
	// A second controller on a directory in use fails fast.
	other := tg.cfgs[0]
	_, tr := raft.NewInmemTransport("127.0.0.1:19999")
	other.transport = tr
	c2, err := New(other, nil)
	require.NoError(t, err)
	assert.Error(t, c2.Start("127.0.0.1:1"), "the log is locked by the running controller")
	require.NoError(t, c2.Shutdown(context.Background()))
}

// TestControllerFailoverFollowsHeartbeatDeadline: with a scan interval of
// an hour, a master elected at registration (outside the scan) is still
// replaced once its heartbeat timeout runs out, not at the next scan.
func TestControllerFailoverFollowsHeartbeatDeadline(t *testing.T) {
	tg := startGroup(t, 1, func(c *Config) { c.ScanInterval = time.Hour })
	c := tg.leader()
	// Let the leader's first scan run on an empty state: its timer is then
	// an hour away, as a controller that led before any broker registered.
	require.Eventually(t, func() bool { return len(c.fsm.groups()) == 0 && c.IsLeader() }, wait, 10*time.Millisecond)
	require.Equal(t, int64(1), registerBroker(t, c, "b", 1).MasterBrokerID)
	registerBroker(t, c, "b", 2)
	h1 := tg.heartbeat("b", 1, 1000)
	tg.heartbeat("b", 2, 1000)
	require.Equal(t, remoting.Success, alterSyncStateSet(c, "b", 1, 1, 1, 1, 2).ResponseCode())
	h1.halt()
	require.Eventually(t, func() bool { return syncStateData(t, c, "b").MasterBrokerID == 2 }, wait, 10*time.Millisecond,
		"the dead master is replaced at its heartbeat deadline")
}
