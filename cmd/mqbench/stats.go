package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram of durations in microseconds, log-linear: values below 64 µs
// have their own bucket, above that each power of two is split into 32
// buckets, so a reported percentile is within about 3% of the true value.
// Recording is one atomic add: senders never contend on a lock.
const (
	histSubBits = 5
	histSub     = 1 << histSubBits // buckets per power of two
	histLinear  = 2 * histSub      // values below this are exact
	histBuckets = histLinear + 40*histSub
)

// histIndex returns the bucket of v (µs, >= 0).
func histIndex(v int64) int {
	if v < histLinear {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1 // >= 1
	mant := int(v >> shift)                          // in [histSub, 2*histSub)
	i := histLinear + (shift-1)*histSub + mant - histSub
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// histUpper returns the largest value that falls in bucket i: percentiles
// are reported on the pessimistic side.
func histUpper(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	i -= histLinear
	shift := i/histSub + 1
	mant := int64(i%histSub + histSub)
	return (mant+1)<<shift - 1
}

// Histogram counts durations; safe for concurrent Record.
type Histogram struct {
	b [histBuckets]atomic.Int64
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	h.b[histIndex(d.Microseconds())].Add(1)
}

// Quantiles returns the durations at or below which fraction qs of the
// recorded values lie (0 when nothing was recorded).
func (h *Histogram) Quantiles(qs ...float64) []time.Duration {
	var counts [histBuckets]int64
	var total int64
	for i := range h.b {
		counts[i] = h.b[i].Load()
		total += counts[i]
	}
	out := make([]time.Duration, len(qs))
	if total == 0 {
		return out
	}
	for k, q := range qs {
		// rank is the 1-based position of the quantile's value.
		rank := int64(math.Ceil(q * float64(total)))
		if rank < 1 {
			rank = 1
		}
		var seen int64
		for i, c := range counts {
			seen += c
			if seen >= rank {
				out[k] = time.Duration(histUpper(i)) * time.Microsecond
				break
			}
		}
	}
	return out
}

// Counters are the running totals of one benchmark, updated by many
// goroutines with atomics and read once a second by the reporter.
type Counters struct {
	OK       atomic.Int64 // messages acknowledged (sent or consumed)
	Failed   atomic.Int64 // send errors before a broker answered (Send Failed)
	RespFail atomic.Int64 // broker answered with an error (Response Failed)
	RTSum    atomic.Int64 // sum of response times, ns, over the acknowledged requests
	RTCount  atomic.Int64 // number of requests in RTSum (a batch is one)
	RTMax    atomic.Int64 // ns, since the last Snapshot that reset it
	Hist     Histogram

	// Consumer side: born-to-consume and store-to-consume latencies, ms.
	B2CSum atomic.Int64
	B2CMax atomic.Int64
	S2CSum atomic.Int64
	S2CMax atomic.Int64
}

// storeMax raises m to v if v is larger.
func storeMax(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// RecordSend accounts one acknowledged request of n messages that took rt.
func (c *Counters) RecordSend(n int, rt time.Duration) {
	c.OK.Add(int64(n))
	c.RTSum.Add(int64(rt))
	c.RTCount.Add(1)
	storeMax(&c.RTMax, int64(rt))
	c.Hist.Record(rt)
}

// RecordConsume accounts one consumed message with its born-to-consume and
// store-to-consume latencies in ms.
func (c *Counters) RecordConsume(b2c, s2c int64) {
	c.OK.Add(1)
	c.B2CSum.Add(b2c)
	c.S2CSum.Add(s2c)
	storeMax(&c.B2CMax, b2c)
	storeMax(&c.S2CMax, s2c)
}

// Snapshot is a reading of Counters at one instant.
type Snapshot struct {
	At                             time.Time
	OK, Failed, RespFail           int64
	RTSum, RTCount                 int64
	RTMax                          int64 // ns, over the interval that ended at this snapshot
	B2CSum, B2CMax, S2CSum, S2CMax int64
}

// Snapshot reads the counters. With resetMax the interval maxima restart
// from zero, so each per-second line shows its own second's maximum.
func (c *Counters) Snapshot(at time.Time, resetMax bool) Snapshot {
	s := Snapshot{
		At: at, OK: c.OK.Load(), Failed: c.Failed.Load(), RespFail: c.RespFail.Load(),
		RTSum: c.RTSum.Load(), RTCount: c.RTCount.Load(),
		B2CSum: c.B2CSum.Load(), S2CSum: c.S2CSum.Load(),
	}
	if resetMax {
		s.RTMax = c.RTMax.Swap(0)
		s.B2CMax = c.B2CMax.Swap(0)
		s.S2CMax = c.S2CMax.Swap(0)
	} else {
		s.RTMax = c.RTMax.Load()
		s.B2CMax = c.B2CMax.Load()
		s.S2CMax = c.S2CMax.Load()
	}
	return s
}

// Interval is what happened between two snapshots.
type Interval struct {
	Elapsed        time.Duration
	OK             int64
	TPS            float64
	MaxRT          time.Duration
	AvgRT          time.Duration
	Failed         int64 // totals, as RocketMQ prints them
	RespFail       int64
	AvgB2C, AvgS2C float64 // ms
	MaxB2C, MaxS2C int64   // ms
}

// Between returns the interval from prev to cur; cur's maxima are taken as
// the interval's own (see Snapshot's resetMax).
func Between(prev, cur Snapshot) Interval {
	iv := Interval{
		Elapsed:  cur.At.Sub(prev.At),
		OK:       cur.OK - prev.OK,
		MaxRT:    time.Duration(cur.RTMax),
		Failed:   cur.Failed,
		RespFail: cur.RespFail,
		MaxB2C:   cur.B2CMax,
		MaxS2C:   cur.S2CMax,
	}
	if secs := iv.Elapsed.Seconds(); secs > 0 {
		iv.TPS = float64(iv.OK) / secs
	}
	if n := cur.RTCount - prev.RTCount; n > 0 {
		iv.AvgRT = time.Duration((cur.RTSum - prev.RTSum) / n)
	}
	if iv.OK > 0 {
		iv.AvgB2C = float64(cur.B2CSum-prev.B2CSum) / float64(iv.OK)
		iv.AvgS2C = float64(cur.S2CSum-prev.S2CSum) / float64(iv.OK)
	}
	return iv
}

// ms converts a duration to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
