package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ProcessorFunc handles one request: on a worker of the pool it was
// registered with (Handle), or on the connection's event loop (the inline
// processor of HandleInline). It returns the response, or nil when it
// answers later through Conn.Reply (a parked long-poll) or owes no answer. A
// returned error becomes SYSTEM_ERROR with the error text as remark. It must
// not keep req.Body after returning unless it copied it.
type ProcessorFunc func(c *Conn, req *Command) (*Command, error)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is host:port to listen on; port 0 picks a free one (see Server.Addr).
	Addr string
	// Logger receives lifecycle lines and one line per rejected peer.
	Logger logrus.FieldLogger
	// MaxFramesPerWake bounds how many frames one connection may decode per
	// event-loop wake, so a fast client cannot starve the others (default 64).
	MaxFramesPerWake int
	// IdleTimeout closes a connection that sent nothing for this long (default
	// 120 s, as RocketMQ's serverChannelMaxIdleTimeSeconds).
	IdleTimeout time.Duration
	// NumEventLoops is the number of gnet event loops (0: one per CPU).
	NumEventLoops int

	// TLSMode says whether the port serves TLS connections, plain ones, or
	// both (see TLSMode). TLS is the server side's configuration (its
	// certificate, client certificates to ask for), required unless
	// TLSMode is TLSDisabled.
	TLSMode TLSMode
	TLS     *tls.Config
	// TLSHandshakeTimeout bounds a TLS handshake (default 10 s).
	TLSHandshakeTimeout time.Duration

	// MaxConns caps the connections open at once and MaxConnsPerAddr those
	// from one IP address (0: no cap). Past either, a new connection is
	// closed as soon as it is accepted, before it is read, and logged at
	// most once per address every 10 s; open connections are not touched.
	MaxConns        int
	MaxConnsPerAddr int
	// Authorize, when set, vets every request whose code is routed before
	// its processor sees it (see Authorizer). Nil costs one branch.
	Authorize Authorizer
}

// Authorizer vets a request before its processor sees it, as RocketMQ's
// server RPC hooks do for ACL. For a code routed with HandleInline it runs
// on the connection's event loop, before the inline processor, so it must
// not block there, and req's Body and RawExt may alias the input buffer and
// must not be kept; for other codes it runs on the route's worker, as
// RocketMQ runs its hooks, so a heavy check (a large body to decode) stalls
// no event loop. It sees every header field: ExtFields, and RawExt for the
// binary-header requests of codes registered with ReadRawFields. ok false
// refuses the request: the peer gets code and remark, and no processor
// runs. A panic in it refuses the request with SYSTEM_ERROR.
type Authorizer func(c *Conn, req *Command) (code ResponseCode, remark string, ok bool)

type route struct {
	pool   *Pool
	fn     ProcessorFunc
	inline ProcessorFunc // tried on the event loop first (HandleInline)
	raw    bool          // binary headers' fields stay in RawExt (ReadRawFields)
}

// ErrRunOnPool is returned by the inline processor of HandleInline when the
// request needs work that may block (a file to write, a lock held for long):
// the server then runs the request on the route's pool. The inline processor
// must not have changed anything before returning it.
var ErrRunOnPool = errors.New("remoting: run this request on its pool")

// Server is a RocketMQ remoting server on gnet. Register processors and pools
// before Start; they are read without locks afterwards.
type Server struct {
	gnet.BuiltinEventEngine

	cfg    ServerConfig
	log    logrus.FieldLogger
	routes map[RequestCode]route
	pools  []*Pool
	// keepRawFn is keepRaw, for the decoder.
	keepRawFn func(*Command) bool

	onOpen  []func(*Conn)
	onClose []func(*Conn)

	limits   connLimits
	refusals refusalLog
	// pending holds the *pendingConn of a TLS-enabled port whose first byte
	// has not arrived, for the idle scan.
	pending sync.Map

	tlsMu     sync.Mutex // guards tlsLive and tlsClosed
	tlsLive   map[net.Conn]struct{}
	tlsClosed bool           // Shutdown began: no more hand-offs
	tlsWG     sync.WaitGroup // the TLS path's goroutines

	eng      gnet.Engine
	addr     string
	booted   chan struct{}
	runDone  chan error
	runErr   error
	conns    sync.Map // uint64 -> *Conn
	nextID   atomic.Uint64
	opaque   atomic.Int32
	started  atomic.Bool
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// NewServer returns a server that is not yet listening.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxFramesPerWake <= 0 {
		cfg.MaxFramesPerWake = 64
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = defaultTLSHandshakeTimeout
	}
	if cfg.Logger == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		cfg.Logger = l
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger.WithField("component", "remoting"),
		routes:  make(map[RequestCode]route),
		booted:  make(chan struct{}),
		runDone: make(chan error, 1),
	}
	s.keepRawFn = s.keepRaw // one method value, not one per frame
	s.limits.max, s.limits.perAddr = cfg.MaxConns, cfg.MaxConnsPerAddr
	s.refusals.log = s.log
	return s
}

