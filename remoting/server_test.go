package remoting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet starts a process-wide goroutine pool (ants) on first use; it is
		// not ours to stop.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

const echoCode RequestCode = 9999

// MustStartServer starts a server on a free loopback port with an echo
// processor and stops it when the test ends.
func MustStartServer(t testing.TB, cfg ServerConfig, setup func(s *Server)) *Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s := NewServer(cfg)
	pool := s.NewPool("default", 4, 1024)
	s.Handle(echoCode, pool, func(c *Conn, req *Command) (*Command, error) {
		resp := NewResponse(req, Success, "")
		resp.ExtFields = req.ExtFields
		resp.Body = req.Body
		return resp, nil
	})
	if setup != nil {
		setup(s)
	}
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
	})
	return s
}

func MustNewClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	cl := NewClient(cfg)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func invoke(t *testing.T, cl *Client, addr string, req *Command) *Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cl.InvokeSync(ctx, addr, req)
	require.NoError(t, err)
	return resp
}

func TestServerEchoBothSerializations(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	for _, st := range []SerializeType{JSONSerialize, RocketMQSerialize} {
		req := NewRequest(echoCode, map[string]string{"k": "v"}, []byte("body"))
		req.SerializeType = st
		resp := invoke(t, cl, s.Addr(), req)
		assert.Equal(t, Success, resp.ResponseCode())
		assert.True(t, resp.IsResponse())
		assert.Equal(t, req.Opaque, resp.Opaque)
		assert.Equal(t, st, resp.SerializeType, "answer in the request's serialize type")
		assert.Equal(t, "v", resp.ExtFields["k"])
		assert.Equal(t, []byte("body"), resp.Body)
	}
}

func TestServerUnknownCodeEchoesOpaque(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	conn := rawConn(t, s.Addr())
	writeRaw(t, conn, &Command{Code: 31337, Opaque: 4242})
	resp := readRaw(t, conn)
	assert.Equal(t, RequestCodeNotSupported, resp.ResponseCode())
	assert.Equal(t, int32(4242), resp.Opaque)
	assert.True(t, resp.IsResponse())
	assert.Contains(t, resp.Remark, "31337")
}

func TestServerFullPoolAnswersSystemBusy(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	const slowCode RequestCode = 9000
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		pool := s.NewPool("slow", 1, 1)
		s.Handle(slowCode, pool, func(c *Conn, req *Command) (*Command, error) {
			started.Add(1)
			<-release
			return NewResponse(req, Success, ""), nil
		})
	})
	defer close(release)
	conn := rawConn(t, s.Addr())
	writeRaw(t, conn, &Command{Code: int32(slowCode), Opaque: 1}) // runs, blocks the only worker
	require.Eventually(t, func() bool { return started.Load() == 1 }, 3*time.Second, 5*time.Millisecond)
	writeRaw(t, conn, &Command{Code: int32(slowCode), Opaque: 2}) // fills the queue
	writeRaw(t, conn, &Command{Code: int32(slowCode), Opaque: 3}) // refused
	resp := readRaw(t, conn)
	assert.Equal(t, SystemBusy, resp.ResponseCode())
	assert.Equal(t, int32(3), resp.Opaque)
}

func TestServerProcessorPanicBecomesSystemError(t *testing.T) {
	const boom RequestCode = 9001
	const fails RequestCode = 9002
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		pool := s.NewPool("p", 1, 4)
		s.Handle(boom, pool, func(c *Conn, req *Command) (*Command, error) {
			var m map[string]int
			m["x"] = 1 // nil map write
			return nil, nil
		})
		s.Handle(fails, pool, func(c *Conn, req *Command) (*Command, error) {
			return nil, errors.New("disk on fire")
		})
	})
	cl := MustNewClient(t, ClientConfig{})
	resp := invoke(t, cl, s.Addr(), NewRequest(boom, nil, nil))
	assert.Equal(t, SystemError, resp.ResponseCode())
	resp = invoke(t, cl, s.Addr(), NewRequest(fails, nil, nil))
	assert.Equal(t, SystemError, resp.ResponseCode())
	assert.Equal(t, "disk on fire", resp.Remark)
	// The server still serves.
	resp = invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil))
	assert.Equal(t, Success, resp.ResponseCode())
}

func TestServerMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	good := MustNewClient(t, ClientConfig{})
	cases := map[string][]byte{
		"length over 16 MiB":      binary.BigEndian.AppendUint32(nil, MaxFrameSize+1),
		"negative length":         {0xFF, 0xFF, 0xFF, 0xF0},
		"header beyond frame":     append(binary.BigEndian.AppendUint32(nil, 6), 0, 0, 0, 100, '{', '}'),
		"unknown serialize type":  append(binary.BigEndian.AppendUint32(nil, 6), 9, 0, 0, 2, '{', '}'),
		"invalid json header":     append(binary.BigEndian.AppendUint32(nil, 9), 0, 0, 0, 5, '{', '"', 'c', 'o', 'd'),
		"binary header truncated": append(binary.BigEndian.AppendUint32(nil, 7), 1, 0, 0, 3, 0, 1, 2),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			bad := rawConn(t, s.Addr())
			_, err := bad.Write(payload)
			require.NoError(t, err)
			// Another client is served meanwhile.
			resp := invoke(t, good, s.Addr(), NewRequest(echoCode, nil, []byte(name)))
			assert.Equal(t, []byte(name), resp.Body)
			// The bad one is closed by the server.
			_ = bad.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = bad.Read(make([]byte, 1))
			assert.ErrorIs(t, err, io.EOF, "server must close the offending connection")
		})
	}
}

func TestServerPartialFramesAreReassembled(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	conn := rawConn(t, s.Addr())
	frame, err := EncodeFrame(&Command{Code: int32(echoCode), Opaque: 77, Body: []byte("split across writes")})
	require.NoError(t, err)
	for i := range frame { // one byte at a time
		_, err := conn.Write(frame[i : i+1])
		require.NoError(t, err)
	}
	resp := readRaw(t, conn)
	assert.Equal(t, int32(77), resp.Opaque)
	assert.Equal(t, []byte("split across writes"), resp.Body)
}

func TestServerManyFramesInOneWrite(t *testing.T) {
	s := MustStartServer(t, ServerConfig{MaxFramesPerWake: 4}, nil)
	conn := rawConn(t, s.Addr())
	var batch []byte
	const n = 50 // more than MaxFramesPerWake: the rest must be picked up by a wake
	for i := range n {
		var err error
		batch, err = AppendFrame(batch, &Command{Code: int32(echoCode), Opaque: int32(i + 1)})
		require.NoError(t, err)
	}
	_, err := conn.Write(batch)
	require.NoError(t, err)
	seen := map[int32]bool{}
	r := bufio.NewReader(conn)
	for range n {
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := ReadCommand(r)
		require.NoError(t, err)
		seen[resp.Opaque] = true
	}
	assert.Len(t, seen, n)
}

func TestOnewayRequestGetsNoResponse(t *testing.T) {
	got := make(chan string, 1)
	const note RequestCode = 9003
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.Handle(note, s.NewPool("n", 1, 4), func(c *Conn, req *Command) (*Command, error) {
			got <- req.ExtFields["v"]
			return NewResponse(req, Success, ""), nil
		})
	})
	conn := rawConn(t, s.Addr())
	writeRaw(t, conn, &Command{Code: int32(note), Opaque: 1, Flag: flagOneway, ExtFields: map[string]string{"v": "x"}})
	writeRaw(t, conn, &Command{Code: int32(echoCode), Opaque: 2})
	assert.Equal(t, "x", <-got)
	resp := readRaw(t, conn)
	assert.Equal(t, int32(2), resp.Opaque, "the oneway request must not be answered")
}

func TestServerInvokesClient(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.OnConnOpen(func(c *Conn) { conns <- c })
	})
	cl := MustNewClient(t, ClientConfig{})
	const check RequestCode = CheckTransactionState
	oneway := make(chan string, 1)
	cl.RegisterHandler(check, func(addr string, req *Command) *Command {
		if req.IsOneway() {
			oneway <- req.ExtFields["msgId"]
			return nil
		}
		resp := NewResponse(req, Success, "checked "+req.ExtFields["msgId"])
		return resp
	})
	invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil)) // connect
	c := <-conns
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, NewRequest(check, map[string]string{"msgId": "M1"}, nil))
	require.NoError(t, err)
	assert.Equal(t, "checked M1", resp.Remark)

	require.NoError(t, c.InvokeOneway(NewRequest(check, map[string]string{"msgId": "M2"}, nil)))
	assert.Equal(t, "M2", <-oneway)

	// An unregistered code comes back as not supported.
	resp, err = c.Invoke(ctx, NewRequest(NotifyConsumerIdsChanged, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, RequestCodeNotSupported, resp.ResponseCode())
}

