package remoting

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/testcert"
)

// tlsFixture is a CA with a loopback server certificate and a client one.
type tlsFixture struct {
	ca     *testcert.CA
	server testcert.Files
	client testcert.Files
}

func newTLSFixture(t *testing.T) tlsFixture {
	ca := testcert.NewCA(t, "test")
	return tlsFixture{ca: ca, server: ca.Loopback(t, "server"), client: ca.Client(t, "client")}
}

func (f tlsFixture) serverConfig(t *testing.T, auth ClientAuth) *tls.Config {
	t.Helper()
	cfg, err := ServerTLSConfig(ServerTLSOptions{CertPath: f.server.CertPath, KeyPath: f.server.KeyPath,
		ClientAuth: auth, TrustCertPath: f.ca.CertPath})
	require.NoError(t, err)
	return cfg
}

// clientTLS is a client configuration trusting the fixture's CA; withCert
// adds the client certificate.
func (f tlsFixture) clientTLS(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	o := ClientTLSOptions{TrustCertPath: f.ca.CertPath}
	if withCert {
		o.CertPath, o.KeyPath = f.client.CertPath, f.client.KeyPath
	}
	cfg, err := ClientTLSConfig(o)
	require.NoError(t, err)
	return cfg
}

// strangerTLS is a client configuration that sends a certificate of
// another CA. Go's client sends none the server's CA list does not name, so
// it is forced, as another client might send it.
func (f tlsFixture) strangerTLS(t *testing.T) *tls.Config {
	t.Helper()
	stranger := testcert.NewCA(t, "other").Client(t, "stranger")
	cfg, err := ClientTLSConfig(ClientTLSOptions{TrustCertPath: f.ca.CertPath, CertPath: stranger.CertPath, KeyPath: stranger.KeyPath})
	require.NoError(t, err)
	cert := cfg.Certificates[0]
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return cfg
}

// tlsServer starts a server in mode with the echo processor and counts the
// requests it processes; hook records its log.
func tlsServer(t *testing.T, cfg ServerConfig, setup func(*Server)) (*Server, *logtest.Hook, *atomic.Int64) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.InfoLevel)
	cfg.Logger = log
	var processed atomic.Int64
	s := MustStartServer(t, cfg, func(s *Server) {
		pool := s.NewPool("counted", 2, 64)
		s.Handle(countedCode, pool, func(c *Conn, req *Command) (*Command, error) {
			processed.Add(1)
			resp := NewResponse(req, Success, "")
			resp.Body = req.Body
			return resp, nil
		})
		if setup != nil {
			setup(s)
		}
	})
	return s, hook, &processed
}

const countedCode RequestCode = 9301

// logged reports whether a warning containing msg was logged.
func logged(hook *logtest.Hook, msg string) bool {
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

func countLogged(hook *logtest.Hook, msg string) int {
	n := 0
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, msg) {
			n++
		}
	}
	return n
}

// closedByPeer waits until the server closes conn: a read returns EOF or a
// reset, never data.
func closedByPeer(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 1))
	assert.Zero(t, n, "the server answered instead of closing")
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection: %v", err)
}

func TestTLSEnforcingServesTLSAndDropsPlain(t *testing.T) {
	f := newTLSFixture(t)
	s, hook, processed := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthNone)}, nil)

	cl := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)})
	for _, st := range []SerializeType{JSONSerialize, RocketMQSerialize} {
		req := NewRequest(countedCode, map[string]string{"k": "v"}, []byte("over tls"))
		req.SerializeType = st
		resp := invoke(t, cl, s.Addr(), req)
		assert.Equal(t, Success, resp.ResponseCode())
		assert.Equal(t, "over tls", string(resp.Body))
	}
	require.EqualValues(t, 2, processed.Load())

	// A plain client: its frame is never decoded, the connection closes.
	conn := rawConn(t, s.Addr())
	frame, err := EncodeFrame(&Command{Code: int32(countedCode), Opaque: 7})
	require.NoError(t, err)
	_, err = conn.Write(frame)
	require.NoError(t, err)
	closedByPeer(t, conn)
	assert.EqualValues(t, 2, processed.Load(), "the plain frame must not be processed")
	assert.True(t, logged(hook, "this port only serves TLS"), "the refusal is logged")

	// Our plain remoting client fails too, and the TLS client still works.
	plain := MustNewClient(t, ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = plain.InvokeSync(ctx, s.Addr(), NewRequest(countedCode, nil, nil))
	require.Error(t, err)
	assert.EqualValues(t, 2, processed.Load())
	invoke(t, cl, s.Addr(), NewRequest(countedCode, nil, nil))
	assert.EqualValues(t, 3, processed.Load())
}

