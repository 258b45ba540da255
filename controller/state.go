package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Errors of the replica state: an event the Raft log carries is refused
// with one of these when the state moved on since the leader decided it,
// so every controller applies it alike (Apply is deterministic).
var (
	// ErrUnknownGroup means the broker name has no registered replica.
	ErrUnknownGroup = errors.New("controller: broker group not registered")
	// ErrUnknownReplica means the broker id is not registered in its group.
	ErrUnknownReplica = errors.New("controller: replica not registered")
	// ErrFencedMasterEpoch means a request names a master or master epoch
	// that is no longer the group's (a deposed master).
	ErrFencedMasterEpoch = errors.New("controller: stale master or master epoch")
	// ErrFencedSyncStateSetEpoch means an in-sync set change was based on
	// a set that has changed since.
	ErrFencedSyncStateSetEpoch = errors.New("controller: stale sync state set epoch")
	// ErrInvalidReplicas means a new in-sync set lacks the master or names
	// an unknown replica.
	ErrInvalidReplicas = errors.New("controller: invalid sync state set")
	// ErrClusterMismatch means a broker name is registered under another
	// cluster.
	ErrClusterMismatch = errors.New("controller: broker name registered in another cluster")
)

// Replica is one broker of a group as the controller knows it.
type Replica struct {
	ID     int64  `json:"brokerId"`
	Addr   string `json:"brokerAddress"`
	HaAddr string `json:"haAddress,omitempty"`
	// HeartbeatTimeoutMs is the broker's brokerNotActiveTimeoutMillis:
	// a new controller leader gives every replica this long to heartbeat
	// before it counts as dead, so it never deposes a master whose lease
	// may still run.
	HeartbeatTimeoutMs int64 `json:"heartbeatTimeoutMills"`
}

// Group is one broker group's replica state (RocketMQ 5's BrokerReplicaInfo
// and SyncStateInfo), built by the Raft log.
type Group struct {
	ClusterName string             `json:"clusterName"`
	BrokerName  string             `json:"brokerName"`
	Replicas    map[int64]*Replica `json:"replicas"`
	// MasterID is the master's replica id, protocol.NoMaster when none.
	MasterID int64 `json:"masterBrokerId"`
	// MasterEpoch grows by one with every change of master (to none too).
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSet holds the replicas that have everything the master
	// acknowledged under sync replication, the master included; sorted.
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// clone returns a deep copy.
func (g *Group) clone() *Group {
	c := *g
	c.Replicas = make(map[int64]*Replica, len(g.Replicas))
	for id, r := range g.Replicas {
		rc := *r
		c.Replicas[id] = &rc
	}
	c.SyncStateSet = slices.Clone(g.SyncStateSet)
	return &c
}

// master returns the master's replica, nil when none.
func (g *Group) master() *Replica {
	if g.MasterID == protocol.NoMaster {
		return nil
	}
	return g.Replicas[g.MasterID]
}

// inSync reports whether id is in the sync state set.
func (g *Group) inSync(id int64) bool {
	_, ok := slices.BinarySearch(g.SyncStateSet, id)
	return ok
}

// ids returns the replica ids, sorted.
func (g *Group) ids() []int64 {
	out := make([]int64, 0, len(g.Replicas))
	for id := range g.Replicas {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// ReplicaInfo is the group's master as the protocol carries it.
func (g *Group) ReplicaInfo() protocol.ReplicaInfoHeader {
	h := protocol.ReplicaInfoHeader{MasterBrokerID: g.MasterID, MasterEpoch: g.MasterEpoch, SyncStateSetEpoch: g.SyncStateSetEpoch}
	if m := g.master(); m != nil {
		h.MasterAddress, h.MasterHaAddress = m.Addr, m.HaAddr
	}
	return h
}

// SyncState is the group's in-sync set as the protocol carries it.
func (g *Group) SyncState() protocol.SyncStateSet {
	return protocol.SyncStateSet{SyncStateSet: slices.Clone(g.SyncStateSet), SyncStateSetEpoch: g.SyncStateSetEpoch}
}

// state is what the Raft log builds: every group, and the remoting address
// of each controller (so a follower can point brokers at its leader).
type state struct {
	Groups      map[string]*Group `json:"groups"`
	Controllers map[string]string `json:"controllers"` // Raft server id -> remoting address
}

func newState() *state {
	return &state{Groups: map[string]*Group{}, Controllers: map[string]string{}}
}

// Event types of the Raft log. Part of the log's format: never renumber.
const (
	evRegister       = "register"
	evElect          = "elect"
	evAlterSyncState = "alterSyncStateSet"
	evControllerAddr = "controllerAddr"
)

// event is one Raft log entry, JSON-encoded: a type and its one payload.
type event struct {
	Type           string               `json:"type"`
	Register       *registerEvent       `json:"register,omitempty"`
	Elect          *electEvent          `json:"elect,omitempty"`
	Alter          *alterEvent          `json:"alter,omitempty"`
	ControllerAddr *controllerAddrEvent `json:"controllerAddr,omitempty"`
}

// registerEvent records a replica's addresses (CONTROLLER_REGISTER_BROKER).
type registerEvent struct {
	ClusterName string `json:"clusterName"`
	BrokerName  string `json:"brokerName"`
	Replica
}

// electEvent changes a group's master. ExpectMasterEpoch is the epoch the
// leader decided on: if the group moved on meanwhile, the event is refused.
// NewMaster is protocol.NoMaster when no replica can take over.
type electEvent struct {
	BrokerName        string `json:"brokerName"`
	ExpectMasterEpoch int32  `json:"expectMasterEpoch"`
	NewMaster         int64  `json:"newMaster"`
}

// alterEvent changes a group's in-sync set at its master's request.
type alterEvent struct {
	BrokerName              string  `json:"brokerName"`
	MasterID                int64   `json:"masterBrokerId"`
	MasterEpoch             int32   `json:"masterEpoch"`
	ExpectSyncStateSetEpoch int32   `json:"expectSyncStateSetEpoch"`
	NewSet                  []int64 `json:"newSyncStateSet"`
}

// controllerAddrEvent records a controller's remoting address.
type controllerAddrEvent struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

func (e *event) encode() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("controller: encode event: %v", err)) // plain structs: cannot fail
	}
	return b
}

