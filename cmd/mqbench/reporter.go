package main

import (
	"io"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// reporter prints one line a second from a Counters and, at the end, the
// run's Summary. Its goroutine (reportLoop) is started by start and ended by
// finish.
type reporter struct {
	c    *Counters
	lw   *liveWriter
	line func(time.Time, Interval) string

	first Snapshot // taken by start

	mu                    sync.Mutex // guards prev and the maxima
	prev                  Snapshot
	maxRT, maxB2C, maxS2C int64

	stop chan struct{}
	wg   sync.WaitGroup
}

func newReporter(c *Counters, lw *liveWriter, line func(time.Time, Interval) string) *reporter {
	return &reporter{c: c, lw: lw, line: line, stop: make(chan struct{})}
}

// start takes the first snapshot and starts the per-second lines.
func (r *reporter) start(now time.Time) {
	r.prev = r.c.Snapshot(now, true)
	r.first = r.prev
	r.wg.Add(1)
	go r.reportLoop()
}

func (r *reporter) reportLoop() {
	defer r.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.lw.Live(r.line(now, r.advance(now)))
		}
	}
}

// advance reads the counters and returns the interval since the last read,
// folding its maxima into the run's.
func (r *reporter) advance(now time.Time) Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.c.Snapshot(now, true)
	iv := Between(r.prev, cur)
	r.prev = cur
	r.maxRT = max(r.maxRT, cur.RTMax)
	r.maxB2C = max(r.maxB2C, cur.B2CMax)
	r.maxS2C = max(r.maxS2C, cur.S2CMax)
	return iv
}

// finish stops the per-second lines and summarises everything since start,
// with TPS taken over the span [from, to].
func (r *reporter) finish(from, to time.Time) Summary {
	first := r.first
	close(r.stop)
	r.wg.Wait()
	r.advance(to)
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.prev
	s := Summary{
		Total:    last.OK - first.OK,
		Elapsed:  to.Sub(from),
		MaxRT:    time.Duration(r.maxRT),
		Failed:   last.Failed - first.Failed,
		RespFail: last.RespFail - first.RespFail,
		MaxB2C:   r.maxB2C,
		MaxS2C:   r.maxS2C,
	}
	if n := last.RTCount - first.RTCount; n > 0 {
		s.AvgRT = time.Duration((last.RTSum - first.RTSum) / n)
	}
	if s.Total > 0 {
		s.AvgB2C = float64(last.B2CSum-first.B2CSum) / float64(s.Total)
		s.AvgS2C = float64(last.S2CSum-first.S2CSum) / float64(s.Total)
	}
	q := r.c.Hist.Quantiles(0.50, 0.99, 0.999)
	s.P50, s.P99, s.P999 = q[0], q[1], q[2]
	return s
}

// newLogger returns the client's logger: warnings and errors to stderr by
// default, so the per-second lines stay readable.
func newLogger(w io.Writer, level string) (logrus.FieldLogger, error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(lvl)
	return l, nil
}
