package nameserver

import (
	"sort"
	"sync/atomic"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// requestCounter counts one request code's requests; the table of them is
// built before the server starts and only read afterwards, so counting
// takes no lock.
type requestCounter struct {
	code  remoting.RequestCode
	count atomic.Int64
}

// counted wraps a processor so each request of its code is counted.
func (ns *NameServer) counted(code remoting.RequestCode, fn remoting.ProcessorFunc) remoting.ProcessorFunc {
	rc := &requestCounter{code: code}
	ns.requests = append(ns.requests, rc)
	return func(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		rc.count.Add(1)
		return fn(c, req)
	}
}

// Stats is a nameserver's figures at one moment, for package metrics.
type Stats struct {
	Addr string
	// Brokers lists the registered brokers (masters and slaves) with the
	// cluster each registered in.
	Brokers []BrokerStat
	Topics  int
	// Requests counts the requests served since start by code.
	Requests map[remoting.RequestCode]int64
	// PoolQueued, PoolBusy and PoolRejected describe the request pool.
	PoolQueued, PoolBusy, PoolCapacity int
	PoolRejected                       int64
}

// BrokerStat is one registered broker.
type BrokerStat struct {
	Cluster, BrokerName, Addr string
	BrokerID                  int64
}

// Stats returns the nameserver's figures now.
func (ns *NameServer) Stats() Stats {
	st := Stats{Addr: ns.Addr(), Topics: len(ns.routes.AllTopics()), Requests: make(map[remoting.RequestCode]int64, len(ns.requests))}
	ci := ns.routes.ClusterInfo()
	clusterOf := map[string]string{}
	for cluster, names := range ci.ClusterAddrTable {
		for _, n := range names {
			clusterOf[n] = cluster
		}
	}
	for name, bd := range ci.BrokerAddrTable {
		for id, addr := range bd.BrokerAddrs {
			st.Brokers = append(st.Brokers, BrokerStat{Cluster: clusterOf[name], BrokerName: name, Addr: addr, BrokerID: id})
		}
	}
	sort.Slice(st.Brokers, func(i, j int) bool {
		a, b := st.Brokers[i], st.Brokers[j]
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.BrokerID < b.BrokerID
	})
	for _, rc := range ns.requests {
		st.Requests[rc.code] = rc.count.Load()
	}
	st.PoolQueued, st.PoolBusy, st.PoolCapacity, st.PoolRejected = ns.pool.Queued(), ns.pool.Busy(), ns.pool.Capacity(), ns.pool.Rejected()
	return st
}
