// Package daemon holds what the server mains (mqnamesrv, mqbroker,
// mqcontroller) share: the exit-code convention for flags, the logger they
// configure from -log-level, the start / wait-for-signal / bounded-shutdown
// lifecycle, and how a controller member is put on a host's port. The
// servers themselves stay in their own packages; this is only the process
// shell around them.
package daemon

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/controller"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// Exit codes shared by the server binaries.
const (
	ExitOK    = 0
	ExitFail  = 1 // bad config, or the server failed to start or stop
	ExitUsage = 2 // bad command line
)

// StopSignals returns a channel that receives SIGINT and SIGTERM, the
// signals that stop a server gracefully.
func StopSignals() <-chan os.Signal {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return sigs
}

// ParseFlags parses args into fs. ok is false when the process should exit
// at once, with code: ExitOK after -h (the flag package printed the usage),
// ExitUsage for a bad flag (it printed why).
func ParseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	return ExitOK, true
}

// NewLogger returns a logger writing timestamped text to w at level (one of
// logrus's names: debug, info, warn, error...).
func NewLogger(w io.Writer, level string) (*logrus.Logger, error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	log := logrus.New()
	log.SetOutput(w)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	log.SetLevel(lvl)
	return log, nil
}

// Server is the lifecycle both servers expose.
type Server interface {
	// Start returns once the server listens, or its error.
	Start() error
	// Addr is the listening address; valid after Start.
	Addr() string
	// Shutdown stops the server; safe after a failed Start.
	Shutdown(ctx context.Context) error
}

// Run starts srv and serves until stop delivers a signal, then shuts it
// down within timeout, and returns the exit code. Once srv listens it logs
// bootMsg at Info with bootFields plus the listening address as "addr", and,
// when started is not nil, sends the address there. A failed start still
// shuts down whatever did start, so no half-started store stays locked.
func Run(srv Server, log logrus.FieldLogger, timeout time.Duration, bootMsg string, bootFields logrus.Fields,
	stop <-chan os.Signal, started chan<- string) int {
	if err := srv.Start(); err != nil {
		log.WithError(err).Error("cannot start")
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		return ExitFail
	}
	log.WithFields(bootFields).WithField("addr", srv.Addr()).Info(bootMsg)
	if started != nil {
		started <- srv.Addr()
	}

	sig := <-stop
	log.WithField("signal", sig).Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.WithError(err).Error("shutdown")
		return ExitFail
	}
	return ExitOK
}

// Chain is first with helpers started after it (a metrics endpoint beside
// a broker), as one Server: Start starts first and then each helper,
// stopping at the first failure (Run then calls Shutdown, which stops what
// started); Addr is first's; Shutdown stops the helpers in reverse order
// and first last.
func Chain(first Server, then ...Server) Server {
	return &chain{servers: append([]Server{first}, then...)}
}

type chain struct {
	servers []Server
	started int
}

func (c *chain) Start() error {
	for _, s := range c.servers {
		if err := s.Start(); err != nil {
			return err
		}
		c.started++
	}
	return nil
}

func (c *chain) Addr() string { return c.servers[0].Addr() }

func (c *chain) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(c.servers) - 1; i >= 0; i-- {
		// The first always gets Shutdown (a failed Start leaves a store to
		// close); helpers only once started.
		if i == 0 || i < c.started {
			if err := c.servers[i].Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Logged is srv that logs msg with its address at Info once it started.
func Logged(srv Server, log logrus.FieldLogger, msg string) Server { return logged{srv, log, msg} }

type logged struct {
	Server
	log logrus.FieldLogger
	msg string
}

func (l logged) Start() error {
	if err := l.Server.Start(); err != nil {
		return err
	}
	l.log.WithField("addr", l.Addr()).Info(l.msg)
	return nil
}

// HostController builds the controller member keys describe (scan is the
// scanNotActiveBrokerInterval of the file they came from), routes its
// requests on srv, a pool of their own sized by the keys, and pairs it with
// host, which owns srv: mqcontroller's own server, or a nameserver's with
// enableControllerInNamesrv.
func HostController(host controller.Host, srv *remoting.Server, keys *conf.ControllerKeys, scan time.Duration,
	log logrus.FieldLogger) (*controller.Hosted, error) {
	cc, err := keys.Options(scan)
	if err != nil {
		return nil, err
	}
	ctl, err := controller.New(cc, log)
	if err != nil {
		return nil, err
	}
	ctl.Register(srv, srv.NewPool("controller", keys.ControllerThreadPoolNums, keys.ControllerRequestThreadPoolQueueCapacity))
	return controller.NewHosted(host, ctl), nil
}
