package main

import (
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
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/controller"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// ctlWait bounds the waits on elections: a heartbeat timeout or two, many
// on a loaded machine under -race.
const ctlWait = 30 * time.Second

// MustStartControllerNamesrv starts a nameserver running a controller
// group of one on its own port (enableControllerInNamesrv), as mqnamesrv
// does, and returns its address.
func MustStartControllerNamesrv(t *testing.T) string {
	t.Helper()
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress = "127.0.0.1"
	nsCfg.ListenPort = 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	nsCfg.ServerSelectorThreads = 1
	ns, err := nameserver.New(nsCfg, testLogger())
	require.NoError(t, err)
	ctl, err := controller.New(controller.Config{
		Group: "group1", Peers: []controller.Peer{{ID: "n0", Addr: "127.0.0.1:0"}}, SelfID: "n0",
		StorePath: t.TempDir(), ScanInterval: 50 * time.Millisecond, NotifyBrokerRoleChanged: true,
	}, testLogger())
	require.NoError(t, err)
	ctl.Register(ns.Server(), ns.Server().NewPool("controller", 2, 1000))
	h := controller.NewHosted(ns, ctl)
	require.NoError(t, h.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, h.Shutdown(ctx))
	})
	require.Eventually(t, ctl.IsLeader, ctlWait, 5*time.Millisecond)
	return h.Addr()
}

// MustStartCtlBroker starts replica id of broker-a in controller mode,
// heartbeating every 100 ms and dead after 1 s.
func MustStartCtlBroker(t *testing.T, ns string, id int64) *broker.Broker {
	t.Helper()
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1 = "127.0.0.1"
	cfg.BindAddress = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.NamesrvAddr = ns
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MaxHashSlotNum = 1000
	cfg.MaxIndexNum = 4000
	cfg.ServerSelectorThreads = 1
	smallBroker(&cfg)
	cfg.EnableControllerMode = true
	cfg.ControllerAddr = ns
	cfg.BrokerID = id
	cfg.BrokerRole = conf.RoleSyncMaster
	cfg.BrokerHeartbeatInterval = 100
	cfg.BrokerNotActiveTimeoutMillis = 1000
	cfg.HaSendHeartbeatInterval = 100
	b, err := broker.New(&cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	return b
}

func stopBroker(t *testing.T, b *broker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, b.Shutdown(ctx))
}

