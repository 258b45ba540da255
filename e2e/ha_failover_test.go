package e2e

// Master failover with the official Go client: broker-a (SYNC_MASTER) and
// broker-c (ASYNC_MASTER) have a slave each, broker-b none. The official
// producer and push consumer run in the client driver; the slaved masters
// are kill -9ed mid-stream and started again.
//
// What the official client does here, read from rocketmq-client-go v2:
//   - The producer sends to masters only (its publish queues skip a broker
//     name without a master); a send to the dead master fails on the
//     connection and is retried on another broker name (retry 2), so sends
//     go on against broker-b at once.
//   - The push consumer pulls where tryFindBroker points: the master while
//     its route lists one, else any broker of the name (the slave). Its route
//     is refreshed every 30 s, so it moves to the slave, and back, within a
//     refresh (plus the 3 s retry delay of a failed pull).
//   - Consumer offsets are fetched and committed at the master only
//     (offset_store.go uses FindBrokerAddrByName, the master's address;
//     RocketMQ's Java client falls back to a slave there). So a consumer that
//     starts, or is given a queue, while the master is down cannot start that
//     queue: the offsets a slave holds are used by a consumer that runs
//     across the failover from its memory, and by the master's copy when it
//     is back. The test therefore checks the slave's copy of the committed
//     offsets directly (QUERY_CONSUMER_OFFSET on the slave), and the
//     consumer's resume point through a consumer suspended across the kill.
//
// Redelivery (RocketMQ's at-least-once): a consumer resumes at the committed
// offset; what it consumed after its last commit may come again, what lies
// below the committed offset may not. The test allows repeats (counted and
// logged: a send retried after the kill may also have been stored by the
// dead master) but fails on any delivery below the offsets committed before
// the kill, on a body that differs from what was sent, on a message never
// sent, on an acknowledged message served at another queue or offset than
// its SEND_OK named, and on an acknowledged message never delivered.

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failoverWait bounds a wait that spans the official client's route
// refresh (30 s) and its failed-pull retry delay (3 s), with room for
// -race on a loaded 2-core machine.
const failoverWait = 120 * time.Second

// driverSends records what the official producer answered: SEND_OK results
// (acknowledged), other stored statuses, and errors (outcome unknown).
type driverSends struct {
	mu        sync.Mutex
	acked     map[string]SendRes
	stored    map[string]SendRes // SendFlushSlaveTimeout, SendSlaveNotAvailable...
	failed    map[string]failedSend
	perBroker map[string]int // SEND_OKs by broker name
	// failPause is how long a sender of run waits after a failed send
	// (0: none), so a dead broker is not hammered in a tight loop.
	failPause time.Duration
}

// failedSend is a send the client returned an error for.
type failedSend struct {
	start time.Time
	err   string
}

func newDriverSends() *driverSends {
	return &driverSends{acked: map[string]SendRes{}, stored: map[string]SendRes{}, failed: map[string]failedSend{}, perBroker: map[string]int{}}
}

// perBrokerCopy is the number of SEND_OKs by broker name.
func (s *driverSends) perBrokerCopy() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.perBroker))
	for k, v := range s.perBroker {
		out[k] = v
	}
	return out
}

// ackedOn is the number of SEND_OKs from broker.
func (s *driverSends) ackedOn(broker string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perBroker[broker]
}

// sent reports whether id was sent at all (any outcome).
func (s *driverSends) sent(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, a := s.acked[id]
	_, b := s.stored[id]
	_, c := s.failed[id]
	return a || b || c
}

// ackedIDs lists the acknowledged ids (filtered by keep when not nil).
func (s *driverSends) ackedIDs(keep func(string, SendRes) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, r := range s.acked {
		if keep == nil || keep(id, r) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// run sends with senders goroutines, each up to perSender messages with
// ids "<prefix>-<sender>-<i>", until stop is closed (nil: until done), and
// returns once they all stopped.
func (s *driverSends) run(t *testing.T, p *RemoteProducer, topic, prefix string, senders, perSender int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d-%04d", prefix, w, i)
				start := time.Now()
				r, err := p.TrySendSync(t, Msg(topic, string(crashBody(id))))
				s.mu.Lock()
				switch {
				case err != nil:
					s.failed[id] = failedSend{start: start, err: err.Error()}
				case r.Status == primitive.SendOK:
					s.acked[id] = r
					s.perBroker[r.BrokerName]++
				default:
					s.stored[id] = r
				}
				s.mu.Unlock()
				if err != nil && s.failPause > 0 {
					select {
					case <-stop:
						return
					case <-time.After(s.failPause):
					}
				}
			}
		}()
	}
	wg.Wait()
}

