package broker

import (
	"sort"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// StatsSnapshot is a broker's figures at one moment, for package metrics:
// counters since start (read from atomics), rates (from statsLoop's
// samples), offsets and lag (from the store and the offset table), queue
// and connection figures. Building it takes the managers' read locks
// briefly; nothing on the send or pull path waits for it.
type StatsSnapshot struct {
	Cluster, BrokerName, Addr, Role string
	BrokerID                        int64
	Version                         string
	BootTime                        time.Time

	// Put and Get are the broker-wide message and byte counters with
	// rates: messages stored by sends (and send-backs, transaction commits)
	// and messages returned by pulls.
	Put, Get CounterStats
	Topics   []TopicSnapshot
	Groups   []GroupSnapshotStats
	SendBack []GroupCounter

	// Pulls that found messages in the page-cache share of the commitlog
	// tail, or beyond it.
	PullsFromCache, PullsFromDisk int64
	// Long polling: pulls parked now, parked since start, and refused for a
	// full hold table since start.
	HeldPulls                 int
	PullsParked, PullsRefused int64

	Pools []PoolSnapshot
	// ProducerConnections counts the connections of each producer group.
	ProducerConnections map[string]int

	Replication ReplicationSnapshot
}

// TopicSnapshot is one topic on this broker.
type TopicSnapshot struct {
	Topic string
	// Queues is the write queue count; MaxOffset sums their max offsets
	// (rocketmq-exporter's rocketmq_producer_offset).
	Queues    int32
	MaxOffset int64
	Put       CounterStats
}

// GroupSnapshotStats is one group's consumption of one topic on this
// broker.
type GroupSnapshotStats struct {
	Group, Topic string
	// ConsumerOffset sums the committed offsets; Lag sums max offset minus
	// committed offset over the queues, QueueLag per queue.
	ConsumerOffset int64
	Lag            int64
	QueueLag       []QueueLag
	Get            CounterStats
	// OnlineConsumers and MessageModel come from the group's heartbeats.
	OnlineConsumers int
	MessageModel    string
}

// QueueLag is one queue's backlog for a group.
type QueueLag struct {
	QueueID        int32
	BrokerOffset   int64
	ConsumerOffset int64
	Lag            int64
}

// PoolSnapshot is one worker pool.
type PoolSnapshot struct {
	Name                   string
	Queued, Busy, Capacity int
	// Rejected counts requests answered SYSTEM_BUSY for a full queue.
	Rejected int64
}

// ReplicationSnapshot is a master's view of its slaves, or a slave's of
// its master.
type ReplicationSnapshot struct {
	Master bool
	Slaves []SlaveLag // on a master
	// On a slave: how far it is behind its master's max offset (-1 while
	// the master's offset is unknown) and whether it follows now.
	BehindMaster int64
	Following    bool
}

// SlaveLag is one slave connection of a master.
type SlaveLag struct {
	Addr      string
	AckOffset int64
	LagBytes  int64
}

// Stats returns the broker's figures now. Call it on a started broker.
func (b *Broker) Stats() *StatsSnapshot {
	s := &StatsSnapshot{
		Cluster: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName, Addr: b.Addr(), Role: b.cfg.BrokerRole,
		BrokerID: b.cfg.BrokerID, Version: brokerVersionDesc, BootTime: b.bootTime,
		ProducerConnections: b.consume.producers.connectionCounts(),
	}
	var topicCounters []TopicCounter
	var gets []GroupCounter
	s.Put, s.Get, topicCounters, gets, s.SendBack = b.stats.counters()
	puts := make(map[string]CounterStats, len(topicCounters))
	for _, t := range topicCounters {
		puts[t.Topic] = t.CounterStats
	}
	getByKey := make(map[groupTopic]CounterStats, len(gets))
	for _, g := range gets {
		getByKey[groupTopic{g.Group, g.Topic}] = g.CounterStats
	}
	st := b.store
	for _, name := range b.topics.Names() {
		tc := b.topics.Get(name)
		if tc == nil {
			continue
		}
		ts := TopicSnapshot{Topic: name, Queues: tc.WriteQueueNums, Put: puts[name]}
		for q := range tc.WriteQueueNums {
			ts.MaxOffset += max(0, st.MaxOffsetInQueue(name, q))
		}
		s.Topics = append(s.Topics, ts)
	}
	for _, e := range b.consume.offsets.entries() {
		g := GroupSnapshotStats{Group: e.group, Topic: e.topic, Get: getByKey[groupTopic{e.group, e.topic}]}
		if snap, ok := b.consume.consumers.Snapshot(e.group); ok {
			g.OnlineConsumers, g.MessageModel = len(snap.Channels), string(snap.MessageModel)
		}
		queues := make([]int32, 0, len(e.offsets))
		for q := range e.offsets {
			queues = append(queues, q)
		}
		sort.Slice(queues, func(i, j int) bool { return queues[i] < queues[j] })
		for _, q := range queues {
			co := max(0, e.offsets[q])
			bo := max(0, st.MaxOffsetInQueue(e.topic, q))
			lag := max(0, bo-co)
			g.ConsumerOffset += co
			g.Lag += lag
			g.QueueLag = append(g.QueueLag, QueueLag{QueueID: q, BrokerOffset: bo, ConsumerOffset: co, Lag: lag})
		}
		s.Groups = append(s.Groups, g)
	}
	s.PullsFromCache, s.PullsFromDisk = b.stats.pullsFromCache.Load(), b.stats.pullsFromDisk.Load()
	s.HeldPulls, s.PullsParked, s.PullsRefused = b.consume.hold.totals()
	for _, p := range []*remoting.Pool{b.pools.Send, b.pools.Pull, b.pools.Query, b.pools.Admin,
		b.pools.ClientManage, b.pools.ConsumerManage, b.pools.EndTransaction} {
		s.Pools = append(s.Pools, PoolSnapshot{Name: p.Name(), Queued: p.Queued(), Busy: p.Busy(), Capacity: p.Capacity(), Rejected: p.Rejected()})
	}
	s.Replication = b.replicationSnapshot()
	return s
}

// replicationSnapshot reads the HA master's or slave's status.
func (b *Broker) replicationSnapshot() ReplicationSnapshot {
	var r ReplicationSnapshot
	// Each pointer is read once: in controller mode the role can change
	// while a snapshot is taken.
	master, slave := b.ha.master.Load(), b.ha.slave.Load()
	switch {
	case master != nil:
		r.Master = true
		for _, c := range master.Status().Slaves {
			r.Slaves = append(r.Slaves, SlaveLag{Addr: c.Addr, AckOffset: c.AckOffset, LagBytes: c.LagBytes})
		}
	case slave != nil:
		info := b.haStatus()
		r.BehindMaster = -1
		if info.MasterCommitLogMaxOffset >= 0 {
			r.BehindMaster = max(0, info.MasterCommitLogMaxOffset-info.HAClientRuntimeInfo.MaxOffset)
		}
		r.Following = info.HAClientRuntimeInfo.IsActivated
	}
	return r
}

// offsetEntry is one (group, topic)'s committed offsets.
type offsetEntry struct {
	group, topic string
	offsets      map[int32]int64
}

// entries copies the table, sorted by group then topic.
func (m *ConsumerOffsetManager) entries() []offsetEntry {
	m.mu.RLock()
	out := make([]offsetEntry, 0, len(m.table))
	for k, q := range m.table {
		topic, group, ok := splitOffsetKey(k)
		if !ok {
			continue
		}
		cp := make(map[int32]int64, len(q))
		for id, off := range q {
			cp[id] = off
		}
		out = append(out, offsetEntry{group: group, topic: topic, offsets: cp})
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].group != out[j].group {
			return out[i].group < out[j].group
		}
		return out[i].topic < out[j].topic
	})
	return out
}

// connectionCounts returns each producer group's connection count.
func (m *ProducerManager) connectionCounts() map[string]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]int, len(m.groups))
	for g, chans := range m.groups {
		out[g] = len(chans)
	}
	return out
}