// NewPool creates a worker pool owned by the server: workers goroutines and a
// queue of queueLen requests. A full queue answers SYSTEM_BUSY.
func (s *Server) NewPool(name string, workers, queueLen int) *Pool {
	p := newPool(name, workers, queueLen)
	s.pools = append(s.pools, p)
	return p
}

// Handle routes requests with code to fn, run on pool.
func (s *Server) Handle(code RequestCode, pool *Pool, fn ProcessorFunc) {
	s.routes[code] = route{pool: pool, fn: fn}
}

// HandleInline routes requests with code to inline, run on the connection's
// event loop as soon as the frame is decoded: no hand-off to a worker and
// back, and the answer leaves in the loop's next write. It is for requests
// answered from memory in microseconds (a send to an existing topic, whose
// answer under SYNC_FLUSH leaves from the group commit instead; a pull of
// records in the page cache). inline must not block: it stalls every
// connection of its loop. When a request would, it returns ErrRunOnPool
// and the request goes to fn on pool, as Handle routes it. In inline,
// req.Body aliases the connection's input buffer and is valid only until it
// returns.
func (s *Server) HandleInline(code RequestCode, pool *Pool, inline, fn ProcessorFunc) {
	s.routes[code] = route{pool: pool, fn: fn, inline: inline}
}

// ReadRawFields makes the processors of code read a binary header's fields
// from req.RawExt: such requests are decoded without building ExtFields.
// JSON headers still arrive in ExtFields, so the processors must read both
// (Command.FieldMap does, off the hot path). Call it after routing code.
func (s *Server) ReadRawFields(code RequestCode) {
	r, ok := s.routes[code]
	if !ok {
		panic(fmt.Sprintf("remoting: ReadRawFields(%d) before the code is routed", code))
	}
	r.raw = true
	s.routes[code] = r
}

// keepRaw says whether cmd is a request whose code is read from RawExt.
func (s *Server) keepRaw(cmd *Command) bool {
	return !cmd.IsResponse() && s.routes[cmd.RequestCode()].raw
}

// OnConnOpen registers a hook run when a peer connects; it must not block.
// It runs on the event loop; on a port with TLS on, once the connection's
// first byte has told its path, and for a TLS connection on its own
// goroutine after the handshake.
func (s *Server) OnConnOpen(fn func(*Conn)) { s.onOpen = append(s.onOpen, fn) }

// OnConnClose registers a hook run when a connection closes (nameservers drop
// the broker, brokers drop the client), on the event loop or, for a TLS
// connection, on its own goroutine. It must not block.
func (s *Server) OnConnClose(fn func(*Conn)) { s.onClose = append(s.onClose, fn) }

