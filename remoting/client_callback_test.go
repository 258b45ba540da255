package remoting

import (
	"context"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutinesCreated is how many goroutines the process has started so far,
// or 0 where the runtime does not count them.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// BenchmarkInvokeAsyncSenders is the benchmark tool's async send shape: 16
// senders share a window of calls in flight on one connection, 1 KiB
// each, and every callback frees a slot. Callbacks are short and arrive
// in bursts (one read holds many responses), so how they are handed to
// goroutines is a visible share of the client's CPU.
func BenchmarkInvokeAsyncSenders(b *testing.B) {
	s := MustStartServer(b, ServerConfig{}, nil)
	cl := MustNewClient(b, ClientConfig{})
	body := make([]byte, 1024)
	for _, inFlight := range []int{64, 1024} {
		b.Run("inflight"+strconv.Itoa(inFlight), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			slots := make(chan struct{}, inFlight)
			var done sync.WaitGroup
			var failed atomic.Pointer[error]
			done.Add(b.N)
			cb := func(_ *Command, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				<-slots
				done.Done()
			}
			var next atomic.Int64
			var senders sync.WaitGroup
			b.ResetTimer()
			cpu, created := processCPU(), goroutinesCreated()
			for range 16 {
				senders.Add(1)
				go func() {
					defer senders.Done()
					for next.Add(1) <= int64(b.N) {
						slots <- struct{}{}
						if err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, body), 10*time.Second, cb); err != nil {
							failed.CompareAndSwap(nil, &err)
							<-slots
							done.Done()
						}
					}
				}()
			}
			senders.Wait()
			done.Wait()
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") // client and server
			b.ReportMetric(float64(goroutinesCreated()-created)/float64(b.N), "goroutines/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
		})
	}
}

// callbackWorkers is how many callback workers cl has running.
func callbackWorkers(cl *Client) int {
	cl.cbq.mu.Lock()
	defer cl.cbq.mu.Unlock()
	return cl.cbq.workers
}

// Callbacks that wait for a later callback must not deadlock: with every
// worker blocked on the gate and the gate's callback queued behind them, a
// plain bounded pool would hang here; the rescue gives the queued
// callbacks goroutines of their own. Driven through runCallback so the
// gate is queued last for sure.
func TestClientCallbacksWaitingForLaterOneDoNotDeadlock(t *testing.T) {
	cl := MustNewClient(t, ClientConfig{})
	const waiters = 3 * maxCallbackWorkers
	gate := make(chan struct{})
	var released atomic.Int32
	var done sync.WaitGroup
	done.Add(waiters + 1)
	start := time.Now()
	cl.wg.Add(1) // runCallback's callers are counted, as the read loops are
	for range waiters {
		cl.runCallback(callbackTask{cb: func(*Command, error) {
			defer done.Done()
			select {
			case <-gate:
				released.Add(1)
			case <-time.After(5 * time.Second):
			}
		}})
	}
	cl.runCallback(callbackTask{cb: func(*Command, error) {
		defer done.Done()
		close(gate)
	}})
	cl.wg.Done()
	done.Wait()
	assert.Equal(t, int32(waiters), released.Load(), "callbacks gave up waiting for the gate")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.LessOrEqual(t, callbackWorkers(cl), maxCallbackWorkers)
}

// The same over a connection: InvokeAsync callbacks block until the
// callback of a call answered after them has run.
func TestClientAsyncCallbacksWaitingForLaterCall(t *testing.T) {
	s := mustStartDelayServer(t)
	cl := MustNewClient(t, ClientConfig{})
	const waiters = 2 * maxCallbackWorkers
	gate := make(chan struct{})
	var released atomic.Int32
	var done sync.WaitGroup
	done.Add(waiters + 1)
	for range waiters {
		require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil), 5*time.Second,
			func(_ *Command, err error) {
				defer done.Done()
				assert.NoError(t, err)
				select {
				case <-gate:
					released.Add(1)
				case <-time.After(5 * time.Second):
				}
			}))
	}
	require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), delayReq(50*time.Millisecond), 5*time.Second,
		func(_ *Command, err error) {
			defer done.Done()
			assert.NoError(t, err)
			close(gate)
		}))
	done.Wait()
	assert.Equal(t, int32(waiters), released.Load(), "callbacks gave up waiting for the later call")
}

// Short callbacks under load reuse the workers: the queue is drained by
// workers that finish, not by a goroutine per callback, and Close leaves
// none of them running.
func TestClientCallbackQueueDrainsAndStops(t *testing.T) {
	cl := NewClient(ClientConfig{})
	const n = 2000
	var ran atomic.Int32
	cl.wg.Add(1)
	for range n {
		cl.runCallback(callbackTask{cb: func(*Command, error) { ran.Add(1) }})
	}
	cl.wg.Done()
	require.Eventually(t, func() bool { return ran.Load() == n }, 5*time.Second, time.Millisecond)
	cl.cbq.mu.Lock()
	assert.Zero(t, cl.cbq.n)
	assert.Equal(t, uint64(n), cl.cbq.popped)
	for _, task := range cl.cbq.ring {
		assert.Nil(t, task.cb, "the queue holds on to a finished task")
	}
	cl.cbq.mu.Unlock()
	require.NoError(t, cl.Close())
	assert.Zero(t, callbackWorkers(cl))
}
