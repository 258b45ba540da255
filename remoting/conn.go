package remoting

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// ErrConnClosed means the connection closed before the operation finished.
var ErrConnClosed = errors.New("remoting: connection closed")

// Conn is the server's side of one peer connection. Its methods are safe for
// concurrent use by processors.
type Conn struct {
	id       uint64
	gc       gnet.Conn     // the plain path's connection; nil on the TLS path
	tls      *tlsTransport // the TLS path's socket; nil on the plain path
	s        *Server
	remote   string
	local    string
	addr     netip.Addr // the peer's IP, its key in the connection limits
	lastRead atomic.Int64

	mu      sync.Mutex // guards pending, and changes of closed
	pending map[int32]chan *Command
	closed  atomic.Bool // set under mu; read without it

	// Small frames are encoded straight into wbuf and written by the event
	// loop in one system call per wake-up (flushQueued), so answers that
	// finish together share a write instead of one write (and one frame
	// allocation) each.
	wmu      sync.Mutex // guards wbuf, wspare and wakeSent
	wbuf     []byte
	wspare   []byte
	wakeSent bool // a Wake is on its way to the loop; it will flush wbuf
	// large says wbuf reached flushAtBytes, for the loop's check after
	// each frame without waiting for wmu behind a worker copying a body.
	large atomic.Bool
}

// Write sends frames with bodies larger than coalesceMaxBody from a buffer
// of their own rather than copying them into the queue; ReplyWith queues
// any size (its body is copied once, into the queue).
//
// The event loop flushes early, in the middle of a turn, once flushAtBytes
// are queued: many pull answers decoded in one turn (each tens of KiB) would
// otherwise pile up past maxSpareConnBuf, and a buffer that large is dropped
// after its write and grown again from nothing on the next turn.
const (
	coalesceMaxBody = 16 << 10
	maxSpareConnBuf = 256 << 10
	flushAtBytes    = 128 << 10
)

// ID is unique among the server's connections for its lifetime.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the peer's address, host:port.
func (c *Conn) RemoteAddr() string { return c.remote }

// LocalAddr is our side's address, host:port.
func (c *Conn) LocalAddr() string { return c.local }

// Closed reports whether the connection has closed.
func (c *Conn) Closed() bool { return c.closed.Load() }

// Close closes the connection; the server's close hooks run.
func (c *Conn) Close() error {
	if c.tls != nil {
		c.tls.close()
		return nil
	}
	return c.gc.Close()
}

// TLS reports whether the connection came over TLS.
func (c *Conn) TLS() bool { return c.tls != nil }

// Write encodes cmd and queues it on the connection.
func (c *Conn) Write(cmd *Command) error {
	if c.Closed() {
		return ErrConnClosed
	}
	if len(cmd.Body) <= coalesceMaxBody {
		return c.queue(cmd)
	}
	buf, err := EncodeFrame(cmd)
	if err != nil {
		return err
	}
	if c.tls != nil {
		return c.queueOwned(buf)
	}
	if err := c.gc.AsyncWrite(buf, nil); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", c.remote, err)
	}
	return nil
}

// queue appends cmd's frame to wbuf and, if no wake-up is pending, asks the
// event loop to flush (OnTraffic calls flushQueued).
func (c *Conn) queue(cmd *Command) error {
	return c.queueFrame(func(dst []byte) ([]byte, error) { return AppendFrame(dst, cmd) })
}

// queueFrame appends a frame with appendFrame to wbuf and, if no wake-up is
// pending, asks the event loop to flush (OnTraffic calls flushQueued). On an
// error wbuf is left as it was.
func (c *Conn) queueFrame(appendFrame func([]byte) ([]byte, error)) error {
	wake, err := c.appendQueued(appendFrame)
	if err != nil || !wake {
		return err
	}
	if c.tls != nil {
		c.tls.kick()
		return nil
	}
	if err := c.gc.Wake(nil); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", c.remote, err)
	}
	return nil
}

// appendQueued is queueFrame's part under wmu; it reports whether the caller
// must wake the loop. The lock is released even if appendFrame panics (a
// processor's body writer): the event loop takes it on every turn.
func (c *Conn) appendQueued(appendFrame func([]byte) ([]byte, error)) (wake bool, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf, err := appendFrame(c.wbuf)
	if err != nil {
		return false, err // c.wbuf is as it was
	}
	c.wbuf = buf
	if len(buf) >= flushAtBytes && !c.large.Load() {
		c.large.Store(true)
	}
	wake = !c.wakeSent
	c.wakeSent = true
	return wake, nil
}

// holdFlush marks a flush as coming: the event loop is in OnTraffic for this
// connection and flushes when it returns, so frames queued meanwhile need no
// wake-up of their own.
func (c *Conn) holdFlush() {
	c.wmu.Lock()
	c.wakeSent = true
	c.wmu.Unlock()
}

// flushIfLarge writes the queued frames now if they reached flushAtBytes.
// Like flushQueued, it runs on the event loop in OnTraffic, which still
// flushes when it returns. It reports whether the connection is still open:
// a failed write closes it at once, and its buffers with it.
func (c *Conn) flushIfLarge(gc gnet.Conn) bool {
	if !c.large.Load() {
		return true
	}
	c.flushQueued(gc)
	c.holdFlush()
	return !c.Closed()
}

