// Package nameserver is a RocketMQ 4.x nameserver: a route table that brokers
// fill by registering every 30 s and clients read to find where a topic lives.
// It keeps no durable state except the KV config; every nameserver of a
// cluster learns the whole table from the brokers, independently.
package nameserver

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Errors from RouteInfoManager.
var (
	// ErrBadBrokerAddr means a broker address that is not host:port, or holds a
	// character (',', '"', '{', '}', whitespace) that would corrupt the
	// brokerAddrs text the official Go client splits by hand.
	ErrBadBrokerAddr = errors.New("nameserver: bad broker address")
	// ErrBadRegistration means a registration missing its cluster or broker
	// name, or with a negative brokerId.
	ErrBadRegistration = errors.New("nameserver: bad broker registration")
)

// BrokerLiveInfo is what the nameserver knows of one registered broker address.
type BrokerLiveInfo struct {
	// LastUpdate is when the broker last registered (or proved alive via
	// QUERY_DATA_VERSION); a broker silent for BrokerExpiry is dropped.
	LastUpdate time.Time
	// DataVersion is the version of the topic table it last sent.
	DataVersion protocol.DataVersion
	// ConnID is the server connection it registered over (0: none), so a
	// closed connection drops exactly the brokers that used it.
	ConnID uint64
	// HaServerAddr is where its slaves replicate from.
	HaServerAddr string
}

// RegisterBrokerRequest is one broker registration.
type RegisterBrokerRequest struct {
	ClusterName  string
	BrokerAddr   string
	BrokerName   string
	BrokerID     int64
	HaServerAddr string
	// Topics may be nil (a slave, or a broker with nothing to say).
	Topics        *protocol.TopicConfigSerializeWrapper
	FilterServers []string
	ConnID        uint64
}

// RegisterBrokerResult tells a slave where its master is.
type RegisterBrokerResult struct {
	MasterAddr   string
	HaServerAddr string
}

// RouteInfoManager is the nameserver's route table. It holds no sockets, so
// it is tested on its own; the processors and the scan loop drive it. All
// methods are safe for concurrent use: reads (route lookups, by far the most
// frequent) share mu, changes take it exclusively.
type RouteInfoManager struct {
	log logrus.FieldLogger

	mu sync.RWMutex
	// topicQueueTable: topic -> brokerName -> that broker's queues of the topic.
	topicQueueTable map[string]map[string]*protocol.QueueData
	// brokerAddrTable: brokerName -> cluster and member addresses by brokerId.
	brokerAddrTable map[string]*protocol.BrokerData
	// clusterAddrTable: cluster -> set of broker names.
	clusterAddrTable map[string]map[string]struct{}
	// brokerLiveTable: broker address -> liveness.
	brokerLiveTable map[string]*BrokerLiveInfo
	// filterServerTable: broker address -> filter servers (kept for the wire
	// shape; RocketMQ 4.9 brokers send an empty list).
	filterServerTable map[string][]string
}

// NewRouteInfoManager returns an empty table.
func NewRouteInfoManager(log logrus.FieldLogger) *RouteInfoManager {
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		log = l
	}
	return &RouteInfoManager{
		log:               log.WithField("component", "routeinfo"),
		topicQueueTable:   make(map[string]map[string]*protocol.QueueData),
		brokerAddrTable:   make(map[string]*protocol.BrokerData),
		clusterAddrTable:  make(map[string]map[string]struct{}),
		brokerLiveTable:   make(map[string]*BrokerLiveInfo),
		filterServerTable: make(map[string][]string),
	}
}