func decodeEvent(b []byte) (*event, error) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("controller: bad log entry: %w", err)
	}
	return &e, nil
}

// applyResult is what applying an event returns through raft's
// ApplyFuture: the group after the event, or why the event was refused.
type applyResult struct {
	group *Group // a copy
	err   error
}

// apply applies e to s. Refusals leave s unchanged.
func (s *state) apply(e *event) applyResult {
	switch e.Type {
	case evRegister:
		if e.Register != nil {
			return s.applyRegister(e.Register)
		}
	case evElect:
		if e.Elect != nil {
			return s.applyElect(e.Elect)
		}
	case evAlterSyncState:
		if e.Alter != nil {
			return s.applyAlter(e.Alter)
		}
	case evControllerAddr:
		if e.ControllerAddr != nil {
			s.Controllers[e.ControllerAddr.ID] = e.ControllerAddr.Addr
			return applyResult{}
		}
	}
	// An entry of a newer version of this package: skip it rather than
	// stop applying the log.
	return applyResult{err: fmt.Errorf("controller: unknown log entry type %q", e.Type)}
}

func (s *state) applyRegister(r *registerEvent) applyResult {
	g := s.Groups[r.BrokerName]
	if g == nil {
		g = &Group{ClusterName: r.ClusterName, BrokerName: r.BrokerName, Replicas: map[int64]*Replica{}, SyncStateSet: []int64{}}
		s.Groups[r.BrokerName] = g
	} else if err := g.checkCluster(r.ClusterName); err != nil {
		return applyResult{err: err}
	}
	rep := r.Replica
	g.Replicas[rep.ID] = &rep
	return applyResult{group: g.clone()}
}

func (s *state) applyElect(e *electEvent) applyResult {
	g := s.Groups[e.BrokerName]
	switch {
	case g == nil:
		return applyResult{err: fmt.Errorf("%w: %s", ErrUnknownGroup, e.BrokerName)}
	case g.MasterEpoch != e.ExpectMasterEpoch:
		return applyResult{err: fmt.Errorf("%w: %s is at master epoch %d, the election was decided at %d",
			ErrFencedMasterEpoch, e.BrokerName, g.MasterEpoch, e.ExpectMasterEpoch)}
	case e.NewMaster != protocol.NoMaster && g.Replicas[e.NewMaster] == nil:
		return applyResult{err: fmt.Errorf("%w: %s has no replica %d", ErrUnknownReplica, e.BrokerName, e.NewMaster)}
	}
	g.MasterID = e.NewMaster
	g.MasterEpoch++
	if e.NewMaster != protocol.NoMaster {
		// The new master alone is known to hold what it will acknowledge;
		// it adds the others back as they catch up (as RocketMQ 5). With
		// no master the set stays: its members are the ones that may take
		// over when they return.
		g.SyncStateSet = []int64{e.NewMaster}
		g.SyncStateSetEpoch++
	}
	return applyResult{group: g.clone()}
}

