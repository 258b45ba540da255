package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/controller"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// ctlWait bounds the waits of these tests: elections take a heartbeat
// timeout, on a loaded machine with -race several.
const ctlWait = 30 * time.Second

// freePort returns a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return p
}

// testController is a controller group of one on its own remoting server.
type testController struct {
	t       *testing.T
	dir     string
	port    int  // remoting port, kept across restarts
	unclean bool // enableElectUncleanMaster
	h       *controller.Hosted
}

func startTestController(t *testing.T) *testController { return startTestControllerWith(t, false) }

// startTestControllerWith starts a controller that elects a replica
// outside the in-sync set when none inside lives if unclean is set.
func startTestControllerWith(t *testing.T, unclean bool) *testController {
	tc := &testController{t: t, dir: t.TempDir(), port: freePort(t), unclean: unclean}
	tc.start()
	t.Cleanup(tc.stop)
	return tc
}

func (tc *testController) addr() string { return "127.0.0.1:" + strconv.Itoa(tc.port) }

func (tc *testController) start() {
	t := tc.t
	ctl, err := controller.New(controller.Config{
		Group: "g", Peers: []controller.Peer{{ID: "n0", Addr: "127.0.0.1:0"}}, SelfID: "n0",
		StorePath: tc.dir, ScanInterval: 50 * time.Millisecond, NotifyBrokerRoleChanged: true,
		EnableElectUncleanMaster: tc.unclean,
	}, baLogger())
	require.NoError(t, err)
	srv := remoting.NewServer(remoting.ServerConfig{Addr: tc.addr(), Logger: baLogger(), NumEventLoops: 1})
	ctl.Register(srv, srv.NewPool("controller", 4, 1000))
	tc.h = controller.NewHosted(srv, ctl)
	require.NoError(t, tc.h.Start())
	require.Eventually(t, ctl.IsLeader, ctlWait, 5*time.Millisecond)
}

func (tc *testController) stop() {
	if tc.h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(tc.t, tc.h.Shutdown(ctx))
	tc.h = nil
}

// ctlBrokerConfig is replica id of broker-a in controller mode, quick:
// heartbeats every 100 ms, dead (and fenced) after 1 s (600 ms let the
// group flap under -race on a loaded machine).
func ctlBrokerConfig(t *testing.T, ns, ctl string, id int64) *conf.BrokerConfig {
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = ns
	cfg.EnableControllerMode = true
	cfg.ControllerAddr = ctl
	cfg.BrokerID = id
	cfg.BrokerRole = conf.RoleSyncMaster
	cfg.BrokerHeartbeatInterval = 100
	cfg.BrokerNotActiveTimeoutMillis = 1000
	cfg.HaSendHeartbeatInterval = 100
	cfg.HaMaxTimeSlaveNotCatchup = 3000
	cfg.SlaveTimeout = 5000
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), fmt.Sprintf("store-%d", id))
	return cfg
}

func startCtlBroker(t *testing.T, cfg *conf.BrokerConfig) *Broker {
	t.Helper()
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	return b
}

func role(b *Broker) string {
	r, _, _ := b.ControllerRole()
	return r
}

// waitMaster waits until exactly one of bs is master and the others slaves,
// and returns the master.
func waitMaster(t *testing.T, bs ...*Broker) *Broker {
	t.Helper()
	var m *Broker
	require.Eventually(t, func() bool {
		m = nil
		for _, b := range bs {
			switch role(b) {
			case "MASTER":
				if m != nil {
					return false
				}
				m = b
			case "SLAVE":
			default:
				return false
			}
		}
		return m != nil && m.acceptWrites.Load()
	}, ctlWait, 5*time.Millisecond, "one master, the others slaves")
	return m
}

func syncStateSet(t *testing.T, cl *remoting.Client, ctl, name string) *protocol.ReplicasInfo {
	t.Helper()
	body, _ := json.Marshal([]string{name})
	resp := baInvoke(t, cl, ctl, remoting.NewRequest(remoting.ControllerGetSyncStateData, nil, body))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	var out protocol.BrokerReplicasInfo
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	return out.ReplicasInfoTable[name]
}

func inSyncIDs(ri *protocol.ReplicasInfo) []int64 {
	var ids []int64
	for _, r := range ri.InSyncReplicas {
		ids = append(ids, r.BrokerID)
	}
	return ids
}

