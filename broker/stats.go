package broker

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Names of the broker's statistics, as RocketMQ's BrokerStatsManager spells
// them: VIEW_BROKER_STATS_DATA asks for one by name and key (mqadmin
// statsAll reads TOPIC_PUT_NUMS by topic and GROUP_GET_NUMS by
// "topic@group").
const (
	StatsTopicPutNums  = "TOPIC_PUT_NUMS"  // key: topic
	StatsTopicPutSize  = "TOPIC_PUT_SIZE"  // key: topic
	StatsGroupGetNums  = "GROUP_GET_NUMS"  // key: topic@group
	StatsGroupGetSize  = "GROUP_GET_SIZE"  // key: topic@group
	StatsSndbckPutNums = "SNDBCK_PUT_NUMS" // key: topic@group
	StatsBrokerPutNums = "BROKER_PUT_NUMS" // key: the cluster name
	StatsBrokerGetNums = "BROKER_GET_NUMS" // key: the cluster name
)

// statsSampleInterval is how often statsLoop samples every counter.
const statsSampleInterval = time.Second

// Sample rings: per second for 10 s rates, per 10 s for the minute and the
// 10-minute rate, per 10 min for the hour, per hour for the day (RocketMQ's
// StatsItem keeps minute, hour and day snapshots the same way).
var (
	secRing  = ringSpec{step: time.Second, n: 11}
	minRing  = ringSpec{step: 10 * time.Second, n: 61}
	hourRing = ringSpec{step: 10 * time.Minute, n: 7}
	dayRing  = ringSpec{step: time.Hour, n: 25}
)

// brokerStats counts what the broker stores and serves. The counters are
// atomics reached through copy-on-write maps, so the send and pull paths
// count without a lock and without allocating once a key exists (its first
// use takes writeMu and copies the map). statsLoop samples every counter
// each second into rings, from which rates and windowed sums are read.
type brokerStats struct {
	// put and get are the broker-wide counters (BROKER_PUT_NUMS,
	// BROKER_GET_NUMS and their sizes).
	put, get *statsItem

	topics   cowMap[string]     // TOPIC_PUT_NUMS / _SIZE by topic
	groups   cowMap[groupTopic] // GROUP_GET_NUMS / _SIZE by group and topic
	sendBack cowMap[groupTopic] // SNDBCK_PUT_NUMS by group and topic

	// Pulls that found messages, by where the records lay: within the
	// page-cache share of the commitlog tail, or beyond it (store's
	// GetMessageResult.FromDisk).
	pullsFromCache atomic.Int64
	pullsFromDisk  atomic.Int64

	// sampleMu guards every item's rings: statsLoop writes them, readers
	// (admin requests, scrapes) read them. Never taken when counting.
	sampleMu sync.Mutex
	epoch    time.Time // sample times are offsets from it (monotonic)
}

// groupTopic keys the per-group counters.
type groupTopic struct{ group, topic string }

func newBrokerStats() *brokerStats {
	return &brokerStats{put: newStatsItem(), get: newStatsItem(), epoch: time.Now()}
}

// statsItem is one counter pair (messages and bytes) and its samples.
type statsItem struct {
	nums, size atomic.Int64
	// Rings of samples, guarded by brokerStats.sampleMu.
	sec, min, hour, day ring
}

func newStatsItem() *statsItem {
	return &statsItem{sec: newRing(secRing), min: newRing(minRing), hour: newRing(hourRing), day: newRing(dayRing)}
}

func (it *statsItem) add(nums, size int64) {
	it.nums.Add(nums)
	it.size.Add(size)
}

// onPut counts messages stored by a send.
func (s *brokerStats) onPut(topic string, msgs int, bytes int32) {
	s.put.add(int64(msgs), int64(bytes))
	s.topics.getOrCreate(topic).add(int64(msgs), int64(bytes))
}

// onGet counts messages a pull returned.
func (s *brokerStats) onGet(group, topic string, msgs, bytes int, fromDisk bool) {
	s.get.add(int64(msgs), int64(bytes))
	s.groups.getOrCreate(groupTopic{group, topic}).add(int64(msgs), int64(bytes))
	if fromDisk {
		s.pullsFromDisk.Add(1)
	} else {
		s.pullsFromCache.Add(1)
	}
}

// onSendBack counts a message a consumer sent back for retry.
func (s *brokerStats) onSendBack(group, topic string) {
	s.sendBack.getOrCreate(groupTopic{group, topic}).add(1, 0)
}