// queueKey names one queue of one broker.
type queueKey struct {
	broker string
	queue  int
}

// committedOffsets is QUERY_CONSUMER_OFFSET of every queue of topic on b.
func committedOffsets(b *binCluster, group, topic string, queues int) map[queueKey]int64 {
	out := map[queueKey]int64{}
	for q := range queues {
		out[queueKey{b.BrokerName, q}] = b.consumerOffset(group, topic, int32(q))
	}
	return out
}

// waitCommittedAtEnd waits until the group's committed offset of every
// queue of topic on master is the queue's max offset (everything consumed
// and committed) and returns them.
func waitCommittedAtEnd(t *testing.T, master *binCluster, group, topic string, queues int, within time.Duration) map[queueKey]int64 {
	t.Helper()
	var got map[queueKey]int64
	require.Eventually(t, func() bool {
		got = committedOffsets(master, group, topic, queues)
		for q := range queues {
			if got[queueKey{master.BrokerName, q}] != master.maxOffset(topic, int32(q)) {
				return false
			}
		}
		return true
	}, within, 100*time.Millisecond, "%s never committed the end of %s on %s", group, topic, master.BrokerName)
	return got
}

// haPair is a master and its slave.
type haPair struct {
	role          string
	master, slave *binCluster
}

// TestHAMasterFailoverOfficialClient: broker-a (SYNC_MASTER) and broker-c
// (ASYNC_MASTER) each have a slave, broker-b (ASYNC_MASTER) none. Phase 1 is
// consumed by the official push consumer and committed (at the masters and,
// copied, at the slaves); the consumer is suspended. Under 4 senders both
// slaved masters are kill -9ed: sends go on against broker-b; the slaves
// hold the committed offsets and, under SYNC_MASTER, every SEND_OK of their
// master (under ASYNC_MASTER how many they hold is reported: the async
// promise). The consumer resumes and gets every acknowledged message from
// the slaves and broker-b, none below the committed offsets. The masters
// restart: the slaves follow and catch up (identical commitlogs), the
// consumer returns and takes new messages, and the committed offsets end at
// the queue ends, never below what they were before the kill. Both roles
// share one cluster so the client's 30 s route refreshes are waited once.
func TestHAMasterFailoverOfficialClient(t *testing.T) {
	t.Parallel()
	started := time.Now()
	lap := started
	var laps []string
	mark := func(name string) {
		laps = append(laps, fmt.Sprintf("%s %v", name, time.Since(lap).Round(time.Millisecond)))
		lap = time.Now()
	}
	ns := startBinNamesrv(t)
	pairs := []*haPair{
		{role: "SYNC_MASTER", master: ns.addBroker("a-master", "broker-a", 0, haBrokerConf("SYNC_MASTER", nil))},
		{role: "ASYNC_MASTER", master: ns.addBroker("c-master", "broker-c", 0, haBrokerConf("ASYNC_MASTER", nil))},
	}
	b := ns.addBroker("b-master", "broker-b", 0, haBrokerConf("ASYNC_MASTER", nil))
	masters := []*binCluster{pairs[0].master, pairs[1].master, b}
	topic := uniq("HAFailover")
	group := uniq("CG_HA")
	const queues = 4
	for _, m := range masters {
		m.createTopic(topic, queues)
	}
	// The slaves start with the topic in place: their first metadata copy,
	// 3 s after start, takes it (the next one would be 10 s later). Their
	// masters' commitlogs are empty: they copy every message.
	for _, p := range pairs {
		p.slave = ns.addBroker(p.master.BrokerName+"-slave", p.master.BrokerName, 1, haBrokerConf("SLAVE", nil))
	}
	for _, p := range pairs {
		waitSlaveConnected(t, p.master)
		waitTopicOnSlave(t, p.slave, topic)
	}
	for _, m := range masters {
		m.waitRoute(topic)
	}
	mark("start")

	d := startDriver(t, ns.NamesrvAddr)
	prod := d.NewProducer(t, "")
	sends := newDriverSends()
	// One send alone first: the official client fills a new topic's
	// publish queues before the broker addresses, so sends racing the
	// first route lookup can fail with "route info not found".
	sends.run(t, prod, topic, "p0", 1, 1, nil)
	// Phase 1: consumed and committed before the kill.
	sends.run(t, prod, topic, "p1", 4, 60, nil)
	require.Len(t, sends.ackedIDs(nil), 241, "phase 1: every send must be SEND_OK (failed: %v)", sends.failed)
	in := NewInbox()
	c := d.StartPush(t, PushSpec{Group: group, Topic: topic}, in)
	WaitAllWithin(t, failoverWait, bodiesOf(sends.ackedIDs(nil)), in)
	c.Suspend(t)
	// The client persists offsets every 5 s, the slaves copy them every
	// 10 s: wait for both; that is what the kill must not undo.
	committed := map[queueKey]int64{}
	for _, m := range masters {
		for k, v := range waitCommittedAtEnd(t, m, group, topic, queues, failoverWait) {
			committed[k] = v
		}
	}
	for _, p := range pairs {
		require.Eventually(t, func() bool {
			for q := range queues {
				if p.slave.consumerOffset(group, topic, int32(q)) < committed[queueKey{p.slave.BrokerName, q}] {
					return false
				}
			}
			return true
		}, haWait, 100*time.Millisecond, "the %s slave never copied the committed offsets %v", p.role, committed)
	}
	mark("phase 1")

	// Phase 2: senders run across the kill of both slaved masters.
	stop := make(chan struct{})
	var sendWG sync.WaitGroup
	sendWG.Add(1)
	go func() {
		defer sendWG.Done()
		sends.run(t, prod, topic, "p2", 4, 3000, stop)
	}()
	for _, p := range pairs {
		base := sends.ackedOn(p.master.BrokerName)
		require.Eventually(t, func() bool { return sends.ackedOn(p.master.BrokerName) >= base+60 }, failoverWait, time.Millisecond,
			"phase 2: %s acknowledged only %d", p.master.BrokerName, sends.ackedOn(p.master.BrokerName)-base)
	}
	for _, p := range pairs {
		p.master.killBroker()
	}
	killedAt := time.Now()
	// Sends go on against broker-b; every send started after the kills must
	// succeed (a send to a dead master is retried on another broker).
	afterKill := func() int {
		return len(sends.ackedIDs(func(_ string, r SendRes) bool { return r.Start.After(killedAt) }))
	}
	require.Eventually(t, func() bool { return afterKill() >= 100 }, failoverWait, 5*time.Millisecond,
		"sends with the masters down: only %d SEND_OK", afterKill())
	close(stop)
	sendWG.Wait()
	mark("phase 2 and kill")
	sends.mu.Lock()
	for id, r := range sends.acked {
		if r.Start.After(killedAt) {
			assert.Equal(t, "broker-b", r.BrokerName, "send %s after the kill acknowledged by %s", id, r.BrokerName)
		}
	}
	for id, f := range sends.failed {
		// Only a send in flight at the kill may fail (outcome unknown).
		assert.True(t, f.start.Before(killedAt), "send %s started after the kill failed: %s", id, f.err)
	}
	sends.mu.Unlock()

	// Each slave holds the committed offsets and what its master
	// acknowledged (all of it under SYNC_MASTER).
	missingTail := map[string]bool{}
	for _, p := range pairs {
		name := p.slave.BrokerName
		for q := range queues {
			assert.GreaterOrEqual(t, p.slave.consumerOffset(group, topic, int32(q)), committed[queueKey{name, q}],
				"the %s slave lost the committed offset of queue %d", p.role, q)
		}
		onSlave := slaveContents(t, p.slave, topic, queues, sends)
		acked := sends.ackedIDs(func(_ string, r SendRes) bool { return r.BrokerName == name })
		var tail []string
		for _, id := range acked {
			if _, ok := onSlave[id]; !ok {
				tail = append(tail, id)
				missingTail[id] = true
			}
		}
		if p.role == "SYNC_MASTER" {
			assert.Empty(t, tail, "SYNC_MASTER: %d SEND_OK messages missing from the slave at the kill: %v", len(tail), head(tail, 10))
		}
		t.Logf("%s (%s): the slave had %d of the %d messages its master acknowledged when the master was killed (%d missing)",
			p.role, name, len(acked)-len(tail), len(acked), len(tail))
	}

	// The consumer resumes against the slaves and broker-b.
	resumeAt := in.Len()
	c.Resume(t)
	WaitAllWithin(t, failoverWait, bodiesOf(sends.ackedIDs(func(id string, _ SendRes) bool { return !missingTail[id] })), in)
	mark("consumed from the slaves")

	// The masters come back: the slaves follow them again, and the
	// consumer returns (at its next route refresh) and gets any tail too.
	for _, p := range pairs {
		p.master.startBroker()
	}
	for _, p := range pairs {
		waitSlaveConnected(t, p.master)
		end := waitCaughtUp(t, p.master, p.slave)
		requireSameCommitLog(t, p.master, p.slave, end)
	}
	WaitAllWithin(t, failoverWait, bodiesOf(sends.ackedIDs(nil)), in)
	mark("masters back")

	// Phase 4: a new producer (a fresh route, with the masters in it) sends
	// to every master; the consumer keeps consuming.
	p4 := d.NewProducer(t, "")
	sends.run(t, p4, topic, "p4w", 1, 1, nil) // alone first, as in phase 1
	sends.run(t, p4, topic, "p4", 4, 30, nil)
	sends.mu.Lock()
	p4On := map[string]int{}
	for id, r := range sends.acked {
		if strings.HasPrefix(id, "p4-") {
			p4On[r.BrokerName]++
		}
	}
	sends.mu.Unlock()
	for _, p := range pairs {
		assert.Positive(t, p4On[p.master.BrokerName], "no phase-4 send reached the restarted %s", p.master.BrokerName)
	}
	WaitAllWithin(t, failoverWait, bodiesOf(sends.ackedIDs(nil)), in)
	// Offsets intact: each master ends with the end of every queue
	// committed, never below what was committed before the kill.
	final := map[queueKey]int64{}
	for _, m := range masters {
		for k, v := range waitCommittedAtEnd(t, m, group, topic, queues, failoverWait) {
			final[k] = v
		}
	}
	for k, v := range committed {
		assert.GreaterOrEqual(t, final[k], v, "committed offset of %v went back", k)
	}
	mark("phase 4")

	repeats := checkDeliveries(t, in.Msgs(), resumeAt, committed, sends)
	sends.mu.Lock()
	failed, stored := len(sends.failed), len(sends.stored)
	sends.mu.Unlock()
	t.Logf("failover: %d acknowledged (%v), %d failed in flight at the kill, %d stored with another status, %d repeated deliveries; %s; took %v",
		len(sends.ackedIDs(nil)), sends.perBrokerCopy(), failed, stored, repeats, strings.Join(laps, ", "),
		time.Since(started).Round(time.Millisecond))
}

