package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// RequestHandler answers a request a server sent to this client (for example
// CHECK_TRANSACTION_STATE or NOTIFY_CONSUMER_IDS_CHANGED). It returns the
// response, or nil to send none.
type RequestHandler func(addr string, req *Command) *Command

// ClientConfig configures a Client.
type ClientConfig struct {
	// DialTimeout bounds a connection attempt (default 3 s).
	DialTimeout time.Duration
	// IdleTimeout closes a connection that received nothing for this long
	// (default 120 s, as the Java and Go clients). It is re-dialled on next use.
	IdleTimeout time.Duration
	// WriteTimeout bounds one frame write when the context has no deadline (default 10 s).
	WriteTimeout time.Duration
	// MaxServerRequests bounds the server-sent requests handled at once (default 16).
	MaxServerRequests int
	// Language is put into every request (default GO).
	Language LanguageCode
	// BeforeRequest, when set, runs on each request just before it is encoded
	// (the SDK signs requests for ACL here).
	BeforeRequest func(addr string, req *Command)
	// Logger receives connection lifecycle lines.
	Logger logrus.FieldLogger
}

// Client is the transport under our SDK and the broker's outbound calls: one
// reused connection per address, responses matched by opaque.
type Client struct {
	cfg    ClientConfig
	log    logrus.FieldLogger
	opaque atomic.Int32
	sem    chan struct{}

	mu       sync.Mutex // guards conns, handlers and closed
	conns    map[string]*clientConn
	handlers map[RequestCode]RequestHandler
	closed   bool

	wg sync.WaitGroup // read loops, handler and callback goroutines
}

// ErrClientClosed means the client was closed.
var ErrClientClosed = errors.New("remoting: client closed")

// NewClient returns a client; it dials lazily.
func NewClient(cfg ClientConfig) *Client {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.MaxServerRequests <= 0 {
		cfg.MaxServerRequests = 16
	}
	if cfg.Logger == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		cfg.Logger = l
	}
	return &Client{
		cfg:      cfg,
		log:      cfg.Logger.WithField("component", "remoting-client"),
		sem:      make(chan struct{}, cfg.MaxServerRequests),
		conns:    make(map[string]*clientConn),
		handlers: make(map[RequestCode]RequestHandler),
	}
}

// RegisterHandler routes server-sent requests with code to h.
func (cl *Client) RegisterHandler(code RequestCode, h RequestHandler) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.handlers[code] = h
}

// InvokeSync sends req to addr and waits for the response until ctx ends.
func (cl *Client) InvokeSync(ctx context.Context, addr string, req *Command) (*Command, error) {
	cc, err := cl.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	ch := make(chan *Command, 1)
	op := cc.register(&call{ch: ch})
	if op == 0 {
		return nil, fmt.Errorf("remoting: invoke %s: %w", addr, ErrConnClosed)
	}
	if err := cc.send(ctx, req, op, 0); err != nil {
		cc.unregister(op)
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, addr, ErrConnClosed)
		}
		return resp, nil
	case <-ctx.Done():
		cc.unregister(op)
		return nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, addr, ctx.Err())
	}
}

// InvokeAsync sends req and calls cb once with the response or an error
// (timeout after the given duration, or the connection closing). cb runs on
// its own goroutine. Exactly one of these happens: InvokeAsync returns an
// error, or cb is called.
func (cl *Client) InvokeAsync(ctx context.Context, addr string, req *Command, timeout time.Duration, cb func(*Command, error)) error {
	cc, err := cl.conn(ctx, addr)
	if err != nil {
		return err
	}
	c := &call{cb: cb}
	op := cl.nextOpaque()
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return fmt.Errorf("remoting: invoke %s: %w", addr, ErrConnClosed)
	}
	// The timer is armed under the lock, so whoever later takes the call out of
	// pending (response, close, or the timer itself) sees it set.
	c.timer = time.AfterFunc(timeout, func() {
		if cc.unregister(op) {
			cl.runCallback(cb, nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, addr, context.DeadlineExceeded))
		}
	})
	cc.pending[op] = c
	cc.mu.Unlock()
	if err := cc.send(ctx, req, op, 0); err != nil && cc.unregister(op) {
		// Still pending, so cb was not called: the caller learns of the failure
		// from the returned error alone. Otherwise the connection's close
		// already reported it through cb.
		c.timer.Stop()
		return err
	}
	return nil
}