// ValidateBrokerAddr checks that addr is host:port with nothing the Go
// client's brokerAddrs parser would trip on.
func ValidateBrokerAddr(addr string) error {
	if addr == "" || strings.ContainsAny(addr, ",\"{}\\ \t\r\n") {
		return fmt.Errorf("%w: %q", ErrBadBrokerAddr, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("%w: %q is not host:port", ErrBadBrokerAddr, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("%w: %q has no valid port", ErrBadBrokerAddr, addr)
	}
	return nil
}

// RegisterBroker records a broker's registration (RouteInfoManager.registerBroker
// in Java): the broker joins its cluster and group, an address moving to a new
// brokerId leaves its old one (slave promoted to master), the master's topics
// replace their queue data when its data version changed or on its first
// registration, and its liveness is refreshed. A slave learns its master's
// address and HA address when the master is registered.
func (m *RouteInfoManager) RegisterBroker(req RegisterBrokerRequest) (RegisterBrokerResult, error) {
	var res RegisterBrokerResult
	if req.ClusterName == "" || req.BrokerName == "" || req.BrokerID < 0 {
		return res, fmt.Errorf("%w: cluster %q, broker name %q, broker id %d", ErrBadRegistration, req.ClusterName, req.BrokerName, req.BrokerID)
	}
	if err := ValidateBrokerAddr(req.BrokerAddr); err != nil {
		return res, err
	}
	if req.HaServerAddr != "" && strings.ContainsAny(req.HaServerAddr, ",\"{}\\ \t\r\n") {
		return res, fmt.Errorf("%w: HA address %q", ErrBadBrokerAddr, req.HaServerAddr)
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	names := m.clusterAddrTable[req.ClusterName]
	if names == nil {
		names = make(map[string]struct{})
		m.clusterAddrTable[req.ClusterName] = names
	}
	names[req.BrokerName] = struct{}{}

	registerFirst := false
	bd := m.brokerAddrTable[req.BrokerName]
	if bd == nil {
		registerFirst = true
		bd = &protocol.BrokerData{Cluster: req.ClusterName, BrokerName: req.BrokerName, BrokerAddrs: make(map[int64]string)}
		m.brokerAddrTable[req.BrokerName] = bd
	}
	// One address holds one brokerId: a slave switched to master first
	// leaves its old id.
	for id, a := range bd.BrokerAddrs {
		if a == req.BrokerAddr && id != req.BrokerID {
			delete(bd.BrokerAddrs, id)
		}
	}
	if _, had := bd.BrokerAddrs[req.BrokerID]; !had {
		registerFirst = true
	}
	bd.BrokerAddrs[req.BrokerID] = req.BrokerAddr

	var dv protocol.DataVersion
	if req.Topics != nil {
		dv = req.Topics.DataVersion
		if req.BrokerID == protocol.MasterID && (registerFirst || m.topicConfigChangedLocked(req.BrokerAddr, dv)) {
			for name, tc := range req.Topics.TopicConfigTable {
				if tc == nil {
					continue
				}
				if tc.TopicName != "" {
					name = tc.TopicName
				}
				if name == "" {
					continue
				}
				m.updateQueueDataLocked(req.BrokerName, name, tc)
			}
		}
	}

	prev := m.brokerLiveTable[req.BrokerAddr]
	m.brokerLiveTable[req.BrokerAddr] = &BrokerLiveInfo{LastUpdate: time.Now(), DataVersion: dv, ConnID: req.ConnID, HaServerAddr: req.HaServerAddr}
	if prev == nil {
		m.log.WithFields(logrus.Fields{"cluster": req.ClusterName, "brokerName": req.BrokerName, "brokerId": req.BrokerID, "addr": req.BrokerAddr}).Info("new broker registered")
	}

	if req.FilterServers != nil {
		if len(req.FilterServers) == 0 {
			delete(m.filterServerTable, req.BrokerAddr)
		} else {
			m.filterServerTable[req.BrokerAddr] = append([]string(nil), req.FilterServers...)
		}
	}

	if req.BrokerID != protocol.MasterID {
		if master := bd.BrokerAddrs[protocol.MasterID]; master != "" {
			if li := m.brokerLiveTable[master]; li != nil {
				res.MasterAddr = master
				res.HaServerAddr = li.HaServerAddr
			}
		}
	}
	return res, nil
}

// updateQueueDataLocked replaces brokerName's queues of topic. Lock should be held.
func (m *RouteInfoManager) updateQueueDataLocked(brokerName, topic string, tc *protocol.TopicConfig) {
	qds := m.topicQueueTable[topic]
	if qds == nil {
		qds = make(map[string]*protocol.QueueData)
		m.topicQueueTable[topic] = qds
	}
	qd := &protocol.QueueData{
		BrokerName:     brokerName,
		ReadQueueNums:  tc.ReadQueueNums,
		WriteQueueNums: tc.WriteQueueNums,
		Perm:           tc.Perm,
		TopicSysFlag:   tc.TopicSysFlag,
	}
	if old := qds[brokerName]; old == nil || *old != *qd {
		m.log.WithFields(logrus.Fields{"topic": topic, "brokerName": brokerName}).Debug("queue data updated")
	}
	qds[brokerName] = qd
}

// topicConfigChangedLocked reports whether dv differs from the version the
// broker at addr last registered. Lock should be held.
func (m *RouteInfoManager) topicConfigChangedLocked(addr string, dv protocol.DataVersion) bool {
	li := m.brokerLiveTable[addr]
	return li == nil || li.DataVersion != dv
}

// IsBrokerTopicConfigChanged reports whether dv differs from what the broker
// at addr last registered (true for an unknown broker).
func (m *RouteInfoManager) IsBrokerTopicConfigChanged(addr string, dv protocol.DataVersion) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.topicConfigChangedLocked(addr, dv)
}

// BrokerDataVersion returns the data version the broker at addr last registered.
func (m *RouteInfoManager) BrokerDataVersion(addr string) (protocol.DataVersion, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	li := m.brokerLiveTable[addr]
	if li == nil {
		return protocol.DataVersion{}, false
	}
	return li.DataVersion, true
}

// TouchBroker refreshes a registered broker's liveness (a QUERY_DATA_VERSION
// that found nothing changed counts as a heartbeat).
func (m *RouteInfoManager) TouchBroker(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if li := m.brokerLiveTable[addr]; li != nil {
		li.LastUpdate = time.Now()
	}
}

// LiveBroker returns a copy of what is known of the broker at addr.
func (m *RouteInfoManager) LiveBroker(addr string) (BrokerLiveInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	li := m.brokerLiveTable[addr]
	if li == nil {
		return BrokerLiveInfo{}, false
	}
	return *li, true
}

// UnregisterBroker removes one member of a broker group, as a broker does on
// clean shutdown. When the group has no member left it leaves its cluster and
// its queue data is dropped.
func (m *RouteInfoManager) UnregisterBroker(clusterName, brokerAddr, brokerName string, brokerID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.brokerLiveTable, brokerAddr)
	delete(m.filterServerTable, brokerAddr)
	bd := m.brokerAddrTable[brokerName]
	if bd == nil {
		return
	}
	if a, ok := bd.BrokerAddrs[brokerID]; ok && a == brokerAddr {
		delete(bd.BrokerAddrs, brokerID)
	}
	m.log.WithFields(logrus.Fields{"cluster": clusterName, "brokerName": brokerName, "brokerId": brokerID, "addr": brokerAddr}).Info("broker unregistered")
	if len(bd.BrokerAddrs) == 0 {
		m.removeBrokerNameLocked(brokerName)
	}
}

// removeBrokerNameLocked drops a broker group that has no member left: out of
// its cluster, and its queues out of every topic. Lock should be held.
func (m *RouteInfoManager) removeBrokerNameLocked(brokerName string) {
	delete(m.brokerAddrTable, brokerName)
	for cluster, names := range m.clusterAddrTable {
		if _, ok := names[brokerName]; ok {
			delete(names, brokerName)
			if len(names) == 0 {
				delete(m.clusterAddrTable, cluster)
			}
		}
	}
	for topic, qds := range m.topicQueueTable {
		if _, ok := qds[brokerName]; ok {
			delete(qds, brokerName)
			if len(qds) == 0 {
				delete(m.topicQueueTable, topic)
				m.log.WithFields(logrus.Fields{"topic": topic, "brokerName": brokerName}).Info("topic removed with its last broker")
			}
		}
	}
}

// removeBrokerAddrLocked forgets a broker address everywhere (Java's
// onChannelDestroy). Lock should be held.
func (m *RouteInfoManager) removeBrokerAddrLocked(addr string) {
	delete(m.brokerLiveTable, addr)
	delete(m.filterServerTable, addr)
	for name, bd := range m.brokerAddrTable {
		for id, a := range bd.BrokerAddrs {
			if a == addr {
				delete(bd.BrokerAddrs, id)
			}
		}
		if len(bd.BrokerAddrs) == 0 {
			m.removeBrokerNameLocked(name)
		}
	}
}

// ScanNotActiveBroker drops every broker whose last registration is before
// deadline, with its queue data once its group is empty, and returns the
// addresses dropped.
func (m *RouteInfoManager) ScanNotActiveBroker(deadline time.Time) []string {
	removed, _ := m.scanNotActiveBroker(deadline)
	return removed
}

// scanNotActiveBroker is ScanNotActiveBroker that also returns the
// connections the expired brokers registered over (0 when unknown), so the
// caller can close them as Java's scanNotActiveBroker closes the channel.
func (m *RouteInfoManager) scanNotActiveBroker(deadline time.Time) (removed []string, connIDs []uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for addr, li := range m.brokerLiveTable {
		if li.LastUpdate.Before(deadline) {
			removed = append(removed, addr)
		}
	}
	sort.Strings(removed)
	for _, addr := range removed {
		li := m.brokerLiveTable[addr]
		m.log.WithFields(logrus.Fields{"addr": addr, "lastUpdate": li.LastUpdate}).Warn("broker expired, removing it")
		if li.ConnID != 0 {
			connIDs = append(connIDs, li.ConnID)
		}
		m.removeBrokerAddrLocked(addr)
	}
	return removed, connIDs
}

// RemoveByConn drops every broker that registered over the connection connID,
// which has just closed, and returns their addresses.
func (m *RouteInfoManager) RemoveByConn(connID uint64) []string {
	if connID == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var removed []string
	for addr, li := range m.brokerLiveTable {
		if li.ConnID == connID {
			removed = append(removed, addr)
		}
	}
	sort.Strings(removed)
	for _, addr := range removed {
		m.log.WithField("addr", addr).Info("broker connection closed, removing it")
		m.removeBrokerAddrLocked(addr)
	}
	return removed
}

// PickupTopicRouteData returns the route of topic, or nil when the topic has
// no queue data or none of its brokers is known (Java answers TOPIC_NOT_EXIST
// in both cases). The result shares nothing with the table.
func (m *RouteInfoManager) PickupTopicRouteData(topic string) *protocol.TopicRouteData {
	m.mu.RLock()
	defer m.mu.RUnlock()
	qds := m.topicQueueTable[topic]
	if len(qds) == 0 {
		return nil
	}
	r := &protocol.TopicRouteData{
		QueueDatas:        make([]*protocol.QueueData, 0, len(qds)),
		BrokerDatas:       make([]*protocol.BrokerData, 0, len(qds)),
		FilterServerTable: map[string][]string{},
	}
	for name, qd := range qds {
		c := *qd
		r.QueueDatas = append(r.QueueDatas, &c)
		bd := m.brokerAddrTable[name]
		if bd == nil {
			continue
		}
		clone := bd.Clone()
		r.BrokerDatas = append(r.BrokerDatas, clone)
		for _, addr := range clone.BrokerAddrs {
			if fs := m.filterServerTable[addr]; len(fs) > 0 {
				r.FilterServerTable[addr] = append([]string(nil), fs...)
			}
		}
	}
	if len(r.BrokerDatas) == 0 {
		return nil
	}
	sort.Slice(r.QueueDatas, func(i, j int) bool { return r.QueueDatas[i].BrokerName < r.QueueDatas[j].BrokerName })
	sort.Slice(r.BrokerDatas, func(i, j int) bool { return r.BrokerDatas[i].BrokerName < r.BrokerDatas[j].BrokerName })
	return r
}

// ClusterInfo returns a copy of the broker and cluster tables.
func (m *RouteInfoManager) ClusterInfo() *protocol.ClusterInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ci := &protocol.ClusterInfo{
		BrokerAddrTable:  make(map[string]*protocol.BrokerData, len(m.brokerAddrTable)),
		ClusterAddrTable: make(map[string][]string, len(m.clusterAddrTable)),
	}
	for name, bd := range m.brokerAddrTable {
		ci.BrokerAddrTable[name] = bd.Clone()
	}
	for cluster, names := range m.clusterAddrTable {
		ci.ClusterAddrTable[cluster] = sortedKeys(names)
	}
	return ci
}

