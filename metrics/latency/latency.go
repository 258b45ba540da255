// Package latency is a lock-free, allocation-free latency histogram for the
// packages that time their own work on hot paths (store puts and reads,
// flushes). It imports nothing of the project, so store can own its
// histograms while package metrics, above it, turns them into Prometheus
// histograms at scrape time.
//
// Observe is two atomic adds after a scan of the bucket bounds. Reading the
// clock twice costs more than that on some virtual machines (about 100 ns
// for time.Now and time.Since under kvm-clock), so a Histogram can sample:
// Start decides, with the runtime's cheap per-thread random source, whether
// this call is timed at all.
package latency

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of the buckets, shared by every Histogram:
// from 10 µs to 10 s, roughly 1-2.5-5 per decade, plus +Inf. They cover a
// page-cache append (a few µs) up to a stalled fsync.
var Bounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Histogram counts durations into Bounds. The zero value times every call;
// SetSampling makes it time one in n. Safe for concurrent use.
type Histogram struct {
	// counts[i] counts observations <= Bounds[i] and > Bounds[i-1];
	// counts[len(Bounds)] those above the last bound.
	counts [len(Bounds) + 1]atomic.Uint64
	sumNs  atomic.Int64
	// mask is n-1 when one in n (a power of two) calls is timed, else 0.
	mask uint32
}

// SetSampling makes Start time about one call in n (rounded down to a power
// of two; n <= 1 times every call). Call it before the histogram is shared.
func (h *Histogram) SetSampling(n int) {
	p := uint32(1)
	for int(p)*2 <= n && p < 1<<30 {
		p *= 2
	}
	h.mask = p - 1
}

// SampleEvery is the n of SetSampling, as a power of two (1: every call).
func (h *Histogram) SampleEvery() int { return int(h.mask) + 1 }

// Start returns the time to pass to Since, or the zero time when this call
// is not sampled (then Since does nothing).
func (h *Histogram) Start() time.Time {
	if h.mask != 0 && rand.Uint32()&h.mask != 0 {
		return time.Time{}
	}
	return time.Now()
}

// Since observes the time elapsed since start, a value from Start; a zero
// start is ignored.
func (h *Histogram) Since(start time.Time) {
	if start.IsZero() {
		return
	}
	h.Observe(time.Since(start))
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(Bounds) && d > Bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Snapshot is a histogram read at one moment: per-bucket (not cumulative)
// counts, their total and the sum of the observed durations. Buckets are
// read one by one, so a snapshot taken during observations may miss the
// newest ones; it never counts one twice.
type Snapshot struct {
	Counts [len(Bounds) + 1]uint64
	Count  uint64
	Sum    time.Duration
}

// Snapshot reads the histogram.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	s.Sum = time.Duration(h.sumNs.Load())
	return s
}

// Quantile estimates the q-quantile (0 < q <= 1) as the upper bound of the
// bucket holding it (Bounds' last entry for the overflow bucket); zero when
// nothing was observed.
func (s Snapshot) Quantile(q float64) time.Duration {
	if s.Count == 0 {
		return 0
	}
	rank := uint64(q * float64(s.Count))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= rank {
			if i < len(Bounds) {
				return Bounds[i]
			}
			break
		}
	}
	return Bounds[len(Bounds)-1]
}
