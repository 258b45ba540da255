package remoting

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/sirupsen/logrus"
)

// The TLS path. gnet has no TLS, and the plain path must not pay for it, so
// every connection is accepted by gnet as before; with TLS on (permissive or
// enforcing) its first byte decides where it goes. A plain frame stays on the
// event loop (enforcing drops it). A TLS handshake (0x16) is handed over:
// the socket is duplicated out of gnet, gnet closes its own descriptor, and
// a goroutine serves the connection through crypto/tls, decoding frames into
// the same Conn and Command and calling the same dispatch, so processors
// cannot tell the paths apart. Its answers are coalesced like the loop's
// (Conn.wbuf), and written by the reader at the end of each batch of frames
// or, for answers from workers, by the connection's writeLoop.

// defaultTLSHandshakeTimeout bounds a TLS handshake (Netty's SslHandler
// default is 10 s too).
const defaultTLSHandshakeTimeout = 10 * time.Second

// tlsReadBufSize is the TLS reader's buffer: frames up to this size are
// decoded in place, as gnet's input buffer lets the plain path do.
const tlsReadBufSize = 64 << 10

// pendingConn is a connection on a TLS-enabled port whose first byte has not
// arrived yet, so neither path owns it. It holds its place in connLimits.
type pendingConn struct {
	gc     gnet.Conn
	addr   netip.Addr
	remote string
	opened int64 // unix nanoseconds, for the idle scan
	// handedOff is set on the event loop before it returns gnet.Close for a
	// TLS connection: the TLS path now owns the socket and the limit slot,
	// so OnClose releases nothing.
	handedOff bool
}

// route decides a pending connection's path from its first byte. It returns
// the plain Conn to go on decoding frames on the loop, or nil and the action
// for the loop (gnet.None while no byte has arrived).
func (s *Server) route(gc gnet.Conn, p *pendingConn) (*Conn, gnet.Action) {
	first, err := gc.Peek(1)
	if err != nil {
		return nil, gnet.None
	}
	s.pending.Delete(p)
	if first[0] == tlsHandshakeByte {
		return nil, s.handOff(gc, p)
	}
	if s.cfg.TLSMode == TLSEnforcing {
		// Fail closed: nothing of the connection is decoded, let alone run.
		head, _ := gc.Peek(min(gc.InboundBuffered(), 8))
		s.refusals.refused(p.addr, p.remote, "tlsRequired",
			"dropping a plain connection: this port only serves TLS (tls.server.mode=enforcing)",
			logrus.Fields{"firstBytes": hex.EncodeToString(head)})
		return nil, gnet.Close
	}
	return s.openConn(gc, p.addr), gnet.None
}

// handOff moves a TLS connection off the event loop: it duplicates the
// socket for a goroutine of the TLS path, with the bytes gnet already read,
// and closes gnet's side. Closing a duplicated descriptor sends nothing to
// the peer; the socket lives on in the copy.
func (s *Server) handOff(gc gnet.Conn, p *pendingConn) gnet.Action {
	head, _ := gc.Peek(-1)
	buffered := bytes.Clone(head)
	fd, err := gc.Dup()
	if err != nil {
		s.log.WithFields(logrus.Fields{"peer": p.remote, "reason": err}).Warn("cannot take over a TLS connection")
		return gnet.Close
	}
	f := os.NewFile(uintptr(fd), "tls-conn")
	nc, err := net.FileConn(f) // duplicates fd again, into Go's poller
	_ = f.Close()
	if err != nil {
		s.log.WithFields(logrus.Fields{"peer": p.remote, "reason": err}).Warn("cannot take over a TLS connection")
		return gnet.Close
	}
	s.tlsMu.Lock()
	if s.tlsClosed {
		s.tlsMu.Unlock()
		_ = nc.Close()
		return gnet.Close
	}
	if s.tlsLive == nil {
		s.tlsLive = make(map[net.Conn]struct{})
	}
	s.tlsLive[nc] = struct{}{}
	s.tlsWG.Add(1)
	s.tlsMu.Unlock()
	p.handedOff = true
	go s.serveTLSLoop(nc, buffered, p)
	return gnet.Close
}

// prefixConn reads prefix before the socket: the bytes gnet read before the
// hand-off (the ClientHello, in part or whole).
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (pc *prefixConn) Read(b []byte) (int, error) {
	if len(pc.prefix) > 0 {
		n := copy(b, pc.prefix)
		pc.prefix = pc.prefix[n:]
		return n, nil
	}
	return pc.Conn.Read(b)
}

