package latency

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObserveBuckets(t *testing.T) {
	var h Histogram
	h.Observe(0)
	h.Observe(10 * time.Microsecond) // on the bound: the first bucket
	h.Observe(11 * time.Microsecond)
	h.Observe(3 * time.Millisecond)
	h.Observe(time.Minute) // beyond the last bound
	s := h.Snapshot()
	assert.Equal(t, uint64(5), s.Count)
	assert.Equal(t, uint64(2), s.Counts[0])
	assert.Equal(t, uint64(1), s.Counts[1])
	assert.Equal(t, uint64(1), s.Counts[8], "3 ms falls in (2.5 ms, 5 ms]")
	assert.Equal(t, uint64(1), s.Counts[len(Bounds)])
	assert.Equal(t, 10*time.Microsecond+11*time.Microsecond+3*time.Millisecond+time.Minute, s.Sum)
	assert.Equal(t, 10*time.Microsecond, s.Quantile(0.2))
	assert.Equal(t, 5*time.Millisecond, s.Quantile(0.8))
	assert.Equal(t, 10*time.Second, s.Quantile(1))
	assert.Zero(t, Snapshot{}.Quantile(0.99))
}

func TestConcurrentObserveCountsEveryCall(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				h.Observe(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	s := h.Snapshot()
	assert.Equal(t, uint64(8000), s.Count)
	assert.Equal(t, 8000*time.Millisecond, s.Sum)
}

func TestSampling(t *testing.T) {
	var every Histogram
	assert.Equal(t, 1, every.SampleEvery())
	for range 100 {
		every.Since(every.Start())
	}
	assert.Equal(t, uint64(100), every.Snapshot().Count, "the zero value times every call")

	var h Histogram
	h.SetSampling(20) // rounded down to 16
	require.Equal(t, 16, h.SampleEvery())
	const calls = 64000
	for range calls {
		h.Since(h.Start())
	}
	n := h.Snapshot().Count
	// Expect 4000; the bound is many standard deviations (about 61) wide.
	assert.InDelta(t, calls/16, float64(n), 1000)
	h.Since(time.Time{})
	assert.Equal(t, n, h.Snapshot().Count, "an unsampled start is ignored")
}

func TestObserveAllocatesNothing(t *testing.T) {
	var h Histogram
	h.SetSampling(4)
	allocs := testing.AllocsPerRun(1000, func() { h.Since(h.Start()) })
	assert.Zero(t, allocs)
}

func BenchmarkObserve(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Observe(300 * time.Microsecond)
		}
	})
}

func BenchmarkStartSinceSampled16(b *testing.B) {
	var h Histogram
	h.SetSampling(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Since(h.Start())
		}
	})
}
