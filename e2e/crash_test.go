package e2e

// Crash tests: the broker binary is killed with SIGKILL (no shutdown code,
// no flush, the abort file stays) while clients work, or its files are
// damaged while it is down, and then it is started again on the same store.
// They check the promises of reliability.md §1.3 for a process crash.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// crashBody is the body of the message with id uniq: the id, then filler of
// a size that varies with the id (200-1400 bytes), so records fall at
// irregular positions and a run crosses the 1 MiB commitlog file boundary.
func crashBody(uniq string) []byte {
	var h uint32 = 2166136261
	for i := 0; i < len(uniq); i++ {
		h = (h ^ uint32(uniq[i])) * 16777619
	}
	n := 200 + int(h%1200)
	b := make([]byte, 0, len(uniq)+1+n)
	b = append(b, uniq...)
	b = append(b, '|')
	for i := range n {
		b = append(b, 'a'+byte((int(h)+i)%26))
	}
	return b
}

// uniqOfBody returns the id a crashBody starts with.
func uniqOfBody(b []byte) string {
	s, _, _ := strings.Cut(string(b), "|")
	return s
}

// ackLog records what concurrent senders got: SEND_OK acknowledgements and
// failed (unknown-outcome) sends.
type ackLog struct {
	mu      sync.Mutex
	acked   map[string]sendResult
	ackedAt map[string]time.Time // when the SEND_OK arrived
	unknown map[string]bool
	n       atomic.Int64
}

func newAckLog() *ackLog {
	return &ackLog{acked: make(map[string]sendResult), ackedAt: make(map[string]time.Time), unknown: make(map[string]bool)}
}

func (a *ackLog) ok(uniq string, r sendResult) {
	now := time.Now()
	a.mu.Lock()
	a.acked[uniq] = r
	a.ackedAt[uniq] = now
	a.mu.Unlock()
	a.n.Add(1)
}

func (a *ackLog) failed(uniq string) {
	a.mu.Lock()
	a.unknown[uniq] = true
	a.mu.Unlock()
}

// sendUntilKilled runs senders goroutines, each sending up to perSender
// messages round-robin over queues, until stop is closed or its send fails
// (the broker is gone). Every outcome goes to log.
func sendUntilKilled(c *binCluster, topic string, queues int32, round, senders, perSender int, props map[string]string, log *ackLog, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("r%d-m%02d-%05d", round, s, i)
				r, err := c.send(topic, int32((s+i)%int(queues)), id, crashBody(id), props)
				if err != nil {
					log.failed(id)
					return
				}
				log.ok(id, r)
			}
		}()
	}
	return &wg
}

// killKind says at which point a round of a crash test kills the broker.
type killKind int

const (
	// killAfterAcks kills once the round has a given number of SEND_OKs.
	killAfterAcks killKind = iota
	// killAtBoundary kills as soon as the first record lands in the next
	// commitlog file: the previous file's last records and its blank
	// marker may still be waiting for their group commit.
	killAtBoundary
	// killInBurst starts twice the senders at once and kills after a few
	// SEND_OKs, with most of the burst in flight.
	killInBurst
)

func (k killKind) String() string {
	switch k {
	case killAtBoundary:
		return "boundary"
	case killInBurst:
		return "burst"
	default:
		return "acks"
	}
}

// killStep is one round of a crash plan.
type killStep struct {
	kind    killKind
	acks    int64 // the round's SEND_OKs before the kill (not killAtBoundary)
	senders int
	props   map[string]string // more properties for every message sent (nil: none)
}

func (s killStep) String() string {
	if s.kind == killAtBoundary {
		return fmt.Sprintf("boundary/%d senders", s.senders)
	}
	return fmt.Sprintf("%v %d/%d senders", s.kind, s.acks, s.senders)
}

// crashPlan draws rounds kill steps. The first round writes ~1 MiB, so the
// first commitlog file fills; then every fourth round (from the second)
// kills at a file boundary and every fourth (from the fourth) in a burst of
// 16 senders after 1-30 SEND_OKs; the others kill after 20-619 SEND_OKs.
func crashPlan(rounds int, rng *rand.Rand) []killStep {
	plan := make([]killStep, rounds)
	for r := range plan {
		switch {
		case r == 0:
			plan[r] = killStep{kind: killAfterAcks, acks: 1200, senders: 8}
		case r%4 == 1:
			plan[r] = killStep{kind: killAtBoundary, senders: 8}
		case r%4 == 3:
			plan[r] = killStep{kind: killInBurst, acks: 1 + rng.Int64N(30), senders: 16}
		default:
			plan[r] = killStep{kind: killAfterAcks, acks: 20 + rng.Int64N(600), senders: 8}
		}
	}
	return plan
}