func TestTLSPermissiveServesBothOnOnePort(t *testing.T) {
	f := newTLSFixture(t)
	const inlineCode RequestCode = 9302
	s, _, _ := tlsServer(t, ServerConfig{TLSMode: TLSPermissive, TLS: f.serverConfig(t, ClientAuthNone)}, func(s *Server) {
		pool := s.NewPool("inline", 1, 4)
		answer := func(c *Conn, req *Command) (*Command, error) {
			resp := NewResponse(req, Success, "")
			if c.TLS() {
				resp.Remark = "tls"
			}
			resp.Body = req.Body
			return resp, nil
		}
		s.HandleInline(inlineCode, pool, answer, answer)
	})
	tlsClient := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)})
	plainClient := MustNewClient(t, ClientConfig{})
	// Bodies below the coalescing limit, above it, and above the TLS
	// reader's buffer (decoded from a buffer of its own).
	sizes := []int{0, 100, coalesceMaxBody + 1, tlsReadBufSize + 10}
	var wg sync.WaitGroup
	for _, cl := range []*Client{tlsClient, plainClient} {
		for _, code := range []RequestCode{countedCode, inlineCode, echoCode} {
			for _, size := range sizes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := bytes.Repeat([]byte{byte(size)}, size)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					resp, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(code, nil, body))
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, Success, resp.ResponseCode())
					assert.Equal(t, len(body), len(resp.Body))
					assert.True(t, bytes.Equal(body, resp.Body), "code %d size %d", code, size)
					if code == inlineCode {
						assert.Equal(t, cl == tlsClient, resp.Remark == "tls", "the processor sees which path")
					}
				}()
			}
		}
	}
	wg.Wait()
	// Many requests in flight on one TLS connection, answered from the
	// event loop and from workers interleaved.
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		code := countedCode
		if i%2 == 0 {
			code = inlineCode
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := tlsClient.InvokeSync(ctx, s.Addr(), NewRequest(code, nil, []byte("x")))
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
}

// The server's own requests (transaction checks) reach a TLS client, and
// the client's answer comes back through the same connection.
func TestTLSServerInvokesClient(t *testing.T) {
	f := newTLSFixture(t)
	conns := make(chan *Conn, 1)
	s, _, _ := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthNone)}, func(s *Server) {
		s.OnConnOpen(func(c *Conn) { conns <- c })
	})
	cl := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)})
	cl.RegisterHandler(CheckTransactionState, func(_ string, req *Command) *Command {
		return NewResponse(req, Success, "checked "+req.ExtFields["msgId"])
	})
	invoke(t, cl, s.Addr(), NewRequest(countedCode, nil, nil))
	c := <-conns
	require.True(t, c.TLS())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, NewRequest(CheckTransactionState, map[string]string{"msgId": "M1"}, nil))
	require.NoError(t, err)
	assert.Equal(t, "checked M1", resp.Remark)
}

func TestTLSDisabledRefusesHandshake(t *testing.T) {
	f := newTLSFixture(t)
	s, hook, processed := tlsServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false), DialTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(countedCode, nil, nil))
	require.Error(t, err)
	assert.Zero(t, processed.Load())
	require.Eventually(t, func() bool { return logged(hook, "this port does not serve TLS") }, 5*time.Second, 10*time.Millisecond)
}