// Start listens and returns once the server accepts connections, or with the
// listen error.
func (s *Server) Start() error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("remoting: server already started")
	}
	switch s.cfg.TLSMode {
	case TLSDisabled:
	case TLSPermissive, TLSEnforcing:
		if s.cfg.TLS == nil || (len(s.cfg.TLS.Certificates) == 0 && s.cfg.TLS.GetCertificate == nil) {
			s.stopPools()
			return fmt.Errorf("%w: tls.server.mode %s needs a server certificate", ErrTLSConfig, s.cfg.TLSMode)
		}
	default:
		s.stopPools()
		return fmt.Errorf("%w: %s", ErrTLSConfig, s.cfg.TLSMode)
	}
	addr, err := claimAddr(s.cfg.Addr)
	if err != nil {
		return err
	}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithTicker(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReuseAddr(true),
		// Each event loop accepts on its own SO_REUSEPORT listener and
		// registers the connection itself. Without it gnet's acceptor hands
		// connections to the loops through a queue, and one accepted while
		// the engine stops lands on a stopped loop: never served, never
		// closed, and the client (the official Go client does not time out
		// its connections) hangs there. claimAddr keeps the port exclusive.
		gnet.WithReusePort(true),
		gnet.WithLogger(s.cfg.Logger.WithField("component", "gnet")),
	}
	if s.cfg.NumEventLoops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(s.cfg.NumEventLoops))
	}
	go func() {
		s.runDone <- gnet.Run(s, "tcp://"+addr, opts...)
	}()
	select {
	case <-s.booted:
		s.log.WithFields(logrus.Fields{"addr": s.addr, "tls": s.cfg.TLSMode.String()}).Info("listening")
		return nil
	case err := <-s.runDone:
		s.runErr = err
		close(s.runDone)
		s.stopPools()
		if err == nil {
			err = errors.New("remoting: engine stopped before it started")
		}
		return fmt.Errorf("remoting: listen on %s: %w", s.cfg.Addr, err)
	}
}

// stopPools stops the pools' workers (a start that failed).
func (s *Server) stopPools() {
	for _, p := range s.pools {
		p.stop()
	}
}

// claimAddr checks that addr's port is free and, for port 0, picks one, so
// that every event loop's SO_REUSEPORT listener binds the same port and no
// other process already holds it: a probe socket without SO_REUSEPORT fails
// to bind while any socket has the port.
func claimAddr(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("remoting: listen on %s: %w", addr, err)
	}
	defer ln.Close()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("remoting: listen on %s: %w", addr, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)), nil
}

// Addr is the address the server listens on, with the real port when the
// configured one was 0. Valid after Start.
func (s *Server) Addr() string { return s.addr }

// Shutdown stops taking new requests (they get SYSTEM_BUSY), lets the workers
// finish what they hold, then closes every connection and the listener. Safe to
// call twice; later calls return the first result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		for _, p := range s.pools {
			select {
			case <-p.stop():
			case <-ctx.Done():
				s.log.WithField("pool", p.name).Warn("shutdown: workers still busy at deadline")
			}
		}
		s.stopErr = s.stopEngine(ctx)
		// The TLS path's connections close after gnet stopped, so no
		// hand-off starts a new one meanwhile.
		if err := s.stopTLS(ctx); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// stopEngine stops gnet: the listeners and the plain connections.
func (s *Server) stopEngine(ctx context.Context) error {
	if !s.started.Load() || s.eng.Validate() != nil {
		return nil
	}
	// Engine.Stop signals the engine at once but then polls for the end on a
	// 500 ms ticker; gnet.Run returning is the earlier, exact signal. The
	// Stop goroutine ends by itself within one poll interval.
	stopped := make(chan error, 1)
	go func() { stopped <- s.eng.Stop(ctx) }()
	select {
	case <-s.runDone:
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("remoting: stop engine: %w", err)
		}
		select {
		case <-s.runDone:
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// nextOpaque returns a positive request id for server-sent requests, wrapping
// past 2^31 back to 1.
func (s *Server) nextOpaque() int32 {
	for {
		if op := s.opaque.Add(1); op > 0 {
			return op
		}
		s.opaque.CompareAndSwap(s.opaque.Load(), 0)
	}
}

// CloseConn closes the connection with the given ID, if it is still open
// (the nameserver closes the channel of a broker it expired).
func (s *Server) CloseConn(id uint64) bool {
	v, ok := s.conns.Load(id)
	if !ok {
		return false
	}
	_ = v.(*Conn).Close()
	return true
}

// OnBoot records the engine and the real listening address.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.addr = s.cfg.Addr
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			host, _, _ := net.SplitHostPort(s.cfg.Addr)
			switch a := sa.(type) {
			case *unix.SockaddrInet4:
				s.addr = net.JoinHostPort(host, strconv.Itoa(a.Port))
			case *unix.SockaddrInet6:
				s.addr = net.JoinHostPort(host, strconv.Itoa(a.Port))
			}
		}
		_ = unix.Close(fd)
	}
	close(s.booted)
	return gnet.None
}