func TestServerClosesIdleConnections(t *testing.T) {
	closed := make(chan struct{})
	s := MustStartServer(t, ServerConfig{IdleTimeout: 200 * time.Millisecond}, func(s *Server) {
		s.OnConnClose(func(*Conn) { close(closed) })
	})
	conn := rawConn(t, s.Addr())
	writeRaw(t, conn, &Command{Code: int32(echoCode), Opaque: 1})
	readRaw(t, conn)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection was not closed")
	}
}

func TestShutdownTwiceAndBusyWhileStopping(t *testing.T) {
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0"})
	s.NewPool("p", 1, 1)
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, s.Shutdown(ctx))
	_, err := net.DialTimeout("tcp", s.Addr(), 500*time.Millisecond)
	assert.Error(t, err, "listener must be closed after shutdown")
}

func TestStartFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	s := NewServer(ServerConfig{Addr: ln.Addr().String()})
	err = s.Start()
	require.Error(t, err)
	assert.NoError(t, s.Shutdown(context.Background()))
}

func rawConn(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func writeRaw(t *testing.T, c net.Conn, cmd *Command) {
	t.Helper()
	b, err := EncodeFrame(cmd)
	require.NoError(t, err)
	_, err = c.Write(b)
	require.NoError(t, err)
}

func readRaw(t *testing.T, c net.Conn) *Command {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	cmd, err := ReadCommand(c)
	require.NoError(t, err)
	return cmd
}

func TestReplyWithWritesBodyIntoFrame(t *testing.T) {
	const pull, pullCold RequestCode = 9004, 9005
	handler := func(own bool) ProcessorFunc {
		return func(c *Conn, req *Command) (*Command, error) {
			parts := [][]byte{[]byte("rec1"), []byte("record-2")}
			resp := NewResponse(req, Success, "")
			resp.SetExt("nextBeginOffset", "2")
			reply := c.ReplyWith
			if own {
				reply = c.ReplyWithOwnBuffer
			}
			err := reply(req, resp, 12, func(b []byte) []byte {
				for _, p := range parts {
					b = append(b, p...)
				}
				return b
			})
			return nil, err
		}
	}
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		pool := s.NewPool("p", 1, 4)
		s.Handle(pull, pool, handler(false))
		s.Handle(pullCold, pool, handler(true))
	})
	cl := MustNewClient(t, ClientConfig{})
	for _, code := range []RequestCode{pull, pullCold} {
		resp := invoke(t, cl, s.Addr(), NewRequest(code, nil, nil))
		assert.Equal(t, []byte("rec1record-2"), resp.Body, "code %d", code)
		assert.Equal(t, "2", resp.ExtFields["nextBeginOffset"])
	}

	_, err := AppendFrameWith(nil, &Command{}, 3, func(b []byte) []byte { return append(b, 'x') })
	assert.Error(t, err, "a body writer that breaks its promise is caught")
}

