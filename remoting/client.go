package remoting

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
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
	// TLS, when set, makes every connection TLS with this configuration
	// (see ClientTLSConfig); the handshake is part of the dial and its
	// timeout. Without a ServerName the host of the address dialled is
	// verified (VerifyFull).
	TLS *tls.Config
}

// Client is the transport under our SDK and the broker's outbound calls: one
// reused connection per address, responses matched by opaque.
//
// Per-call costs are kept off the hot path: async timeouts are enforced by
// one periodic scan instead of a timer per call, callbacks run on a few
// long-lived workers instead of a goroutine each, and call records (with the
// channel a sync caller waits on) are reused.
type Client struct {
	cfg    ClientConfig
	log    logrus.FieldLogger
	opaque atomic.Int32
	sem    chan struct{}
	epoch  time.Time // call deadlines are monotonic offsets from here

	mu       sync.Mutex // guards conns, handlers, closed and scanning's store
	conns    map[string]*clientConn
	handlers map[RequestCode]RequestHandler
	closed   bool
	scanning atomic.Bool // the timeout scan was started (set under mu)

	cbq  callbackQueue
	stop chan struct{} // closed by Close: the timeout scan exits

	wg sync.WaitGroup // read loops, the scan, handler and callback goroutines
}

// ErrClientClosed means the client was closed.
var ErrClientClosed = errors.New("remoting: client closed")

const (
	// timeoutScanInterval is how often async calls are checked against
	// their deadlines, so a timeout fires up to this much late.
	timeoutScanInterval = 50 * time.Millisecond
	// maxCallbackWorkers bounds the long-lived callback workers; a
	// callback arriving while all are busy waits for one to finish.
	maxCallbackWorkers = 16
	// callbackRescueInterval is how often a callback queue that has no
	// idle worker is checked for progress. A callback still queued at the
	// next check (so after waiting between one and two intervals) gets a
	// goroutine of its own, as does every one queued behind it.
	callbackRescueInterval = 5 * time.Millisecond
	// maxIdleCallbackRing bounds the callback queue's buffer kept while it
	// is empty: enough for the thousands of calls an async producer keeps
	// in flight, without keeping what a rare larger burst grew.
	maxIdleCallbackRing = 8192
)

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
	cl := &Client{
		cfg:      cfg,
		log:      cfg.Logger.WithField("component", "remoting-client"),
		sem:      make(chan struct{}, cfg.MaxServerRequests),
		epoch:    time.Now(),
		conns:    make(map[string]*clientConn),
		handlers: make(map[RequestCode]RequestHandler),
		stop:     make(chan struct{}),
	}
	cl.cbq.cond.L = &cl.cbq.mu
	return cl
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
	c := newCall()
	c.raw = req.RawExt != nil
	op := cc.register(c)
	if op == 0 {
		c.free()
		return nil, fmt.Errorf("remoting: invoke %s: %w", addr, ErrConnClosed)
	}
	if err := cc.send(ctx, req, op, 0); err != nil {
		if cc.unregister(op) {
			c.free()
		} // else the connection's close owns c and will still send to c.ch
		return nil, err
	}
	var resp *Command
	if done := ctx.Done(); done == nil {
		resp = <-c.ch
	} else {
		select {
		case resp = <-c.ch:
		case <-done:
			if cc.unregister(op) {
				c.free()
			} // else a response or the close is being delivered to c.ch: drop c
			return nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, addr, ctx.Err())
		}
	}
	// The one value for this registration was received: nobody else holds c.
	c.free()
	if resp == nil {
		return nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, addr, ErrConnClosed)
	}
	return resp, nil
}