// field returns the value after "#name\t" in out ("" when absent).
func field(out, name string) string {
	m := regexp.MustCompile(`(?m)^#` + regexp.QuoteMeta(name) + `:?\t(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// TestControllerCommands: a nameserver with a controller and two replicas
// of broker-a, as the operator sees them. getControllerMetaData names the
// leader; getSyncStateSet shows the master and both replicas in sync (by
// broker name and by cluster); getBrokerEpoch shows epoch 1 on both;
// electMaster hands the group to the slave at epoch 2 and refuses an
// unknown replica. When the slave stops it leaves the set; when the
// master stops too the group is masterless and getSyncStateSet says so.
func TestControllerCommands(t *testing.T) {
	ns := MustStartControllerNamesrv(t)
	b1 := MustStartCtlBroker(t, ns, 1)
	b2 := MustStartCtlBroker(t, ns, 2)
	stopped := map[*broker.Broker]bool{}
	t.Cleanup(func() {
		for _, b := range []*broker.Broker{b1, b2} {
			if !stopped[b] {
				stopBroker(t, b)
			}
		}
	})
	run := func(args ...string) string {
		t.Helper()
		r := mqadmin(t, nil, args...)
		require.Equal(t, 0, r.code, "mqadmin %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out, r.err)
		return r.out
	}

	out := run("getControllerMetaData", "-a", ns)
	assert.Equal(t, "group1", field(out, "ControllerGroup"))
	assert.Equal(t, "n0", field(out, "ControllerLeaderId"))
	assert.Equal(t, ns, field(out, "ControllerLeaderAddress"))
	assert.Contains(t, out, "#Peer:\tn0-")

	var master string
	require.Eventually(t, func() bool {
		out = run("getSyncStateSet", "-a", ns, "-b", "broker-a")
		master = field(out, "MasterBrokerId")
		return field(out, "SyncStateSetNums") == "2" && (master == "1" || master == "2")
	}, ctlWait, 20*time.Millisecond, "a master and both replicas in sync")
	// 1, unless a loaded machine let the empty group flap before.
	epoch, err := strconv.Atoi(field(out, "MasterEpoch"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(out, "InSyncReplica:\tReplicaIdentity{brokerName='broker-a'"))
	assert.Contains(t, out, "alive=true")
	other := map[string]string{"1": "2", "2": "1"}[master]
	masterB := map[string]*broker.Broker{"1": b1, "2": b2}[master]
	assert.Equal(t, masterB.Addr(), field(out, "MasterAddr"))

	require.Eventually(t, func() bool {
		return strings.Contains(run("getSyncStateSet", "-a", ns, "-c", "DefaultCluster", "-n", ns), "#brokerName\tbroker-a")
	}, ctlWait, 20*time.Millisecond, "-c finds the cluster's groups at the nameserver")
	out = run("getSyncStateSet", "-a", ns, "-b", "broker-x")
	assert.Contains(t, out, "#NotRegistered")

	require.Eventually(t, func() bool {
		return strings.Count(run("getBrokerEpoch", "-b", "broker-a", "-n", ns), fmt.Sprintf("EpochEntry{epoch=%d, startOffset=0", epoch)) == 2
	}, ctlWait, 20*time.Millisecond, "both replicas at the nameserver, each at epoch %d", epoch)
	out = run("getBrokerEpoch", "-b", masterB.Addr())
	assert.Equal(t, "broker-a", field(out, "brokerName"))
	assert.Equal(t, master, field(out, "brokerId"))

	out = run("electMaster", "-a", ns, "-bn", "broker-a", "-b", other, "-c", "DefaultCluster")
	assert.Equal(t, other, field(out, "MasterBrokerId"))
	assert.Equal(t, strconv.Itoa(epoch+1), field(out, "MasterEpoch"))
	r := mqadmin(t, nil, "electMaster", "-a", ns, "-bn", "broker-a", "-b", "9")
	assert.NotEqual(t, 0, r.code, "an unknown replica is never elected: %s", r.out)
	r = mqadmin(t, nil, "electMaster", "-a", ns, "-bn", "broker-a", "-b", "0")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "brokerId")
	otherB := map[string]*broker.Broker{"1": b1, "2": b2}[other]
	require.Eventually(t, func() bool {
		e := run("getBrokerEpoch", "-b", otherB.Addr())
		return strings.Contains(e, fmt.Sprintf("EpochEntry{epoch=%d,", epoch+1))
	}, ctlWait, 20*time.Millisecond, "the new master starts epoch %d", epoch+1)

	// The old master (now a slave) stops: it leaves the in-sync set. Then
	// the master stops: no in-sync replica lives, the group has no master.
	stopBroker(t, masterB)
	stopped[masterB] = true
	require.Eventually(t, func() bool {
		out = run("getSyncStateSet", "-a", ns, "-b", "broker-a")
		return field(out, "SyncStateSetNums") == "1"
	}, ctlWait, 20*time.Millisecond, "the stopped slave leaves the in-sync set")
	stopBroker(t, otherB)
	stopped[otherB] = true
	require.Eventually(t, func() bool {
		out = run("getSyncStateSet", "-a", ns, "-b", "broker-a")
		return field(out, "MasterBrokerId") == "-"
	}, ctlWait, 20*time.Millisecond, "no live in-sync replica: no master")
	assert.Contains(t, out, "#NoMaster\t")
	assert.Contains(t, out, "enableElectUncleanMaster")
	last, err := strconv.Atoi(field(out, "MasterEpoch"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, last, epoch+1, "epochs never go back: %s", out)
}