// serveTLSLoop owns a handed-off connection: the handshake, then the frames
// until the connection ends; then it runs the close hooks and releases the
// connection's limit slot.
func (s *Server) serveTLSLoop(nc net.Conn, buffered []byte, p *pendingConn) {
	defer s.tlsWG.Done()
	defer s.limits.release(p.addr)
	defer func() {
		_ = nc.Close()
		s.tlsMu.Lock()
		delete(s.tlsLive, nc)
		s.tlsMu.Unlock()
	}()
	tc := tls.Server(&prefixConn{Conn: nc, prefix: buffered}, s.cfg.TLS)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TLSHandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if !errors.Is(err, net.ErrClosed) { // else closed by Shutdown
			s.refusals.refused(p.addr, p.remote, "tlsHandshake", "TLS handshake failed", logrus.Fields{"error": err.Error()})
		}
		return
	}
	c := &Conn{id: s.nextID.Add(1), s: s, remote: p.remote, addr: p.addr, pending: make(map[int32]chan *Command)}
	if la := nc.LocalAddr(); la != nil {
		c.local = la.String()
	}
	c.tls = &tlsTransport{
		nc: nc, tc: tc,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		writeTimeout: s.cfg.IdleTimeout,
	}
	c.lastRead.Store(time.Now().UnixNano())
	s.conns.Store(c.id, c)
	for _, fn := range s.onOpen {
		fn(c)
	}
	s.tlsWG.Add(1) // this goroutine is counted, so the count is above zero
	go func() {
		defer s.tlsWG.Done()
		c.tlsWriteLoop()
	}()
	err = s.readTLSFrames(c, bufio.NewReaderSize(tc, tlsReadBufSize))
	c.tls.close()
	s.conns.Delete(c.id)
	c.markClosed()
	c.dropQueued()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.WithFields(logrus.Fields{"peer": c.remote, "reason": err}).Debug("connection closed")
	}
	for _, fn := range s.onClose {
		fn(c)
	}
}

// readTLSFrames decodes and dispatches frames until the connection fails or
// closes. As OnTraffic does, it takes every whole frame already buffered
// (up to MaxFramesPerWake) before writing the answers they produced in one
// write; it blocks for more only after that write.
func (s *Server) readTLSFrames(c *Conn, r *bufio.Reader) error {
	for {
		frame, inPlace, err := readTLSFrame(r)
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrFrameTooShort) {
				s.rejectPeer(c, err)
			}
			return err
		}
		c.lastRead.Store(time.Now().UnixNano())
		c.holdFlush()
		for k := 1; ; k++ {
			// In place, the body aliases the reader's buffer until Discard,
			// as it aliases gnet's on the plain path.
			cmd, err := decodeFrame(frame, false, s.keepRawFn)
			if err != nil {
				c.flushTLS()
				s.rejectPeer(c, err)
				return err
			}
			s.dispatch(c, cmd)
			if inPlace {
				_, _ = r.Discard(4 + len(frame))
			}
			if c.large.Load() {
				c.flushTLS()
				c.holdFlush()
			}
			if k >= s.cfg.MaxFramesPerWake {
				break
			}
			if frame, err = bufferedTLSFrame(r); err != nil {
				c.flushTLS()
				s.rejectPeer(c, err)
				return err
			}
			if frame == nil {
				break
			}
			inPlace = true
		}
		c.flushTLS()
	}
}

// readTLSFrame reads the next frame (after its length prefix), waiting for
// it. One that fits the reader's buffer is returned in place (the caller
// discards it after use); a larger one is read into a buffer of its own.
func readTLSFrame(r *bufio.Reader) (frame []byte, inPlace bool, err error) {
	p, err := r.Peek(4)
	if err != nil {
		return nil, false, readErr(err, len(p))
	}
	n, err := FrameLength(p)
	if err != nil {
		return nil, false, err
	}
	if 4+n <= r.Size() {
		b, err := r.Peek(4 + n)
		if err != nil {
			return nil, false, readErr(err, len(b))
		}
		return b[4:], true, nil
	}
	_, _ = r.Discard(4)
	frame = make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, false, readErr(err, 1)
	}
	return frame, false, nil
}

// bufferedTLSFrame returns the next frame in place if it is wholly buffered
// already, nil if not (or if it is too large to be), or the error of a bad
// length.
func bufferedTLSFrame(r *bufio.Reader) ([]byte, error) {
	if r.Buffered() < 4 {
		return nil, nil
	}
	p, _ := r.Peek(4)
	n, err := FrameLength(p)
	if err != nil {
		return nil, err
	}
	if 4+n > r.Size() || r.Buffered() < 4+n {
		return nil, nil
	}
	b, _ := r.Peek(4 + n)
	return b[4:], nil
}

