// Package daemon holds what the server mains (mqnamesrv, mqbroker) share:
// the exit-code convention for flags, the logger they configure from
// -log-level, and the start / wait-for-signal / bounded-shutdown lifecycle.
// The servers themselves stay in their own packages; this is only the
// process shell around them.
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