// TestControllerModeFailoverInProcess: three replicas of broker-a under a
// controller. The first is master, registered as brokerId 0; the in-sync
// set grows to all three, and a SYNC_MASTER send is SUCCESS only once
// every replica has it. The master stops: an in-sync replica takes over at
// epoch 2, registers as brokerId 0 and takes sends. The old master comes
// back with a tail nobody else has (written while it was down): it becomes
// a slave, cuts that tail, and ends with the new master's commitlog.
func TestControllerModeFailoverInProcess(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	cl := baClient(t)
	var cfgs []*conf.BrokerConfig
	var bs []*Broker
	for id := int64(1); id <= 3; id++ {
		cfg := ctlBrokerConfig(t, ns.Addr(), ctl.addr(), id)
		cfgs = append(cfgs, cfg)
		bs = append(bs, startCtlBroker(t, cfg))
	}
	stopped := map[*Broker]bool{}
	t.Cleanup(func() {
		for _, b := range bs {
			if !stopped[b] {
				mustShutdownBroker(t, b)
			}
		}
	})
	m := waitMaster(t, bs...)
	require.Equal(t, remoting.Success, baInvoke(t, cl, m.Addr(), createTopicReq("CTL", 1, 1, 6)).ResponseCode())
	require.Eventually(t, func() bool {
		r := ns.Routes().PickupTopicRouteData("CTL")
		return r != nil && len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[0] == m.Addr() && len(r.BrokerDatas[0].BrokerAddrs) == 3
	}, ctlWait, 5*time.Millisecond, "the master is brokerId 0 at the nameserver, the slaves are listed under their ids")
	require.Eventually(t, func() bool { return len(syncStateSet(t, cl, ctl.addr(), "broker-a").InSyncReplicas) == 3 },
		ctlWait, 10*time.Millisecond, "the in-sync set grows to every replica")

	for i := range 20 {
		resp := haSend(t, cl, m.Addr(), "CTL", fmt.Sprintf("m%d", i))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		end := m.Store().CommitLog().MaxOffset()
		for _, b := range bs {
			assert.GreaterOrEqual(t, b.Store().CommitLog().MaxOffset(), end, "SUCCESS before replica %d had the message", b.cfg.BrokerID)
		}
	}
	for _, b := range bs {
		if b != m {
			resp := haSend(t, cl, b.Addr(), "CTL", "to a slave")
			assert.Equal(t, remoting.ServiceNotAvailable, resp.ResponseCode())
		}
	}

	// The master stops; an in-sync replica takes over.
	oldCfg := m.cfg
	common := m.Store().CommitLog().MaxOffset()
	// Not necessarily 1: under load a heartbeat may miss the 1 s
	// timeout before the first send, and the group flaps while empty.
	_, oldEpoch, err := m.ControllerRole()
	require.NoError(t, err)
	mustShutdownBroker(t, m)
	stopped[m] = true
	var rest []*Broker
	for _, b := range bs {
		if b != m {
			rest = append(rest, b)
		}
	}
	nm := waitMaster(t, rest...)
	_, epoch, err := nm.ControllerRole()
	require.NoError(t, err)
	assert.Greater(t, epoch, oldEpoch, "a promotion starts a new epoch")
	require.Eventually(t, func() bool {
		r := ns.Routes().PickupTopicRouteData("CTL")
		return r != nil && r.BrokerDatas[0].BrokerAddrs[0] == nm.Addr()
	}, ctlWait, 5*time.Millisecond, "the new master registers as brokerId 0")
	for i := range 10 {
		resp := haSend(t, cl, nm.Addr(), "CTL", fmt.Sprintf("n%d", i))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	}
	var ec protocol.EpochEntryCache
	resp := baInvoke(t, cl, nm.Addr(), remoting.NewRequest(remoting.GetBrokerEpochCache, nil, nil))
	require.NoError(t, json.Unmarshal(resp.Body, &ec))
	require.Len(t, ec.EpochList, 2)
	assert.Equal(t, protocol.EpochEntry{Epoch: oldEpoch, StartOffset: 0, EndOffset: common}, ec.EpochList[0])
	assert.Equal(t, epoch, ec.EpochList[1].Epoch)
	assert.Equal(t, common, ec.EpochList[1].StartOffset)

	// The old master's store gets a tail nobody else has, as if it had
	// appended messages no replica acknowledged before it died.
	st, err := store.Open(oldCfg.StoreConfig(), nil)
	require.NoError(t, err)
	st.SetSlave(false)
	for i := range 5 {
		m := &message.MessageExt{QueueID: 0, BornHost: netip.MustParseAddrPort("127.0.0.1:1"), BornTimestamp: time.Now().UnixMilli()}
		m.Topic = "CTL"
		m.Body = []byte(fmt.Sprintf("unacknowledged-%d", i))
		require.Equal(t, store.PutOK, st.PutMessage(context.Background(), m).Status)
	}
	require.Greater(t, st.CommitLog().MaxOffset(), common)
	require.NoError(t, st.Shutdown(context.Background()))

	back := startCtlBroker(t, oldCfg)
	bs = append(bs, back)
	require.Eventually(t, func() bool {
		return role(back) == "SLAVE" && back.Store().CommitLog().MaxOffset() == nm.Store().CommitLog().MaxOffset()
	}, ctlWait, 5*time.Millisecond, "the old master follows the new one, its tail cut")
	assert.Equal(t, nm.Store().Epochs().Entries(), back.Store().Epochs().Entries(), "it took the new master's epoch history")
	require.Eventually(t, func() bool { return back.Store().DispatchBehindBytes() == 0 }, ctlWait, 5*time.Millisecond)
	bcHeartbeat(t, cl, back.Addr(), "c1", "G", protocol.ConsumeFromFirstOffset, bcTagSub("CTL", "*"))
	r := bcPull(t, cl, back.Addr(), bcPullHeader("G", "CTL", 0, 0, protocol.PullFlagSubscription, 0))
	require.Equal(t, remoting.Success, r.code, r.remark)
	for _, body := range r.bodies {
		assert.NotContains(t, body, "unacknowledged", "a cut message is served")
	}
	require.Eventually(t, func() bool { return len(syncStateSet(t, cl, ctl.addr(), "broker-a").InSyncReplicas) == 3 },
		ctlWait, 10*time.Millisecond, "the old master rejoins the in-sync set")
}