// flushQueued writes the queued frames. It runs on the connection's event
// loop (OnTraffic), where gnet's Write is synchronous: it writes what the
// socket takes and copies the rest into the outbound buffer, so buf can be
// reused as soon as it returns.
//
// Nothing is written once the connection has closed: gnet has released it
// (and its descriptor may already belong to a new connection).
func (c *Conn) flushQueued(gc gnet.Conn) {
	closed := c.Closed()
	c.wmu.Lock()
	buf := c.wbuf
	if closed {
		c.wbuf, c.wspare = nil, nil
		c.large.Store(false)
		c.wakeSent = false
		c.wmu.Unlock()
		return
	}
	if len(buf) == 0 {
		c.wakeSent = false
		c.wmu.Unlock()
		return
	}
	c.wbuf = c.wspare[:0]
	c.wspare = nil
	if c.large.Load() {
		c.large.Store(false)
	}
	// Cleared together with taking the buffer: a frame queued from now on
	// sends its own wake-up.
	c.wakeSent = false
	c.wmu.Unlock()
	_, _ = gc.Write(buf) // a failed write closes the connection in gnet
	if cap(buf) <= maxSpareConnBuf {
		c.wmu.Lock()
		if c.wspare == nil {
			c.wspare = buf[:0]
		}
		c.wmu.Unlock()
	}
}

// Reply sends resp as the answer to req: it copies req's opaque and serialize
// type and sets the response bit. Requests with the oneway bit get no answer.
func (c *Conn) Reply(req, resp *Command) error {
	if !c.prepareReply(req, resp) {
		return nil
	}
	return c.Write(resp)
}

// ReplyWith is Reply with the body written by appendBody (exactly bodyLen
// bytes) straight into the connection's write buffer, saving the copy
// through resp.Body and a buffer per answer: a pull response's records go
// from the mapped files into the frame once, and the buffer is reused.
// appendBody runs under the write lock, which the event loop takes on every
// turn for this connection: it must only copy from memory. A body that may
// have to be read from disk (records no longer in the page cache) goes
// through ReplyWithOwnBuffer.
func (c *Conn) ReplyWith(req, resp *Command, bodyLen int, appendBody func([]byte) []byte) error {
	if !c.prepareReply(req, resp) {
		return nil
	}
	if c.Closed() {
		return ErrConnClosed
	}
	return c.queueFrame(func(dst []byte) ([]byte, error) { return AppendFrameWith(dst, resp, bodyLen, appendBody) })
}

// ReplyWithOwnBuffer is ReplyWith that builds the frame in a buffer of its
// own, outside any lock the event loop takes, and hands it to gnet: for a
// body copied out of data that may fault in from disk.
func (c *Conn) ReplyWithOwnBuffer(req, resp *Command, bodyLen int, appendBody func([]byte) []byte) error {
	if !c.prepareReply(req, resp) {
		return nil
	}
	if c.Closed() {
		return ErrConnClosed
	}
	buf, err := AppendFrameWith(make([]byte, 0, 256+32*len(resp.ExtFields)+len(resp.RawExt)+bodyLen), resp, bodyLen, appendBody)
	if err != nil {
		return err
	}
	if c.tls != nil {
		return c.queueOwned(buf)
	}
	if err := c.gc.AsyncWrite(buf, nil); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", c.remote, err)
	}
	return nil
}

// prepareReply makes resp the answer to req; false means req is oneway and
// gets none.
func (c *Conn) prepareReply(req, resp *Command) bool {
	if req.IsOneway() {
		return false
	}
	resp.Opaque = req.Opaque
	resp.SerializeType = req.SerializeType
	resp.MarkResponse()
	return true
}

func (c *Conn) replyError(req *Command, code ResponseCode, remark string) {
	_ = c.Reply(req, NewResponse(req, code, remark))
}

// Invoke sends a request to the peer (for example CHECK_TRANSACTION_STATE or
// GET_CONSUMER_RUNNING_INFO) and waits for its response or ctx.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	req.Opaque = c.s.nextOpaque()
	req.Flag &^= flagResponse | flagOneway
	ch := make(chan *Command, 1)
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil, ErrConnClosed
	}
	c.pending[req.Opaque] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.Opaque)
		c.mu.Unlock()
	}()
	if err := c.Write(req); err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrConnClosed
		}
		return resp, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("remoting: invoke code %d on %s: %w", req.Code, c.remote, ctx.Err())
	}
}

// InvokeOneway sends a request with the oneway bit set; the peer owes no answer.
func (c *Conn) InvokeOneway(req *Command) error {
	req.Opaque = c.s.nextOpaque()
	req.Flag = (req.Flag &^ flagResponse) | flagOneway
	return c.Write(req)
}

// complete hands a response to the Invoke waiting for its opaque; responses
// nobody waits for (timed out, or answers to oneway requests) are dropped.
func (c *Conn) complete(resp *Command) {
	c.mu.Lock()
	ch, ok := c.pending[resp.Opaque]
	delete(c.pending, resp.Opaque)
	c.mu.Unlock()
	if ok {
		ch <- resp
	}
}

func (c *Conn) markClosed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.closed.Store(true)
	for op, ch := range c.pending {
		close(ch)
		delete(c.pending, op)
	}
}
