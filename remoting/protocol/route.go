package protocol

import (
	"encoding/json"
	"sort"
)

// MasterID is the brokerId of a broker group's master (MixAll.MASTER_ID).
const MasterID int64 = 0

// QueueData is one broker's share of a topic in a route: how many read and
// write queues it holds and with which permission (QueueData.java).
//
// RocketMQ 4.9 names the flag field topicSysFlag; the official Go client still
// reads topicSynFlag (its 4.7-era name) and uses the value only to notice route
// changes, so emitting the 4.9 spelling costs it nothing.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

// BrokerData is a broker group: its cluster, its name and the address of each
// member by brokerId (0 is the master) (BrokerData.java).
//
// encoding/json writes BrokerAddrs compactly with quoted decimal keys, e.g.
// {"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}. That is the form Java
// nameservers send to clients of version >= 4.9.4, and the official Go client's
// hand-rolled parser needs it compact: it splits the raw object text on ',' and
// ':' and keeps any whitespace inside the address.
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}

// Clone returns a deep copy, so a route handed out cannot alias the table.
func (bd *BrokerData) Clone() *BrokerData {
	addrs := make(map[int64]string, len(bd.BrokerAddrs))
	for id, a := range bd.BrokerAddrs {
		addrs[id] = a
	}
	return &BrokerData{Cluster: bd.Cluster, BrokerName: bd.BrokerName, BrokerAddrs: addrs}
}

// MasterAddr is the master's address, or "" when the group has no master.
func (bd *BrokerData) MasterAddr() string { return bd.BrokerAddrs[MasterID] }

// MarshalJSON makes sure brokerAddrs is always an object: the Go client
// slices its raw text and would panic on null.
func (bd BrokerData) MarshalJSON() ([]byte, error) {
	type plain BrokerData
	if bd.BrokerAddrs == nil {
		bd.BrokerAddrs = map[int64]string{}
	}
	return json.Marshal(plain(bd))
}

// TopicRouteData is the GET_ROUTEINFO_BY_TOPIC body (TopicRouteData.java):
//
//	{"orderTopicConf":null,"queueDatas":[...],"brokerDatas":[...],"filterServerTable":{}}
//
// OrderTopicConf, when set, is "brokerName:queueNums;..." and replaces the
// queue data for ordered producers.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []*QueueData        `json:"queueDatas"`
	BrokerDatas       []*BrokerData       `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// Encode renders the route as compact JSON with queue and broker data sorted
// by broker name, so equal routes give equal bytes.
func (r *TopicRouteData) Encode() ([]byte, error) {
	out := *r
	if out.QueueDatas == nil {
		out.QueueDatas = []*QueueData{}
	}
	if out.BrokerDatas == nil {
		out.BrokerDatas = []*BrokerData{}
	}
	if out.FilterServerTable == nil {
		out.FilterServerTable = map[string][]string{}
	}
	sort.SliceStable(out.QueueDatas, func(i, j int) bool { return out.QueueDatas[i].BrokerName < out.QueueDatas[j].BrokerName })
	sort.SliceStable(out.BrokerDatas, func(i, j int) bool { return out.BrokerDatas[i].BrokerName < out.BrokerDatas[j].BrokerName })
	return json.Marshal(&out)
}

// DecodeTopicRouteData parses a route body. It accepts quoted keys in
// brokerAddrs only (what Encode writes); Java nameservers answering old
// clients use bare integer keys, which is not JSON.
func DecodeTopicRouteData(b []byte) (*TopicRouteData, error) {
	var r TopicRouteData
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, wrapBody("TopicRouteData", err)
	}
	return &r, nil
}