// InvokeAsync sends req and calls cb once with the response or an error
// (timeout after the given duration, or the connection closing). cb runs on
// one of the client's callback workers or its own goroutine, never on the
// caller's; it may block and may invoke again. Callbacks of different calls
// run in no particular order. Exactly one of these happens: InvokeAsync
// returns an error, or cb is called.
func (cl *Client) InvokeAsync(ctx context.Context, addr string, req *Command, timeout time.Duration, cb func(*Command, error)) error {
	cc, err := cl.conn(ctx, addr)
	if err != nil {
		return err
	}
	cl.startTimeoutScan()
	c := newCall()
	c.cb = cb
	c.code = req.Code
	c.raw = req.RawExt != nil
	now := cl.monotonic()
	c.deadline = now + int64(timeout)
	if c.deadline < now {
		c.deadline = math.MaxInt64 // a timeout too long to add means none
	}
	op := cc.register(c)
	if op == 0 {
		c.free()
		return fmt.Errorf("remoting: invoke %s: %w", addr, ErrConnClosed)
	}
	if err := cc.send(ctx, req, op, 0|sendCoalesce); err != nil && cc.unregister(op) {
		// Still pending, so cb was not called: the caller learns of the failure
		// from the returned error alone. Otherwise the connection's close or
		// the timeout scan already reported it through cb.
		c.free()
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

// Close closes every connection and waits for the client's goroutines,
// callbacks included (so a callback must not call Close).
func (cl *Client) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	close(cl.stop)
	conns := cl.conns
	cl.conns = map[string]*clientConn{}
	cl.mu.Unlock()
	cl.stopCallbackWorkers()
	for _, cc := range conns {
		cc.close(nil)
	}
	cl.wg.Wait()
	// Every worker is gone, so the queue is empty and a late rescue finds
	// nothing to do; stop the timer so none fires at all.
	cl.cbq.mu.Lock()
	if cl.cbq.rescue != nil {
		cl.cbq.rescue.Stop()
	}
	cl.cbq.armed = false
	cl.cbq.mu.Unlock()
	return nil
}

// nextOpaque returns a fresh request id: an even one (never 0), so that
// register can mark the calls whose answers stay raw with the low bit.
func (cl *Client) nextOpaque() int32 {
	for {
		if op := cl.opaque.Add(2); op != 0 {
			return op
		}
	}
}

// rawOpaque marks the opaque of a call sent with RawExt: its binary answer
// keeps its fields in RawExt. The read loop tells from the answer's opaque
// alone, before decoding the fields and without a lookup.
const rawOpaque int32 = 1

// monotonic is the time since the client was made, immune to clock steps.
func (cl *Client) monotonic() int64 { return int64(time.Since(cl.epoch)) }

// callbackTask is one InvokeAsync outcome waiting to be delivered.
type callbackTask struct {
	cb   func(*Command, error)
	resp *Command
	err  error
}

// callbackQueue holds InvokeAsync outcomes until a callback worker takes
// them. Under load a worker that finishes one callback takes the next
// straight from the queue, so short callbacks share a few goroutines
// instead of each paying for one of its own (before the queue, 70-95% of
// callbacks did, since a busy worker was seldom parked at the moment the
// read loop had one to hand over).
//
// A queue can deadlock callbacks that wait for one another, say one
// blocked in a send until a slot frees that only a later callback
// releases, if every worker is blocked like that. So no callback waits
// long for a busy worker: while callbacks are queued with no idle worker
// to take them, the rescue timer checks every callbackRescueInterval,
// and if a callback queued at the previous check is still there, every
// queued callback gets a goroutine of its own. So a callback waits in the
// queue for two intervals at most (plus timer lateness), however the
// callbacks ahead of it block, and the read loop never waits on them.
//
// Invariant, under mu: while n > waking (more tasks queued than workers on
// their way to the queue), the rescue timer is armed; it stays armed until
// the queue is empty.
type callbackQueue struct {
	mu   sync.Mutex // guards everything below
	cond sync.Cond  // idle workers wait here; L is &mu

	ring   []callbackTask // queued tasks: n of them from head, wrapping
	head   int
	n      int
	pushed uint64 // tasks ever queued
	popped uint64 // tasks ever taken off the queue
	mark   uint64 // pushed at the last rescue check

	workers  int  // workers running
	idle     int  // workers waiting on cond, not yet signalled
	waking   int  // workers signalled or started that have not yet looked at the queue
	stopping bool // Close was called: workers exit once the queue is empty

	rescue *time.Timer // runs rescueCallbacks; made on first use
	armed  bool        // rescue is set to fire
}

// push queues t. Call with mu held.
func (q *callbackQueue) push(t callbackTask) {
	if q.n == len(q.ring) {
		grown := make([]callbackTask, max(2*len(q.ring), 64))
		k := copy(grown, q.ring[q.head:])
		copy(grown[k:], q.ring[:q.head])
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = t
	q.n++
	q.pushed++
}

// pop takes the oldest task off the queue; n must be positive. Call with mu
// held.
func (q *callbackQueue) pop() callbackTask {
	t := q.ring[q.head]
	q.ring[q.head] = callbackTask{} // hold no response once handed out
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	q.popped++
	if q.n == 0 && len(q.ring) > maxIdleCallbackRing {
		q.ring, q.head = nil, 0 // a one-off burst, say a close failing many calls
	}
	return t
}

// runCallback queues t and makes sure something will take it: a worker
// already on its way to the queue, an idle worker it wakes, a new worker
// while there are fewer than maxCallbackWorkers, or else a busy worker
// when it finishes, with the rescue timer set in case none does soon. It
// never blocks, so the read loop keeps reading while callbacks are slow.
// Callers run on goroutines counted in cl.wg (read loops and the timeout
// scan), so the Add here never races Close's Wait.
func (cl *Client) runCallback(t callbackTask) {
	q := &cl.cbq
	q.mu.Lock()
	q.push(t)
	switch {
	case q.waking >= q.n:
		// Each queued task has a worker coming for it.
	case q.idle > 0:
		q.idle--
		q.waking++
		q.cond.Signal()
	case q.workers < maxCallbackWorkers:
		q.workers++
		q.waking++
		cl.wg.Add(1)
		go cl.callbackLoop()
	case !q.armed:
		q.armed = true
		q.mark = q.pushed
		if q.rescue == nil {
			q.rescue = time.AfterFunc(callbackRescueInterval, cl.rescueCallbacks)
		} else {
			q.rescue.Reset(callbackRescueInterval)
		}
	}
	q.mu.Unlock()
}

// callbackLoop is a callback worker: it runs queued callbacks, waiting for
// more while there are none, until Close and the queue is empty.
func (cl *Client) callbackLoop() {
	defer cl.wg.Done()
	q := &cl.cbq
	q.mu.Lock()
	q.waking--
	for {
		if q.n > 0 {
			t := q.pop()
			q.mu.Unlock()
			t.cb(t.resp, t.err)
			q.mu.Lock()
			continue
		}
		if q.stopping {
			break
		}
		q.idle++
		q.cond.Wait()
		q.waking-- // whoever woke us moved us from idle to waking
	}
	q.workers--
	q.mu.Unlock()
}

// rescueCallbacks is the rescue timer's check (see callbackQueue). A task
// queued at the previous check and not yet taken means the workers have
// not kept up for a whole callbackRescueInterval: they are slow, or
// blocked, perhaps on a callback still in the queue. Each queued task then
// runs on a goroutine of its own, as every callback did before the queue.
//
// It runs on the timer's goroutine, not one counted in cl.wg; the Add is
// still safe because while the queue holds tasks some worker is running
// (workers exit only when it is empty), so the count is above zero.
func (cl *Client) rescueCallbacks() {
	q := &cl.cbq
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		q.armed = false
		return
	}
	if q.popped >= q.mark {
		q.mark = q.pushed
		q.rescue.Reset(callbackRescueInterval)
		return
	}
	for q.n > 0 {
		t := q.pop()
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			t.cb(t.resp, t.err)
		}()
	}
	q.armed = false
}

