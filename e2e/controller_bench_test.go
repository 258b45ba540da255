package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// envFailoverKills turns TestControllerFailoverBench on: how many masters
// it kills (make failover-bench, scripts/failover-bench.sh).
const envFailoverKills = "FAILOVER_BENCH_KILLS"

// benchAck is one SEND_OK: which broker answered and when.
type benchAck struct {
	addr string
	at   time.Time
}

// benchSends is the stream's record: SEND_OKs by message id, and the ids of
// sends whose outcome is unknown (a transport error or another code). The
// counters spare the waits a scan of every SEND_OK.
type benchSends struct {
	mu      sync.Mutex
	acked   map[string]benchAck
	failed  map[string]bool
	perAddr map[string]int // SEND_OKs by broker address
	// After watch(after, not): the first SEND_OK at or after after from a
	// broker other than not.
	watchAfter time.Time
	watchNot   string
	first      benchAck
}

func newBenchSends() *benchSends {
	return &benchSends{acked: map[string]benchAck{}, failed: map[string]bool{}, perAddr: map[string]int{}}
}

// record notes one send's outcome.
func (s *benchSends) record(id string, ok bool, addr string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.failed[id] = true
		return
	}
	s.acked[id] = benchAck{addr: addr, at: at}
	s.perAddr[addr]++
	if !s.watchAfter.IsZero() && s.first.at.IsZero() && addr != s.watchNot && !at.Before(s.watchAfter) {
		s.first = benchAck{addr: addr, at: at}
	}
}

// watch starts looking for the first SEND_OK at or after t from a broker
// other than not.
func (s *benchSends) watch(t time.Time, not string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchAfter, s.watchNot, s.first = t, not, benchAck{}
}

// firstSeen is what watch looks for (zero when none yet).
func (s *benchSends) firstSeen() benchAck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// ackedOn is the number of SEND_OKs from addr so far.
func (s *benchSends) ackedOn(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perAddr[addr]
}