// removeTopic forgets a deleted topic's counters.
func (s *brokerStats) removeTopic(topic string) {
	s.topics.deleteIf(func(k string) bool { return k == topic })
	s.groups.deleteIf(func(k groupTopic) bool { return k.topic == topic })
	s.sendBack.deleteIf(func(k groupTopic) bool { return k.topic == topic })
}

// removeGroup forgets a deleted group's counters.
func (s *brokerStats) removeGroup(group string) {
	s.groups.deleteIf(func(k groupTopic) bool { return k.group == group })
	s.sendBack.deleteIf(func(k groupTopic) bool { return k.group == group })
}

// sample records every counter's value now.
func (s *brokerStats) sample(now time.Time) {
	at := now.Sub(s.epoch)
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	s.put.sample(at)
	s.get.sample(at)
	for _, it := range s.topics.snapshot() {
		it.sample(at)
	}
	for _, it := range s.groups.snapshot() {
		it.sample(at)
	}
	for _, it := range s.sendBack.snapshot() {
		it.sample(at)
	}
}

func (it *statsItem) sample(at time.Duration) {
	n, sz := it.nums.Load(), it.size.Load()
	if base := max(at-statsSampleInterval, 0); it.sec.count == 0 && base < at {
		// A new counter: everything it holds was counted since the last
		// sampling, so a zero one interval back is its baseline.
		it.sec.add(base, 0, 0)
		it.min.add(base, 0, 0)
		it.hour.add(base, 0, 0)
		it.day.add(base, 0, 0)
	}
	it.sec.add(at, n, sz)
	it.min.add(at, n, sz)
	it.hour.add(at, n, sz)
	it.day.add(at, n, sz)
}

// statsLoop samples the counters every second until the broker stops.
func (b *Broker) statsLoop() {
	defer b.wg.Done()
	t := time.NewTicker(statsSampleInterval)
	defer t.Stop()
	b.stats.sample(time.Now())
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.stats.sample(now)
		}
	}
}

// Rates is a counter's recent throughput, per second.
type Rates struct {
	// Nums10s, Nums60s and Nums600s are messages per second over the last
	// 10 s, minute and 10 minutes (or since start, when shorter).
	Nums10s, Nums60s, Nums600s float64
	// Size60s is bytes per second over the last minute.
	Size60s float64
}

// WindowStats are a counter's sums and rates over a minute, an hour and a
// day (BrokerStatsData's statsMinute, statsHour and statsDay).
type WindowStats struct {
	Minute, Hour, Day WindowStat
}

// WindowStat is one window: the count in it and its rate per second.
type WindowStat struct {
	Sum int64
	TPS float64
}

func (it *statsItem) rates() Rates {
	return Rates{
		Nums10s:  it.sec.rate(10*time.Second, false),
		Nums60s:  it.min.rate(time.Minute, false),
		Nums600s: it.min.rate(10*time.Minute, false),
		Size60s:  it.min.rate(time.Minute, true),
	}
}

// windows reads the item's windowed sums at at (since epoch): the live
// counter minus the oldest sample within each window, so what was counted
// a moment ago is in the minute already; TPS is that sum over the time it
// covers.
func (it *statsItem) windows(at time.Duration, size bool) WindowStats {
	live := it.nums.Load()
	if size {
		live = it.size.Load()
	}
	win := func(r *ring, d time.Duration) WindowStat {
		sum, span := r.sumTo(at, live, d, size)
		w := WindowStat{Sum: sum}
		if span > 0 {
			w.TPS = float64(sum) / span.Seconds()
		}
		return w
	}
	return WindowStats{Minute: win(&it.min, time.Minute), Hour: win(&it.hour, time.Hour), Day: win(&it.day, 24*time.Hour)}
}

// putRates and getRates are the broker-wide rates.
func (s *brokerStats) putRates() Rates {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return s.put.rates()
}

func (s *brokerStats) getRates() Rates {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return s.get.rates()
}

// groupRates returns the get rate of group on topic (zero when it pulled
// nothing yet).
func (s *brokerStats) groupRates(group, topic string) Rates {
	it := s.groups.get(groupTopic{group, topic})
	if it == nil {
		return Rates{}
	}
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return it.rates()
}

