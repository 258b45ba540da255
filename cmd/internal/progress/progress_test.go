package progress

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOffWritesNothing(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "scanning", 10) // a buffer is not a terminal
	assert.False(t, b.On())
	b.Add(3)
	b.SetLabel("x")
	b.Tick()
	b.Done()
	stop := make(chan struct{})
	close(stop)
	b.Spin(stop)
	assert.Empty(t, buf.String())
}

func TestNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	assert.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f), "a regular file")
	r, w, err := os.Pipe()
	assert.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.False(t, IsTerminal(w), "a pipe")
}

func TestDrawsAndRateLimits(t *testing.T) {
	var buf bytes.Buffer
	b := NewOn(&buf, true, "printing", 4)
	clock := b.start
	b.now = func() time.Time { return clock }
	b.SetUnit("queues")
	b.Add(1)
	assert.Equal(t, "\rprinting  1/4 queues (25%)  0s\x1b[K", buf.String())
	b.Add(1) // within the redraw interval: not drawn
	assert.Equal(t, 1, strings.Count(buf.String(), "\r"))
	clock = clock.Add(time.Second)
	b.Add(1)
	assert.Contains(t, buf.String(), "3/4 queues (75%)  1s")
	b.Done()
	assert.True(t, strings.HasSuffix(buf.String(), "\r\x1b[K"), "the line is erased at the end")
	buf.Reset()
	b.Done()
	assert.Empty(t, buf.String(), "erasing twice writes nothing")

	u := NewOn(&buf, true, "resetting", 0)
	u.now = func() time.Time { return u.start.Add(2 * time.Second) }
	u.Tick()
	assert.Equal(t, "\rresetting  2s\x1b[K", buf.String())
}

func TestConcurrentAdds(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	b := NewOn(lockedWriter{&mu, &buf}, true, "x", 800)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Add(1)
			}
		}()
	}
	wg.Wait()
	b.mu.Lock()
	assert.Equal(t, int64(800), b.done)
	b.mu.Unlock()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