// TestControllerModeLeaseFencesMaster: a master that hears from no
// controller for brokerNotActiveTimeoutMillis refuses sends; when the
// controller is back (the same master at the same epoch) it takes them
// again.
func TestControllerModeLeaseFencesMaster(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	cl := baClient(t)
	b := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1))
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	waitMaster(t, b)
	require.Equal(t, remoting.Success, baInvoke(t, cl, b.Addr(), createTopicReq("LEASE", 1, 1, 6)).ResponseCode())
	resp := haSend(t, cl, b.Addr(), "LEASE", "before")
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)

	ctl.stop()
	require.Eventually(t, func() bool { return !b.acceptWrites.Load() }, ctlWait, 5*time.Millisecond, "fenced when the lease ran out")
	resp = haSend(t, cl, b.Addr(), "LEASE", "fenced")
	assert.Equal(t, remoting.ServiceNotAvailable, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "lease")
	assert.Equal(t, "MASTER", role(b), "still the master as far as it knows")
	require.Eventually(t, func() bool {
		r := ns.Routes().PickupTopicRouteData("LEASE")
		return r == nil || r.BrokerDatas[0].BrokerAddrs[0] == ""
	}, ctlWait, 5*time.Millisecond, "a fenced master does not register as brokerId 0")

	ctl.start()
	require.Eventually(t, func() bool { return b.acceptWrites.Load() }, ctlWait, 5*time.Millisecond, "writes again once the controller answers")
	_, epoch, _ := b.ControllerRole()
	assert.Equal(t, int32(1), epoch)
	resp = haSend(t, cl, b.Addr(), "LEASE", "after")
	assert.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
}

