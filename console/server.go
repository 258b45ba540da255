// Package console is gorocketmq's web console: cluster, topics, consumer
// groups and messages in a browser, with a live chart of send and consume
// TPS. It is an HTTP server over the SDK's admin client (client.Admin), so
// every action is the same admin request mqadmin makes; cmd/mqconsole runs
// it. Templates, styles and the chart script are embedded: the binary is
// all there is to deploy.
//
// Pages are rendered by html/template, which escapes everything a cluster
// hands back (topic names, keys, bodies, properties) for the context it
// lands in; a Content-Security-Policy that allows only the console's own
// script is a second wall. Inputs are checked against RocketMQ's rules
// before any request is made. Write actions are POST forms carrying a
// per-process token, and a read-only console refuses them all.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
)

// Errors of the console's lifecycle and input checks.
var (
	// ErrStarted means Start was called twice.
	ErrStarted = errors.New("console: already started")
	// ErrClosed means the console was shut down.
	ErrClosed = errors.New("console: shut down")
	// ErrReadOnly means a write action was asked of a read-only console.
	ErrReadOnly = errors.New("console: read-only: write actions are disabled (-read-only)")
	// ErrBadInput means a form or query value broke a rule; the text says which.
	ErrBadInput = errors.New("console: bad input")
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// requestTimeout bounds the admin requests behind one page.
const requestTimeout = 20 * time.Second

// Config is what the console needs.
type Config struct {
	// Addr is the HTTP listen address (host:port; port 0 picks one).
	Addr string
	// ClientOptions configure the admin client and the producer (at least
	// client.WithNameServer).
	ClientOptions []client.Option
	// ChartEvery is how often the live chart polls the brokers' totals
	// (0: every 2 s).
	ChartEvery time.Duration
	// ReadOnly disables every write action: creating and deleting topics,
	// sending and resending messages, resetting offsets.
	ReadOnly bool
	// Log receives the console's log.
	Log logrus.FieldLogger
}

// Server is a running console.
type Server struct {
	cfg   Config
	log   logrus.FieldLogger
	admin *client.Admin
	pages map[string]*template.Template
	// token guards write forms against cross-site posts: a page of
	// another origin cannot read it.
	token string

	prodMu     sync.Mutex // guards producer and prodClosed
	producer   *client.Producer
	prodClosed bool // Shutdown ran: no producer may start after it

	mu   sync.Mutex // guards srv and ln
	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup // owns serveLoop
	done bool
}

// New builds a console and its admin client; Start serves it.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		cfg.Log = l
	}
	if cfg.ChartEvery <= 0 {
		cfg.ChartEvery = 2 * time.Second
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("console: token: %w", err)
	}
	admin, err := client.NewAdmin(cfg.ClientOptions...)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Log.WithField("component", "console"), admin: admin, pages: pages, token: hex.EncodeToString(tok)}, nil
}

// Handler is the console's HTTP handler (tests serve it directly).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/cluster", http.StatusSeeOther) })
	mux.HandleFunc("GET /cluster", s.pageCluster)
	mux.HandleFunc("GET /api/stats", s.apiStats)
	mux.HandleFunc("GET /topics", s.pageTopics)
	mux.HandleFunc("POST /topics", s.write(s.postCreateTopic))
	mux.HandleFunc("GET /topic", s.pageTopic)
	mux.HandleFunc("POST /topic/delete", s.write(s.postDeleteTopic))
	mux.HandleFunc("POST /topic/send", s.write(s.postSendMessage))
	mux.HandleFunc("GET /groups", s.pageGroups)
	mux.HandleFunc("GET /group", s.pageGroup)
	mux.HandleFunc("POST /group/reset", s.write(s.postResetOffset))
	mux.HandleFunc("POST /group/skip", s.write(s.postSkipBacklog))
	mux.HandleFunc("GET /messages", s.pageMessages)
	mux.HandleFunc("GET /message", s.pageMessage)
	mux.HandleFunc("POST /message/resend", s.write(s.postResend))
	mux.HandleFunc("POST /message/deliver", s.write(s.postDeliver))
	return secureHeaders(mux)
}

// secureHeaders adds headers that keep the pages from running anything
// but the console's own script, being framed, or being sniffed.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Start listens and serves; it returns once the port is open.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil || s.done {
		return ErrStarted
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("console: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	// A client gets 10 s for the headers and 30 s for the whole request,
	// body included, so a slow sender cannot hold connections open; the
	// answer may take a broker call (requestTimeout) to build.
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: requestTimeout + 10*time.Second, IdleTimeout: 2 * time.Minute}
	s.wg.Add(1)
	go s.serveLoop(s.srv, ln)
	return nil
}

func (s *Server) serveLoop(srv *http.Server, ln net.Listener) {
	defer s.wg.Done()
	_ = srv.Serve(ln) // ends with Shutdown
}

// Addr is the address served (the real port once started).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Addr
}

// Shutdown stops serving (running requests finish within ctx) and closes
// the admin client and the producer. Safe to call twice and before Start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.srv, s.done = nil, true
	s.mu.Unlock()
	var errs []error
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			errs = append(errs, err)
		}
		s.wg.Wait()
	}
	s.prodMu.Lock()
	if s.producer != nil {
		errs = append(errs, s.producer.Shutdown())
		s.producer = nil
	}
	// A handler Shutdown stopped waiting for (ctx ran out) may still ask
	// for the producer: it must not start one nobody shuts down.
	s.prodClosed = true
	s.prodMu.Unlock()
	errs = append(errs, s.admin.Close())
	return errors.Join(errs...)
}

// getProducer starts the producer the console sends with, on first use.
func (s *Server) getProducer() (*client.Producer, error) {
	s.prodMu.Lock()
	defer s.prodMu.Unlock()
	if s.prodClosed {
		return nil, ErrClosed
	}
	if s.producer != nil {
		return s.producer, nil
	}
	opts := append(append([]client.Option{}, s.cfg.ClientOptions...), client.WithGroupName("MQCONSOLE_PRODUCER"))
	p, err := client.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	s.producer = p
	return p, nil
}

// write wraps a POST handler: refused on a read-only console or without
// the form token; otherwise run, then back to the page the action named
// with its outcome.
func (s *Server) write(h func(r *http.Request) (next string, msg string, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.ReadOnly {
			s.renderError(w, http.StatusForbidden, ErrReadOnly)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
		if err := r.ParseForm(); err != nil {
			s.renderError(w, http.StatusBadRequest, fmt.Errorf("%w: %v", ErrBadInput, err))
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(s.token)) != 1 {
			s.renderError(w, http.StatusForbidden, errors.New("console: the form is stale or from another site: reload the page and try again"))
			return
		}
		next, msg, err := h(r)
		if err != nil {
			s.log.WithError(err).WithField("action", r.URL.Path).Info("console action failed")
			s.renderError(w, statusOf(err), err)
			return
		}
		s.log.WithFields(logrus.Fields{"action": r.URL.Path, "remote": r.RemoteAddr}).Info(msg)
		http.Redirect(w, r, s.withFlash(next, msg), http.StatusSeeOther)
	}
}

// statusOf is the HTTP status for an action's error.
func statusOf(err error) int {
	if errors.Is(err, ErrBadInput) {
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// ctx is a request's context bounded by requestTimeout.
func ctxOf(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}
