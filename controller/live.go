package controller

import (
	"math"
	"sync"
	"time"
)

// liveKey names one replica.
type liveKey struct {
	group string
	id    int64
}

// liveInfo is what the leader last heard from a replica.
type liveInfo struct {
	last      time.Time     // when the last heartbeat (or registration) arrived
	timeout   time.Duration // the broker's brokerNotActiveTimeoutMillis
	epoch     int32
	maxOffset int64
	priority  int32
}

// liveTable is the leader's view of which replicas are alive (RocketMQ 5's
// BrokerHeartbeatManager). It is not in the Raft log: liveness is the
// leader's own observation, and a new leader starts by giving every
// registered replica a full timeout (grace), so it never deposes a master
// whose lease, granted by the previous leader, may still run.
type liveTable struct {
	mu sync.Mutex
	m  map[liveKey]liveInfo // guarded by mu
}

func newLiveTable() *liveTable { return &liveTable{m: map[liveKey]liveInfo{}} }

// reset forgets everything and marks every replica of groups alive as of
// now (a new leader).
func (t *liveTable) reset(groups []*Group, now time.Time, defaultTimeout time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.m)
	for _, g := range groups {
		for id, r := range g.Replicas {
			t.m[liveKey{g.BrokerName, id}] = liveInfo{last: now, timeout: replicaTimeout(r, defaultTimeout)}
		}
	}
}

// replicaTimeout is r's heartbeat timeout, or def when it never said.
func replicaTimeout(r *Replica, def time.Duration) time.Duration {
	if r.HeartbeatTimeoutMs > 0 {
		return millis(r.HeartbeatTimeoutMs)
	}
	return def
}

// millis converts a broker's timeout in milliseconds, saturating: a value
// too large for a Duration would wrap negative and count the broker dead
// at once (and depose a live master).
func millis(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// touch records a heartbeat or registration.
func (t *liveTable) touch(k liveKey, li liveInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[k] = li
}

// touchRegistered records a registration: it keeps what the last
// heartbeat told of the replica's position.
func (t *liveTable) touchRegistered(k liveKey, now time.Time, timeout time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	li := t.m[k]
	li.last, li.timeout = now, timeout
	t.m[k] = li
}

// alive reports whether the replica was heard from within its timeout.
func (t *liveTable) alive(k liveKey, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	li, ok := t.m[k]
	return ok && now.Sub(li.last) < li.timeout
}

// candidates returns the live replicas of group, by id.
func (t *liveTable) candidates(group string, now time.Time) map[int64]candidate {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int64]candidate{}
	for k, li := range t.m {
		if k.group == group && now.Sub(li.last) < li.timeout {
			out[k.id] = candidate{id: k.id, epoch: li.epoch, maxOffset: li.maxOffset, priority: li.priority}
		}
	}
	return out
}

// deadline returns when the replica counts as dead (zero when unknown).
func (t *liveTable) deadline(k liveKey) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if li, ok := t.m[k]; ok {
		return li.last.Add(li.timeout)
	}
	return time.Time{}
}