// crashSeed returns the random source of a crash test: seeded with def, or
// with E2E_CRASH_SEED when set (to replay a logged seed or explore others).
// The seed only picks kill points and damage; what is in flight at a kill
// still depends on timing.
func crashSeed(t *testing.T, def uint64) *rand.Rand {
	t.Helper()
	seed := def
	if v := os.Getenv("E2E_CRASH_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "E2E_CRASH_SEED")
	}
	t.Logf("seed %d (replay with E2E_CRASH_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// killRound runs step's senders on topic, kill -9s the broker at the
// step's point and returns once every sender has stopped, with the time of
// the kill; the broker stays down. Message ids carry the round ("r<round>-").
func killRound(t *testing.T, c *binCluster, topic string, queues int32, round int, step killStep, log *ackLog) time.Time {
	t.Helper()
	base := log.n.Load()
	var next string
	if step.kind == killAtBoundary {
		next = nextCommitlogFile(t, c)
	}
	stop := make(chan struct{})
	wg := sendUntilKilled(c, topic, queues, round, step.senders, 4000, step.props, log, stop)
	if step.kind == killAtBoundary {
		waitFileData(t, next, 60*time.Second)
	} else {
		require.Eventually(t, func() bool { return log.n.Load() >= base+step.acks }, 60*time.Second, 200*time.Microsecond,
			"round %d: only %d sends acknowledged", round, log.n.Load()-base)
	}
	killed := time.Now()
	c.killBroker()
	close(stop)
	wg.Wait()
	return killed
}

// nextCommitlogFile returns the path of the commitlog file the writer rolls
// into next: the one after the last holding data, or the one after that
// when less than a quarter of the current file is left (the kill should
// come after some SEND_OKs of the round). A file holds data when any of
// its bytes is not zero, and its data ends after its last such byte: a
// power-loss round can leave the first sectors of a file zeroed and the
// records after them kept (a lost range), so neither its first record nor
// a walk of its records from the start tells.
func nextCommitlogFile(t *testing.T, c *binCluster) string {
	t.Helper()
	dir := filepath.Join(c.StoreDir, "commitlog")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	last, end := int64(-1), 0
	for _, e := range entries {
		off, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || len(e.Name()) != 20 || off < last {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		n := len(b)
		for n > 0 && b[n-1] == 0 {
			n--
		}
		if n > 0 {
			last, end = off, n
		}
	}
	require.GreaterOrEqual(t, last, int64(0), "no commitlog file holds data")
	size := c.commitlogFileSize()
	next := last + size
	if size-int64(end) < size/4 {
		next += size
	}
	return filepath.Join(dir, fmt.Sprintf("%020d", next))
}

// fileHasData reports whether path exists and its first 8 bytes (a
// record's TOTALSIZE and MAGIC) are not zero.
func fileHasData(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [8]byte
	n, _ := f.ReadAt(b[:], 0)
	return n == len(b) && binary.BigEndian.Uint64(b[:]) != 0
}

// waitFileData polls path (through the page cache, which the broker's
// writes reach at once) until its first record is there, every 100 us so
// the kill lands within a group commit of the roll.
func waitFileData(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !fileHasData(path) {
		require.True(t, time.Now().Before(deadline), "no record reached %s within %v", path, d)
		time.Sleep(100 * time.Microsecond)
	}
}

// commitlogFileSize is the broker's mappedFileSizeCommitLog.
func (c *binCluster) commitlogFileSize() int64 {
	n, err := strconv.ParseInt(c.brokerConf["mappedFileSizeCommitLog"], 10, 64)
	require.NoError(c.t, err)
	return n
}

// maxAckedOffsets returns, per queue, the highest acknowledged queue offset
// (-1 for a queue with none).
func (a *ackLog) maxAckedOffsets(queues int32) []int64 {
	out := make([]int64, queues)
	for q := range out {
		out[q] = -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.acked {
		if r.QueueID >= 0 && r.QueueID < queues {
			out[r.QueueID] = max(out[r.QueueID], r.QueueOffset)
		}
	}
	return out
}

// requireQueuesReachAcked checks, right after a restart, that no queue
// ends before its highest acknowledged offset (a cheap per-round check;
// checkPromise pulls everything).
func requireQueuesReachAcked(t *testing.T, c *binCluster, topic string, queues int32, log *ackLog, round int) {
	t.Helper()
	for q, off := range log.maxAckedOffsets(queues) {
		assert.Greater(t, c.maxOffset(topic, int32(q)), off, "round %d: queue %d ends before its acknowledged offset %d", round, q, off)
	}
}

// promise is what checkPromise found.
type promise struct {
	served  map[string]*message.MessageExt // by UNIQ_KEY
	missing []string                       // acknowledged, not served (sorted)
}

// checkPromise pulls every queue of topic and checks reliability.md §1.3
// against the senders' log: every SEND_OK message that is served is served
// at the queue and offset its acknowledgement named, with its body; every
// served record is an intact message that was sent (acknowledged, or with
// an unknown outcome), served once, among contiguous offsets (pullAll) or,
// with gaps, increasing ones (a power cut can tear an unacknowledged record
// that intact ones follow; recovery skips it and keeps them).
// It returns the acknowledged messages not served for the caller to judge.
func checkPromise(t *testing.T, c *binCluster, topic string, queues int32, log *ackLog, gaps bool) promise {
	t.Helper()
	p := promise{served: make(map[string]*message.MessageExt)}
	for q := range queues {
		for _, m := range c.pullQueue(topic, q, gaps) {
			id := m.UniqKey()
			require.NotEmpty(t, id, "served message %d/%d (commitlog %d) has no UNIQ_KEY", q, m.QueueOffset, m.CommitLogOffset)
			require.Equal(t, id, uniqOfBody(m.Body), "served message %d/%d (commitlog %d): body does not belong to its UNIQ_KEY",
				q, m.QueueOffset, m.CommitLogOffset)
			require.Equal(t, crashBody(id), m.Body, "served message %s: body differs from what was sent", id)
			// The properties are not under the body CRC: check them too.
			require.Equal(t, "true", m.Properties[message.PropWaitStoreMsgOK], "served message %s (commitlog %d): properties damaged: %q",
				id, m.CommitLogOffset, m.Properties)
			require.Equal(t, c.brokerConf["brokerClusterName"], m.Properties[message.PropCluster],
				"served message %s (commitlog %d): properties damaged: %q", id, m.CommitLogOffset, m.Properties)
			_, dup := p.served[id]
			require.False(t, dup, "message %s served twice (sent once)", id)
			p.served[id] = m
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id, r := range log.acked {
		m, ok := p.served[id]
		if !ok {
			p.missing = append(p.missing, id)
			continue
		}
		assert.Equal(t, r.QueueID, m.QueueID, "message %s moved queue", id)
		assert.Equal(t, r.QueueOffset, m.QueueOffset, "message %s moved offset", id)
		assert.Equal(t, r.CommitLogOffset, m.CommitLogOffset, "message %s moved in the commitlog", id)
	}
	for id := range p.served {
		if _, ok := log.acked[id]; !ok {
			require.True(t, log.unknown[id], "served message %s was never sent", id)
		}
	}
	sort.Strings(p.missing)
	return p
}

// roundReport counts one round's messages: SEND_OKs, sends whose outcome
// the kill left unknown, how many of those are served, and how many
// SEND_OKs are not.
type roundReport struct{ acked, inFlight, kept, lost int }

// roundReports splits the log and p by the round in the message ids.
func roundReports(rounds int, log *ackLog, p promise) []roundReport {
	out := make([]roundReport, rounds)
	round := func(id string) int {
		var r int
		if _, err := fmt.Sscanf(id, "r%d-", &r); err != nil || r < 0 || r >= rounds {
			return -1
		}
		return r
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id := range log.acked {
		if r := round(id); r >= 0 {
			out[r].acked++
			if _, ok := p.served[id]; !ok {
				out[r].lost++
			}
		}
	}
	for id := range log.unknown {
		if r := round(id); r >= 0 {
			out[r].inFlight++
			if _, ok := p.served[id]; ok {
				out[r].kept++
			}
		}
	}
	return out
}

// killDuringSends is the kill -9 test for one flushDiskType: concurrent
// senders on 4 queues, SIGKILL at the plan's point of each round (the
// senders' other sends are in flight), restart on the same store, a quick
// check that no queue ends before its acknowledged offsets; then a
// graceful restart, and every SEND_OK message of every round must be
// served at the queue and offset its acknowledgement named, with its body
// and properties, among contiguous offsets and no foreign record, and the
// log goes on at the right offset. The page-cache checks of
// TestCrashKill9SyncFlush run when cachestat works here (the per-kill one
// under SYNC_FLUSH only). The per-round figures are logged.
func killDuringSends(t *testing.T, flush string, plan []killStep) {
	c := startBinCluster(t, map[string]string{"flushDiskType": flush})
	topic := uniq("Crash" + strings.ReplaceAll(flush, "_", ""))
	const queues = 4
	c.createTopic(topic, queues)
	pc := pageCacheObservable(t)

	log := newAckLog()
	start := time.Now()
	tails := make([]string, len(plan))
	seen := make(map[string]bool)
	for round, step := range plan {
		killRound(t, c, topic, queues, round, step, log)
		if flush == "SYNC_FLUSH" && pc {
			requireAckedFsynced(t, c, log, round, seen)
			if u := unsyncedTailPages(t, c); u > 0 {
				tails[round] = fmt.Sprintf("  (%d pages of earlier files unsynced at the kill)", u)
			}
		}
		c.startBroker()
		assert.Contains(t, c.broker.lastRunLog(), "normal=false", "a killed broker must recover as after an abnormal exit (abort file)")
		requireQueuesReachAcked(t, c, topic, queues, log, round)
	}
	took := time.Since(start)

	// A graceful stop after the kills: the next start trusts the files.
	c.stopBroker()
	require.Equal(t, 0, c.broker.exitCode(), "graceful stop exit code")
	if pc {
		requireStoreSynced(t, c, "graceful stop after the kills")
	}
	c.startBroker()
	assert.Contains(t, c.broker.lastRunLog(), "normal=true", "a cleanly stopped broker must recover normally")

	p := checkPromise(t, c, topic, queues, log, false)
	reports := roundReports(len(plan), log, p)
	var b strings.Builder
	total := roundReport{}
	for r, rep := range reports {
		fmt.Fprintf(&b, "\n  round %2d  %-22v acknowledged %4d  in flight %2d  kept %2d  lost %d%s",
			r, plan[r], rep.acked, rep.inFlight, rep.kept, rep.lost, tails[r])
		total.acked += rep.acked
		total.inFlight += rep.inFlight
		total.kept += rep.kept
		total.lost += rep.lost
	}
	t.Logf("%s, %d kill -9 rounds in %v: %d acknowledged, %d in flight at the kills (%d of them kept), %d served, %d lost%s",
		flush, len(plan), took.Round(time.Millisecond), total.acked, total.inFlight, total.kept, len(p.served), len(p.missing), b.String())
	assert.Empty(t, p.missing, "%d SEND_OK messages lost by kill -9 (%s)", len(p.missing), flush)

	// The log goes on where recovery left it: the next offset is the next one.
	for q := range int32(queues) {
		maxOff := c.maxOffset(topic, q)
		r, err := c.send(topic, q, fmt.Sprintf("after-%d", q), crashBody(fmt.Sprintf("after-%d", q)), nil)
		require.NoError(t, err)
		assert.Equal(t, maxOff, r.QueueOffset, "queue %d: first offset after restart", q)
	}
}

// TestCrashKill9SyncFlush: with SYNC_FLUSH no acknowledged message is lost
// by kill -9 during concurrent sync sends, over 20 kills (reliability.md
// §7 test 1): after 20-619 SEND_OKs, right after the writer rolled into a
// new commitlog file, and in bursts of 16 senders. A kill leaves the page
// cache, so every kill also checks there that the acknowledged data was
// fsynced: no commitlog file wholly below the newest acknowledged record
// may hold an unsynced page (requireAckedFsynced); and the graceful stop
// after the kills must leave no unsynced page in the store
// (requireStoreSynced), since the next start trusts the files.
func TestCrashKill9SyncFlush(t *testing.T) {
	t.Parallel()
	killDuringSends(t, "SYNC_FLUSH", crashPlan(20, crashSeed(t, 18)))
}

// TestCrashKill9AsyncFlush: with ASYNC_FLUSH a process kill loses nothing
// either: acknowledged bytes sit in the page cache behind the mapping, which
// outlives the process.
func TestCrashKill9AsyncFlush(t *testing.T) {
	t.Parallel()
	killDuringSends(t, "ASYNC_FLUSH", crashPlan(5, crashSeed(t, 18)))
}

// offsetsOnDisk reads <store>/config/consumerOffset.json's entry for
// topic@group, nil when absent or unreadable (mid-rename).
func offsetsOnDisk(c *binCluster, topic, group string) map[string]int64 {
	b, err := os.ReadFile(filepath.Join(c.StoreDir, "config", "consumerOffset.json"))
	if err != nil {
		return nil
	}
	var f struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	return f.OffsetTable[topic+"@"+group]
}

// TestCrashKill9KeepsPersistedConsumerOffsets: offsets committed before the
// last periodic persist (flushConsumerOffsetInterval, 300 ms here) survive a
// kill -9; offsets committed after it may fall back, but never below the
// persisted value, and never above what was committed.
func TestCrashKill9KeepsPersistedConsumerOffsets(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, map[string]string{"flushConsumerOffsetInterval": "300"})
	topic, group := uniq("CrashOffsets"), uniq("GCrashOffsets")
	const queues = 4
	c.createTopic(topic, queues)
	for q := range int32(queues) {
		for i := range 30 {
			id := fmt.Sprintf("o%d-%d", q, i)
			_, err := c.send(topic, q, id, crashBody(id), nil)
			require.NoError(t, err)
		}
	}
	commit := func(base int64) {
		for q := range int32(queues) {
			resp := c.mustInvoke(c.BrokerAddr, remoting.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
				ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: base + int64(q),
			}, nil)
			require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
		}
	}
	const persisted, latest = 10, 20
	commit(persisted)
	require.Eventually(t, func() bool {
		on := offsetsOnDisk(c, topic, group)
		for q := range queues {
			if on[strconv.Itoa(q)] != int64(persisted+q) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "offsets never persisted to consumerOffset.json")
	commit(latest)
	c.restartBroker()

	for q := range queues {
		got := c.consumerOffset(group, topic, int32(q))
		assert.GreaterOrEqual(t, got, int64(persisted+q), "queue %d: persisted offset lost by kill -9", q)
		assert.LessOrEqual(t, got, int64(latest+q), "queue %d: offset beyond any commit", q)
	}
}

// TestCrashKill9OffsetsLoop kills the broker repeatedly while a client
// commits ever larger offsets and the broker persists them every 50 ms:
// each restart must parse consumerOffset.json (written atomically), and
// each queue's offset must be at least what the file held just before the
// kill and at most the last commit: never reset, never from the future.
func TestCrashKill9OffsetsLoop(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, map[string]string{"flushConsumerOffsetInterval": "50"})
	topic, group := uniq("CrashOffLoop"), uniq("GCrashOffLoop")
	const queues = 2
	c.createTopic(topic, queues)
	for q := range int32(queues) {
		for i := range 5 {
			id := fmt.Sprintf("l%d-%d", q, i)
			_, err := c.send(topic, q, id, crashBody(id), nil)
			require.NoError(t, err)
		}
	}
	var committed [queues]int64
	const rounds = 6
	for round := range rounds {
		// Commit for a while (the broker persists several times), then kill
		// in the middle of the commits.
		for i := range 40 + 13*round {
			q := i % queues
			next := committed[q] + 1
			resp := c.mustInvoke(c.BrokerAddr, remoting.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
				ConsumerGroup: group, Topic: topic, QueueID: int32(q), CommitOffset: next,
			}, nil)
			require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
			committed[q] = next
		}
		onDisk := offsetsOnDisk(c, topic, group)
		c.restartBroker()
		for q := range queues {
			got := c.consumerOffset(group, topic, int32(q))
			assert.GreaterOrEqual(t, got, onDisk[strconv.Itoa(q)], "round %d queue %d: below the persisted offset", round, q)
			assert.LessOrEqual(t, got, committed[q], "round %d queue %d: beyond the last commit", round, q)
			// Carry on from what the broker has, as a consumer would.
			committed[q] = max(got, 0)
		}
	}
}

// consumerOffset is QUERY_CONSUMER_OFFSET; -1 when the broker has none.
func (c *binCluster) consumerOffset(group, topic string, queueID int32) int64 {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: queueID,
	}, nil)
	if resp.Code == int32(remoting.QueryNotFound) {
		return -1
	}
	require.Equal(c.t, int32(remoting.Success), resp.Code, resp.Remark)
	var h protocol.OffsetResponseHeader
	require.NoError(c.t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h.Offset
}

// TestCrashKill9DuringDelayBurst: a kill -9 during a burst of delay-level
// (DELAY=1/2, levels "1s 2s") and timer (TIMER_DELAY_MS) messages; after the
// restart each acknowledged message reaches its real topic at least once.
// Repeats are allowed only from the window since the last delay-offset
// persist; they are counted and reported.
func TestCrashKill9DuringDelayBurst(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, map[string]string{
		"messageDelayLevel":        "1s 2s",
		"flushDelayOffsetInterval": "200",
		"timerWheelEnable":         "true",
	})
	topic := uniq("CrashDelay")
	const queues = 2
	c.createTopic(topic, queues)

	log := newAckLog()
	stop := make(chan struct{})
	var wgs []*sync.WaitGroup
	for _, props := range []map[string]string{
		{message.PropDelayTimeLevel: "1"},
		{message.PropDelayTimeLevel: "2"},
		{message.PropTimerDelayMS: "1500"},
	} {
		wgs = append(wgs, sendUntilKilledPrefixed(c, topic, queues, props, log, stop))
	}
	// Kill after some have been delivered (level 1 is 1 s) and some are
	// still waiting: the burst runs for 1.2 s, with at least 50 acknowledged.
	burst := time.Now()
	require.Eventually(t, func() bool { return log.n.Load() >= 50 }, 30*time.Second, 5*time.Millisecond)
	time.Sleep(time.Until(burst.Add(1200 * time.Millisecond)))
	c.killBroker()
	close(stop)
	for _, wg := range wgs {
		wg.Wait()
	}
	c.startBroker()

	log.mu.Lock()
	acked := make(map[string]bool, len(log.acked))
	for id := range log.acked {
		acked[id] = true
	}
	unknown := len(log.unknown)
	log.mu.Unlock()
	require.NotEmpty(t, acked)

	// Poll the real topic until every acknowledged message arrived (the
	// longest delay is 2 s after the restart).
	count := make(map[string]int)
	next := make([]int64, queues)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for q := range int32(queues) {
			for _, m := range c.pullFrom(topic, q, &next[q]) {
				count[uniqOfBody(m.Body)]++
				require.Equal(t, crashBody(uniqOfBody(m.Body)), m.Body, "delivered body differs")
			}
		}
		missing := 0
		for id := range acked {
			if count[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var missing []string
	repeats := 0
	for id := range acked {
		if count[id] == 0 {
			missing = append(missing, id)
		}
		if count[id] > 1 {
			repeats += count[id] - 1
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "%d acknowledged delayed messages never delivered after kill -9", len(missing))
	t.Logf("delay burst: %d acknowledged, %d in flight at the kill, %d lost, %d repeated deliveries (last-persist window)",
		len(acked), unknown, len(missing), repeats)
	assert.LessOrEqual(t, repeats, len(acked), "repeats beyond one replay of everything")
}

// sendUntilKilledPrefixed is sendUntilKilled with 2 senders whose ids carry
// the properties, so bursts with different properties do not share ids.
func sendUntilKilledPrefixed(c *binCluster, topic string, queues int32, props map[string]string, log *ackLog, stop <-chan struct{}) *sync.WaitGroup {
	prefix := "d"
	for k, v := range props {
		prefix += k + v
	}
	var wg sync.WaitGroup
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d-%05d", prefix, s, i)
				r, err := c.send(topic, int32((s+i)%int(queues)), id, crashBody(id), props)
				if err != nil {
					log.failed(id)
					return
				}
				log.ok(id, r)
			}
		}()
	}
	return &wg
}

// pullFrom pulls what queue queueID holds from *next on (up to a few
// batches), advances *next, and checks offsets are contiguous.
func (c *binCluster) pullFrom(topic string, queueID int32, next *int64) []*message.MessageExt {
	c.t.Helper()
	var out []*message.MessageExt
	for range 50 {
		resp := c.mustInvoke(c.BrokerAddr, remoting.PullMessage, &protocol.PullMessageRequestHeader{
			ConsumerGroup: "CG_BIN_CHECK", Topic: topic, QueueID: queueID, QueueOffset: *next, MaxMsgNums: 32,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTag,
		}, nil)
		if resp.Code != int32(remoting.Success) {
			require.Contains(c.t, []int32{int32(remoting.PullNotFound), int32(remoting.PullRetryImmediately)}, resp.Code,
				"pull %s/%d at %d: %s", topic, queueID, *next, resp.Remark)
			return out
		}
		msgs, err := message.DecodeRecords(resp.Body)
		require.NoError(c.t, err, "pull %s/%d at %d served a record that does not decode", topic, queueID, *next)
		for _, m := range msgs {
			require.Equal(c.t, *next, m.QueueOffset, "pull %s/%d: offsets not contiguous", topic, queueID)
			*next++
		}
		out = append(out, msgs...)
	}
	return out
}

// TestCrashBaselineGracefulStop is the control for the kill tests: SIGTERM
// makes the broker exit 0, and the next start takes the normal recovery
// path (no abort file) with every message kept.
func TestCrashBaselineGracefulStop(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, map[string]string{"flushDiskType": "ASYNC_FLUSH"})
	topic := uniq("Graceful")
	c.createTopic(topic, 1)
	for i := range 50 {
		id := fmt.Sprintf("c%04d", i)
		_, err := c.send(topic, 0, id, crashBody(id), nil)
		require.NoError(t, err)
	}
	c.stopBroker()
	assert.Equal(t, 0, c.broker.exitCode(), "graceful stop exit code")
	c.startBroker()
	assert.Contains(t, c.broker.lastRunLog(), "normal=true", "a cleanly stopped broker must recover normally")
	checkServedPrefix(t, c, topic, 50)
}

// TestCrashKill9NameserverRelearnsRoutes: a nameserver killed and
// restarted knows nothing, yet routes the broker's topics again within a
// few registration periods (2 s here); the broker serves sends meanwhile.
func TestCrashKill9NameserverRelearnsRoutes(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, nil)
	topic := uniq("CrashNS")
	c.createTopic(topic, 2)
	c.waitRoute(topic)

	c.killNamesrv()
	_, err := c.send(topic, 0, "ns-down", crashBody("ns-down"), nil)
	require.NoError(t, err, "the broker must serve sends while the nameserver is down")

	start := time.Now()
	c.startNamesrv()
	c.waitRoute(topic)
	took := time.Since(start)
	assert.Less(t, took, 10*time.Second, "routes relearned only after %v", took)
	t.Logf("nameserver relearned the route %v after its restart", took.Round(time.Millisecond))
}

// commitlogRecords walks the commitlog files of a stopped broker and returns
// each record's file path, position in it, and length, in log order.
type clRecord struct {
	path     string
	pos, len int
}

func commitlogRecords(t *testing.T, storeDir string) []clRecord {
	t.Helper()
	dir := filepath.Join(storeDir, "commitlog")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var recs []clRecord
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for pos := 0; pos+8 <= len(b) && binary.BigEndian.Uint64(b[pos:]) != 0; {
			r, err := message.ParseRecord(b[pos:])
			if err != nil {
				break // blank marker at the file end, or the end of data
			}
			recs = append(recs, clRecord{path: path, pos: pos, len: r.Size()})
			pos += r.Size()
		}
	}
	return recs
}