// OnOpen admits a connection within the connection limits and wraps it in a
// Conn; on a port with TLS on, it waits for the first byte as a pendingConn.
func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	ra := gc.RemoteAddr()
	addr := peerAddr(ra)
	if limit := s.limits.acquire(addr); limit != "" {
		// No context is set: OnClose releases nothing for it.
		total, fromAddr := s.limits.count(addr)
		s.refusals.refused(addr, addrString(ra), limit, "refusing a connection: connection limit reached",
			logrus.Fields{"open": total, "openFromAddr": fromAddr, "maxConnections": s.cfg.MaxConns, "maxPerAddress": s.cfg.MaxConnsPerAddr})
		return nil, gnet.Close
	}
	if s.cfg.TLSMode != TLSDisabled {
		p := &pendingConn{gc: gc, addr: addr, remote: addrString(ra), opened: time.Now().UnixNano()}
		gc.SetContext(p)
		s.pending.Store(p, struct{}{})
		return nil, gnet.None
	}
	s.openConn(gc, addr)
	return nil, gnet.None
}

// openConn makes the Conn of a plain connection and runs the open hooks.
func (s *Server) openConn(gc gnet.Conn, addr netip.Addr) *Conn {
	c := &Conn{id: s.nextID.Add(1), gc: gc, s: s, addr: addr, pending: make(map[int32]chan *Command)}
	c.remote = addrString(gc.RemoteAddr())
	c.local = addrString(gc.LocalAddr())
	c.lastRead.Store(time.Now().UnixNano())
	gc.SetContext(c)
	s.conns.Store(c.id, c)
	for _, fn := range s.onOpen {
		fn(c)
	}
	return c
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// OnClose fails the connection's pending server-side invocations and runs
// the close hooks, and gives its place in the connection limits back.
func (s *Server) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		if p, _ := gc.Context().(*pendingConn); p != nil {
			s.pending.Delete(p)
			if !p.handedOff {
				s.limits.release(p.addr)
			}
		}
		return gnet.None
	}
	s.limits.release(c.addr)
	s.conns.Delete(c.id)
	c.markClosed()
	if err != nil {
		s.log.WithFields(logrus.Fields{"peer": c.remote, "reason": err}).Debug("connection closed")
	}
	for _, fn := range s.onClose {
		fn(c)
	}
	return gnet.None
}

// OnTraffic decodes whole frames from the connection's buffer and dispatches
// them. It never waits for bytes: a partial frame stays buffered until more
// arrive. At most MaxFramesPerWake frames are taken per call; the rest are
// picked up by a Wake so other connections on this loop get their turn.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		p, _ := gc.Context().(*pendingConn)
		if p == nil {
			return gnet.Close
		}
		var action gnet.Action
		if c, action = s.route(gc, p); c == nil {
			return action
		}
	}
	// Answers queued by workers before this call and by the frames it
	// handles go out together in one write when it returns; meanwhile no
	// answer needs to wake the loop.
	c.holdFlush()
	defer c.flushQueued(gc)
	if gc.InboundBuffered() > 0 {
		// A wake-up to flush is not traffic from the peer.
		c.lastRead.Store(time.Now().UnixNano())
	}
	for range s.cfg.MaxFramesPerWake {
		prefix, err := gc.Peek(4)
		if err != nil {
			return gnet.None
		}
		n, err := FrameLength(prefix)
		if err != nil {
			if prefix[0] == tlsHandshakeByte && s.cfg.TLSMode == TLSDisabled {
				// Only a TLS record can start so: a plain frame this long
				// is over MaxFrameSize.
				s.refusals.refused(c.addr, c.remote, "tlsDisabled",
					"closing a TLS connection: this port does not serve TLS (tls.server.mode=disabled)", nil)
				return gnet.Close
			}
			s.rejectPeer(c, err)
			return gnet.Close
		}
		frame, err := gc.Peek(4 + n)
		if err != nil {
			return gnet.None // the rest of the frame has not arrived yet
		}
		// The body aliases gnet's input buffer until Discard: inline
		// processors read it in place, queued ones get a copy.
		cmd, err := decodeFrame(frame[4:], false, s.keepRawFn)
		if err != nil {
			_, _ = gc.Discard(4 + n)
			s.rejectPeer(c, err)
			return gnet.Close
		}
		s.dispatch(c, cmd)
		_, _ = gc.Discard(4 + n)
		if !c.flushIfLarge(gc) {
			return gnet.None
		}
	}
	if gc.InboundBuffered() > 0 {
		_ = gc.Wake(nil)
	}
	return gnet.None
}