// view returns the windowed stats of one named statistic and key, as
// VIEW_BROKER_STATS_DATA asks, or false when there is no such item.
func (s *brokerStats) view(name, key, cluster string, now time.Time) (WindowStats, bool) {
	var it *statsItem
	useSize := false
	split := func() (groupTopic, bool) {
		// "topic@group": topic names cannot hold '@'.
		for i := 0; i < len(key); i++ {
			if key[i] == '@' {
				return groupTopic{group: key[i+1:], topic: key[:i]}, true
			}
		}
		return groupTopic{}, false
	}
	switch name {
	case StatsTopicPutNums, StatsTopicPutSize:
		it, useSize = s.topics.get(key), name == StatsTopicPutSize
	case StatsGroupGetNums, StatsGroupGetSize, StatsSndbckPutNums:
		gt, ok := split()
		if !ok {
			return WindowStats{}, false
		}
		if name == StatsSndbckPutNums {
			it = s.sendBack.get(gt)
		} else {
			it, useSize = s.groups.get(gt), name == StatsGroupGetSize
		}
	case StatsBrokerPutNums, StatsBrokerGetNums:
		if key != cluster {
			return WindowStats{}, false
		}
		it = s.put
		if name == StatsBrokerGetNums {
			it = s.get
		}
	}
	if it == nil {
		return WindowStats{}, false
	}
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return it.windows(now.Sub(s.epoch), useSize), true
}

// CounterStats is one counter's totals since start and its recent rates.
type CounterStats struct {
	Nums, Size int64
	Rates
}

// TopicCounter is a topic's put counter.
type TopicCounter struct {
	Topic string
	CounterStats
}

// GroupCounter is a group's get counter on one topic.
type GroupCounter struct {
	Group, Topic string
	CounterStats
}

// counters reads every topic and group counter with its rates, sorted.
func (s *brokerStats) counters() (put, get CounterStats, topics []TopicCounter, groups []GroupCounter, sendBack []GroupCounter) {
	read := func(it *statsItem) CounterStats {
		return CounterStats{Nums: it.nums.Load(), Size: it.size.Load(), Rates: it.rates()}
	}
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	put, get = read(s.put), read(s.get)
	for k, it := range s.topics.snapshot() {
		topics = append(topics, TopicCounter{Topic: k, CounterStats: read(it)})
	}
	for k, it := range s.groups.snapshot() {
		groups = append(groups, GroupCounter{Group: k.group, Topic: k.topic, CounterStats: read(it)})
	}
	for k, it := range s.sendBack.snapshot() {
		sendBack = append(sendBack, GroupCounter{Group: k.group, Topic: k.topic, CounterStats: read(it)})
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	less := func(a, b GroupCounter) bool {
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Topic < b.Topic
	}
	sort.Slice(groups, func(i, j int) bool { return less(groups[i], groups[j]) })
	sort.Slice(sendBack, func(i, j int) bool { return less(sendBack[i], sendBack[j]) })
	return
}

// cowMap is a copy-on-write map of counters: readers load the current map
// with one atomic read and look the key up, writers (a key's first use, a
// deletion) copy it under mu. Keys are topics and groups, created rarely.
type cowMap[K comparable] struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[K]*statsItem]
}

