package main

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistIndexBounds(t *testing.T) {
	tests := []struct {
		v    int64
		want int
	}{
		{-5, 0},
		{0, 0},
		{1, 1},
		{63, 63},
		{64, 64},
		{65, 64}, // 64..65 share a bucket (width 2 in [64,128))
		{66, 65},
		{127, 95},
		{128, 96},
		{1 << 62, histBuckets - 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, histIndex(tt.v), "v=%d", tt.v)
	}
}

func TestHistUpperIsBucketMaximum(t *testing.T) {
	// Every value lands in a bucket whose upper bound is >= it and within
	// 1/32 of it, and the next value past the bound lands in the next bucket.
	for v := int64(0); v < 1<<22; v = v*9/8 + 1 {
		i := histIndex(v)
		up := histUpper(i)
		require.GreaterOrEqual(t, up, v, "v=%d", v)
		assert.LessOrEqual(t, float64(up-v), float64(v)/32+1, "v=%d up=%d", v, up)
		assert.Equal(t, i+1, histIndex(up+1), "v=%d", v)
	}
}

func TestQuantiles(t *testing.T) {
	var h Histogram
	assert.Equal(t, []time.Duration{0, 0}, h.Quantiles(0.5, 0.99), "empty histogram")
	// 1..1000 µs, once each.
	for v := 1; v <= 1000; v++ {
		h.Record(time.Duration(v) * time.Microsecond)
	}
	q := h.Quantiles(0.5, 0.99, 0.999, 1)
	within := func(got time.Duration, want int64) {
		t.Helper()
		us := got.Microseconds()
		assert.GreaterOrEqual(t, us, want)
		assert.LessOrEqual(t, float64(us), float64(want)*1.04, "got %d µs want ~%d", us, want)
	}
	within(q[0], 500)
	within(q[1], 990)
	within(q[2], 999)
	within(q[3], 1000)
}

func TestCountersConcurrentRecord(t *testing.T) {
	var c Counters
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				c.RecordSend(2, time.Duration(g*1000+i)*time.Microsecond)
			}
		}()
	}
	wg.Wait()
	s := c.Snapshot(time.Now(), true)
	assert.Equal(t, int64(16000), s.OK)
	assert.Equal(t, int64(8000), s.RTCount)
	assert.Equal(t, int64(7999*time.Microsecond), s.RTMax)
	assert.Zero(t, c.RTMax.Load(), "resetMax clears the interval maximum")
}

func TestBetween(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := Snapshot{At: t0, OK: 100, RTSum: int64(100 * time.Millisecond), RTCount: 100, B2CSum: 50, S2CSum: 20}
	cur := Snapshot{At: t0.Add(2 * time.Second), OK: 300, Failed: 3, RespFail: 1,
		RTSum: int64(500 * time.Millisecond), RTCount: 200, RTMax: int64(9 * time.Millisecond),
		B2CSum: 450, S2CSum: 220, B2CMax: 7, S2CMax: 5}
	iv := Between(prev, cur)
	assert.Equal(t, 2*time.Second, iv.Elapsed)
	assert.Equal(t, int64(200), iv.OK)
	assert.InDelta(t, 100.0, iv.TPS, 1e-9)
	assert.Equal(t, 4*time.Millisecond, iv.AvgRT)
	assert.Equal(t, 9*time.Millisecond, iv.MaxRT)
	assert.Equal(t, int64(3), iv.Failed)
	assert.Equal(t, int64(1), iv.RespFail)
	assert.InDelta(t, 2.0, iv.AvgB2C, 1e-9)
	assert.InDelta(t, 1.0, iv.AvgS2C, 1e-9)
	assert.Zero(t, Between(cur, cur).TPS, "zero elapsed gives no rate")
}

func TestLines(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)
	iv := Interval{TPS: 12345.6, MaxRT: 7 * time.Millisecond, AvgRT: 1234 * time.Microsecond, Failed: 2, RespFail: 1,
		AvgB2C: 1.5, AvgS2C: 0.25, MaxB2C: 9, MaxS2C: 4}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"send", sendLine(now, iv),
			"Current Time: 2026-11-29 10:00:01 Send TPS: 12346 Max RT(ms): 7 Average RT(ms):   1.234 Send Failed: 2 Response Failed: 1"},
		{"consume", consumeLine(now, iv),
			"Current Time: 2026-11-29 10:00:01 Consume TPS: 12346 Average(B2C) RT(ms):   1.500 Average(S2C) RT(ms):   0.250 MAX(B2C) RT(ms): 9 MAX(S2C) RT(ms): 4"},
		{"complete", completeLine(Summary{Total: 1000, Elapsed: 2 * time.Second, MaxRT: 12 * time.Millisecond,
			AvgRT: 500 * time.Microsecond, Failed: 3, RespFail: 4}),
			"[Complete] Send Total: 1000 Send TPS: 500 Max RT(ms): 12 Average RT(ms): 0.500 Send Failed: 3 Response Failed: 4"},
		{"percentiles", percentileLine("RT", Summary{P50: 250 * time.Microsecond, P99: 2 * time.Millisecond, P999: 12500 * time.Microsecond}),
			"p50/p99/p999 RT(ms): 0.250 2.000 12.500"},
		{"cpu", cpuLine(CPUShare{Used: 3 * time.Second, Wall: 10 * time.Second, Cores: 2}),
			"[CPU] mqbench used 3.00 CPU-seconds in 10.00 s: 30% of one core, 15% of 2 cores"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got, tt.name)
	}
	// The shape RocketMQ users grep for.
	re := regexp.MustCompile(`^\[Complete\] Send Total: \d+ Send TPS: \d+ Max RT\(ms\): \d+ Average RT\(ms\): [\d.]+ Send Failed: \d+ Response Failed: \d+$`)
	assert.Regexp(t, re, tests[2].got)
}

