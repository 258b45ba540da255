package remoting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkInvokeAsync keeps a fixed number of InvokeAsync calls in flight
// over loopback, each callback sending the next request, as the SDK's
// SendAsync does: the client's per-call costs (call bookkeeping, timeout,
// callback dispatch) show up here rather than a caller's wait.
func BenchmarkInvokeAsync(b *testing.B) {
	s := MustStartServer(b, ServerConfig{}, nil)
	cl := MustNewClient(b, ClientConfig{})
	body := make([]byte, 128)
	for _, inFlight := range []int{1, 16} {
		b.Run(map[int]string{1: "inflight1", 16: "inflight16"}[inFlight], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			// Each finished call hands a token back; the loop below turns
			// every token into the next call, so exactly b.N calls are sent.
			tokens := make(chan error, inFlight)
			for range inFlight {
				tokens <- nil
			}
			cb := func(_ *Command, err error) { tokens <- err }
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				if err := <-tokens; err != nil {
					b.Fatal(err)
				}
				if err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, body), 10*time.Second, cb); err != nil {
					b.Fatal(err)
				}
			}
			for range inFlight {
				if err := <-tokens; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") // client and server
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkInvokeSyncCPU is BenchmarkRoundTrip's parallel16-pool case with
// the process's CPU time per call reported, the figure the client's per-call
// costs move.
func BenchmarkInvokeSyncCPU(b *testing.B) {
	s := MustStartServer(b, ServerConfig{}, nil)
	cl := MustNewClient(b, ClientConfig{})
	body := make([]byte, 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.SetParallelism(16)
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(echoCode, nil, body)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") // client and server
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// delayedEcho answers after the delay in the request's "delayMs" field,
// without holding a pool worker meanwhile.
const delayedEcho RequestCode = 9102

func mustStartDelayServer(t *testing.T) *Server {
	return MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.Handle(delayedEcho, s.NewPool("delay", 2, 4096), func(c *Conn, req *Command) (*Command, error) {
			ms, _ := strconv.Atoi(req.ExtFields["delayMs"])
			resp := NewResponse(req, Success, "")
			time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { _ = c.Reply(req, resp) })
			return nil, nil
		})
	})
}

func delayReq(d time.Duration) *Command {
	return NewRequest(delayedEcho, map[string]string{"delayMs": strconv.Itoa(int(d / time.Millisecond))}, nil)
}

// Responses, the timeout scan and connection closes race for the same calls:
// for every call InvokeAsync accepted, cb runs exactly once, and for every
// call it refused, never.
func TestClientAsyncCompletesExactlyOnce(t *testing.T) {
	s := mustStartDelayServer(t)
	delays := []time.Duration{0, 20 * time.Millisecond, 45 * time.Millisecond, 60 * time.Millisecond, 110 * time.Millisecond}
	timeouts := []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, time.Second}
	for round := range 3 {
		cl := NewClient(ClientConfig{})
		const senders, each = 8, 60
		var calls [senders * each]struct {
			accepted atomic.Bool
			cbs      atomic.Int32
			err      atomic.Value // error kind seen by cb
		}
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					k := g*each + i
					c := &calls[k]
					err := cl.InvokeAsync(context.Background(), s.Addr(), delayReq(delays[k%len(delays)]), timeouts[(k/len(delays))%len(timeouts)],
						func(resp *Command, err error) {
							if c.cbs.Add(1) != 1 {
								t.Errorf("call %d: callback ran twice", k)
							}
							switch {
							case err == nil && resp != nil:
								c.err.Store("ok")
							case errors.Is(err, context.DeadlineExceeded):
								c.err.Store("timeout")
							case errors.Is(err, ErrConnClosed):
								c.err.Store("closed")
							default:
								t.Errorf("call %d: resp %v, err %v", k, resp, err)
							}
						})
					c.accepted.Store(err == nil)
					if i == each/2 && g == 0 && round == 1 {
						cl.CloseConn(s.Addr()) // fails what is pending; later calls dial again
					}
					if i%10 == 0 {
						time.Sleep(time.Duration(k%7) * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		// Let answers land and calls time out for a while, then fail the rest.
		time.Sleep([]time.Duration{130 * time.Millisecond, 60 * time.Millisecond, 0}[round])
		require.NoError(t, cl.Close()) // fails the rest; returns after every callback
		seen := map[string]int{}
		for k := range calls {
			c := &calls[k]
			if c.accepted.Load() {
				if assert.Equal(t, int32(1), c.cbs.Load(), "call %d", k) {
					seen[c.err.Load().(string)]++
				}
			} else {
				assert.Zero(t, c.cbs.Load(), "call %d was refused but its callback ran", k)
				seen["refused"]++
			}
		}
		t.Logf("round %d: %v", round, seen)
		assert.Zero(t, callbackWorkers(cl), "callback workers left after Close")
	}
}

// A callback may call InvokeSync and InvokeAsync on the same connection and
// block until the nested call's callback ran, even with every worker doing
// the same: nested callbacks must not wait behind blocked workers.
func TestClientCallbacksMayInvokeAndBlock(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	const chains = 3 * maxCallbackWorkers
	var wg sync.WaitGroup
	wg.Add(chains)
	for range chains {
		err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, []byte("outer")), 5*time.Second,
			func(resp *Command, err error) {
				defer wg.Done()
				if !assert.NoError(t, err) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = cl.InvokeSync(ctx, s.Addr(), NewRequest(echoCode, nil, []byte("sync")))
				if !assert.NoError(t, err) {
					return
				}
				nested := make(chan error, 1)
				err = cl.InvokeAsync(ctx, s.Addr(), NewRequest(echoCode, nil, []byte("nested")), 5*time.Second,
					func(_ *Command, err error) { nested <- err })
				if !assert.NoError(t, err) {
					return
				}
				select {
				case err := <-nested:
					assert.NoError(t, err)
				case <-ctx.Done():
					t.Error("nested callback never ran")
				}
			})
		require.NoError(t, err)
	}
	wg.Wait()
}

