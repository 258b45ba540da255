package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Controller mode: the headers and bodies that brokers, the controller
// (package controller) and tools exchange. Names and keys follow RocketMQ
// 5's controller classes; fields marked ours are gorocketmq's additions,
// which a RocketMQ peer ignores.
//
// Replica ids: a broker in controller mode is identified in its group by
// its configured brokerId (1, 2, 3...), never 0. The master registers with
// the nameservers as brokerId 0 and a slave under its own id, so clients
// see RocketMQ's usual layout. NoMaster (0) in a masterBrokerId field means
// the group has no master.

// NoMaster is the masterBrokerId of a group that has no master.
const NoMaster int64 = 0

// BrokerHeartbeatRequestHeader is BROKER_HEARTBEAT's header (RocketMQ 5's
// BrokerHeartbeatRequestHeader): a broker's liveness and position, sent to
// the controller leader every brokerHeartbeatInterval.
type BrokerHeartbeatRequestHeader struct {
	ClusterName string `ext:"clusterName,required"`
	BrokerAddr  string `ext:"brokerAddr,required"`
	BrokerName  string `ext:"brokerName,required"`
	BrokerID    int64  `ext:"brokerId,required"`
	// Epoch is the newest master epoch in the broker's epoch file.
	Epoch int32 `ext:"epoch"`
	// MaxOffset is the broker's commitlog max offset: the election prefers
	// the replica holding the most.
	MaxOffset     int64 `ext:"maxOffset"`
	ConfirmOffset int64 `ext:"confirmOffset"`
	// HeartbeatTimeoutMills is the broker's brokerNotActiveTimeoutMillis:
	// silent this long, it counts as dead (and a master as deposed).
	HeartbeatTimeoutMills int64 `ext:"heartbeatTimeoutMills"`
	ElectionPriority      int32 `ext:"electionPriority"`
}

// RegisterBrokerToControllerRequestHeader is CONTROLLER_REGISTER_BROKER's
// header: a broker announces its address (and, ours, its HA address and
// heartbeat timeout), which the controller keeps in its Raft log.
type RegisterBrokerToControllerRequestHeader struct {
	ClusterName   string `ext:"clusterName,required"`
	BrokerName    string `ext:"brokerName,required"`
	BrokerID      int64  `ext:"brokerId,required"`
	BrokerAddress string `ext:"brokerAddress,required"`
	// HaAddress (ours) is where the broker serves slaves when master.
	HaAddress string `ext:"haAddress"`
	// HeartbeatTimeoutMills (ours) is the broker's
	// brokerNotActiveTimeoutMillis, so a new controller leader knows every
	// broker's lease before its first heartbeat.
	HeartbeatTimeoutMills int64 `ext:"heartbeatTimeoutMills"`
	InvokeTime            int64 `ext:"invokeTime"`
}

// ReplicaInfoHeader is the controller's view of a group's master, in the
// answers to BROKER_HEARTBEAT (ours: RocketMQ answers it empty),
// CONTROLLER_REGISTER_BROKER, CONTROLLER_GET_REPLICA_INFO and
// CONTROLLER_ELECT_MASTER, and the header of NOTIFY_BROKER_ROLE_CHANGED.
// The body of each is the group's SyncStateSet.
type ReplicaInfoHeader struct {
	// MasterBrokerID is the master's replica id, NoMaster when none.
	MasterBrokerID    int64  `ext:"masterBrokerId"`
	MasterAddress     string `ext:"masterAddress"`
	MasterEpoch       int32  `ext:"masterEpoch"`
	SyncStateSetEpoch int32  `ext:"syncStateSetEpoch"`
	// MasterHaAddress (ours) is the master's HA address, for its slaves.
	MasterHaAddress string `ext:"masterHaAddress"`
}

// GetReplicaInfoRequestHeader is CONTROLLER_GET_REPLICA_INFO's header.
type GetReplicaInfoRequestHeader struct {
	BrokerName string `ext:"brokerName,required"`
}