// stopCallbackWorkers lets the workers exit once the queue is empty; a
// callback queued later (the connections' closes fail their pending calls)
// starts a worker again.
func (cl *Client) stopCallbackWorkers() {
	q := &cl.cbq
	q.mu.Lock()
	q.stopping = true
	q.waking += q.idle
	q.idle = 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// startTimeoutScan starts the timeout scan on the first async call. It
// checks closed under mu, which Close sets before it waits, so the scan is
// either counted in cl.wg before Close waits or never started.
func (cl *Client) startTimeoutScan() {
	if cl.scanning.Load() {
		return // the common case: no lock per async call
	}
	cl.mu.Lock()
	if !cl.scanning.Load() && !cl.closed {
		cl.scanning.Store(true)
		cl.wg.Add(1)
		go cl.timeoutLoop()
	}
	cl.mu.Unlock()
}

// timeoutLoop fails async calls past their deadline, every
// timeoutScanInterval until Close.
func (cl *Client) timeoutLoop() {
	defer cl.wg.Done()
	t := time.NewTicker(timeoutScanInterval)
	defer t.Stop()
	var conns []*clientConn
	var expired []expiredCall
	for {
		select {
		case <-cl.stop:
			return
		case <-t.C:
		}
		cl.mu.Lock()
		conns = conns[:0]
		for _, cc := range cl.conns {
			conns = append(conns, cc)
		}
		cl.mu.Unlock()
		now := cl.monotonic()
		for _, cc := range conns {
			expired = cc.expire(now, expired[:0])
			for _, e := range expired {
				cl.runCallback(callbackTask{cb: e.cb, err: fmt.Errorf("remoting: invoke code %d on %s: %w", e.code, cc.addr, context.DeadlineExceeded)})
			}
		}
		clear(conns) // keep no closed connection alive between scans
		clear(expired)
	}
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
	var nc net.Conn
	var err error
	if cl.cfg.TLS != nil {
		td := tls.Dialer{NetDialer: &d, Config: cl.cfg.TLS}
		nc, err = td.DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
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

// call is one request waiting for its response: a sync caller waiting on ch,
// or an async one whose cb the response, the timeout scan or the
// connection's close completes. Whoever removes it from pending owns
// completing it; calls are reused (newCall, free) only once no one else can
// still reach them, so a late response can never land in a later call.
type call struct {
	ch       chan *Command // sync: one response, or nil when the connection closed
	cb       func(*Command, error)
	code     int32 // async: the request code, for the timeout error
	deadline int64 // async: Client.monotonic time the call times out
	raw      bool  // the request came with RawExt: so may the response
}

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan *Command, 1)} }}

