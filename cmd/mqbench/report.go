package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// timeLayout is how RocketMQ's benchmark prints "Current Time".
const timeLayout = "2006-01-02 15:04:05"

// sendLine formats one per-second producer line in the shape of RocketMQ's
// benchmark Producer, so scripts written for it parse ours.
func sendLine(now time.Time, iv Interval) string {
	return fmt.Sprintf("Current Time: %s Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d Response Failed: %d",
		now.Format(timeLayout), int64(iv.TPS+0.5), iv.MaxRT.Milliseconds(), ms(iv.AvgRT), iv.Failed, iv.RespFail)
}

// consumeLine formats one per-second consumer line as RocketMQ's benchmark
// Consumer: born-to-consume (B2C) and store-to-consume (S2C) in ms.
func consumeLine(now time.Time, iv Interval) string {
	return fmt.Sprintf("Current Time: %s Consume TPS: %d Average(B2C) RT(ms): %7.3f Average(S2C) RT(ms): %7.3f MAX(B2C) RT(ms): %d MAX(S2C) RT(ms): %d",
		now.Format(timeLayout), int64(iv.TPS+0.5), iv.AvgB2C, iv.AvgS2C, iv.MaxB2C, iv.MaxS2C)
}

// Summary is a whole run's result.
type Summary struct {
	Total          int64
	Elapsed        time.Duration
	MaxRT, AvgRT   time.Duration
	Failed         int64
	RespFail       int64
	P50, P99, P999 time.Duration
	// Consumer side (ms).
	AvgB2C, AvgS2C float64
	MaxB2C, MaxS2C int64
}

// TPS is messages per second over the run.
func (s Summary) TPS() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Total) / s.Elapsed.Seconds()
}

// completeLine is the producer's final line, exactly:
// [Complete] Send Total: N Send TPS: X Max RT(ms): Y Average RT(ms): Z Send Failed: F Response Failed: R
func completeLine(s Summary) string {
	return fmt.Sprintf("[Complete] Send Total: %d Send TPS: %d Max RT(ms): %d Average RT(ms): %.3f Send Failed: %d Response Failed: %d",
		s.Total, int64(s.TPS()+0.5), s.MaxRT.Milliseconds(), ms(s.AvgRT), s.Failed, s.RespFail)
}

// consumeCompleteLine is the consumer's final line.
func consumeCompleteLine(s Summary) string {
	return fmt.Sprintf("[Complete] Consume Total: %d Consume TPS: %d Average(B2C) RT(ms): %.3f Average(S2C) RT(ms): %.3f MAX(B2C) RT(ms): %d MAX(S2C) RT(ms): %d",
		s.Total, int64(s.TPS()+0.5), s.AvgB2C, s.AvgS2C, s.MaxB2C, s.MaxS2C)
}

// percentileLine is printed after the complete line; label names what was
// measured ("RT" for send round trips, "E2E" for publish-to-receive).
func percentileLine(label string, s Summary) string {
	return fmt.Sprintf("p50/p99/p999 %s(ms): %.3f %.3f %.3f", label, ms(s.P50), ms(s.P99), ms(s.P999))
}

// cpuLine reports the tool's own CPU use so a reader can tell whether the
// tool, not the broker, was the limit.
func cpuLine(c CPUShare) string {
	return fmt.Sprintf("[CPU] mqbench used %.2f CPU-seconds in %.2f s: %.0f%% of one core, %.0f%% of %d cores",
		c.Used.Seconds(), c.Wall.Seconds(), c.OfOneCore()*100, c.OfMachine()*100, c.Cores)
}

// isTerminal reports whether w is a character device (a terminal), where
// the per-second line is redrawn in place instead of scrolling.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// liveWriter prints per-second lines: redrawn in place on a terminal
// (carriage return + erase to end of line), one per line otherwise.
type liveWriter struct {
	mu      sync.Mutex
	w       io.Writer
	inPlace bool
	pending bool // a redrawn line is on screen without its newline
	// progress, when set, is appended to in-place lines: how much of the
	// run is done. Piped output never shows it.
	progress func() string
}

// setProgress makes in-place lines end with how far the run is: the larger
// of the elapsed share of d and, with count > 0, done() of count.
func (lw *liveWriter) setProgress(start time.Time, d time.Duration, count int64, done func() int64) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.progress = func() string { return runProgress(time.Since(start), d, count, done()) }
}

// runProgress renders "  [ 42% 25s/1m0s]" (with "  1200/5000 msgs" when a
// count bounds the run).
func runProgress(elapsed, d time.Duration, count, done int64) string {
	share := 0.0
	if d > 0 {
		share = float64(elapsed) / float64(d)
	}
	msgs := ""
	if count > 0 {
		share = max(share, float64(done)/float64(count))
		msgs = fmt.Sprintf(" %d/%d msgs", done, count)
	}
	return fmt.Sprintf("  [%3.0f%% %s/%s%s]", min(share, 1)*100, elapsed.Round(time.Second), d, msgs)
}

func newLiveWriter(w io.Writer, inPlace bool) *liveWriter {
	return &liveWriter{w: w, inPlace: inPlace}
}

// Live prints a line that the next Live may overwrite.
func (lw *liveWriter) Live(line string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.inPlace {
		if lw.progress != nil {
			line += lw.progress()
		}
		fmt.Fprintf(lw.w, "\r%s\x1b[K", line)
		lw.pending = true
		return
	}
	fmt.Fprintln(lw.w, line)
}

// Line prints a permanent line, first ending any line being redrawn.
func (lw *liveWriter) Line(line string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.pending {
		fmt.Fprintln(lw.w)
		lw.pending = false
	}
	fmt.Fprintln(lw.w, line)
}

// errorLog prints the first few send errors, so a run with failures says
// why without flooding the terminal.
type errorLog struct {
	mu   sync.Mutex
	w    io.Writer
	left int // lines still allowed
}

func newErrorLog(w io.Writer, limit int) *errorLog { return &errorLog{w: w, left: limit} }

func (l *errorLog) report(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left <= 0 {
		return
	}
	l.left--
	fmt.Fprintf(l.w, "mqbench: send error: %v\n", err)
}
