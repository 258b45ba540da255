package client

import (
	"crypto/md5"
	"fmt"
	"sort"
	"strings"
)

// AllocateStrategy divides a topic's queues among a consumer group's
// members. Every member runs it over the same sorted inputs (queues by topic,
// broker, id; clientIds sorted) and must compute the same division, so the
// strategies here follow the Java client's arithmetic exactly: members using
// Java, C++ or the official Go client agree with them.
type AllocateStrategy interface {
	// Name is the strategy's name as RocketMQ reports it.
	Name() string
	// Allocate returns the queues of mqs that currentID should consume.
	Allocate(group, currentID string, mqs []MessageQueue, cids []string) []MessageQueue
}

func indexOf(cids []string, id string) int {
	for i, c := range cids {
		if c == id {
			return i
		}
	}
	return -1
}

// AllocateAveragely gives each member a contiguous block of queues, the
// first members one more when the division has a remainder
// (AllocateMessageQueueAveragely, the default).
type AllocateAveragely struct{}

// Name implements AllocateStrategy.
func (AllocateAveragely) Name() string { return "AVG" }

// Allocate implements AllocateStrategy.
func (AllocateAveragely) Allocate(_, currentID string, mqs []MessageQueue, cids []string) []MessageQueue {
	index := indexOf(cids, currentID)
	if index < 0 || len(mqs) == 0 {
		return nil
	}
	n, m := len(mqs), len(cids)
	mod := n % m
	var size int
	switch {
	case n <= m:
		size = 1
	case mod > 0 && index < mod:
		size = n/m + 1
	default:
		size = n / m
	}
	start := index*size + mod
	if mod > 0 && index < mod {
		start = index * size
	}
	rng := min(size, n-start)
	var out []MessageQueue
	for i := 0; i < rng; i++ {
		out = append(out, mqs[(start+i)%n])
	}
	return out
}

// AllocateAveragelyByCircle deals queues to members like cards
// (AllocateMessageQueueAveragelyByCircle).
type AllocateAveragelyByCircle struct{}

// Name implements AllocateStrategy.
func (AllocateAveragelyByCircle) Name() string { return "AVG_BY_CIRCLE" }

// Allocate implements AllocateStrategy.
func (AllocateAveragelyByCircle) Allocate(_, currentID string, mqs []MessageQueue, cids []string) []MessageQueue {
	index := indexOf(cids, currentID)
	if index < 0 {
		return nil
	}
	var out []MessageQueue
	for i := index; i < len(mqs); i += len(cids) {
		out = append(out, mqs[i])
	}
	return out
}

// AllocateByConfig consumes a fixed list of queues, whatever the others do
// (AllocateMessageQueueByConfig).
type AllocateByConfig struct {
	Queues []MessageQueue
}

// Name implements AllocateStrategy.
func (AllocateByConfig) Name() string { return "CONFIG" }

// Allocate implements AllocateStrategy.
func (a AllocateByConfig) Allocate(_, _ string, mqs []MessageQueue, _ []string) []MessageQueue {
	var out []MessageQueue
	for _, q := range a.Queues {
		for _, m := range mqs {
			if m == q {
				out = append(out, q)
				break
			}
		}
	}
	return out
}

// AllocateByMachineRoom consumes only queues of brokers named
// "<room>@<name>" whose room is listed, divided evenly
// (AllocateMessageQueueByMachineRoom).
type AllocateByMachineRoom struct {
	Rooms []string
}

// Name implements AllocateStrategy.
func (AllocateByMachineRoom) Name() string { return "MACHINE_ROOM" }

// Allocate implements AllocateStrategy.
func (a AllocateByMachineRoom) Allocate(_, currentID string, mqs []MessageQueue, cids []string) []MessageQueue {
	index := indexOf(cids, currentID)
	if index < 0 {
		return nil
	}
	var pre []MessageQueue
	for _, q := range mqs {
		parts := strings.Split(q.BrokerName, "@")
		if len(parts) != 2 { // as Java: exactly "<room>@<name>"
			continue
		}
		room := parts[0]
		for _, r := range a.Rooms {
			if r == room {
				pre = append(pre, q)
				break
			}
		}
	}
	mod := len(pre) / len(cids)
	rem := len(pre) % len(cids)
	start := mod * index
	out := append([]MessageQueue(nil), pre[start:start+mod]...)
	if rem > index {
		out = append(out, pre[index+mod*len(cids)])
	}
	return out
}

// AllocateByConsistentHash places members on a hash ring with VirtualNodes
// points each (default 10) and gives each queue to the next member on the
// ring (AllocateMessageQueueConsistentHash with its MD5 hash), so a member
// joining or leaving moves few queues.
type AllocateByConsistentHash struct {
	VirtualNodes int
}

// Name implements AllocateStrategy.
func (AllocateByConsistentHash) Name() string { return "CONSISTENT_HASH" }

// Allocate implements AllocateStrategy.
func (a AllocateByConsistentHash) Allocate(_, currentID string, mqs []MessageQueue, cids []string) []MessageQueue {
	if indexOf(cids, currentID) < 0 {
		return nil
	}
	vn := a.VirtualNodes
	if vn <= 0 {
		vn = 10
	}
	type point struct {
		h  int64
		id string
	}
	ring := make([]point, 0, len(cids)*vn)
	for _, c := range cids {
		for i := 0; i < vn; i++ {
			ring = append(ring, point{md5Hash(fmt.Sprintf("%s-%d", c, i)), c})
		}
	}
	// Java keeps the ring in a TreeMap: a later point with an equal hash
	// replaces an earlier one. Sort stably and keep the last of equal hashes.
	sort.SliceStable(ring, func(i, j int) bool { return ring[i].h < ring[j].h })
	dedup := ring[:0]
	for i, p := range ring {
		if i+1 < len(ring) && ring[i+1].h == p.h {
			continue
		}
		dedup = append(dedup, p)
	}
	ring = dedup
	var out []MessageQueue
	for _, q := range mqs {
		key := fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.Topic, q.BrokerName, q.QueueID)
		h := md5Hash(key)
		i := sort.Search(len(ring), func(i int) bool { return ring[i].h >= h })
		if i == len(ring) {
			i = 0
		}
		if ring[i].id == currentID {
			out = append(out, q)
		}
	}
	return out
}

// md5Hash is the Java ConsistentHashRouter's MD5Hash: the first four digest
// bytes as an unsigned big-endian number.
func md5Hash(key string) int64 {
	d := md5.Sum([]byte(key))
	var h int64
	for i := 0; i < 4; i++ {
		h = h<<8 | int64(d[i])
	}
	return h
}
