// Package progress draws a one-line progress indicator for long command
// runs (mqadmin printMsg, statsAll, resets; mqbench runs) on a terminal,
// and nothing at all when its writer is not one: piped or redirected
// output stays exactly the command's own.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// redrawEvery bounds how often the line is redrawn.
const redrawEvery = 100 * time.Millisecond

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Bar is a progress line: "label  done/total (pct%)  elapsed", or with no
// total "label  done  elapsed". It draws only when on; every method is
// safe to call either way, and from several goroutines.
type Bar struct {
	w     io.Writer
	on    bool
	label string
	start time.Time
	now   func() time.Time

	mu          sync.Mutex // guards the fields below
	total, done int64
	unit        string
	last        time.Time // last redraw
	drawn       bool      // a line is on screen
}

// New returns a bar on w, drawing only when w is a terminal; total <= 0
// means unknown.
func New(w io.Writer, label string, total int64) *Bar {
	return NewOn(w, IsTerminal(w), label, total)
}

// NewOn is New with the terminal decision made by the caller (tests).
func NewOn(w io.Writer, on bool, label string, total int64) *Bar {
	return &Bar{w: w, on: on, label: label, total: total, start: time.Now(), now: time.Now}
}

// On reports whether the bar draws.
func (b *Bar) On() bool { return b.on }

// SetUnit names what is counted ("messages", "topics").
func (b *Bar) SetUnit(u string) {
	b.mu.Lock()
	b.unit = u
	b.mu.Unlock()
}

// SetTotal changes the total (<= 0: unknown).
func (b *Bar) SetTotal(n int64) {
	b.mu.Lock()
	b.total = n
	b.drawLocked(false)
	b.mu.Unlock()
}

// SetLabel changes what the line says it is doing.
func (b *Bar) SetLabel(l string) {
	b.mu.Lock()
	b.label = l
	b.drawLocked(true)
	b.mu.Unlock()
}

// Add counts n more done.
func (b *Bar) Add(n int64) {
	b.mu.Lock()
	b.done += n
	b.drawLocked(false)
	b.mu.Unlock()
}

// Tick redraws without progress (the elapsed time moves).
func (b *Bar) Tick() {
	b.mu.Lock()
	b.drawLocked(false)
	b.mu.Unlock()
}

// Clear removes the line, so the command's own output is not mixed with
// it; the next Add draws it again.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on && b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
		b.last = time.Time{}
	}
}

// Done removes the line for good.
func (b *Bar) Done() { b.Clear() }

func (b *Bar) drawLocked(force bool) {
	if !b.on {
		return
	}
	now := b.now()
	if !force && b.drawn && now.Sub(b.last) < redrawEvery {
		return
	}
	b.last = now
	b.drawn = true
	fmt.Fprintf(b.w, "\r%s\x1b[K", b.lineLocked(now))
}

func (b *Bar) lineLocked(now time.Time) string {
	el := now.Sub(b.start).Round(100 * time.Millisecond)
	unit := ""
	if b.unit != "" {
		unit = " " + b.unit
	}
	if b.total > 0 {
		pct := float64(b.done) * 100 / float64(b.total)
		return fmt.Sprintf("%s  %d/%d%s (%.0f%%)  %s", b.label, b.done, b.total, unit, min(pct, 100), el)
	}
	if b.done > 0 {
		return fmt.Sprintf("%s  %d%s  %s", b.label, b.done, unit, el)
	}
	return fmt.Sprintf("%s  %s", b.label, el)
}

// Spin draws the bar every redraw interval until stop is closed (for one
// long call with nothing to count). It returns at once when the bar is off.
func (b *Bar) Spin(stop <-chan struct{}) {
	if !b.on {
		return
	}
	t := time.NewTicker(redrawEvery * 2)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			b.Tick()
		}
	}
}
