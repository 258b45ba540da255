package protocol

import (
	"encoding/json"
	"sort"
)

// ClusterInfo is the GET_BROKER_CLUSTER_INFO body (ClusterInfo.java): every
// broker group by name, and the broker names of every cluster.
//
//	{"brokerAddrTable":{"broker-a":{"cluster":"c","brokerName":"broker-a","brokerAddrs":{"0":"ip:port"}}},
//	 "clusterAddrTable":{"c":["broker-a"]}}
type ClusterInfo struct {
	BrokerAddrTable  map[string]*BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string    `json:"clusterAddrTable"`
}

// Encode renders compact JSON; broker name lists are sorted so equal tables
// give equal bytes.
func (ci *ClusterInfo) Encode() ([]byte, error) {
	out := ClusterInfo{BrokerAddrTable: ci.BrokerAddrTable, ClusterAddrTable: make(map[string][]string, len(ci.ClusterAddrTable))}
	if out.BrokerAddrTable == nil {
		out.BrokerAddrTable = map[string]*BrokerData{}
	}
	for c, names := range ci.ClusterAddrTable {
		s := append([]string{}, names...)
		sort.Strings(s)
		out.ClusterAddrTable[c] = s
	}
	return json.Marshal(&out)
}

// DecodeClusterInfo parses a ClusterInfo body.
func DecodeClusterInfo(b []byte) (*ClusterInfo, error) {
	var ci ClusterInfo
	if err := json.Unmarshal(b, &ci); err != nil {
		return nil, wrapBody("ClusterInfo", err)
	}
	return &ci, nil
}