// streamLoop sends one message after another to queue of topic at the
// group's master, as a client would: it asks the nameservers for the
// master when it has none or a send failed, and retries after 20 ms.
func (cc *ctlCluster) streamLoop(s *benchSends, topic string, queue int32, prefix string, stop <-chan struct{}) {
	addr := ""
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if addr == "" {
			for n := range cc.ns {
				if cc.running(n) {
					if addr = cc.routedMaster(n, topic, "broker-a"); addr != "" {
						break
					}
				}
			}
		}
		id := fmt.Sprintf("%s-%06d", prefix, i)
		ok := false
		if addr != "" {
			v := *cc.base
			v.BrokerAddr = addr
			_, code, _, err := v.sendCode(topic, queue, id, crashBody(id), nil)
			ok = err == nil && code == remoting.Success
		}
		s.record(id, ok, addr, time.Now())
		if !ok {
			addr = ""
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// TestControllerFailoverBench measures failover in a controller-mode
// cluster of real processes (three nameservers with controllers, three
// replicas of broker-a, SYNC_MASTER, default controller timings: heartbeats
// every 1 s, a broker dead after 3 s, Raft at hashicorp/raft's defaults)
// under a steady stream of sync sends from 4 senders: FAILOVER_BENCH_KILLS
// times, the master is kill -9ed, and the time from the kill to the first
// SEND_OK on the group's new master is taken; the killed broker is started
// again and the next kill waits until all three replicas are in sync. At
// the end every SEND_OK must be held by the master (none lost). Measured,
// not a pass/fail bound; off unless the variable is set.
func TestControllerFailoverBench(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv(envFailoverKills))
	if kills <= 0 {
		t.Skipf("set %s=N to kill a master N times (make failover-bench)", envFailoverKills)
	}
	cc := startCtlCluster(t, 3)
	for id := 1; id <= 3; id++ {
		cc.addReplica("broker-a", id, nil)
	}
	m, _ := cc.waitMaster("broker-a", "", 3)
	topic := uniq("CtlBench")
	const queues = 4
	cc.createTopicOn("broker-a", topic, queues, m)

	s := newBenchSends()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for q := range int32(queues) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc.streamLoop(s, topic, q, fmt.Sprintf("q%d", q), stop)
		}()
	}
	stopStream := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopStream()

	var took []time.Duration
	var lines []string
	for k := 1; k <= kills; k++ {
		m, epoch := cc.waitMaster("broker-a", "", 3)
		base := s.ackedOn(m.BrokerAddr)
		require.Eventually(t, func() bool { return s.ackedOn(m.BrokerAddr) >= base+50 }, ctlWait, 5*time.Millisecond,
			"kill %d: the master %s acknowledged only %d sends", k, m.BrokerAddr, s.ackedOn(m.BrokerAddr)-base)
		// The clock starts as the kill is sent: killBroker returns once the
		// process is reaped, a little later.
		killedAt := time.Now()
		s.watch(killedAt, m.BrokerAddr)
		m.killBroker()
		var first benchAck
		require.Eventually(t, func() bool { first = s.firstSeen(); return !first.at.IsZero() },
			ctlWait, 5*time.Millisecond, "kill %d: no SEND_OK on a new master", k)
		d := first.at.Sub(killedAt)
		took = append(took, d)
		_, nepoch := cc.waitMaster("broker-a", m.BrokerAddr, 0)
		line := fmt.Sprintf("kill %2d: master %s (epoch %d) killed; first SEND_OK on %s (epoch %d) after %v",
			k, m.BrokerAddr, epoch, first.addr, nepoch, d.Round(time.Millisecond))
		t.Log(line)
		lines = append(lines, line)
		cc.startReplica(m)
	}
	nm, _ := cc.waitMaster("broker-a", "", 3)
	stopStream()

	// Every SEND_OK is in the master's queues; nothing there was never sent.
	present := map[string]bool{}
	for q := range int32(queues) {
		for _, msg := range nm.pullAll(topic, q) {
			id := uniqOfBody(msg.Body)
			present[id] = true
		}
	}
	s.mu.Lock()
	lost := 0
	var lostIDs []string
	for id := range s.acked {
		if !present[id] {
			lost++
			lostIDs = append(lostIDs, id)
		}
	}
	unknownStored := 0
	for id := range present {
		_, ok := s.acked[id]
		switch {
		case ok:
		case s.failed[id]:
			unknownStored++
		default:
			assert.Failf(t, "a message never sent is served", "%s", id)
		}
	}
	acked, failed := len(s.acked), len(s.failed)
	s.mu.Unlock()
	sort.Strings(lostIDs)
	assert.Zero(t, lost, "acknowledged messages lost: %v", head(lostIDs, 10))

	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	summary := fmt.Sprintf("%d kills: kill -9 to first SEND_OK on the new master: median %v, worst %v, best %v; "+
		"%d SEND_OK, %d acknowledged messages lost; %d sends failed or unanswered (%d of them stored anyway)",
		len(took), median.Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), sorted[0].Round(time.Millisecond),
		acked, lost, failed, unknownStored)
	t.Log(summary)
	// The servers' view of each failover, for reading the times apart
	// (heartbeat timeout, election, the new master's start, registration).
	var events []string
	for i, p := range cc.ns {
		for _, l := range scanLog(strings.NewReader(p.log()), "electing a new master", "master elected", "entering leader state") {
			events = append(events, fmt.Sprintf("n%d %s", i, l))
		}
	}
	for _, v := range cc.replicas["broker-a"] {
		for _, l := range scanLog(strings.NewReader(v.broker.log()), "this broker is the master now", "this broker is a slave now", "not ready") {
			events = append(events, v.BrokerAddr+" "+l)
		}
	}
	t.Logf("server events:\n%s", strings.Join(events, "\n"))
	if out := os.Getenv("FAILOVER_BENCH_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(strings.Join(append(lines, summary), "\n")+"\n"), 0o644))
	}
}
