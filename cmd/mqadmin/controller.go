package main

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Controller mode's commands (RocketMQ 5's getControllerMetaData,
// getSyncStateSet, electMaster, getBrokerEpoch). -a names the controllers
// (their remoting ports: the nameservers' with enableControllerInNamesrv);
// requests only the leader answers find it from any of them.

func getControllerMetaDataCmd() *command {
	return &command{
		name: "getControllerMetaData", desc: "Get controller cluster's metadata.",
		opts: []option{{short: "a", long: "controllerAddress", hasArg: true, required: true, desc: "the address of controller"}},
		run:  runGetControllerMetaData,
	}
}

func runGetControllerMetaData(e *env) error {
	a, err := e.controllerAdmin()
	if err != nil {
		return err
	}
	md, err := a.ControllerMetaData(e.ctx, e.vals.get("a"))
	if err != nil {
		return err
	}
	e.printf("\n#ControllerGroup\t%s", md.Group)
	e.printf("\n#ControllerLeaderId\t%s", md.ControllerLeaderID)
	e.printf("\n#ControllerLeaderAddress\t%s", md.ControllerLeaderAddress)
	for _, p := range strings.FieldsFunc(md.Peers, func(r rune) bool { return r == ';' }) {
		e.printf("\n#Peer:\t%s", p)
	}
	e.printf("\n")
	return nil
}

func getSyncStateSetCmd() *command {
	return &command{
		name: "getSyncStateSet", desc: "Fetch syncStateSet for target brokers.",
		opts: []option{
			{short: "a", long: "controllerAddress", hasArg: true, required: true, desc: "the address of controller"},
			{short: "c", long: "clusterName", hasArg: true, desc: "which cluster"},
			{short: "b", long: "brokerName", hasArg: true, desc: "which broker to fetch"},
			{short: "i", long: "interval", hasArg: true, desc: "the interval(second) of get info"},
		},
		needOneOf: []string{"b", "c"},
		run:       runGetSyncStateSet,
	}
}

// runGetSyncStateSet prints each group's master and replicas. -c takes the
// cluster's broker names from the nameservers (-n).
func runGetSyncStateSet(e *env) error {
	a, err := e.controllerAdmin()
	if err != nil {
		return err
	}
	return e.repeat(3, func() error {
		names := []string{e.vals.get("b")}
		if !e.vals.has("b") {
			if names, err = e.clusterBrokerNames(e.vals.get("c")); err != nil {
				return err
			}
		}
		info, err := a.SyncStateData(e.ctx, e.vals.get("a"), names...)
		if err != nil {
			return err
		}
		for _, n := range names {
			ri := info.ReplicasInfoTable[n]
			if ri == nil {
				e.printf("\n#brokerName\t%s\n#NotRegistered\tthe controller knows no replica of %s\n", n, n)
				continue
			}
			master := strconv.FormatInt(ri.MasterBrokerID, 10)
			if ri.MasterBrokerID == protocol.NoMaster {
				master = "-"
			}
			e.printf("\n#brokerName\t%s\n#MasterBrokerId\t%s\n#MasterAddr\t%s\n#MasterEpoch\t%d\n#SyncStateSetEpoch\t%d\n#SyncStateSetNums\t%d\n",
				n, master, ri.MasterAddress, ri.MasterEpoch, ri.SyncStateSetEpoch, len(ri.InSyncReplicas))
			if ri.MasterBrokerID == protocol.NoMaster {
				e.printf("#NoMaster\tno in-sync replica is alive: writes to %s stop until one returns (or the controller allows enableElectUncleanMaster)\n", n)
			}
			for _, r := range ri.InSyncReplicas {
				e.printf("\nInSyncReplica:\t%s\n", replicaString(r))
			}
			for _, r := range ri.NotInSyncReplicas {
				e.printf("\nNotInSyncReplica:\t%s\n", replicaString(r))
			}
		}
		return nil
	})
}

// replicaString is Java's ReplicaIdentity.toString.
func replicaString(r protocol.ReplicaIdentity) string {
	return fmt.Sprintf("ReplicaIdentity{brokerName='%s', brokerId=%d, brokerAddress='%s', alive=%t}", r.BrokerName, r.BrokerID, r.BrokerAddress, r.Alive)
}

func electMasterCmd() *command {
	return &command{
		name: "electMaster", desc: "Re-elect the specified broker as master.",
		opts: []option{
			{short: "a", long: "controllerAddress", hasArg: true, required: true, desc: "The address of controller"},
			{short: "b", long: "brokerId", hasArg: true, required: true, desc: "The id of the broker which requires to become master"},
			{short: "bn", long: "brokerName", hasArg: true, required: true, desc: "The broker name of the replicas that require to be manipulated"},
			{short: "c", long: "clusterName", hasArg: true, desc: "the clusterName of broker"},
		},
		run: runElectMaster,
	}
}