// corruptSetup writes n messages to a 1-queue topic with SYNC_FLUSH, then
// stops the broker with kill -9 (all were acknowledged, so all are on disk).
func corruptSetup(t *testing.T, n int) (*binCluster, string) {
	c := startBinCluster(t, map[string]string{"flushDiskType": "SYNC_FLUSH"})
	topic := uniq("Corrupt")
	c.createTopic(topic, 1)
	for i := range n {
		id := fmt.Sprintf("c%04d", i)
		r, err := c.send(topic, 0, id, crashBody(id), nil)
		require.NoError(t, err)
		require.Equal(t, int64(i), r.QueueOffset)
	}
	c.killBroker()
	return c, topic
}

// checkServedPrefix pulls the queue and requires exactly messages 0..want-1,
// intact, then a new send continuing at offset want.
func checkServedPrefix(t *testing.T, c *binCluster, topic string, want int) {
	t.Helper()
	msgs := c.pullAll(topic, 0)
	require.Len(t, msgs, want, "served messages after repair")
	for i, m := range msgs {
		id := fmt.Sprintf("c%04d", i)
		require.Equal(t, id, m.UniqKey())
		require.Equal(t, crashBody(id), m.Body)
	}
	r, err := c.send(topic, 0, "after", crashBody("after"), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(want), r.QueueOffset, "first offset after repair")
	got := c.pullAll(topic, 0)
	require.Len(t, got, want+1)
	assert.Equal(t, "after", got[want].UniqKey())
}