// TestControllerModeNoInSyncReplica: two replicas of broker-a. The slave's
// replication is cut (pointed at a closed port): it leaves the in-sync set
// and the master takes sends alone (SUCCESS with the set {master}). The
// master stops, leaving only the out-of-sync slave alive.
//   - clean: the group stays without a master; the slave is never elected
//     and refuses sends. The master comes back, is elected again (it is in
//     the set), and the slave follows it and gets every message.
//   - enableElectUncleanMaster: the slave is elected and takes sends; the
//     old master comes back as its slave and its tail (what only it held)
//     is cut.
func TestControllerModeNoInSyncReplica(t *testing.T) {
	baVerifyNoLeaks(t)
	for _, unclean := range []bool{false, true} {
		t.Run(fmt.Sprintf("unclean=%v", unclean), func(t *testing.T) {
			ns := mustStartNameServer(t)
			ctl := startTestControllerWith(t, unclean)
			cl := baClient(t)
			cfgs := []*conf.BrokerConfig{ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1), ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 2)}
			bs := []*Broker{startCtlBroker(t, cfgs[0])}
			waitMaster(t, bs[0]) // replica 1 is the first master
			bs = append(bs, startCtlBroker(t, cfgs[1]))
			running := map[*Broker]bool{bs[0]: true, bs[1]: true}
			t.Cleanup(func() {
				for b, up := range running {
					if up {
						mustShutdownBroker(t, b)
					}
				}
			})
			m, s := bs[0], bs[1]
			require.Equal(t, m, waitMaster(t, bs...))
			require.Equal(t, remoting.Success, baInvoke(t, cl, m.Addr(), createTopicReq("NOSYNC", 1, 1, 6)).ResponseCode())
			require.Eventually(t, func() bool { return len(syncStateSet(t, cl, ctl.addr(), "broker-a").InSyncReplicas) == 2 },
				ctlWait, 10*time.Millisecond, "both replicas in sync")
			for i := range 5 {
				resp := haSend(t, cl, m.Addr(), "NOSYNC", fmt.Sprintf("both-%d", i))
				require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
			}

			// Cut the slave's replication: it leaves the set, the master
			// goes on alone.
			s.ha.slave.Load().SetMasterAddress("127.0.0.1:" + strconv.Itoa(freePort(t)))
			require.Eventually(t, func() bool {
				ri := syncStateSet(t, cl, ctl.addr(), "broker-a")
				return assert.ObjectsAreEqual([]int64{1}, inSyncIDs(ri))
			}, ctlWait, 10*time.Millisecond, "the cut slave leaves the in-sync set")
			// The master adopts the smaller set after the controller wrote it.
			require.Eventually(t, func() bool {
				return haSend(t, cl, m.Addr(), "NOSYNC", "alone").ResponseCode() == remoting.Success
			}, ctlWait, 10*time.Millisecond, "the master alone in sync takes sends")
			for i := range 5 {
				resp := haSend(t, cl, m.Addr(), "NOSYNC", fmt.Sprintf("alone-%d", i))
				require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
			}
			masterEnd := m.Store().CommitLog().MaxOffset()
			require.Less(t, s.Store().CommitLog().MaxOffset(), masterEnd, "the cut slave lacks what the master took alone")

			mustShutdownBroker(t, m)
			running[m] = false
			if !unclean {
				require.Eventually(t, func() bool {
					return syncStateSet(t, cl, ctl.addr(), "broker-a").MasterBrokerID == protocol.NoMaster
				}, ctlWait, 10*time.Millisecond, "no live in-sync replica: the group has no master")
				assert.NotEqual(t, "MASTER", role(s), "an out-of-sync replica was elected")
				resp := haSend(t, cl, s.Addr(), "NOSYNC", "to the out-of-sync slave")
				assert.Equal(t, remoting.ServiceNotAvailable, resp.ResponseCode(), "a replica of a masterless group took a send")

				back := startCtlBroker(t, cfgs[0])
				running[back] = true
				require.Equal(t, back, waitMaster(t, back, s), "the in-sync replica is elected again when it returns")
				require.Eventually(t, func() bool { return s.Store().CommitLog().MaxOffset() == masterEnd }, ctlWait, 5*time.Millisecond,
					"the slave follows the returned master and copies what it lacked")
				return
			}
			require.Equal(t, s, waitMaster(t, s), "enableElectUncleanMaster elects the out-of-sync replica")
			resp := haSend(t, cl, s.Addr(), "NOSYNC", "after the unclean election")
			require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
			newEnd := s.Store().CommitLog().MaxOffset()
			back := startCtlBroker(t, cfgs[0])
			running[back] = true
			require.Eventually(t, func() bool {
				return role(back) == "SLAVE" && back.Store().CommitLog().MaxOffset() == s.Store().CommitLog().MaxOffset()
			}, ctlWait, 5*time.Millisecond, "the old master follows the unclean master, its tail cut")
			assert.Equal(t, newEnd, back.Store().CommitLog().MaxOffset())
		})
	}
}