func newCall() *call { return callPool.Get().(*call) }

// free returns c for reuse; c must be out of pending with ch drained.
func (c *call) free() {
	c.cb = nil
	c.code = 0
	c.deadline = 0
	c.raw = false
	callPool.Put(c)
}

// expiredCall is an async call the timeout scan took out of pending.
type expiredCall struct {
	cb   func(*Command, error)
	code int32
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
	yielding bool       // the flusher yields before writing (async); a sync writer may take over
	yieldGen uint64     // counts yields, so a yielder knows the flush is still its own
	werr     error      // the write error that closed the connection
	wdl      time.Time  // write deadline set on nc; only the flusher touches it

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
	if c.raw {
		op |= rawOpaque
	}
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

// expire takes the async calls whose deadline is before now out of pending,
// appending them to dst for the caller to fail.
func (cc *clientConn) expire(now int64, dst []expiredCall) []expiredCall {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for op, c := range cc.pending {
		if c.cb != nil && c.deadline < now {
			delete(cc.pending, op)
			dst = append(dst, expiredCall{cb: c.cb, code: c.code})
			c.free()
		}
	}
	return dst
}

// sendCoalesce is a send option outside the wire's flag bits: the caller
// does not wait for the answer (InvokeAsync), so its frame may wait a moment
// for others to share its write (see write).
const sendCoalesce int32 = 1 << 30

func (cc *clientConn) send(ctx context.Context, req *Command, opaque, flags int32) error {
	req.Opaque = opaque
	coalesce := flags&sendCoalesce != 0
	req.Flag = (req.Flag &^ (flagResponse | flagOneway)) | flags&^sendCoalesce
	if req.Language == 0 && cc.cl.cfg.Language != 0 {
		req.Language = cc.cl.cfg.Language
	}
	if cc.cl.cfg.BeforeRequest != nil {
		cc.cl.cfg.BeforeRequest(cc.addr, req)
	}
	return cc.write(ctx, req, coalesce)
}

const (
	// maxSpareWriteBuf bounds the write buffer kept between bursts. An
	// async producer can queue a thousand 1 KiB sends while the flusher
	// waits for a CPU; regrowing a dropped buffer by doubling each time
	// cost 8% of such a client's CPU at 256 KiB.
	maxSpareWriteBuf = 4 << 20
	// minWriteTimeout is the least time a flush is given (see write).
	minWriteTimeout = time.Second
)

// write queues cmd's frame and, unless another writer is already flushing,
// writes out everything queued until the queue is empty. A frame queued
// behind a flusher returns before it reaches the socket; if the write then
// fails, the connection closes and every pending call fails with
// ErrConnClosed, so no caller waits on a frame that was lost.
//
// The socket is shared, and a write that times out part-way must close it;
// so a caller whose context already ended sends nothing, and a flush is
// given at least minWriteTimeout however little of the caller's time is
// left, rather than failing every call on the connection for one caller's
// deadline.
func (cc *clientConn) write(ctx context.Context, cmd *Command, coalesce bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", cc.addr, err)
	}
	timeout := cc.cl.cfg.WriteTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline), minWriteTimeout)
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
	switch {
	case cc.flushing && cc.yielding && !coalesce:
		// The flusher is letting async senders queue up; a caller
		// waiting for its answer writes now instead of waiting for it.
		cc.yielding = false
	case cc.flushing:
		cc.wmu.Unlock()
		return nil
	case coalesce:
		// Let the goroutines that are ready to run queue their frames
		// behind this one first: under async load one write then
		// carries many sends instead of one each.
		cc.flushing, cc.yielding = true, true
		cc.yieldGen++
		gen := cc.yieldGen
		cc.wmu.Unlock()
		yieldToSenders()
		cc.wmu.Lock()
		if !cc.yielding || cc.yieldGen != gen {
			// A sync writer took the flush over, frames and all (and
			// perhaps finished, and another flush began since).
			cc.wmu.Unlock()
			return nil
		}
		cc.yielding = false
	default:
		cc.flushing = true
	}
	for len(cc.wbuf) > 0 {
		buf := cc.wbuf
		cc.wbuf = cc.spare[:0]
		cc.spare = nil
		cc.wmu.Unlock()
		cc.setWriteDeadline(timeout)
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

// yieldToSenders is where an async flusher lets ready goroutines run
// (tests replace it to hold the flusher there).
var yieldToSenders = runtime.Gosched

// setWriteDeadline bounds the next write by timeout. Moving a socket deadline
// re-arms a runtime timer, so one already set slightly earlier than asked
// (by at most an eighth of timeout, and never later) is kept: back-to-back
// writes then share it. Only the flusher calls this.
func (cc *clientConn) setWriteDeadline(timeout time.Duration) {
	want := time.Now().Add(timeout)
	if !cc.wdl.After(want) && want.Sub(cc.wdl) <= timeout/8 {
		return
	}
	cc.wdl = want
	_ = cc.nc.SetWriteDeadline(want)
}

// close marks the connection closed, so no call registers on it any more, and
// closes the socket. The read loop then fails the calls still pending: it is
// counted in the client's WaitGroup, so callbacks are never started after
// Close stopped waiting. Safe to call twice.
func (cc *clientConn) close(reason error) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return
	}
	cc.closed = true
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
}