// TestCrashCorruptFilesOnRestart damages the store of a stopped broker and
// starts the binary again: it must start, log the repair, serve every intact
// message and nothing else, and carry on at the right offset.
func TestCrashCorruptFilesOnRestart(t *testing.T) {
	t.Parallel()
	const n = 60
	cases := []struct {
		name string
		// damage changes the files; it returns how many messages stay intact.
		damage  func(t *testing.T, c *binCluster, topic string) int
		logWord string
	}{
		{"zeroed tail of the last record", func(t *testing.T, c *binCluster, _ string) int {
			recs := commitlogRecords(t, c.StoreDir)
			last := recs[len(recs)-1]
			zeroRange(t, last.path, last.pos+last.len/2, last.len-last.len/2)
			return n - 1
		}, "truncates the log at the last good record"},
		{"flipped body byte in the last record", func(t *testing.T, c *binCluster, _ string) int {
			recs := commitlogRecords(t, c.StoreDir)
			last := recs[len(recs)-1]
			// Inside the body's filler: the body CRC covers only the body
			// (RocketMQ 4.x's format; properties carry no checksum).
			b, err := os.ReadFile(last.path)
			require.NoError(t, err)
			id := fmt.Sprintf("c%04d|", n-1)
			at := bytes.Index(b[last.pos:last.pos+last.len], []byte(id))
			require.GreaterOrEqual(t, at, 0, "body of the last record not found")
			flipByte(t, last.path, last.pos+at+len(id)+10)
			return n - 1
		}, "truncates the log at the last good record"},
		{"garbage after the last record", func(t *testing.T, c *binCluster, _ string) int {
			recs := commitlogRecords(t, c.StoreDir)
			last := recs[len(recs)-1]
			writeAt(t, last.path, last.pos+last.len, []byte("\x00\x00\x01\x00garbage-garbage-garbage"))
			return n
		}, "truncates the log at the last good record"},
		{"bogus consume-queue units past the commitlog end", func(t *testing.T, c *binCluster, topic string) int {
			cq := filepath.Join(c.StoreDir, "consumequeue", topic, "0", "00000000000000000000")
			units := make([]byte, 0, 10*20)
			for i := range 10 {
				units = binary.BigEndian.AppendUint64(units, uint64(8<<20+i*100)) // phy offset beyond the log
				units = binary.BigEndian.AppendUint32(units, 100)
				units = binary.BigEndian.AppendUint64(units, 0)
			}
			writeAt(t, cq, n*20, units)
			return n
		}, "truncating consume queue"},
		{"16 bytes flipped from a consume-queue size field", func(t *testing.T, c *binCluster, topic string) int {
			// Issue 18's finding 3: entry 30's size and tags code and entry
			// 31's offset are damaged; both are rebuilt from the commitlog.
			cq := filepath.Join(c.StoreDir, "consumequeue", topic, "0", "00000000000000000000")
			for i := range 16 {
				flipByte(t, cq, 30*20+10+i)
			}
			return n
		}, "truncating consume queue"},
		{"deleted consumequeue dir", func(t *testing.T, c *binCluster, topic string) int {
			require.NoError(t, os.RemoveAll(filepath.Join(c.StoreDir, "consumequeue", topic)))
			return n
		}, ""},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			c, topic := corruptSetup(t, n)
			want := tc.damage(t, c, topic)
			c.startBroker()
			if tc.logWord != "" {
				assert.Contains(t, c.broker.lastRunLog(), tc.logWord, "the repair is not logged")
			}
			checkServedPrefix(t, c, topic, want)
		})
	}
}

// TestCrashShortCommitlogFileRefusesStart: a commitlog file physically
// shorter than mappedFileSizeCommitLog (truncate -s) is not silently
// extended: the broker refuses to start, naming the file (RocketMQ's
// behaviour; reliability.md test 5).
func TestCrashShortCommitlogFileRefusesStart(t *testing.T) {
	t.Parallel()
	c, _ := corruptSetup(t, 20)
	recs := commitlogRecords(t, c.StoreDir)
	last := recs[len(recs)-1]
	require.NoError(t, os.Truncate(last.path, int64(last.pos+last.len/2)))
	c.broker.start()
	code := c.broker.waitExit(binStartWait)
	assert.NotEqual(t, 0, code, "broker started on a short commitlog file")
	assert.Contains(t, c.broker.lastRunLog(), filepath.Base(last.path), "the refusal does not name the file")
}

func zeroRange(t *testing.T, path string, off, n int) {
	t.Helper()
	writeAt(t, path, off, make([]byte, n))
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, int64(off))
	require.NoError(t, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b, int64(off))
	require.NoError(t, err)
}

func writeAt(t *testing.T, path string, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, int64(off))
	require.NoError(t, err)
}