// TestControllerModeSlaveWaitsForMasterEpoch: a slave that hears of an
// election before the new master began its epoch does not take the
// master's older history (it would keep it for good, and compute later
// cuts from it): it refuses and asks again at its next heartbeat.
func TestControllerModeSlaveWaitsForMasterEpoch(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	m := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1))
	t.Cleanup(func() { mustShutdownBroker(t, m) })
	waitMaster(t, m)
	s := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 2))
	t.Cleanup(func() { mustShutdownBroker(t, s) })
	require.Equal(t, m, waitMaster(t, m, s))
	_, epoch, err := m.ControllerRole()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(s.Store().Epochs().Entries()) > 0 }, ctlWait, 5*time.Millisecond,
		"the slave took the master's epochs")
	before := s.Store().Epochs().Entries()

	err = s.cutToMaster(m.Addr(), epoch+1, baLogger())
	require.ErrorIs(t, err, errMasterNotReady)
	assert.Equal(t, before, s.Store().Epochs().Entries(), "the slave's epochs changed")
	assert.NoError(t, s.cutToMaster(m.Addr(), epoch, baLogger()), "the master's current epoch is taken")
}

// TestControllerModePromotionWhileServed: a slave becomes master (its
// delay, timer and transaction services start) while GET_ALL_DELAY_OFFSET,
// which the other replicas' slave sync sends, is being answered: under
// -race this finds unguarded writes of the services' start.
func TestControllerModePromotionWhileServed(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	cl := baClient(t)
	m := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1))
	waitMaster(t, m)
	s := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 2))
	t.Cleanup(func() { mustShutdownBroker(t, s) })
	require.Equal(t, m, waitMaster(t, m, s))
	require.Eventually(t, func() bool { return len(syncStateSet(t, cl, ctl.addr(), "broker-a").InSyncReplicas) == 2 },
		ctlWait, 10*time.Millisecond, "both replicas in sync")

	stop := make(chan struct{})
	done := make(chan int, 1)
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(halt)
	go func() {
		n := 0
		defer func() { done <- n }()
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := cl.InvokeSync(ctx, s.Addr(), remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
			cancel()
			if err == nil && resp.ResponseCode() == remoting.Success {
				n++
			}
		}
	}()
	mustShutdownBroker(t, m)
	require.Equal(t, s, waitMaster(t, s), "the slave takes over")
	halt()
	assert.Positive(t, <-done, "no GET_ALL_DELAY_OFFSET answered")
	resp := baInvoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	var tbl delayOffsetTable
	require.NoError(t, json.Unmarshal(resp.Body, &tbl))
	assert.NotEmpty(t, tbl.OffsetTable, "the new master's schedule service loaded its offsets")
}

// TestControllerModeForgedRoleChangeIgnored: NOTIFY_BROKER_ROLE_CHANGED
// reaches the broker's public port, so anyone can send it. A forged push
// naming the slave master at a far higher epoch must not make it one: the
// broker asks the controller, whose answer keeps the real master, and the
// slave keeps refusing sends. (Applied as sent, the push made the slave a
// second master that the controller's lower epochs could never correct.)
func TestControllerModeForgedRoleChangeIgnored(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	cl := baClient(t)
	b1 := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1))
	t.Cleanup(func() { mustShutdownBroker(t, b1) })
	m := waitMaster(t, b1)
	b2 := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 2))
	t.Cleanup(func() { mustShutdownBroker(t, b2) })
	waitMaster(t, b1, b2)
	_, epoch, _ := m.ControllerRole()

	h := protocol.ReplicaInfoHeader{MasterBrokerID: 2, MasterAddress: b2.Addr(), MasterEpoch: epoch + 1000, SyncStateSetEpoch: 1000}
	push := remoting.NewRequest(remoting.NotifyBrokerRoleChanged, protocol.EncodeHeader(&h, nil), nil)
	resp := baInvoke(t, cl, b2.Addr(), push)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)

	// The push wakes b2's controller loop; give it several heartbeats'
	// worth of rounds, then check that nothing moved.
	hb := b2.ControllerAnswers()
	require.Eventually(t, func() bool { return b2.ControllerAnswers() >= hb+3 }, ctlWait, 5*time.Millisecond)
	assert.Equal(t, "SLAVE", role(b2))
	assert.False(t, b2.acceptWrites.Load(), "the slave takes no writes")
	_, e2, _ := b2.ControllerRole()
	assert.Less(t, e2, epoch+1000, "the forged epoch was not taken")
	assert.Equal(t, m, waitMaster(t, b1, b2), "the real master is unchanged")
}