// OnTick closes connections idle for longer than IdleTimeout.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	deadline := time.Now().Add(-s.cfg.IdleTimeout).UnixNano()
	s.conns.Range(func(_, v any) bool {
		c := v.(*Conn)
		if c.lastRead.Load() < deadline {
			s.log.WithField("peer", c.remote).Info("closing idle connection")
			_ = c.Close()
		}
		return true
	})
	s.pending.Range(func(k, _ any) bool {
		if p := k.(*pendingConn); p.opened < deadline {
			s.log.WithField("peer", p.remote).Info("closing a connection that sent nothing")
			_ = p.gc.Close()
		}
		return true
	})
	s.refusals.prune()
	tick := s.cfg.IdleTimeout / 4
	if tick > 10*time.Second {
		tick = 10 * time.Second
	}
	return tick, gnet.None
}

func (s *Server) rejectPeer(c *Conn, err error) {
	s.log.WithFields(logrus.Fields{"peer": c.remote, "reason": err.Error()}).Warn("closing connection after a malformed frame")
}

func (s *Server) dispatch(c *Conn, cmd *Command) {
	if cmd.IsResponse() {
		if cmd.Body != nil {
			cmd.Body = bytes.Clone(cmd.Body) // Invoke's caller keeps it
		}
		c.complete(cmd)
		return
	}
	r, ok := s.routes[cmd.RequestCode()]
	if !ok {
		s.log.WithFields(logrus.Fields{"peer": c.remote, "code": cmd.Code}).Debug("request code not supported")
		c.replyError(cmd, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", cmd.Code))
		return
	}
	checked := false // the Authorizer passed it on the loop
	if r.inline != nil && !s.stopping.Load() {
		if s.cfg.Authorize != nil {
			if !s.authorize(c, cmd) {
				return
			}
			checked = true
		}
		if s.process(c, cmd, r.inline, true) {
			return
		}
	}
	if cmd.Body != nil {
		cmd.Body = bytes.Clone(cmd.Body) // it outlives this turn of the loop
	}
	if cmd.RawExt != nil {
		cmd.RawExt = bytes.Clone(cmd.RawExt)
	}
	if s.stopping.Load() || !r.pool.Submit(func() {
		if !checked && s.cfg.Authorize != nil && !s.authorize(c, cmd) {
			return
		}
		s.process(c, cmd, r.fn, false)
	}) {
		remark := "[OVERLOAD]system busy, start flow control for a while"
		if s.stopping.Load() {
			remark = "[SHUTDOWN]server is shutting down"
		}
		c.replyError(cmd, SystemBusy, remark)
	}
}

// authorize runs the Authorizer on req and answers a refusal; it reports
// whether the request may go on.
func (s *Server) authorize(c *Conn, req *Command) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			s.log.WithFields(logrus.Fields{"peer": c.remote, "code": req.Code, "panic": p}).
				Errorf("authorizer panicked\n%s", debug.Stack())
			c.replyError(req, SystemError, fmt.Sprintf("internal error checking request code %d: %v", req.Code, p))
			ok = false
		}
	}()
	code, remark, ok := s.cfg.Authorize(c, req)
	if !ok {
		c.replyError(req, code, remark)
	}
	return ok
}

// process runs fn on req and writes its answer. It reports false only when
// fn, run inline, returned ErrRunOnPool: then nothing was answered.
func (s *Server) process(c *Conn, req *Command, fn ProcessorFunc, inline bool) (done bool) {
	defer func() {
		if p := recover(); p != nil {
			s.log.WithFields(logrus.Fields{"peer": c.remote, "code": req.Code, "panic": p}).
				Errorf("processor panicked\n%s", debug.Stack())
			c.replyError(req, SystemError, fmt.Sprintf("internal error handling request code %d: %v", req.Code, p))
			done = true
		}
	}()
	resp, err := fn(c, req)
	if inline && errors.Is(err, ErrRunOnPool) {
		return false
	}
	if err != nil {
		resp = NewResponse(req, SystemError, err.Error())
	}
	if resp == nil {
		return true
	}
	if err := c.Reply(req, resp); err != nil && !errors.Is(err, ErrConnClosed) {
		s.log.WithFields(logrus.Fields{"peer": c.remote, "code": req.Code, "reason": err}).Warn("cannot write response")
	}
	return true
}
