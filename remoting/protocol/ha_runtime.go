package protocol

import "encoding/json"

// HARuntimeInfo is the GET_BROKER_HA_STATUS body (RocketMQ 5's
// HARuntimeInfo.java): a master's view of its slaves, or a slave's view of
// its master. `mqadmin haStatus` prints it.
//
//	{"master":true,"masterCommitLogMaxOffset":4096,"inSyncSlaveNums":1,
//	 "haConnectionInfo":[{"addr":"10.0.0.2:51000","slaveAckOffset":4096,"diff":0,"inSync":true,
//	                      "transferredByteInSecond":0,"transferFromWhere":4096}],
//	 "haClientRuntimeInfo":{"masterAddr":"","maxOffset":0,...}}
//
// A Java broker fills only the half for its role and leaves the other at
// its zero values. The fields marked ours are sent by gorocketmq's broker
// only; a Java broker never sends them (and never sends isActivated: Java's
// HAClientRuntimeInfo has no getter for it, so fastjson skips it).
type HARuntimeInfo struct {
	Master                   bool                      `json:"master"`
	MasterCommitLogMaxOffset int64                     `json:"masterCommitLogMaxOffset"`
	InSyncSlaveNums          int                       `json:"inSyncSlaveNums"`
	HAConnectionInfo         []HAConnectionRuntimeInfo `json:"haConnectionInfo"`
	HAClientRuntimeInfo      HAClientRuntimeInfo       `json:"haClientRuntimeInfo"`
}

// HAConnectionRuntimeInfo is one slave connected to a master.
type HAConnectionRuntimeInfo struct {
	Addr           string `json:"addr"`
	SlaveAckOffset int64  `json:"slaveAckOffset"`
	// Diff is the master's max offset minus SlaveAckOffset: how many bytes
	// the slave still lacks.
	Diff                    int64 `json:"diff"`
	InSync                  bool  `json:"inSync"`
	TransferredByteInSecond int64 `json:"transferredByteInSecond"`
	TransferFromWhere       int64 `json:"transferFromWhere"`
	// Ours: when the connection came (unix ms), and whether its frames
	// are compressed.
	ConnectedSince int64 `json:"connectedSince,omitempty"`
	Compressed     bool  `json:"compressed,omitempty"`
}

// HAClientRuntimeInfo is a slave's connection to its master.
type HAClientRuntimeInfo struct {
	// MasterAddr is the master's HA address (brokerIP2:haListenPort).
	MasterAddr              string `json:"masterAddr"`
	TransferredByteInSecond int64  `json:"transferredByteInSecond"`
	MaxOffset               int64  `json:"maxOffset"`
	LastReadTimestamp       int64  `json:"lastReadTimestamp"`
	LastWriteTimestamp      int64  `json:"lastWriteTimestamp"`
	MasterFlushOffset       int64  `json:"masterFlushOffset"`
	IsActivated             bool   `json:"isActivated"`
	// Ours: the client's state (idle, connecting, following, retrying,
	// refused) and, when it refuses its master, why.
	State     string `json:"state,omitempty"`
	LastError string `json:"lastError,omitempty"`
}

// MaxDiff returns the largest Diff among a master's slaves: how far the
// slowest one is behind, in bytes. ok is false without slaves.
func (h *HARuntimeInfo) MaxDiff() (diff int64, ok bool) {
	for i, c := range h.HAConnectionInfo {
		if i == 0 || c.Diff > diff {
			diff = c.Diff
		}
	}
	return diff, len(h.HAConnectionInfo) > 0
}

// DecodeHARuntimeInfo parses a GET_BROKER_HA_STATUS body.
func DecodeHARuntimeInfo(b []byte) (*HARuntimeInfo, error) {
	var h HARuntimeInfo
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, wrapBody("HARuntimeInfo", err)
	}
	return &h, nil
}