// tlsTransport is a Conn's TLS socket. Frames are queued in the Conn's wbuf
// as on the plain path; owned holds frames in buffers of their own (large
// bodies), as gnet's AsyncWrite would.
type tlsTransport struct {
	nc   net.Conn // the socket: closing it ends the connection
	tc   *tls.Conn
	wake chan struct{} // frames are queued for writeLoop (capacity 1)
	done chan struct{} // closed by close: writeLoop exits

	owned [][]byte // guarded by the Conn's wmu

	closeOnce    sync.Once
	writeTimeout time.Duration
	wdl          atomic.Int64 // the write deadline last set, unix nanoseconds
}

// kick tells writeLoop there are frames to write; a wake already pending
// covers them.
func (t *tlsTransport) kick() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// close ends the connection: the reader fails and tears it down. It closes
// the socket rather than the TLS session, whose close_notify would wait
// behind a write blocked on a peer that does not read. Safe to call twice.
func (t *tlsTransport) close() {
	t.closeOnce.Do(func() {
		close(t.done)
		_ = t.nc.Close()
	})
}

// write writes buf, then owned. The write deadline is moved only once it is
// an eighth of writeTimeout old: each move re-arms a runtime timer. A peer
// that reads nothing for writeTimeout fails the write and loses the
// connection, as it would lose it idle.
func (t *tlsTransport) write(buf []byte, owned [][]byte) error {
	now := time.Now()
	if dl := t.wdl.Load(); dl-now.UnixNano() < int64(t.writeTimeout-t.writeTimeout/8) {
		want := now.Add(t.writeTimeout)
		t.wdl.Store(want.UnixNano())
		_ = t.nc.SetWriteDeadline(want)
	}
	if len(buf) > 0 {
		if _, err := t.tc.Write(buf); err != nil {
			return fmt.Errorf("remoting: write: %w", err)
		}
	}
	for _, b := range owned {
		if _, err := t.tc.Write(b); err != nil {
			return fmt.Errorf("remoting: write: %w", err)
		}
	}
	return nil
}

// tlsWriteLoop writes what processors answer from other goroutines (workers,
// parked pulls) while the reader waits for the peer.
func (c *Conn) tlsWriteLoop() {
	for {
		select {
		case <-c.tls.done:
			return
		case <-c.tls.wake:
			c.flushTLS()
		}
	}
}

// queueOwned queues a frame built in its own buffer (Write of a large body,
// ReplyWithOwnBuffer) on the TLS path.
func (c *Conn) queueOwned(buf []byte) error {
	c.wmu.Lock()
	c.tls.owned = append(c.tls.owned, buf)
	wake := !c.wakeSent
	c.wakeSent = true
	c.wmu.Unlock()
	if wake {
		c.tls.kick()
	}
	return nil
}

// flushTLS writes the queued frames, like flushQueued for the plain path.
// The reader calls it after each batch, writeLoop when woken; each takes
// the buffers it writes under wmu, so the two never write the same frame,
// and tls.Conn serialises their writes. A failed write closes the
// connection.
func (c *Conn) flushTLS() {
	c.wmu.Lock()
	buf, owned := c.wbuf, c.tls.owned
	if c.Closed() || (len(buf) == 0 && len(owned) == 0) {
		if c.Closed() {
			c.wbuf, c.wspare, c.tls.owned = nil, nil, nil
		}
		c.large.Store(false)
		c.wakeSent = false
		c.wmu.Unlock()
		return
	}
	c.wbuf = c.wspare[:0]
	c.wspare = nil
	c.tls.owned = nil
	c.large.Store(false)
	// Cleared with taking the buffers: a frame queued from now on sends
	// its own wake-up.
	c.wakeSent = false
	c.wmu.Unlock()
	if err := c.tls.write(buf, owned); err != nil {
		c.s.log.WithFields(logrus.Fields{"peer": c.remote, "reason": err}).Debug("closing a TLS connection after a failed write")
		c.tls.close()
		return
	}
	if cap(buf) <= maxSpareConnBuf {
		c.wmu.Lock()
		if c.wspare == nil {
			c.wspare = buf[:0]
		}
		c.wmu.Unlock()
	}
}

// dropQueued forgets frames queued on a closed TLS connection.
func (c *Conn) dropQueued() {
	c.wmu.Lock()
	c.wbuf, c.wspare, c.tls.owned = nil, nil, nil
	c.wmu.Unlock()
}

// stopTLS closes every connection of the TLS path, handshaking or serving,
// refuses new hand-offs, and waits for their goroutines or ctx.
func (s *Server) stopTLS(ctx context.Context) error {
	s.tlsMu.Lock()
	s.tlsClosed = true
	for nc := range s.tlsLive {
		_ = nc.Close()
	}
	s.tlsMu.Unlock()
	done := make(chan struct{})
	go func() {
		s.tlsWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("remoting: TLS connections still closing: %w", ctx.Err())
	}
}