func TestInlineRoutes(t *testing.T) {
	const (
		inlineEcho RequestCode = 9101 // answered on the loop
		deferred   RequestCode = 9102 // handed to the pool by the inline processor
		inlineBoom RequestCode = 9103 // panics on the loop
	)
	var onPool atomic.Int32
	var mu sync.Mutex
	var kept [][]byte
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	s := MustStartServer(t, ServerConfig{MaxFramesPerWake: 8, Logger: quiet}, func(s *Server) {
		pool := s.NewPool("inline-fallback", 2, 64)
		echo := func(c *Conn, req *Command) (*Command, error) {
			resp := NewResponse(req, Success, "")
			resp.Body = req.Body
			return resp, nil
		}
		s.HandleInline(inlineEcho, pool, echo, func(c *Conn, req *Command) (*Command, error) {
			return nil, errors.New("the pool must not run a request its inline processor answered")
		})
		s.HandleInline(deferred, pool, func(c *Conn, req *Command) (*Command, error) {
			return nil, ErrRunOnPool
		}, func(c *Conn, req *Command) (*Command, error) {
			onPool.Add(1)
			// A request handed to the pool owns its body: it is still intact
			// after the loop has read (and reused its buffer for) later frames.
			mu.Lock()
			kept = append(kept, req.Body)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			resp := NewResponse(req, Success, "")
			resp.Body = req.Body
			return resp, nil
		})
		s.HandleInline(inlineBoom, pool, func(c *Conn, req *Command) (*Command, error) {
			panic("inline processor bug")
		}, echo)
	})
	conn := rawConn(t, s.Addr())
	// Many frames in one write, mixing the three routes, so inline answers,
	// pool answers and the loop's input buffer all interleave.
	const n = 60
	var batch []byte
	for i := range n {
		code := []RequestCode{inlineEcho, deferred, inlineBoom}[i%3]
		var err error
		batch, err = AppendFrame(batch, &Command{Code: int32(code), Opaque: int32(i + 1), Body: []byte(fmt.Sprintf("body-%03d", i))})
		require.NoError(t, err)
	}
	_, err := conn.Write(batch)
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	for range n {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := ReadCommand(r)
		require.NoError(t, err)
		i := int(resp.Opaque) - 1
		require.True(t, i >= 0 && i < n, "opaque %d", resp.Opaque)
		if i%3 == 2 {
			assert.Equal(t, SystemError, resp.ResponseCode(), "a panic on the loop answers SYSTEM_ERROR")
			continue
		}
		assert.Equal(t, Success, resp.ResponseCode(), resp.Remark)
		assert.Equal(t, fmt.Sprintf("body-%03d", i), string(resp.Body))
	}
	assert.Equal(t, int32(n/3), onPool.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, kept, n/3)
	for j, b := range kept { // the pool runs one at a time per worker; order is not promised
		assert.Regexp(t, `^body-\d{3}$`, string(b), "kept body %d", j)
	}
	// The server still serves after the inline panics.
	cl := MustNewClient(t, ClientConfig{})
	assert.Equal(t, []byte("after"), invoke(t, cl, s.Addr(), NewRequest(inlineEcho, nil, []byte("after"))).Body)
}

// A request an inline processor hands to the pool keeps its body even after
// the event loop has read later frames into the same input buffer.
func TestInlineFallbackOwnsBody(t *testing.T) {
	const (
		inlineEcho RequestCode = 9111
		deferred   RequestCode = 9112
	)
	gate := make(chan struct{})
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		pool := s.NewPool("fallback", 1, 4)
		echo := func(c *Conn, req *Command) (*Command, error) {
			resp := NewResponse(req, Success, "")
			resp.Body = req.Body
			return resp, nil
		}
		s.HandleInline(inlineEcho, pool, echo, echo)
		s.HandleInline(deferred, pool, func(c *Conn, req *Command) (*Command, error) {
			return nil, ErrRunOnPool
		}, func(c *Conn, req *Command) (*Command, error) {
			<-gate
			return echo(c, req)
		})
	})
	send, read := frameConn(t, s.Addr())
	write := func(code RequestCode, opaque int32, body []byte) {
		send(&Command{Code: int32(code), Opaque: opaque, Body: body})
	}
	want := bytes.Repeat([]byte("A"), 512)
	write(deferred, 1, want)
	for i := range 20 { // same-sized frames through the same buffer meanwhile
		write(inlineEcho, int32(100+i), bytes.Repeat([]byte("B"), 512))
		assert.Equal(t, int32(100+i), read().Opaque)
	}
	close(gate)
	resp := read()
	assert.Equal(t, int32(1), resp.Opaque)
	assert.Equal(t, want, resp.Body)
}

// A response to Conn.Invoke is the caller's: its body stays intact while the
// event loop reads later frames of the connection into the same buffer.
func TestServerInvokeResponseOwnsBody(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		s.OnConnOpen(func(c *Conn) { conns <- c })
	})
	cl := MustNewClient(t, ClientConfig{})
	want := bytes.Repeat([]byte("R"), 300)
	cl.RegisterHandler(GetConsumerRunningInfo, func(addr string, req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.Body = want
		return resp
	})
	invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil)) // connect
	c := <-conns
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, NewRequest(GetConsumerRunningInfo, nil, nil))
	require.NoError(t, err)
	for range 20 { // same-sized frames through the loop's buffer meanwhile
		invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, bytes.Repeat([]byte("x"), 300)))
	}
	assert.Equal(t, want, resp.Body)
}