// SyncStateSet is a group's in-sync replica ids and the epoch of that set
// (RocketMQ 5's SyncStateSet body).
type SyncStateSet struct {
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// Encode renders the set as JSON with its ids sorted.
func (s SyncStateSet) Encode() []byte {
	s.SyncStateSet = SortedIDs(s.SyncStateSet)
	b, _ := json.Marshal(s)
	return b
}

// DecodeSyncStateSet parses a SyncStateSet body.
func DecodeSyncStateSet(b []byte) (SyncStateSet, error) {
	var s SyncStateSet
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("protocol: not a sync state set: %w", err)
	}
	return s, nil
}

// SortedIDs returns a sorted copy of ids without duplicates (never nil).
func SortedIDs(ids []int64) []int64 {
	out := append([]int64{}, ids...)
	slices.Sort(out)
	return slices.Compact(out)
}

// AlterSyncStateSetRequestHeader is CONTROLLER_ALTER_SYNC_STATE_SET's
// header; the body is the new SyncStateSet with the epoch it replaces.
type AlterSyncStateSetRequestHeader struct {
	BrokerName     string `ext:"brokerName,required"`
	MasterBrokerID int64  `ext:"masterBrokerId,required"`
	MasterEpoch    int32  `ext:"masterEpoch,required"`
	InvokeTime     int64  `ext:"invokeTime"`
}

// AlterSyncStateSetResponseHeader answers it with the new set's epoch.
type AlterSyncStateSetResponseHeader struct {
	NewSyncStateSetEpoch int32 `ext:"newSyncStateSetEpoch"`
}

// ElectMasterRequestHeader is CONTROLLER_ELECT_MASTER's header. With
// DesignateElect, BrokerID names the replica to hand over to (mqadmin
// electMaster); without it the controller picks.
type ElectMasterRequestHeader struct {
	ClusterName    string `ext:"clusterName"`
	BrokerName     string `ext:"brokerName,required"`
	BrokerID       int64  `ext:"brokerId"`
	DesignateElect bool   `ext:"designateElect"`
	InvokeTime     int64  `ext:"invokeTime"`
}

// GetMetaDataResponseHeader answers CONTROLLER_GET_METADATA_INFO: the
// controller group, its leader and its peers.
type GetMetaDataResponseHeader struct {
	Group                   string `ext:"group"`
	ControllerLeaderID      string `ext:"controllerLeaderId"`
	ControllerLeaderAddress string `ext:"controllerLeaderAddress"`
	IsLeader                bool   `ext:"isLeader"`
	Peers                   string `ext:"peers"`
}

// BrokerReplicasInfo is CONTROLLER_GET_SYNC_STATE_DATA's answer body
// (RocketMQ 5's BrokerReplicasInfo): per broker name, the master and which
// replicas are in and out of the in-sync set. The request body is a JSON
// array of broker names.
type BrokerReplicasInfo struct {
	ReplicasInfoTable map[string]*ReplicasInfo `json:"replicasInfoTable"`
}

// ReplicasInfo is one group in BrokerReplicasInfo.
type ReplicasInfo struct {
	MasterBrokerID    int64             `json:"masterBrokerId"`
	MasterAddress     string            `json:"masterAddress"`
	MasterEpoch       int32             `json:"masterEpoch"`
	SyncStateSetEpoch int32             `json:"syncStateSetEpoch"`
	InSyncReplicas    []ReplicaIdentity `json:"inSyncReplicas"`
	NotInSyncReplicas []ReplicaIdentity `json:"notInSyncReplicas"`
}

// ReplicaIdentity is one replica of a group.
type ReplicaIdentity struct {
	BrokerName    string `json:"brokerName"`
	BrokerID      int64  `json:"brokerId"`
	BrokerAddress string `json:"brokerAddress"`
	Alive         bool   `json:"alive"`
}

// EpochEntry is one master epoch of a broker's commitlog: it began at
// StartOffset and ran to EndOffset (the next epoch's start, or the
// commitlog's end for the newest).
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
	EndOffset   int64 `json:"endOffset"`
}

// EpochEntryCache is GET_BROKER_EPOCH_CACHE's answer body (RocketMQ 5's
// EpochEntryCache): a broker's epochs and its commitlog max offset.
type EpochEntryCache struct {
	ClusterName string       `json:"clusterName"`
	BrokerName  string       `json:"brokerName"`
	BrokerID    int64        `json:"brokerId"`
	EpochList   []EpochEntry `json:"epochList"`
	MaxOffset   int64        `json:"maxOffset"`
}
