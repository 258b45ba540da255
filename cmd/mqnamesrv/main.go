// Command mqnamesrv runs a RocketMQ-compatible nameserver.
//
//	mqnamesrv [-c namesrv.conf] [-p]
//
// -c reads a RocketMQ properties-style file (listenPort=9876) or YAML;
// -p prints the effective configuration and exits. SIGINT or SIGTERM stops
// the server gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// shutdownTimeout bounds a graceful stop: running requests finish, then
// connections close.
const shutdownTimeout = 15 * time.Second

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs, nil))
}

// run is main without the process: it returns the exit code. started, when
// not nil, receives the listening address once the server is up.
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal, started chan<- string) int {
	fs := flag.NewFlagSet("mqnamesrv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("c", "", "config file (RocketMQ properties style, or .yaml)")
	printConfig := fs.Bool("p", false, "print the effective configuration and exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	log := logrus.New()
	log.SetOutput(stderr)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	lvl, err := logrus.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: -log-level: %v\n", err)
		return 2
	}
	log.SetLevel(lvl)

	cfg, err := conf.LoadNamesrvConfig(*configFile, log)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: %v\n", err)
		return 1
	}
	if *printConfig {
		fmt.Fprint(stdout, conf.Format(&cfg))
		return 0
	}

	ns, err := nameserver.New(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: %v\n", err)
		return 1
	}
	if err := ns.Start(); err != nil {
		log.WithError(err).Error("cannot start")
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = ns.Shutdown(ctx)
		return 1
	}
	log.WithField("addr", ns.Addr()).Info("The Name Server boot success.")
	if started != nil {
		started <- ns.Addr()
	}

	sig := <-stop
	log.WithField("signal", sig).Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := ns.Shutdown(ctx); err != nil {
		log.WithError(err).Error("shutdown")
		return 1
	}
	return 0
}
