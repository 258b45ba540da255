package remoting

import (
	"context"
	"errors"
	"fmt"
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
	gc       gnet.Conn
	s        *Server
	remote   string
	local    string
	lastRead atomic.Int64

	mu      sync.Mutex // guards pending and closed
	pending map[int32]chan *Command
	closed  bool
}

// ID is unique among the server's connections for its lifetime.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the peer's address, host:port.
func (c *Conn) RemoteAddr() string { return c.remote }

// LocalAddr is our side's address, host:port.
func (c *Conn) LocalAddr() string { return c.local }

// Closed reports whether the connection has closed.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close closes the connection; the server's close hooks run.
func (c *Conn) Close() error { return c.gc.Close() }

// Write encodes cmd and queues it on the connection.
func (c *Conn) Write(cmd *Command) error {
	if c.Closed() {
		return ErrConnClosed
	}
	buf, err := EncodeFrame(cmd)
	if err != nil {
		return err
	}
	if err := c.gc.AsyncWrite(buf, nil); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", c.remote, err)
	}
	return nil
}

// Reply sends resp as the answer to req: it copies req's opaque and serialize
// type and sets the response bit. Requests with the oneway bit get no answer.
func (c *Conn) Reply(req, resp *Command) error {
	if req.IsOneway() {
		return nil
	}
	resp.Opaque = req.Opaque
	resp.SerializeType = req.SerializeType
	resp.MarkResponse()
	return c.Write(resp)
}

// ReplyWith is Reply with the body written by appendBody (exactly bodyLen
// bytes) straight into the frame buffer, saving the copy through resp.Body.
func (c *Conn) ReplyWith(req, resp *Command, bodyLen int, appendBody func([]byte) []byte) error {
	if req.IsOneway() {
		return nil
	}
	if c.Closed() {
		return ErrConnClosed
	}
	resp.Opaque = req.Opaque
	resp.SerializeType = req.SerializeType
	resp.MarkResponse()
	buf, err := AppendFrameWith(make([]byte, 0, 256+32*len(resp.ExtFields)+bodyLen), resp, bodyLen, appendBody)
	if err != nil {
		return err
	}
	if err := c.gc.AsyncWrite(buf, nil); err != nil {
		return fmt.Errorf("remoting: write to %s: %w", c.remote, err)
	}
	return nil
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
	if c.closed {
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
	if c.closed {
		return
	}
	c.closed = true
	for op, ch := range c.pending {
		close(ch)
		delete(c.pending, op)
	}
}
