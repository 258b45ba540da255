package remoting

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientInvokeAsync(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	const n = 100
	var wg sync.WaitGroup
	var ok atomic.Int32
	wg.Add(n)
	for i := range n {
		body := []byte{byte(i)}
		err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, body), 3*time.Second,
			func(resp *Command, err error) {
				defer wg.Done()
				if assert.NoError(t, err) && assert.Equal(t, Success, resp.ResponseCode()) && assert.Equal(t, body, resp.Body) {
					ok.Add(1)
				}
			})
		require.NoError(t, err)
	}
	wg.Wait()
	assert.Equal(t, int32(n), ok.Load())
}

func TestClientTimeouts(t *testing.T) {
	release := make(chan struct{})
	const slow RequestCode = 9100
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.Handle(slow, s.NewPool("slow", 2, 8), func(c *Conn, req *Command) (*Command, error) {
			<-release
			return NewResponse(req, Success, ""), nil
		})
	})
	defer close(release)
	cl := MustNewClient(t, ClientConfig{})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(slow, nil, nil))
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	done := make(chan error, 1)
	require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(slow, nil, nil), 100*time.Millisecond,
		func(_ *Command, err error) { done <- err }))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(3 * time.Second):
		t.Fatal("async callback never called")
	}

	// The connection stays usable after timeouts.
	resp := invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, []byte("still here")))
	assert.Equal(t, []byte("still here"), resp.Body)
}

func TestClientReconnectsAfterServerClose(t *testing.T) {
	var mu sync.Mutex
	var conns []*Conn
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.OnConnOpen(func(c *Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() })
	})
	cl := MustNewClient(t, ClientConfig{})
	invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil))
	mu.Lock()
	require.Len(t, conns, 1)
	require.NoError(t, conns[0].Close()) // asynchronous: the event loop closes it
	mu.Unlock()
	// Once the client's reader has seen the close, the next call dials afresh.
	require.Eventually(t, func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		cc := cl.conns[s.Addr()]
		return cc == nil || cc.isClosed()
	}, 5*time.Second, 5*time.Millisecond, "the client never saw the server close the connection")
	resp := invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil))
	assert.Equal(t, Success, resp.ResponseCode())
	mu.Lock()
	assert.Len(t, conns, 2)
	mu.Unlock()
}

func TestClientPendingCallsFailOnClose(t *testing.T) {
	release := make(chan struct{})
	const slow RequestCode = 9101
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.Handle(slow, s.NewPool("slow", 1, 8), func(c *Conn, req *Command) (*Command, error) {
			<-release
			return nil, nil
		})
	})
	defer close(release)
	cl := NewClient(ClientConfig{})
	errs := make(chan error, 1)
	go func() {
		_, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(slow, nil, nil))
		errs <- err
	}()
	require.Eventually(t, func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, cc := range cl.conns {
			cc.mu.Lock()
			n := len(cc.pending)
			cc.mu.Unlock()
			return n == 1
		}
		return false
	}, 3*time.Second, 5*time.Millisecond)
	require.NoError(t, cl.Close())
	assert.ErrorIs(t, <-errs, ErrConnClosed)
	_, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil))
	assert.ErrorIs(t, err, ErrClientClosed)
}

func TestClientDialError(t *testing.T) {
	cl := MustNewClient(t, ClientConfig{DialTimeout: 500 * time.Millisecond})
	_, err := cl.InvokeSync(context.Background(), "127.0.0.1:1", NewRequest(echoCode, nil, nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
}

// BenchmarkRoundTrip measures request/response round trips through the gnet
// server and our client over loopback, with 1 and 16 callers in flight, for
// a processor on a worker pool and one run inline on the event loop.
func BenchmarkRoundTrip(b *testing.B) {
	const inlineEcho RequestCode = 9998
	s := MustStartServer(b, ServerConfig{}, func(s *Server) {
		echo := func(c *Conn, req *Command) (*Command, error) {
			resp := NewResponse(req, Success, "")
			resp.ExtFields = req.ExtFields
			resp.Body = req.Body // encoded into the reply before echo returns
			return resp, nil
		}
		s.HandleInline(inlineEcho, s.NewPool("inline", 1, 16), echo, echo)
	})
	cl := MustNewClient(b, ClientConfig{})
	body := make([]byte, 128)
	for _, code := range []RequestCode{echoCode, inlineEcho} {
		for _, par := range []int{1, 16} {
			name := map[int]string{1: "serial", 16: "parallel16"}[par] + map[RequestCode]string{echoCode: "-pool", inlineEcho: "-inline"}[code]
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(par)
				if par == 1 {
					for b.Loop() {
						if _, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(code, nil, body)); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(code, nil, body)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rt/s")
			})
		}
	}
}

// TestClientRawResponses checks a caller that sends its fields in RawExt
// gets a binary answer's fields there too (a JSON answer's in ExtFields),
// and a caller that sends a map always gets a map, sync or async.
func TestClientRawResponses(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil) // echoes the fields
	cl := MustNewClient(t, ClientConfig{})
	want := map[string]string{"k": "v", "n": "42"}
	rawReq := func(st SerializeType) *Command {
		req := NewRequest(echoCode, nil, nil)
		req.RawExt = AppendIntField(AppendField(nil, "k", "v"), "n", 42)
		req.SerializeType = st
		return req
	}
	mapReq := func(st SerializeType) *Command {
		req := NewRequest(echoCode, maps.Clone(want), nil)
		req.SerializeType = st
		return req
	}
	async := func(req *Command) *Command {
		got := make(chan *Command, 1)
		require.NoError(t, cl.InvokeAsync(context.Background(), s.Addr(), req, 3*time.Second, func(resp *Command, err error) {
			assert.NoError(t, err)
			got <- resp
		}))
		select {
		case resp := <-got:
			return resp
		case <-time.After(5 * time.Second):
			t.Fatal("no callback")
			return nil
		}
	}
	for _, call := range []struct {
		name   string
		invoke func(*Command) *Command
	}{{"sync", func(req *Command) *Command { return invoke(t, cl, s.Addr(), req) }}, {"async", async}} {
		t.Run(call.name, func(t *testing.T) {
			resp := call.invoke(rawReq(RocketMQSerialize))
			assert.Nil(t, resp.ExtFields)
			assert.NotNil(t, resp.RawExt)
			assert.Equal(t, want, resp.FieldMap())

			resp = call.invoke(rawReq(JSONSerialize))
			assert.Equal(t, want, resp.ExtFields, "a JSON answer comes as a map")
			assert.Nil(t, resp.RawExt)

			for _, st := range []SerializeType{RocketMQSerialize, JSONSerialize} {
				resp = call.invoke(mapReq(st))
				assert.Equal(t, want, resp.ExtFields, st.String())
				assert.Nil(t, resp.RawExt, st.String())
			}
		})
	}
}