// bodiesOf maps message ids to the bodies sent under them.
func bodiesOf(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(crashBody(id))
	}
	return out
}

// slaveContents pulls every queue of topic from the slave (once it has
// dispatched all it holds) and returns where each message is, checking that
// each is intact and was sent.
func slaveContents(t *testing.T, slave *binCluster, topic string, queues int, sends *driverSends) map[string]queueKey {
	t.Helper()
	require.Eventually(t, func() bool { _, behind := slave.storeOffsets(); return behind == 0 }, haWait, 20*time.Millisecond)
	out := map[string]queueKey{}
	sends.mu.Lock()
	defer sends.mu.Unlock()
	for q := range queues {
		for _, m := range slave.pullAll(topic, int32(q)) {
			id := uniqOfBody(m.Body)
			require.Equal(t, crashBody(id), m.Body, "the slave serves a body that was not sent (queue %d offset %d)", q, m.QueueOffset)
			if r, ok := sends.acked[id]; ok && r.BrokerName == slave.BrokerName {
				assert.Equal(t, r.QueueID, q, "message %s moved queue on the slave", id)
				assert.Equal(t, r.QueueOffset, m.QueueOffset, "message %s moved offset on the slave", id)
			}
			out[id] = queueKey{slave.BrokerName, q}
		}
	}
	return out
}