// runElectMaster hands a group over to a live in-sync replica.
func runElectMaster(e *env) error {
	id, err := e.vals.int("b", 0)
	if err != nil {
		return err
	}
	if id <= 0 {
		return fmt.Errorf("%w: -b wants a replica's brokerId (>= 1), got %d", errUsage, id)
	}
	a, err := e.controllerAdmin()
	if err != nil {
		return err
	}
	cluster, name := e.vals.get("c"), e.vals.get("bn")
	ri, set, err := a.ElectMaster(e.ctx, e.vals.get("a"), cluster, name, id)
	if err != nil {
		return err
	}
	e.printf("\n#ClusterName\t%s", cluster)
	e.printf("\n#BrokerName\t%s", name)
	e.printf("\n#BrokerMasterAddr\t%s", ri.MasterAddress)
	e.printf("\n#MasterEpoch\t%d", ri.MasterEpoch)
	e.printf("\n#SyncStateSetEpoch\t%d\n", ri.SyncStateSetEpoch)
	e.printf("#MasterBrokerId\t%d\n#SyncStateSet\t%v\n", ri.MasterBrokerID, set.SyncStateSet)
	return nil
}

func getBrokerEpochCmd() *command {
	return &command{
		name: "getBrokerEpoch", desc: "Fetch broker epoch entries.",
		opts: []option{
			{short: "c", long: "clusterName", hasArg: true, desc: "which cluster"},
			{short: "b", long: "brokerName", hasArg: true, desc: "which broker to fetch (a broker name, or one broker's ip:port)"},
			{short: "i", long: "interval", hasArg: true, desc: "the interval(second) of get info"},
		},
		needOneOf: []string{"b", "c"},
		run:       runGetBrokerEpoch,
	}
}

// runGetBrokerEpoch prints the epoch history of every broker of a name or
// cluster (from the nameservers), or of one broker given as ip:port.
func runGetBrokerEpoch(e *env) error {
	b := e.vals.get("b")
	if _, err := netip.ParseAddrPort(b); err == nil && e.vals.has("b") {
		a, err := e.controllerAdmin()
		if err != nil {
			return err
		}
		return e.repeat(3, func() error { return printBrokerEpoch(e, a, b) })
	}
	a, err := e.Admin()
	if err != nil {
		return err
	}
	return e.repeat(3, func() error {
		ci, err := a.ClusterInfo(e.ctx)
		if err != nil {
			return err
		}
		var addrs []string
		for _, r := range clusterRows(ci) {
			if (e.vals.has("b") && r.name == b) || (!e.vals.has("b") && r.cluster == e.vals.get("c")) {
				addrs = append(addrs, r.addr)
			}
		}
		if len(addrs) == 0 {
			return fmt.Errorf("mqadmin: no broker named %q in cluster %q at the nameservers", b, e.vals.get("c"))
		}
		for _, addr := range addrs {
			if err := printBrokerEpoch(e, a, addr); err != nil {
				fmt.Fprintf(e.app.err, "broker %s epochs: %v\n", addr, describe(err))
			}
		}
		return nil
	})
}

func printBrokerEpoch(e *env, a *client.Admin, addr string) error {
	c, err := a.BrokerEpochCache(e.ctx, addr)
	if err != nil {
		return err
	}
	e.printf("\n#clusterName\t%s\n#brokerName\t%s\n#brokerAddr\t%s\n#brokerId\t%d", c.ClusterName, c.BrokerName, addr, c.BrokerID)
	for _, ep := range c.EpochList {
		e.printf("\n#Epoch: EpochEntry{epoch=%d, startOffset=%d, endOffset=%d}", ep.Epoch, ep.StartOffset, ep.EndOffset)
	}
	e.printf("\n#MaxOffset\t%d\n", c.MaxOffset)
	return nil
}

// controllerAdmin is the admin client for controller and single-broker
// commands: they need no nameserver, but the client wants an address
// list, so without -n it gets -a's (it never asks them for routes).
func (e *env) controllerAdmin() (*client.Admin, error) {
	if len(e.nameServers()) == 0 {
		fallback := e.vals.get("a")
		if fallback == "" {
			fallback = e.vals.get("b")
		}
		e.vals["n"] = fallback
	}
	return e.Admin()
}

// clusterBrokerNames returns the broker names of cluster at the
// nameservers, sorted.
func (e *env) clusterBrokerNames(cluster string) ([]string, error) {
	a, err := e.Admin()
	if err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(e.ctx)
	if err != nil {
		return nil, err
	}
	names, ok := ci.ClusterAddrTable[cluster]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNoCluster, cluster)
	}
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out, nil
}