// InvokeOneway sends req with the oneway bit: the server sends no response.
func (cl *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	cc, err := cl.conn(ctx, addr)
	if err != nil {
		return err
	}
	return cc.send(ctx, req, cl.nextOpaque(), flagOneway)
}

// CloseConn closes the connection to addr, if any; pending calls fail.
func (cl *Client) CloseConn(addr string) {
	cl.mu.Lock()
	cc := cl.conns[addr]
	delete(cl.conns, addr)
	cl.mu.Unlock()
	if cc != nil {
		cc.close(nil)
	}
}

// Close closes every connection and waits for the client's goroutines.
func (cl *Client) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	conns := cl.conns
	cl.conns = map[string]*clientConn{}
	cl.mu.Unlock()
	for _, cc := range conns {
		cc.close(nil)
	}
	cl.wg.Wait()
	return nil
}

func (cl *Client) nextOpaque() int32 {
	for {
		if op := cl.opaque.Add(1); op != 0 {
			return op
		}
	}
}

func (cl *Client) runCallback(cb func(*Command, error), resp *Command, err error) {
	cl.wg.Add(1)
	go func() {
		defer cl.wg.Done()
		cb(resp, err)
	}()
}

// conn returns the live connection to addr, dialling one if needed.
func (cl *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClientClosed
	}
	if cc := cl.conns[addr]; cc != nil && !cc.isClosed() {
		cl.mu.Unlock()
		return cc, nil
	}
	cl.mu.Unlock()

	d := net.Dialer{Timeout: cl.cfg.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: connect to %s: %w", addr, err)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		_ = nc.Close()
		return nil, ErrClientClosed
	}
	if cc := cl.conns[addr]; cc != nil && !cc.isClosed() {
		_ = nc.Close() // another caller dialled first
		return cc, nil
	}
	cc := &clientConn{cl: cl, addr: addr, nc: nc, pending: make(map[int32]*call)}
	cl.conns[addr] = cc
	cl.wg.Add(1)
	go cc.readLoop()
	cl.log.WithField("addr", addr).Debug("connected")
	return cc, nil
}

type call struct {
	ch    chan *Command // for InvokeSync
	cb    func(*Command, error)
	timer *time.Timer
}

type clientConn struct {
	cl   *Client
	addr string
	nc   net.Conn

	// Frames are encoded straight into wbuf; one writer at a time (the
	// flusher) writes out everything queued, so concurrent senders share
	// system calls instead of taking turns at one each.
	wmu      sync.Mutex // guards wbuf, spare, flushing and werr
	wbuf     []byte     // frames not yet handed to the socket
	spare    []byte     // the flusher's previous buffer, reused
	flushing bool       // a writer is writing; others only queue
	werr     error      // the write error that closed the connection

	mu      sync.Mutex // guards pending and closed
	pending map[int32]*call
	closed  bool
}

func (cc *clientConn) isClosed() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.closed
}

// register reserves an opaque for c; 0 means the connection is closed.
func (cc *clientConn) register(c *call) int32 {
	op := cc.cl.nextOpaque()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return 0
	}
	cc.pending[op] = c
	return op
}

// unregister removes a pending call, reporting whether it was still pending
// (whoever removes it owns completing it).
func (cc *clientConn) unregister(op int32) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	_, ok := cc.pending[op]
	delete(cc.pending, op)
	return ok
}

func (cc *clientConn) send(ctx context.Context, req *Command, opaque, flags int32) error {
	req.Opaque = opaque
	req.Flag = (req.Flag &^ (flagResponse | flagOneway)) | flags
	if req.Language == 0 && cc.cl.cfg.Language != 0 {
		req.Language = cc.cl.cfg.Language
	}
	if cc.cl.cfg.BeforeRequest != nil {
		cc.cl.cfg.BeforeRequest(cc.addr, req)
	}
	return cc.write(ctx, req)
}

// maxSpareWriteBuf bounds the write buffer kept between bursts.
const maxSpareWriteBuf = 256 << 10

