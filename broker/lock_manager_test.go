package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// fakeClock is a settable clock for managers with expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRebalanceLockManagerExclusiveRenewExpire(t *testing.T) {
	clk := newFakeClock()
	m := NewRebalanceLockManager(60*time.Second, clk.Now)
	q0 := protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}
	q1 := protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}

	assert.Equal(t, []protocol.MessageQueue{q0}, m.TryLockBatch("g", []protocol.MessageQueue{q0}, "c1"))
	assert.Equal(t, []protocol.MessageQueue{q1}, m.TryLockBatch("g", []protocol.MessageQueue{q0, q1}, "c2"),
		"q0 is held by c1, so c2 only gets q1")
	assert.Equal(t, "c1", m.Holder("g", q0))
	assert.True(t, m.IsLocked("g", q0, "c1"))
	assert.False(t, m.IsLocked("g", q0, "c2"))
	assert.Equal(t, []protocol.MessageQueue{q0}, m.TryLockBatch("other", []protocol.MessageQueue{q0}, "c2"),
		"locks are per group")

	// c1 renews at 50 s; c2 still cannot take q0 at 100 s (50 s after renewal).
	clk.Advance(50 * time.Second)
	assert.Len(t, m.TryLockBatch("g", []protocol.MessageQueue{q0}, "c1"), 1)
	clk.Advance(50 * time.Second)
	assert.Empty(t, m.TryLockBatch("g", []protocol.MessageQueue{q0}, "c2"))

	// Past 60 s without renewal the lock expires and c2 takes it over.
	clk.Advance(11 * time.Second)
	assert.Equal(t, "", m.Holder("g", q0))
	assert.Len(t, m.TryLockBatch("g", []protocol.MessageQueue{q0}, "c2"), 1)
	assert.Equal(t, "c2", m.Holder("g", q0))

	// Unlock by a non-holder is ignored; by the holder frees the queue.
	m.UnlockBatch("g", []protocol.MessageQueue{q0}, "c1")
	assert.Equal(t, "c2", m.Holder("g", q0))
	m.UnlockBatch("g", []protocol.MessageQueue{q0}, "c2")
	assert.Equal(t, "", m.Holder("g", q0))
	assert.Len(t, m.TryLockBatch("g", []protocol.MessageQueue{q0}, "c1"), 1)

	assert.Empty(t, m.TryLockBatch("g", []protocol.MessageQueue{q1}, ""), "no client id, no lock")

	clk.Advance(2 * time.Minute)
	assert.Equal(t, 3, m.RemoveExpired()) // g/q0, g/q1, other/q0
	assert.Equal(t, 0, m.RemoveExpired())
}

func TestRebalanceLockManagerConcurrentOneWinner(t *testing.T) {
	m := NewRebalanceLockManager(0, nil)
	q := protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}
	var wg sync.WaitGroup
	wins := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := string(rune('a' + i))
			if len(m.TryLockBatch("g", []protocol.MessageQueue{q}, id)) == 1 {
				wins <- id
			}
		}()
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	assert.Len(t, winners, 1, "exactly one client holds the queue")
}