// AllTopics returns every topic with queue data, sorted.
func (m *RouteInfoManager) AllTopics() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	topics := make([]string, 0, len(m.topicQueueTable))
	for t := range m.topicQueueTable {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	return topics
}

// TopicsByCluster returns the topics served by at least one broker group of
// cluster, sorted.
func (m *RouteInfoManager) TopicsByCluster(cluster string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := m.clusterAddrTable[cluster]
	topics := []string{}
	for t, qds := range m.topicQueueTable {
		for bn := range qds {
			if _, ok := names[bn]; ok {
				topics = append(topics, t)
				break
			}
		}
	}
	sort.Strings(topics)
	return topics
}

// DeleteTopic drops topic's queue data: everywhere, or only for the broker
// groups of cluster when cluster is not empty. It reports whether anything
// was removed. A broker that still has the topic brings it back on its next
// registration with a new data version.
func (m *RouteInfoManager) DeleteTopic(topic, cluster string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	qds, ok := m.topicQueueTable[topic]
	if !ok {
		return false
	}
	if cluster == "" {
		delete(m.topicQueueTable, topic)
		return true
	}
	removed := false
	for bn := range m.clusterAddrTable[cluster] {
		if _, ok := qds[bn]; ok {
			delete(qds, bn)
			removed = true
		}
	}
	if len(qds) == 0 {
		delete(m.topicQueueTable, topic)
	}
	return removed
}

// WipeWritePerm clears the write bit of every queue brokerName holds, so
// producers move away before maintenance, and returns how many topics it
// touched. The broker's next registration with a new data version restores
// what it sends.
func (m *RouteInfoManager) WipeWritePerm(brokerName string) int {
	return m.operatePerm(brokerName, func(p int32) int32 { return p &^ protocol.PermWrite })
}

// AddWritePerm gives every queue brokerName holds read and write permission
// again, and returns how many topics it touched.
func (m *RouteInfoManager) AddWritePerm(brokerName string) int {
	return m.operatePerm(brokerName, func(int32) int32 { return protocol.PermRead | protocol.PermWrite })
}

func (m *RouteInfoManager) operatePerm(brokerName string, f func(int32) int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, qds := range m.topicQueueTable {
		if qd := qds[brokerName]; qd != nil {
			qd.Perm = f(qd.Perm)
			n++
		}
	}
	return n
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
