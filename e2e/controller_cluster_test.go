package e2e

// A controller-mode cluster of child processes: nameservers each running a
// member of the controller group (enableControllerInNamesrv), and the
// replicas of broker groups in controller mode, which take their role from
// the controllers. Tests kill -9 any of them and start them again on the
// same ports and stores.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// ctlWait bounds a wait on the controllers: a Raft election (about 1-2 s
// with hashicorp/raft's defaults) and a broker heartbeat timeout (3 s),
// with room for -race binaries on a loaded 2-core machine.
const ctlWait = 60 * time.Second

// ctlCluster is nameservers with controllers and controller-mode brokers,
// all child processes on loopback.
type ctlCluster struct {
	t       *testing.T
	dir     string
	base    *binCluster // the raw client and its helpers
	nsAddrs []string
	ns      []*binProc
	// replicas of each broker name; [i] is brokerId i+1.
	replicas map[string][]*binCluster
}

// startCtlCluster starts n nameservers, each running a member of one
// controller group, and waits until the group has a leader.
func startCtlCluster(t *testing.T, n int) *ctlCluster {
	t.Helper()
	nsBin, _ := builtBinaries(t)
	dir := t.TempDir()
	raw := newRawClient(t)
	cc := &ctlCluster{t: t, dir: dir, replicas: map[string][]*binCluster{}}
	// Each nameserver listens on p and its controller's Raft on p+1.
	ports := make([]int, n)
	var peers []string
	for i := range ports {
		ports[i] = freePortPair(t)
		peers = append(peers, fmt.Sprintf("n%d-127.0.0.1:%d", i, ports[i]+1))
		cc.nsAddrs = append(cc.nsAddrs, "127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	for i, p := range ports {
		conf := filepath.Join(dir, fmt.Sprintf("namesrv-n%d.conf", i))
		writeProps(t, conf, map[string]string{
			"bindAddress":               "127.0.0.1",
			"listenPort":                strconv.Itoa(p),
			"kvConfigPath":              filepath.Join(dir, fmt.Sprintf("namesrv-n%d", i), "kvConfig.json"),
			"serverWorkerThreads":       "4",
			"serverSelectorThreads":     "1",
			"enableControllerInNamesrv": "true",
			"controllerDLegerGroup":     "group1",
			"controllerDLegerPeers":     strings.Join(peers, ";"),
			"controllerDLegerSelfId":    fmt.Sprintf("n%d", i),
			"controllerStorePath":       filepath.Join(dir, fmt.Sprintf("namesrv-n%d", i), "controller"),
			"controllerThreadPoolNums":  "4",
		})
		cc.ns = append(cc.ns, newBinProc(t, fmt.Sprintf("mqnamesrv n%d", i), nsBin, filepath.Join(dir, fmt.Sprintf("namesrv-n%d.log", i)), "-c", conf))
	}
	cc.base = &binCluster{t: t, dir: dir, NamesrvAddr: cc.nsAddrs[0], raw: raw}
	for i := range cc.ns {
		cc.startNamesrv(i)
	}
	cc.waitLeader()
	return cc
}

// nsList is the nameservers (and controllers) as a broker or client
// config lists them.
func (cc *ctlCluster) nsList() string { return strings.Join(cc.nsAddrs, ";") }

// startNamesrv starts nameserver i (again) and waits until it serves.
func (cc *ctlCluster) startNamesrv(i int) {
	cc.t.Helper()
	cc.ns[i].start()
	cc.base.waitServing(cc.ns[i], cc.nsAddrs[i])
}

// killNamesrv kill -9s nameserver i and its controller.
func (cc *ctlCluster) killNamesrv(i int) {
	cc.t.Helper()
	cc.ns[i].kill9()
	cc.base.raw.CloseConn(cc.nsAddrs[i])
}

// addReplica starts replica id of brokerName in controller mode
// (SYNC_MASTER when it leads: sends wait for every in-sync replica),
// the broker config being haBrokerConf's overlaid with extra.
func (cc *ctlCluster) addReplica(brokerName string, id int, extra map[string]string) *binCluster {
	cc.t.Helper()
	kv := haBrokerConf("SYNC_MASTER", map[string]string{
		"namesrvAddr":          cc.nsList(),
		"enableControllerMode": "true",
		"controllerAddr":       cc.nsList(),
	})
	for k, v := range extra {
		kv[k] = v
	}
	v := &binCluster{t: cc.t, dir: cc.dir, NamesrvAddr: cc.nsAddrs[0], raw: cc.base.raw}
	v.configureBroker(brokerName, id, fmt.Sprintf("%s-%d", brokerName, id), kv)
	cc.replicas[brokerName] = append(cc.replicas[brokerName], v)
	cc.startReplica(v)
	return v
}

// startReplica starts a replica's process (again) and waits until it serves.
func (cc *ctlCluster) startReplica(v *binCluster) {
	cc.t.Helper()
	v.broker.start()
	v.waitServing(v.broker, v.BrokerAddr)
}

// running reports whether nameserver i runs.
func (cc *ctlCluster) running(i int) bool { return cc.ns[i].running() }

// metadata is CONTROLLER_GET_METADATA_INFO of nameserver i's controller.
func (cc *ctlCluster) metadata(i int) (protocol.GetMetaDataResponseHeader, error) {
	var h protocol.GetMetaDataResponseHeader
	resp, err := cc.base.invoke(cc.nsAddrs[i], remoting.ControllerGetMetadataInfo, nil, nil)
	if err != nil {
		return h, err
	}
	if resp.Code != int32(remoting.Success) {
		return h, fmt.Errorf("e2e: metadata of n%d: code %d %s", i, resp.Code, resp.Remark)
	}
	return h, protocol.DecodeHeader(resp.ExtFields, &h)
}

// leader returns the index of the controller that serves as leader, or -1.
func (cc *ctlCluster) leader() int {
	for i := range cc.ns {
		if !cc.running(i) {
			continue
		}
		if h, err := cc.metadata(i); err == nil && h.IsLeader {
			return i
		}
	}
	return -1
}

// waitLeader waits until a controller leads and returns its index.
func (cc *ctlCluster) waitLeader() int {
	cc.t.Helper()
	l := -1
	require.Eventually(cc.t, func() bool { l = cc.leader(); return l >= 0 }, ctlWait, 50*time.Millisecond, "no controller leader")
	return l
}

// replicasInfo is the controller leader's view of brokerName (nil when the
// leader cannot be asked or knows no such group).
func (cc *ctlCluster) replicasInfo(brokerName string) *protocol.ReplicasInfo {
	l := cc.leader()
	if l < 0 {
		return nil
	}
	body, _ := json.Marshal([]string{brokerName})
	resp, err := cc.base.invoke(cc.nsAddrs[l], remoting.ControllerGetSyncStateData, nil, body)
	if err != nil || resp.Code != int32(remoting.Success) {
		return nil
	}
	var out protocol.BrokerReplicasInfo
	if json.Unmarshal(resp.Body, &out) != nil {
		return nil
	}
	return out.ReplicasInfoTable[brokerName]
}

// routedMaster is brokerName's brokerId 0 in nameserver i's route of
// topic, or "".
func (cc *ctlCluster) routedMaster(i int, topic, brokerName string) string {
	resp, err := cc.base.invoke(cc.nsAddrs[i], remoting.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
	if err != nil || resp.Code != int32(remoting.Success) {
		return ""
	}
	rd, err := protocol.DecodeTopicRouteData(resp.Body)
	if err != nil {
		return ""
	}
	for _, bd := range rd.BrokerDatas {
		if bd.BrokerName == brokerName {
			return bd.BrokerAddrs[protocol.MasterID]
		}
	}
	return ""
}

// replicaAt is the replica of brokerName listening on addr, or nil.
func (cc *ctlCluster) replicaAt(brokerName, addr string) *binCluster {
	for _, v := range cc.replicas[brokerName] {
		if v.BrokerAddr == addr {
			return v
		}
	}
	return nil
}

// waitMaster waits until the controllers name a master of brokerName other
// than the replica at not ("" for any) whose process runs, with inSync
// replicas in its in-sync set (0: any), and every running nameserver
// routes it as brokerId 0; it returns that replica and its epoch.
func (cc *ctlCluster) waitMaster(brokerName, not string, inSync int) (*binCluster, int32) {
	cc.t.Helper()
	var m *binCluster
	var ri *protocol.ReplicasInfo
	require.Eventually(cc.t, func() bool {
		ri = cc.replicasInfo(brokerName)
		if ri == nil || ri.MasterBrokerID == protocol.NoMaster || ri.MasterAddress == not {
			return false
		}
		if inSync > 0 && len(ri.InSyncReplicas) != inSync {
			return false
		}
		m = cc.replicaAt(brokerName, ri.MasterAddress)
		if m == nil || !m.broker.running() {
			return false
		}
		for i := range cc.ns {
			if cc.running(i) && cc.routedMaster(i, "TBW102", brokerName) != m.BrokerAddr {
				return false
			}
		}
		return true
	}, ctlWait, 20*time.Millisecond, "no master of %s (other than %q, %d in sync) routed by every nameserver; last seen %+v", brokerName, not, inSync, ri)
	return m, ri.MasterEpoch
}

// createTopicOn creates topic on every replica of brokerName (a replica
// that becomes master serves it at once; the slave sync would copy it only
// after its period) and waits until every nameserver routes it to master.
func (cc *ctlCluster) createTopicOn(brokerName, topic string, queues int32, master *binCluster) {
	cc.t.Helper()
	for _, v := range cc.replicas[brokerName] {
		v.createTopic(topic, queues)
	}
	require.Eventually(cc.t, func() bool {
		for i := range cc.ns {
			if cc.running(i) && cc.routedMaster(i, topic, brokerName) != master.BrokerAddr {
				return false
			}
		}
		return true
	}, ctlWait, 20*time.Millisecond, "%s never routed to the master %s", topic, master.BrokerAddr)
}

// epochs is GET_BROKER_EPOCH_CACHE of a replica.
func (cc *ctlCluster) epochs(v *binCluster) protocol.EpochEntryCache {
	cc.t.Helper()
	resp := v.mustInvoke(v.BrokerAddr, remoting.GetBrokerEpochCache, nil, nil)
	require.Equal(cc.t, int32(remoting.Success), resp.Code, resp.Remark)
	var ec protocol.EpochEntryCache
	require.NoError(cc.t, json.Unmarshal(resp.Body, &ec))
	return ec
}