func TestTLSClientAuthRequire(t *testing.T) {
	f := newTLSFixture(t)
	s, hook, processed := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthRequire)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// No certificate: refused, nothing processed, the refusal logged.
	noCert := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)})
	_, err := noCert.InvokeSync(ctx, s.Addr(), NewRequest(countedCode, nil, nil))
	require.Error(t, err)
	assert.Zero(t, processed.Load())
	require.Eventually(t, func() bool { return logged(hook, "TLS handshake failed") }, 5*time.Second, 10*time.Millisecond)

	// A certificate from another CA: refused.
	_, err = MustNewClient(t, ClientConfig{TLS: f.strangerTLS(t)}).InvokeSync(ctx, s.Addr(), NewRequest(countedCode, nil, nil))
	require.Error(t, err)
	assert.Zero(t, processed.Load())

	// The CA's client certificate: served.
	resp := invoke(t, MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, true)}), s.Addr(), NewRequest(countedCode, nil, nil))
	assert.Equal(t, Success, resp.ResponseCode())
	assert.EqualValues(t, 1, processed.Load())
}

func TestTLSClientAuthOptional(t *testing.T) {
	f := newTLSFixture(t)
	s, _, processed := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthOptional)}, nil)
	invoke(t, MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)}), s.Addr(), NewRequest(countedCode, nil, nil))
	invoke(t, MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, true)}), s.Addr(), NewRequest(countedCode, nil, nil))
	assert.EqualValues(t, 2, processed.Load())

	// A certificate that is sent is verified.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := MustNewClient(t, ClientConfig{TLS: f.strangerTLS(t)}).InvokeSync(ctx, s.Addr(), NewRequest(countedCode, nil, nil))
	require.Error(t, err)
	assert.EqualValues(t, 2, processed.Load())
}

// How the client checks the server: full (chain and address), chain only,
// or not at all.
func TestTLSClientVerifiesServer(t *testing.T) {
	f := newTLSFixture(t)
	// A certificate naming no address: fine for chain-only checks.
	noSAN := f.ca.Issue(t, testcert.Leaf{Name: "nosan"})
	cfg, err := ServerTLSConfig(ServerTLSOptions{CertPath: noSAN.CertPath, KeyPath: noSAN.KeyPath})
	require.NoError(t, err)
	s, _, _ := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: cfg}, nil)
	good, _, _ := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthNone)}, nil)
	other := testcert.NewCA(t, "other")

	try := func(addr string, o ClientTLSOptions) error {
		cfg, err := ClientTLSConfig(o)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = MustNewClient(t, ClientConfig{TLS: cfg}).InvokeSync(ctx, addr, NewRequest(countedCode, nil, nil))
		return err
	}
	assert.NoError(t, try(good.Addr(), ClientTLSOptions{TrustCertPath: f.ca.CertPath}))
	assert.Error(t, try(s.Addr(), ClientTLSOptions{TrustCertPath: f.ca.CertPath}), "full verification needs the address in the certificate")
	assert.NoError(t, try(s.Addr(), ClientTLSOptions{TrustCertPath: f.ca.CertPath, Verify: VerifyChain}))
	assert.Error(t, try(s.Addr(), ClientTLSOptions{TrustCertPath: other.CertPath, Verify: VerifyChain}), "chain checks still need a trusted CA")
	assert.Error(t, try(good.Addr(), ClientTLSOptions{}), "the system roots do not know the test CA")
	assert.NoError(t, try(s.Addr(), ClientTLSOptions{Verify: VerifyNone}))
}