// Slow callbacks must not stall the read loop: a sync call on the same
// connection is answered while every worker (and more) is blocked.
func TestClientSlowCallbacksDoNotStallReads(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	release := make(chan struct{})
	const blocked = 2 * maxCallbackWorkers
	var started, done sync.WaitGroup
	started.Add(blocked)
	done.Add(blocked)
	for range blocked {
		require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil), 5*time.Second,
			func(*Command, error) {
				defer done.Done()
				started.Done()
				<-release
			}))
	}
	started.Wait()
	assert.LessOrEqual(t, callbackWorkers(cl), maxCallbackWorkers)
	resp := invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, []byte("through")))
	assert.Equal(t, []byte("through"), resp.Body)
	close(release)
	done.Wait()
}

// Sync calls are reused; one whose caller gave up while its response was on
// the way must never hand that response to a later call.
func TestClientSyncCallsNeverGetStaleResponses(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	const callers, each = 8, 150
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Abandoned early, so its answer usually arrives late.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((g*each+i)%300)*time.Microsecond)
				_, _ = cl.InvokeSync(ctx, s.Addr(), NewRequest(echoCode, nil, []byte(fmt.Sprintf("stale %d %d", g, i))))
				cancel()
				want := []byte(fmt.Sprintf("fresh %d %d", g, i))
				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(echoCode, nil, want))
				cancel()
				if !assert.NoError(t, err) || !assert.Equal(t, string(want), string(resp.Body)) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// The read deadline moves at most once per slack, yet a busy connection
// stays open past IdleTimeout and a silent one closes soon after it.
func TestClientIdleTimeout(t *testing.T) {
	var opened atomic.Int32
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.OnConnOpen(func(*Conn) { opened.Add(1) })
	})
	const idle = 500 * time.Millisecond
	cl := MustNewClient(t, ClientConfig{IdleTimeout: idle})
	noConns := func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return len(cl.conns) == 0
	}
	// sent is when the last request left: its answer, the last frame the
	// connection read, cannot have come earlier.
	var sent time.Time
	// busy calls every idle/6 for 3*idle on a fresh connection and says
	// whether the connection stayed open. A round where an answer came
	// more than idle/2 after the previous request left is not judged: a
	// stalled machine, not the client, may have let the connection idle.
	busy := func() (judged bool) {
		sent = time.Now()
		invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil))
		conns := opened.Load()
		for start := time.Now(); time.Since(start) < 3*idle; {
			time.Sleep(idle / 6)
			prev := sent
			sent = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(echoCode, nil, nil))
			cancel()
			if gap := time.Since(prev); gap > idle/2 {
				t.Logf("answer %v after the previous request: round not judged", gap)
				return false
			}
			require.NoError(t, err)
		}
		assert.Equal(t, conns, opened.Load(), "a busy connection was closed as idle")
		return true
	}
	judged := false
	for round := 0; round < 5 && !judged; round++ {
		judged = busy()
		require.Eventually(t, noConns, 10*time.Second, 5*time.Millisecond, "an idle connection stayed open")
	}
	if !judged {
		t.Log("every round stalled: the busy connection was not judged")
	}
	assert.GreaterOrEqual(t, time.Since(sent), idle-idle/16-10*time.Millisecond, "closed before it was idle")
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

func TestClientWriteDeadlineReuse(t *testing.T) {
	nc := &deadlineConn{}
	cc := &clientConn{nc: nc}
	cc.setWriteDeadline(10 * time.Second)
	cc.setWriteDeadline(10 * time.Second) // a moment later: within the slack, kept
	require.Len(t, nc.set, 1)
	cc.setWriteDeadline(time.Second) // shorter: must move earlier
	require.Len(t, nc.set, 2)
	assert.WithinDuration(t, time.Now().Add(time.Second), nc.set[1], 100*time.Millisecond)
	cc.setWriteDeadline(10 * time.Second) // far later than the one set: moved
	require.Len(t, nc.set, 3)
	cc.wdl = time.Now().Add(8 * time.Second) // older than the slack allows
	cc.setWriteDeadline(10 * time.Second)
	assert.Len(t, nc.set, 4)
}

// Close stops the timeout scan and the callback workers; a closed client
// starts neither.
func TestClientCloseStopsBackgroundWork(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := NewClient(ClientConfig{})
	var wg sync.WaitGroup
	wg.Add(20)
	for range 20 {
		require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil), time.Second,
			func(*Command, error) { wg.Done() }))
	}
	wg.Wait()
	assert.Positive(t, callbackWorkers(cl))
	require.NoError(t, cl.Close()) // waits for the scan and the workers
	assert.Zero(t, callbackWorkers(cl))
	err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil), time.Second,
		func(*Command, error) { t.Error("callback after Close") })
	assert.ErrorIs(t, err, ErrClientClosed)

	closed := NewClient(ClientConfig{})
	require.NoError(t, closed.Close())
	closed.startTimeoutScan()
	assert.False(t, closed.scanning.Load(), "scan started on a closed client")
}