// failPending fails every call still pending on the closed connection.
func (cc *clientConn) failPending() {
	cc.mu.Lock()
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	var err error
	for _, c := range pending {
		if c.cb == nil {
			c.ch <- nil // the caller reports ErrConnClosed
			continue
		}
		if err == nil {
			err = fmt.Errorf("remoting: %s: %w", cc.addr, ErrConnClosed)
		}
		cc.cl.runCallback(callbackTask{cb: c.cb, err: err})
		c.free()
	}
}

func (cc *clientConn) readLoop() {
	defer cc.cl.wg.Done()
	r := bufio.NewReaderSize(cc.nc, 64<<10)
	idle := cc.cl.cfg.IdleTimeout
	// The read deadline is pushed forward at most once per slack rather
	// than per frame (each move re-arms a runtime timer), so a silent
	// connection closes between idle-slack and idle after its last frame.
	slack := min(idle/16, time.Second)
	var rdl time.Time
	for {
		if now := time.Now(); now.Add(idle - slack).After(rdl) {
			rdl = now.Add(idle)
			_ = cc.nc.SetReadDeadline(rdl)
		}
		cmd, err := readCommand(r, wantsRaw)
		if err != nil {
			cc.close(err)
			cc.failPending()
			return
		}
		if cmd.IsResponse() {
			cc.complete(cmd)
			continue
		}
		cc.serve(cmd)
	}
}

// wantsRaw is the read loop's keepRaw: an answer keeps its binary fields
// in RawExt when its call was sent with RawExt (its opaque says so, see
// rawOpaque); others decode straight into ExtFields, as before.
func wantsRaw(cmd *Command) bool { return cmd.IsResponse() && cmd.Opaque&rawOpaque != 0 }

func (cc *clientConn) complete(resp *Command) {
	cc.mu.Lock()
	c, ok := cc.pending[resp.Opaque]
	delete(cc.pending, resp.Opaque)
	cc.mu.Unlock()
	if !ok {
		return // timed out already, or an answer to a oneway request
	}
	if resp.RawExt != nil && !c.raw {
		// Not expected (the opaque carries the mark), but a caller that
		// built its request with a map must never see RawExt.
		resp.ExtFields, resp.RawExt = resp.FieldMap(), nil
	}
	if c.cb == nil {
		c.ch <- resp // buffered, and this is the registration's only send
		return
	}
	cc.cl.runCallback(callbackTask{cb: c.cb, resp: resp})
	c.free()
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
			_ = cc.write(context.Background(), resp, false)
		}
		return
	}
	select {
	case cc.cl.sem <- struct{}{}:
	default:
		if !req.IsOneway() {
			_ = cc.write(context.Background(), NewResponse(req, SystemBusy, "client busy"), false)
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
		_ = cc.write(context.Background(), resp, false)
	}()
}