func (s *state) applyAlter(a *alterEvent) applyResult {
	g := s.Groups[a.BrokerName]
	if g == nil {
		return applyResult{err: fmt.Errorf("%w: %s", ErrUnknownGroup, a.BrokerName)}
	}
	set, err := g.checkAlter(a)
	if err != nil {
		return applyResult{err: err}
	}
	g.SyncStateSet = set
	g.SyncStateSetEpoch++
	return applyResult{group: g.clone()}
}

// checkCluster refuses a replica registering under a cluster other than
// g's. The leader also calls it before proposing, so a broker of the wrong
// cluster, which registers again every heartbeat, costs no log entry.
func (g *Group) checkCluster(cluster string) error {
	if g.ClusterName != cluster {
		return fmt.Errorf("%w: %s is in %s, not %s", ErrClusterMismatch, g.BrokerName, g.ClusterName, cluster)
	}
	return nil
}

// checkAlter returns a's new in-sync set, sorted, or why applying a to g
// is refused: a deposed master, a stale epoch, a set without the master
// or with an unknown replica. The leader also calls it before proposing,
// so a change Apply would refuse costs no log entry.
func (g *Group) checkAlter(a *alterEvent) ([]int64, error) {
	if g.MasterID == protocol.NoMaster || g.MasterID != a.MasterID || g.MasterEpoch != a.MasterEpoch {
		return nil, fmt.Errorf("%w: %s has master %d at epoch %d, the request came from %d at epoch %d",
			ErrFencedMasterEpoch, a.BrokerName, g.MasterID, g.MasterEpoch, a.MasterID, a.MasterEpoch)
	}
	if g.SyncStateSetEpoch != a.ExpectSyncStateSetEpoch {
		return nil, fmt.Errorf("%w: %s is at sync state set epoch %d, the request expected %d",
			ErrFencedSyncStateSetEpoch, a.BrokerName, g.SyncStateSetEpoch, a.ExpectSyncStateSetEpoch)
	}
	set := protocol.SortedIDs(a.NewSet)
	if _, ok := slices.BinarySearch(set, g.MasterID); !ok {
		return nil, fmt.Errorf("%w: %v lacks the master %d", ErrInvalidReplicas, set, g.MasterID)
	}
	for _, id := range set {
		if g.Replicas[id] == nil {
			return nil, fmt.Errorf("%w: %v names unknown replica %d", ErrInvalidReplicas, set, id)
		}
	}
	return set, nil
}

// groupNames returns the group names, sorted.
func (s *state) groupNames() []string {
	out := make([]string, 0, len(s.Groups))
	for n := range s.Groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// candidate is what the election knows of a live replica.
type candidate struct {
	id        int64
	epoch     int32 // newest epoch in its epoch file
	maxOffset int64
	priority  int32 // electionPriority: lower wins among equals
}

// chooseMaster picks g's next master among the live replicas (RocketMQ 5's
// DefaultElectPolicy): from the in-sync set, or with unclean from any live
// replica when no in-sync one lives. The replica with the newest epoch,
// then the most data, then the lowest electionPriority, then the lowest id
// wins. designated, when not NoMaster, must be eligible and is taken. It
// returns NoMaster when no replica is eligible. The current master is a
// candidate like the others only when it is alive.
func chooseMaster(g *Group, live map[int64]candidate, unclean bool, designated int64) int64 {
	eligible := func(insync bool) []candidate {
		var out []candidate
		for _, id := range g.ids() {
			c, ok := live[id]
			if ok && (!insync || g.inSync(id)) {
				out = append(out, c)
			}
		}
		return out
	}
	cands := eligible(true)
	if len(cands) == 0 && g.MasterEpoch == 0 {
		// The group never had a master: nobody acknowledged anything yet,
		// so every live replica is eligible.
		cands = eligible(false)
	}
	if len(cands) == 0 && unclean {
		cands = eligible(false)
	}
	if designated != protocol.NoMaster {
		for _, c := range cands {
			if c.id == designated {
				return designated
			}
		}
		return protocol.NoMaster
	}
	if len(cands) == 0 {
		return protocol.NoMaster
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		switch {
		case a.epoch != b.epoch:
			return a.epoch > b.epoch
		case a.maxOffset != b.maxOffset:
			return a.maxOffset > b.maxOffset
		case a.priority != b.priority:
			return a.priority < b.priority
		}
		return a.id < b.id
	})
	return cands[0].id
}