// TestReadRawFields checks a route registered with ReadRawFields gets a
// binary header's fields in RawExt (and a JSON header's in ExtFields), and
// that a request handed to the pool owns its RawExt while later frames
// reuse the input buffer.
func TestReadRawFields(t *testing.T) {
	const (
		inlineRaw RequestCode = 9121
		deferred  RequestCode = 9122
	)
	gate := make(chan struct{})
	type seen struct {
		raw bool
		m   map[string]string
	}
	got := make(chan seen, 64)
	s := MustStartServer(t, ServerConfig{}, func(s *Server) {
		pool := s.NewPool("raw", 1, 4)
		echo := func(c *Conn, req *Command) (*Command, error) {
			got <- seen{raw: req.RawExt != nil && req.ExtFields == nil, m: req.FieldMap()}
			resp := NewResponse(req, Success, "")
			resp.ExtFields = req.ExtFields
			resp.RawExt = req.RawExt // encoded before the processor's turn ends
			return resp, nil
		}
		s.HandleInline(inlineRaw, pool, echo, echo)
		s.ReadRawFields(inlineRaw)
		s.HandleInline(deferred, pool, func(c *Conn, req *Command) (*Command, error) {
			return nil, ErrRunOnPool
		}, func(c *Conn, req *Command) (*Command, error) {
			<-gate
			return echo(c, req)
		})
		s.ReadRawFields(deferred)
	})
	assert.Panics(t, func() { s.ReadRawFields(RequestCode(4242)) }, "a code must be routed first")

	send, read := frameConn(t, s.Addr())
	write := func(code RequestCode, st SerializeType, opaque int32, ext map[string]string) {
		send(&Command{Code: int32(code), Opaque: opaque, ExtFields: ext, SerializeType: st})
	}
	fields := map[string]string{"a": "group", "b": "topic", "i": strings.Repeat("p", 300)}
	write(inlineRaw, RocketMQSerialize, 1, fields)
	assert.Equal(t, fields, read().ExtFields, "fields echoed from RawExt")
	assert.Equal(t, seen{raw: true, m: fields}, <-got)
	write(inlineRaw, JSONSerialize, 2, fields)
	assert.Equal(t, fields, read().ExtFields)
	assert.Equal(t, seen{raw: false, m: fields}, <-got)

	want := map[string]string{"a": strings.Repeat("A", 400)}
	write(deferred, RocketMQSerialize, 3, want)
	for i := range 20 { // same-sized frames through the same buffer meanwhile
		write(inlineRaw, RocketMQSerialize, int32(100+i), map[string]string{"a": strings.Repeat("B", 400)})
		assert.Equal(t, int32(100+i), read().Opaque)
		<-got
	}
	close(gate)
	resp := read()
	assert.Equal(t, int32(3), resp.Opaque)
	assert.Equal(t, want, resp.ExtFields)
	assert.Equal(t, seen{raw: true, m: want}, <-got)
}

// frameConn dials addr on a plain socket: send writes one command's frame,
// read returns the next frame the server writes (within 5 s).
func frameConn(t *testing.T, addr string) (send func(*Command), read func() *Command) {
	conn := rawConn(t, addr)
	r := bufio.NewReader(conn)
	send = func(cmd *Command) {
		frame, err := EncodeFrame(cmd)
		require.NoError(t, err)
		_, err = conn.Write(frame)
		require.NoError(t, err)
	}
	read = func() *Command {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := ReadCommand(r)
		require.NoError(t, err)
		return resp
	}
	return send, read
}

// startInlineAnswers starts a server answering code on the event loop (as
// the broker answers pulls of cached data) with bodyLen bytes written into
// the frame by body.
func startInlineAnswers(tb testing.TB, code RequestCode, bodyLen int, body func(req *Command, dst []byte) []byte) *Server {
	tb.Helper()
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	return MustStartServer(tb, ServerConfig{MaxFramesPerWake: 64, Logger: quiet}, func(s *Server) {
		pool := s.NewPool("p", 1, 4)
		answer := func(c *Conn, req *Command) (*Command, error) {
			err := c.ReplyWith(req, NewResponse(req, Success, ""), bodyLen, func(dst []byte) []byte { return body(req, dst) })
			return nil, err
		}
		s.HandleInline(code, pool, answer, answer)
	})
}