// write queues cmd's frame and, unless another writer is already flushing,
// writes out everything queued until the queue is empty. A frame queued
// behind a flusher returns before it reaches the socket; if the write then
// fails, the connection closes and every pending call fails with
// ErrConnClosed, so no caller waits on a frame that was lost.
func (cc *clientConn) write(ctx context.Context, cmd *Command) error {
	timeout := cc.cl.cfg.WriteTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	cc.wmu.Lock()
	if cc.werr != nil {
		err := cc.werr
		cc.wmu.Unlock()
		return fmt.Errorf("remoting: write to %s: %w", cc.addr, err)
	}
	start := len(cc.wbuf)
	var err error
	if cc.wbuf, err = AppendFrame(cc.wbuf, cmd); err != nil {
		cc.wbuf = cc.wbuf[:start]
		cc.wmu.Unlock()
		return err
	}
	if cc.flushing {
		cc.wmu.Unlock()
		return nil
	}
	cc.flushing = true
	for len(cc.wbuf) > 0 {
		buf := cc.wbuf
		cc.wbuf = cc.spare[:0]
		cc.spare = nil
		cc.wmu.Unlock()
		_ = cc.nc.SetWriteDeadline(time.Now().Add(timeout))
		_, err := cc.nc.Write(buf)
		cc.wmu.Lock()
		if cap(buf) <= maxSpareWriteBuf {
			cc.spare = buf[:0]
		}
		if err != nil {
			cc.werr = err
			cc.wbuf = nil
			cc.flushing = false
			cc.wmu.Unlock()
			cc.close(err)
			return fmt.Errorf("remoting: write to %s: %w", cc.addr, err)
		}
		// Later frames were queued by writers that returned at once; they
		// are written with the connection's own timeout.
		timeout = cc.cl.cfg.WriteTimeout
	}
	cc.flushing = false
	cc.wmu.Unlock()
	return nil
}

// close closes the socket and fails every pending call. Safe to call twice.
func (cc *clientConn) close(reason error) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return
	}
	cc.closed = true
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	_ = cc.nc.Close()
	cc.cl.mu.Lock()
	if cc.cl.conns[cc.addr] == cc {
		delete(cc.cl.conns, cc.addr)
	}
	cc.cl.mu.Unlock()
	if reason != nil {
		cc.cl.log.WithFields(logrus.Fields{"addr": cc.addr, "reason": reason}).Debug("connection closed")
	}
	for _, c := range pending {
		if c.ch != nil {
			close(c.ch)
			continue
		}
		if c.timer != nil {
			c.timer.Stop()
		}
		cc.cl.runCallback(c.cb, nil, fmt.Errorf("remoting: %s: %w", cc.addr, ErrConnClosed))
	}
}

func (cc *clientConn) readLoop() {
	defer cc.cl.wg.Done()
	r := bufio.NewReaderSize(cc.nc, 64<<10)
	for {
		_ = cc.nc.SetReadDeadline(time.Now().Add(cc.cl.cfg.IdleTimeout))
		cmd, err := ReadCommand(r)
		if err != nil {
			cc.close(err)
			return
		}
		if cmd.IsResponse() {
			cc.complete(cmd)
			continue
		}
		cc.serve(cmd)
	}
}

func (cc *clientConn) complete(resp *Command) {
	cc.mu.Lock()
	c, ok := cc.pending[resp.Opaque]
	delete(cc.pending, resp.Opaque)
	cc.mu.Unlock()
	if !ok {
		return // timed out already, or an answer to a oneway request
	}
	if c.ch != nil {
		c.ch <- resp
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	cc.cl.runCallback(c.cb, resp, nil)
}

// serve runs the handler for a server-sent request on a bounded goroutine;
// when all are busy the request is refused with SYSTEM_BUSY instead of
// stalling the read loop.
func (cc *clientConn) serve(req *Command) {
	cc.cl.mu.Lock()
	h := cc.cl.handlers[req.RequestCode()]
	cc.cl.mu.Unlock()
	if h == nil {
		if !req.IsOneway() {
			resp := NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
			resp.Language = LangGo
			_ = cc.write(context.Background(), resp)
		}
		return
	}
	select {
	case cc.cl.sem <- struct{}{}:
	default:
		if !req.IsOneway() {
			_ = cc.write(context.Background(), NewResponse(req, SystemBusy, "client busy"))
		}
		return
	}
	cc.cl.wg.Add(1)
	go func() {
		defer cc.cl.wg.Done()
		defer func() { <-cc.cl.sem }()
		resp := h(cc.addr, req)
		if resp == nil || req.IsOneway() {
			return
		}
		resp.Opaque = req.Opaque
		resp.SerializeType = req.SerializeType
		resp.MarkResponse()
		_ = cc.write(context.Background(), resp)
	}()
}