func (c *cowMap[K]) get(k K) *statsItem {
	if m := c.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

func (c *cowMap[K]) getOrCreate(k K) *statsItem {
	if it := c.get(k); it != nil {
		return it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if it := (*old)[k]; it != nil {
			return it
		}
	}
	next := make(map[K]*statsItem, 1+lenOf(old))
	if old != nil {
		for key, it := range *old {
			next[key] = it
		}
	}
	it := newStatsItem()
	next[k] = it
	c.m.Store(&next)
	return it
}

func (c *cowMap[K]) deleteIf(drop func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old == nil {
		return
	}
	next := make(map[K]*statsItem, len(*old))
	for key, it := range *old {
		if !drop(key) {
			next[key] = it
		}
	}
	if len(next) != len(*old) {
		c.m.Store(&next)
	}
}

// snapshot is the current map; callers must not modify it.
func (c *cowMap[K]) snapshot() map[K]*statsItem {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}

func lenOf[K comparable](m *map[K]*statsItem) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// ringSpec is a ring's sampling step and length.
type ringSpec struct {
	step time.Duration
	n    int
}

// ring keeps the last n samples of a counter taken at least step apart.
type ring struct {
	spec  ringSpec
	at    []time.Duration // since brokerStats.epoch
	nums  []int64
	size  []int64
	head  int // index of the newest sample
	count int
}

func newRing(spec ringSpec) ring {
	return ring{spec: spec, at: make([]time.Duration, spec.n), nums: make([]int64, spec.n), size: make([]int64, spec.n)}
}

// step numbers the step of time at falls in.
func (r *ring) step(at time.Duration) int64 {
	n := int64(at / r.spec.step)
	if at < 0 && at%r.spec.step != 0 {
		n--
	}
	return n
}

// slack absorbs ticker jitter when choosing the samples of a window: a
// tenth of the step, at most half the sampling interval.
func (r *ring) slack() time.Duration { return min(r.spec.step/10, statsSampleInterval/2) }

// add records a sample unless the ring already holds one from the same
// step of time (steps counted from the epoch, so every counter's ring
// samples on the same grid).
func (r *ring) add(at time.Duration, nums, size int64) {
	if r.count > 0 && r.step(at) <= r.step(r.at[r.head]) {
		return
	}
	r.head = (r.head + 1) % r.spec.n
	r.at[r.head], r.nums[r.head], r.size[r.head] = at, nums, size
	r.count = min(r.count+1, r.spec.n)
}

// delta returns how much the counter grew over about the last d (from the
// oldest sample within d of the newest) and the time that covers.
func (r *ring) delta(d time.Duration, size bool) (int64, time.Duration) {
	if r.count < 2 {
		return 0, 0
	}
	vals := r.nums
	if size {
		vals = r.size
	}
	newest := r.head
	oldest := newest
	for k := 1; k < r.count; k++ {
		i := (r.head - k + r.spec.n) % r.spec.n
		if r.at[newest]-r.at[i] > d+r.slack() {
			break
		}
		oldest = i
	}
	return vals[newest] - vals[oldest], r.at[newest] - r.at[oldest]
}

// sumTo returns how much the counter grew from the oldest sample within d
// before at up to live, its value at at, and the time that covers. With no
// sample yet (a counter newer than the last sampling) all of live counts.
func (r *ring) sumTo(at time.Duration, live int64, d time.Duration, size bool) (int64, time.Duration) {
	if r.count == 0 {
		return live, 0
	}
	vals := r.nums
	if size {
		vals = r.size
	}
	oldest := -1
	for k := 0; k < r.count; k++ {
		i := (r.head - k + r.spec.n) % r.spec.n
		if at-r.at[i] > d+r.slack() {
			break
		}
		oldest = i
	}
	if oldest < 0 {
		// Every sample is older than the window: the newest bounds it.
		oldest = r.head
	}
	return live - vals[oldest], at - r.at[oldest]
}

// rate is delta per second; zero before two samples.
func (r *ring) rate(d time.Duration, size bool) float64 {
	n, span := r.delta(d, size)
	if span <= 0 {
		return 0
	}
	return float64(n) / span.Seconds()
}

// statsRuntimeFields are GET_BROKER_RUNTIME_INFO's rates, sizes and queue
// capacities, under RocketMQ's names: putTps and getTransferedTps hold the
// rates over 10 s, a minute and 10 minutes, space-separated (mqadmin
// clusterList prints the first).
func (b *Broker) statsRuntimeFields(kv map[string]string) {
	tps := func(r Rates) string { return fmt.Sprintf("%.2f %.2f %.2f", r.Nums10s, r.Nums60s, r.Nums600s) }
	kv["putTps"] = tps(b.stats.putRates())
	kv["getTransferedTps"] = tps(b.stats.getRates())
	if n := b.stats.put.nums.Load(); n > 0 {
		kv["putMessageAverageSize"] = strconv.FormatFloat(float64(b.stats.put.size.Load())/float64(n), 'f', 2, 64)
	}
	kv["sendThreadPoolQueueCapacity"] = strconv.Itoa(b.pools.Send.Capacity())
	kv["pullThreadPoolQueueCapacity"] = strconv.Itoa(b.pools.Pull.Capacity())
	kv["queryThreadPoolQueueCapacity"] = strconv.Itoa(b.pools.Query.Capacity())
	kv["remainHowManyDataToFlush"] = strconv.FormatInt(max(0, b.store.CommitLogMaxOffset()-b.store.CommitLogFlushedOffset()), 10)
	if ds, err := b.store.CommitLogDiskSpace(); err == nil {
		kv["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.", humanBytes(ds.Total), humanBytes(ds.Free))
		kv["commitLogDiskRatio"] = strconv.FormatFloat(ds.UsedRatio, 'f', 4, 64)
	}
}

// humanBytes is MixAll.humanReadableByteCount(n, false): "12.3 GiB".
func humanBytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := "KMGTPE"
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