// Pull answers decoded in one turn are written in parts once they pass
// flushAtBytes, so the connection's write buffer stays small enough to be
// kept and reused instead of being grown from nothing on every turn.
func TestInlineLargeAnswersFlushEarly(t *testing.T) {
	const bigPull RequestCode = 9106
	const n, size = 16, 40 << 10
	s := startInlineAnswers(t, bigPull, size, func(req *Command, b []byte) []byte {
		for range size {
			b = append(b, byte(req.Opaque))
		}
		return b
	})
	conn := rawConn(t, s.Addr())
	var batch []byte
	for i := range n {
		var err error
		batch, err = AppendFrame(batch, &Command{Code: int32(bigPull), Opaque: int32(i + 1)})
		require.NoError(t, err)
	}
	_, err := conn.Write(batch)
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	for i := range n {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := ReadCommand(r)
		require.NoError(t, err)
		require.Equal(t, int32(i+1), resp.Opaque, "answers keep their order")
		require.Len(t, resp.Body, size)
		require.Equal(t, bytes.Repeat([]byte{byte(i + 1)}, size), resp.Body)
	}
	var sc *Conn
	s.conns.Range(func(_, v any) bool { sc = v.(*Conn); return false })
	require.NotNil(t, sc)
	sc.wmu.Lock()
	kept := max(cap(sc.wbuf), cap(sc.wspare))
	sc.wmu.Unlock()
	assert.NotZero(t, kept, "a write buffer is kept for the next turn")
	assert.LessOrEqual(t, kept, maxSpareConnBuf)
}

// writeCounter is a gnet.Conn that only counts writes (nothing else of it is
// called by flushQueued); with fail set, a write fails and closes the
// connection the way gnet does: OnClose runs before Write returns.
type writeCounter struct {
	gnet.Conn
	c      *Conn
	fail   bool
	writes int
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes++
	if w.fail {
		w.c.markClosed()
		return 0, errors.New("connection reset by peer")
	}
	return len(b), nil
}

// A write that fails in the middle of a turn closes the connection at once;
// what the turn queues after that must not be written, since gnet has
// released the connection and its descriptor may be reused.
func TestFlushQueuedSkipsClosedConnection(t *testing.T) {
	big := &Command{Code: 1, Body: make([]byte, flushAtBytes)}
	for _, fail := range []bool{false, true} {
		gc := &writeCounter{fail: fail}
		c := &Conn{gc: gc, pending: map[int32]chan *Command{}}
		gc.c = c
		c.holdFlush() // as OnTraffic does: no Wake needed
		require.NoError(t, c.queue(big))
		assert.Equal(t, !fail, c.flushIfLarge(gc), "fail=%v: open after the early flush", fail)
		assert.Equal(t, 1, gc.writes, "fail=%v", fail)
		if fail {
			// A later frame of the same turn, then the turn's own flush.
			require.NoError(t, c.queue(&Command{Code: 2}))
		}
		c.flushQueued(gc)
		assert.Equal(t, 1, gc.writes, "fail=%v: nothing more is written", fail)
		assert.Empty(t, c.wbuf)
	}
}

// A body writer that panics (a processor bug) must not leave the write lock
// held: the event loop takes it on every turn of the connection.
func TestQueueFrameReleasesLockOnPanic(t *testing.T) {
	c := &Conn{gc: &writeCounter{}, pending: map[int32]chan *Command{}}
	c.holdFlush()
	func() {
		defer func() { assert.NotNil(t, recover()) }()
		_ = c.ReplyWith(&Command{Code: 1}, &Command{}, 4, func([]byte) []byte { panic("body writer bug") })
	}()
	locked := make(chan struct{})
	go func() {
		c.holdFlush()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
		t.Fatal("the write lock is still held after the panic")
	}
	_, err := AppendFrameWith(nil, &Command{}, -1, func(b []byte) []byte { return b })
	assert.Error(t, err, "a negative body length is an error, not a panic")
}