func TestTLSConfigFiles(t *testing.T) {
	ca := testcert.NewCA(t, "files")
	enc := ca.Issue(t, testcert.Leaf{Name: "enc", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyPassword: "s3cret"})
	_, err := ServerTLSConfig(ServerTLSOptions{CertPath: enc.CertPath, KeyPath: enc.KeyPath, KeyPassword: "s3cret"})
	require.NoError(t, err, "an encrypted PKCS#8 key opens with its password")
	_, err = ServerTLSConfig(ServerTLSOptions{CertPath: enc.CertPath, KeyPath: enc.KeyPath, KeyPassword: "wrong"})
	assert.ErrorIs(t, err, ErrTLSConfig)
	_, err = ServerTLSConfig(ServerTLSOptions{CertPath: enc.CertPath, KeyPath: enc.KeyPath})
	assert.ErrorIs(t, err, ErrTLSConfig, "an encrypted key without a password")

	_, err = ServerTLSConfig(ServerTLSOptions{})
	assert.ErrorIs(t, err, ErrTLSConfig, "no certificate")
	_, err = ServerTLSConfig(ServerTLSOptions{CertPath: enc.CertPath})
	assert.ErrorIs(t, err, ErrTLSConfig, "a certificate without its key")
	srv := ca.Loopback(t, "srv")
	_, err = ServerTLSConfig(ServerTLSOptions{CertPath: srv.CertPath, KeyPath: srv.KeyPath, ClientAuth: ClientAuthRequire})
	assert.ErrorIs(t, err, ErrTLSConfig, "client auth without a trust file")
	_, err = ServerTLSConfig(ServerTLSOptions{CertPath: srv.CertPath, KeyPath: srv.KeyPath, ClientAuth: ClientAuthRequire, TrustCertPath: srv.KeyPath})
	assert.ErrorIs(t, err, ErrTLSConfig, "a trust file with no certificate")
	_, err = ClientTLSConfig(ClientTLSOptions{TrustCertPath: "/nonexistent/ca.pem"})
	assert.ErrorIs(t, err, ErrTLSConfig)

	for in, want := range map[string]TLSMode{"disabled": TLSDisabled, "Permissive": TLSPermissive, " ENFORCING ": TLSEnforcing} {
		got, err := ParseTLSMode(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err = ParseTLSMode("enforce")
	assert.ErrorIs(t, err, ErrTLSConfig, "a typo must not fall back to permissive")
	_, err = ParseClientAuth("required")
	assert.ErrorIs(t, err, ErrTLSConfig)

	// A start without a certificate fails instead of serving plain.
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", TLSMode: TLSEnforcing})
	assert.ErrorIs(t, s.Start(), ErrTLSConfig)
	assert.NoError(t, s.Shutdown(context.Background()))
}

// tls.test.mode.enable: a throwaway self-signed certificate, which clients
// that check nothing (the official Go client) accept.
func TestTLSSelfSigned(t *testing.T) {
	cfg, err := ServerTLSConfig(ServerTLSOptions{SelfSigned: true})
	require.NoError(t, err)
	s, _, processed := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: cfg}, nil)
	cl, err := ClientTLSConfig(ClientTLSOptions{Verify: VerifyNone})
	require.NoError(t, err)
	invoke(t, MustNewClient(t, ClientConfig{TLS: cl}), s.Addr(), NewRequest(countedCode, nil, nil))
	assert.EqualValues(t, 1, processed.Load())
}

// A connection that never sends its first byte is closed as idle, and its
// place in the limits is given back.
func TestTLSPendingConnectionIdles(t *testing.T) {
	f := newTLSFixture(t)
	s, _, _ := tlsServer(t, ServerConfig{TLSMode: TLSPermissive, TLS: f.serverConfig(t, ClientAuthNone),
		IdleTimeout: 200 * time.Millisecond, MaxConnsPerAddr: 1}, nil)
	conn := rawConn(t, s.Addr())
	closedByPeer(t, conn)
	require.Eventually(t, func() bool { total, _ := s.limits.count(peerAddr(conn.LocalAddr())); return total == 0 },
		5*time.Second, 10*time.Millisecond)
	invoke(t, MustNewClient(t, ClientConfig{}), s.Addr(), NewRequest(countedCode, nil, nil))
}

// A handshake that stalls is cut at TLSHandshakeTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	f := newTLSFixture(t)
	s, hook, _ := tlsServer(t, ServerConfig{TLSMode: TLSEnforcing, TLS: f.serverConfig(t, ClientAuthNone),
		TLSHandshakeTimeout: 200 * time.Millisecond}, nil)
	conn := rawConn(t, s.Addr())
	_, err := conn.Write([]byte{tlsHandshakeByte, 3, 1}) // a record header, then nothing
	require.NoError(t, err)
	closedByPeer(t, conn)
	require.Eventually(t, func() bool { return logged(hook, "TLS handshake failed") }, 5*time.Second, 10*time.Millisecond)
}