func TestLiveWriter(t *testing.T) {
	var plain bytes.Buffer
	lw := newLiveWriter(&plain, false)
	lw.Live("a")
	lw.Live("b")
	lw.Line("done")
	assert.Equal(t, "a\nb\ndone\n", plain.String(), "piped: one line each")

	var term bytes.Buffer
	lw = newLiveWriter(&term, true)
	lw.Live("a")
	lw.Live("b")
	lw.Line("done")
	lw.Line("more")
	assert.Equal(t, "\ra\x1b[K\rb\x1b[K\ndone\nmore\n", term.String(), "terminal: redrawn in place")
	assert.False(t, isTerminal(&term))

	// Progress goes on the redrawn line only, never into piped output.
	term.Reset()
	lw = newLiveWriter(&term, true)
	lw.setProgress(time.Now(), time.Hour, 10, func() int64 { return 5 })
	lw.Live("x")
	assert.Regexp(t, `^\rx  \[ 50% 0s/1h0m0s 5/10 msgs\]\x1b\[K$`, term.String())
	plain.Reset()
	lw = newLiveWriter(&plain, false)
	lw.setProgress(time.Now(), time.Hour, 10, func() int64 { return 5 })
	lw.Live("x")
	assert.Equal(t, "x\n", plain.String())
}

func TestRunProgress(t *testing.T) {
	assert.Equal(t, "  [ 25% 15s/1m0s]", runProgress(15*time.Second, time.Minute, 0, 0))
	assert.Equal(t, "  [ 80% 15s/1m0s 800/1000 msgs]", runProgress(15*time.Second, time.Minute, 1000, 800), "the count is further along")
	assert.Equal(t, "  [100% 2m0s/1m0s]", runProgress(2*time.Minute, time.Minute, 0, 0), "capped")
}

func TestCPUShare(t *testing.T) {
	c := CPUShare{Used: 500 * time.Millisecond, Wall: time.Second, Cores: 2}
	assert.InDelta(t, 0.5, c.OfOneCore(), 1e-9)
	assert.InDelta(t, 0.25, c.OfMachine(), 1e-9)
	assert.Zero(t, CPUShare{}.OfOneCore())
	assert.Zero(t, CPUShare{Wall: time.Second}.OfMachine())
	clk := startCPUClock()
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // burn a little CPU
	}
	got := clk.Since()
	assert.Positive(t, got.Used)
	assert.GreaterOrEqual(t, got.Wall, 50*time.Millisecond)
}

func TestClaimHonoursCount(t *testing.T) {
	tests := []struct {
		batch int
		count int64
		want  []int
	}{
		{1, 3, []int{1, 1, 1, 0, 0}},
		{64, 100, []int{64, 36, 0, 0}},
		{10, 20, []int{10, 10, 0}},
		{5, 0, []int{5, 5, 5}}, // no count: only time bounds the run
	}
	for _, tt := range tests {
		b := &sendBench{f: &producerFlags{batch: tt.batch, commonFlags: commonFlags{count: tt.count}}}
		var got []int
		for range tt.want {
			got = append(got, b.claim())
		}
		assert.Equal(t, tt.want, got, "batch=%d count=%d", tt.batch, tt.count)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"nope"}, 2},
		{[]string{"producer", "-bogus"}, 2},
		{[]string{"producer", "-d", "0s"}, 1},
		{[]string{"producer", "--mode", "fast"}, 1},
		{[]string{"producer", "--batch", "4", "--delay-level", "3"}, 1},
		{[]string{"producer", "-w", "0"}, 1},
		{[]string{"consumer", "--from", "middle"}, 1},
		{[]string{"latency", "-s", "8"}, 1},
		{[]string{"latency", "--rate", "0"}, 1},
		{[]string{"producer", "extra"}, 2},
		{[]string{"producer", "-h"}, 0},
		{[]string{"help"}, 0},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errOut)
		assert.Equal(t, tt.code, code, "args %v: %s", tt.args, errOut.String())
	}
}