// checkDeliveries checks everything the consumer got (see the file
// comment) and returns the number of repeated deliveries.
func checkDeliveries(t *testing.T, got []Got, resumeAt int, committed map[queueKey]int64, sends *driverSends) int {
	t.Helper()
	type pos struct {
		broker string
		queue  int
		offset int64
	}
	at := map[pos]string{}
	seen := map[string]int{}
	repeats := 0
	for i, g := range got {
		id := uniqOfBody([]byte(g.Body))
		require.True(t, sends.sent(id), "delivered a message never sent: %.60q", g.Body)
		require.Equal(t, string(crashBody(id)), g.Body, "delivered body of %s differs from what was sent", id)
		p := pos{g.Broker, g.QueueID, g.Offset}
		if prev, ok := at[p]; ok {
			require.Equal(t, prev, id, "two messages delivered at %v", p)
		}
		at[p] = id
		if seen[id]++; seen[id] > 1 {
			repeats++
		}
		if i >= resumeAt {
			assert.GreaterOrEqual(t, g.Offset, committed[queueKey{g.Broker, g.QueueID}],
				"%s delivered after the resume from %s queue %d offset %d, below the offset committed before the kill", id, g.Broker, g.QueueID, g.Offset)
		}
	}
	sends.mu.Lock()
	defer sends.mu.Unlock()
	for id, r := range sends.acked {
		want := pos{r.BrokerName, r.QueueID, r.QueueOffset}
		assert.Equal(t, id, at[want], "acknowledged %s (at %v) not delivered there", id, want)
	}
	return repeats
}