func TestConnLimitPerAddress(t *testing.T) {
	f := newTLSFixture(t)
	for _, mode := range []TLSMode{TLSDisabled, TLSPermissive} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := ServerConfig{MaxConnsPerAddr: 3, TLSMode: mode}
			if mode != TLSDisabled {
				cfg.TLS = f.serverConfig(t, ClientAuthNone)
			}
			s, hook, _ := tlsServer(t, cfg, nil)
			// Three admitted connections: on the TLS port one of them TLS.
			var clients []*Client
			for i := range 3 {
				ccfg := ClientConfig{}
				if mode != TLSDisabled && i == 0 {
					ccfg.TLS = f.clientTLS(t, false)
				}
				cl := MustNewClient(t, ccfg)
				invoke(t, cl, s.Addr(), NewRequest(countedCode, nil, nil))
				clients = append(clients, cl)
			}
			// Past the cap, new connections close unread, logged once.
			for range 5 {
				conn := rawConn(t, s.Addr())
				closedByPeer(t, conn)
			}
			require.Eventually(t, func() bool { return logged(hook, "connection limit reached") }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, 1, countLogged(hook, "connection limit reached"), "logged once per peer per interval")
			for _, e := range hook.AllEntries() {
				if strings.Contains(e.Message, "connection limit reached") {
					assert.Equal(t, "serverMaxConnectionsPerAddress", e.Data["reason"])
				}
			}
			// The admitted connections are untouched.
			for _, cl := range clients {
				invoke(t, cl, s.Addr(), NewRequest(countedCode, nil, nil))
			}
			// Closing one makes room for one.
			clients[0].CloseConn(s.Addr())
			require.Eventually(t, func() bool {
				_, n := s.limits.count(peerAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}))
				return n == 2
			}, 5*time.Second, 10*time.Millisecond)
			invoke(t, MustNewClient(t, ClientConfig{}), s.Addr(), NewRequest(countedCode, nil, nil))
		})
	}
}

func TestConnLimitTotal(t *testing.T) {
	s, hook, _ := tlsServer(t, ServerConfig{MaxConns: 2}, nil)
	a, b := MustNewClient(t, ClientConfig{}), MustNewClient(t, ClientConfig{})
	invoke(t, a, s.Addr(), NewRequest(countedCode, nil, nil))
	invoke(t, b, s.Addr(), NewRequest(countedCode, nil, nil))
	closedByPeer(t, rawConn(t, s.Addr()))
	require.Eventually(t, func() bool { return logged(hook, "connection limit reached") }, 5*time.Second, 10*time.Millisecond)
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "connection limit reached") {
			assert.Equal(t, "serverMaxConnections", e.Data["reason"])
		}
	}
	invoke(t, a, s.Addr(), NewRequest(countedCode, nil, nil))
	invoke(t, b, s.Addr(), NewRequest(countedCode, nil, nil))
}

// Shutdown closes TLS connections too and waits for their goroutines
// (TestMain checks that none leaks).
func TestTLSShutdownClosesConnections(t *testing.T) {
	f := newTLSFixture(t)
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", TLSMode: TLSPermissive, TLS: f.serverConfig(t, ClientAuthNone)})
	s.Handle(echoCode, s.NewPool("p", 1, 4), func(c *Conn, req *Command) (*Command, error) { return NewResponse(req, Success, ""), nil })
	require.NoError(t, s.Start())
	cl := MustNewClient(t, ClientConfig{TLS: f.clientTLS(t, false)})
	invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, nil))
	// And one stuck in its handshake.
	stuck := rawConn(t, s.Addr())
	_, err := stuck.Write([]byte{tlsHandshakeByte})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	_ = stuck.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(bufio.NewReader(stuck))
	// Closed, not left to the read deadline: EOF, or a reset when the
	// server closed with the byte still unread in its receive buffer.
	if err != nil {
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the stuck connection was closed")
	}
}
