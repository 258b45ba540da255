package broker

import (
	"sync"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// defaultLockMaxLiveTime is how long a queue lock lives without renewal
// (RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime). Orderly consumers
// renew every 20 s, so a crashed holder's queues free up within a minute.
const defaultLockMaxLiveTime = 60 * time.Second

// lockEntry is one queue's holder.
type lockEntry struct {
	clientID   string
	lastUpdate time.Time
}

// RebalanceLockManager grants orderly consumers exclusive use of queues
// (RocketMQ's RebalanceLockManager): a queue is held by at most one client
// of a group at a time; the holder renews it by locking again; a lock not
// renewed for maxLive expires and another client may take it.
type RebalanceLockManager struct {
	maxLive time.Duration
	now     func() time.Time

	mu    sync.Mutex // guards table
	table map[string]map[protocol.MessageQueue]*lockEntry
}

// NewRebalanceLockManager returns a manager; maxLive <= 0 means 60 s and a nil
// clock means time.Now.
func NewRebalanceLockManager(maxLive time.Duration, now func() time.Time) *RebalanceLockManager {
	if maxLive <= 0 {
		maxLive = defaultLockMaxLiveTime
	}
	if now == nil {
		now = time.Now
	}
	return &RebalanceLockManager{maxLive: maxLive, now: now, table: make(map[string]map[protocol.MessageQueue]*lockEntry)}
}

// TryLockBatch locks (or renews) every queue of mqs that is free, expired or
// already held by clientID, and returns those queues in request order.
func (m *RebalanceLockManager) TryLockBatch(group string, mqs []protocol.MessageQueue, clientID string) []protocol.MessageQueue {
	now := m.now()
	out := make([]protocol.MessageQueue, 0, len(mqs))
	if clientID == "" || group == "" {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.table[group]
	if g == nil {
		g = make(map[protocol.MessageQueue]*lockEntry, len(mqs))
		m.table[group] = g
	}
	for _, mq := range mqs {
		e := g[mq]
		switch {
		case e == nil:
			g[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
		case e.clientID == clientID:
			e.lastUpdate = now
		case now.Sub(e.lastUpdate) > m.maxLive:
			// The holder stopped renewing: RocketMQ hands the queue over.
			e.clientID, e.lastUpdate = clientID, now
		default:
			continue
		}
		out = append(out, mq)
	}
	return out
}

// UnlockBatch releases the queues of mqs that clientID holds; locks held by
// other clients are left alone.
func (m *RebalanceLockManager) UnlockBatch(group string, mqs []protocol.MessageQueue, clientID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.table[group]
	if g == nil {
		return
	}
	for _, mq := range mqs {
		if e := g[mq]; e != nil && e.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(m.table, group)
	}
}

// IsLocked reports whether clientID holds a live lock on mq.
func (m *RebalanceLockManager) IsLocked(group string, mq protocol.MessageQueue, clientID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.table[group][mq]
	return e != nil && e.clientID == clientID && m.now().Sub(e.lastUpdate) <= m.maxLive
}

// Holder returns the client holding a live lock on mq, or "".
func (m *RebalanceLockManager) Holder(group string, mq protocol.MessageQueue) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.table[group][mq]
	if e == nil || m.now().Sub(e.lastUpdate) > m.maxLive {
		return ""
	}
	return e.clientID
}

// RemoveExpired drops expired locks (housekeeping, so groups that went away
// do not stay in the table forever).
func (m *RebalanceLockManager) RemoveExpired() int {
	now := m.now()
	n := 0
	m.mu.Lock()
	defer m.mu.Unlock()
	for group, g := range m.table {
		for mq, e := range g {
			if now.Sub(e.lastUpdate) > m.maxLive {
				delete(g, mq)
				n++
			}
		}
		if len(g) == 0 {
			delete(m.table, group)
		}
	}
	return n
}
