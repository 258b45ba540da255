package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatsRatesFromSamples drives the sampler with a fake clock: rates and
// windowed sums come from the samples, not from the wall clock.
func TestStatsRatesFromSamples(t *testing.T) {
	s := newBrokerStats()
	t0 := s.epoch
	for sec := 0; sec <= 120; sec++ {
		if sec > 0 {
			s.onPut("T", 10, 1000) // 10 messages, 1000 bytes a second
			s.onGet("g", "T", 5, 500, sec%2 == 0)
		}
		s.sample(t0.Add(time.Duration(sec) * time.Second))
	}
	end := t0.Add(120 * time.Second)
	r := s.putRates()
	assert.InDelta(t, 10, r.Nums10s, 1e-9)
	assert.InDelta(t, 10, r.Nums60s, 1e-9)
	assert.InDelta(t, 10, r.Nums600s, 1e-9, "since start when shorter than 10 minutes")
	assert.InDelta(t, 1000, r.Size60s, 1e-9)
	g := s.groupRates("g", "T")
	assert.InDelta(t, 5, g.Nums10s, 1e-9)
	assert.InDelta(t, 5, g.Nums60s, 1e-9)
	assert.Zero(t, s.groupRates("other", "T").Nums60s)

	w, ok := s.view(StatsTopicPutNums, "T", "C", end)
	require.True(t, ok)
	assert.Equal(t, int64(600), w.Minute.Sum)
	assert.InDelta(t, 10, w.Minute.TPS, 1e-9)
	w, ok = s.view(StatsTopicPutSize, "T", "C", end)
	require.True(t, ok)
	assert.Equal(t, int64(60000), w.Minute.Sum)
	w, ok = s.view(StatsGroupGetNums, "T@g", "C", end)
	require.True(t, ok)
	assert.Equal(t, int64(300), w.Minute.Sum)
	_, ok = s.view(StatsGroupGetNums, "T@nobody", "C", end)
	assert.False(t, ok)
	_, ok = s.view(StatsGroupGetNums, "no-separator", "C", end)
	assert.False(t, ok)
	w, ok = s.view(StatsBrokerPutNums, "C", "C", end)
	require.True(t, ok)
	assert.Equal(t, int64(600), w.Minute.Sum)
	_, ok = s.view(StatsBrokerPutNums, "other-cluster", "C", end)
	assert.False(t, ok)
	_, ok = s.view("NO_SUCH_STATS", "T", "C", end)
	assert.False(t, ok)
	// Counted after the last sample: already in the windows.
	s.onPut("T", 3, 30)
	w, ok = s.view(StatsTopicPutNums, "T", "C", end.Add(500*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, int64(603), w.Minute.Sum)
	assert.Equal(t, int64(1203), w.Day.Sum, "the day covers everything since start")
	w, ok = s.view(StatsSndbckPutNums, "T@g", "C", end)
	assert.False(t, ok, "nothing was sent back")
	s.onSendBack("g", "T")
	w, ok = s.view(StatsSndbckPutNums, "T@g", "C", end)
	require.True(t, ok)
	assert.Equal(t, int64(1), w.Minute.Sum, "a counter newer than every sample counts whole")

	put, get, topics, groups, _ := s.counters()
	assert.Equal(t, int64(1203), put.Nums)
	assert.Equal(t, int64(600), get.Nums)
	require.Len(t, topics, 1)
	assert.Equal(t, int64(120030), topics[0].Size)
	require.Len(t, groups, 1)
	assert.Equal(t, GroupCounter{Group: "g", Topic: "T", CounterStats: groups[0].CounterStats}, groups[0])
	assert.Equal(t, int64(60), s.pullsFromDisk.Load(), "every other pull lay beyond the cached tail")
	assert.Equal(t, int64(60), s.pullsFromCache.Load())

	s.removeTopic("T")
	_, _, topics, groups, _ = s.counters()
	assert.Empty(t, topics)
	assert.Empty(t, groups)
}

// TestRingSkipsEarlySamples: a sample less than a step after the last is
// dropped, so a fast ticker cannot shrink a ring's window.
func TestRingSkipsEarlySamples(t *testing.T) {
	r := newRing(ringSpec{step: 10 * time.Second, n: 3})
	r.add(0, 0, 0)
	r.add(time.Second, 100, 0) // too early: dropped
	r.add(10*time.Second, 100, 0)
	r.add(20*time.Second, 300, 0)
	r.add(30*time.Second, 600, 0) // overwrites the oldest
	n, span := r.delta(time.Minute, false)
	assert.Equal(t, int64(500), n)
	assert.Equal(t, 20*time.Second, span)
	assert.InDelta(t, 25, r.rate(time.Minute, false), 1e-9)
	one := newRing(ringSpec{step: time.Second, n: 2})
	one.add(0, 5, 0)
	assert.Zero(t, one.rate(time.Minute, false), "one sample gives no rate")
}

// TestCountingAllocatesNothing: once a topic or group is known, counting a
// put or a pull allocates nothing (the send and pull paths' promise).
func TestCountingAllocatesNothing(t *testing.T) {
	s := newBrokerStats()
	s.onPut("T", 1, 100)
	s.onGet("g", "T", 1, 100, false)
	allocs := testing.AllocsPerRun(1000, func() {
		s.onPut("T", 1, 100)
		s.onGet("g", "T", 1, 100, true)
	})
	assert.Zero(t, allocs)
}

// TestCountingConcurrently creates keys from many goroutines while the
// sampler runs: no count is lost (run with -race).
func TestCountingConcurrently(t *testing.T) {
	s := newBrokerStats()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		at := s.epoch
		for {
			select {
			case <-stop:
				return
			default:
			}
			at = at.Add(time.Second)
			s.sample(at)
		}
	}()
	var workers sync.WaitGroup
	topics := []string{"A", "B", "C", "D"}
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := range 500 {
				s.onPut(topics[(w+i)%len(topics)], 1, 10)
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	put, _, tc, _, _ := s.counters()
	assert.Equal(t, int64(4000), put.Nums)
	var sum int64
	for _, c := range tc {
		sum += c.Nums
	}
	assert.Equal(t, int64(4000), sum)
}

func TestHumanBytes(t *testing.T) {
	assert.Equal(t, "512 B", humanBytes(512))
	assert.Equal(t, "1.5 KiB", humanBytes(1536))
	assert.Equal(t, "2.0 GiB", humanBytes(2<<30))
}

func BenchmarkStatsOnPut(b *testing.B) {
	s := newBrokerStats()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.onPut("BenchTopic", 1, 200)
		}
	})
}
