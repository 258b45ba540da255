// Command mqbroker runs a RocketMQ-compatible broker.
//
//	mqbroker [-c broker.conf] [-n 127.0.0.1:9876[;addr...]] [-p] [-pprof 127.0.0.1:6060]
//
// -c reads a RocketMQ properties-style file (brokerName=broker-a) or YAML;
// -n sets namesrvAddr (over the file and the NAMESRV_ADDR environment
// variable); -p prints the effective configuration and exits; -pprof serves
// Go's profiling endpoints (/debug/pprof/) on a loopback address. SIGINT or
// SIGTERM stops the broker gracefully: it unregisters, finishes running
// requests, persists consumer offsets and flushes the store.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/cmd/internal/daemon"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/metrics"
)

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 30 * time.Second

func main() {
	sigs := daemon.StopSignals()
	tuneGC(os.Getenv)
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr, sigs, nil))
}

// run is main without the process: it returns the exit code. getenv reads
// the environment (NAMESRV_ADDR); started, when not nil, receives the
// broker's address once it is up.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer, stop <-chan os.Signal, started chan<- string) int {
	fs := flag.NewFlagSet("mqbroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("c", "", "config file (RocketMQ properties style, or .yaml)")
	namesrv := fs.String("n", "", "nameserver addresses, ';'-separated ip:port (overrides namesrvAddr and NAMESRV_ADDR)")
	printConfig := fs.Bool("p", false, "print the effective configuration and exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	pprofAddr := fs.String("pprof", "", "serve /debug/pprof/ on this loopback ip:port (off when empty)")
	if code, ok := daemon.ParseFlags(fs, args); !ok {
		return code
	}
	log, err := daemon.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "mqbroker: -log-level: %v\n", err)
		return 2
	}

	cfg := conf.DefaultBrokerConfig()
	// Precedence, lowest first: NAMESRV_ADDR, the file, -n (as RocketMQ).
	cfg.NamesrvAddr = getenv("NAMESRV_ADDR")
	if *configFile != "" {
		if err := conf.Load(*configFile, &cfg, log); err != nil {
			fmt.Fprintf(stderr, "mqbroker: %v\n", err)
			return 1
		}
	}
	if *namesrv != "" {
		cfg.NamesrvAddr = *namesrv
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mqbroker: %v\n", err)
		return 1
	}
	if *printConfig {
		fmt.Fprint(stdout, conf.Format(&cfg))
		return 0
	}
	if len(cfg.NamesrvAddrs()) == 0 {
		log.Warn("no nameserver configured (-n, namesrvAddr or NAMESRV_ADDR): clients will not find this broker")
	}

	if *pprofAddr != "" {
		addr, stopPprof, err := startPprof(*pprofAddr)
		if err != nil {
			fmt.Fprintf(stderr, "mqbroker: -pprof: %v\n", err)
			return 2
		}
		defer stopPprof()
		log.WithField("addr", addr).Info("pprof listening on /debug/pprof/")
	}

	b, err := broker.New(&cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "mqbroker: %v\n", err)
		return 1
	}
	var srv daemon.Server = b
	if cfg.PromEnabled() {
		// /metrics starts once the broker listens and stops before it.
		exp, err := metrics.NewExporter(cfg.PromListenAddr(cfg.BindAddress), metrics.NewBrokerCollector(b))
		if err != nil {
			fmt.Fprintf(stderr, "mqbroker: %v\n", err)
			return 1
		}
		srv = daemon.Chain(b, daemon.Logged(exp, log, "Prometheus metrics on /metrics"))
	}
	return daemon.Run(srv, log, shutdownTimeout, "The broker boot success.",
		logrus.Fields{"brokerName": cfg.BrokerName, "namesrv": cfg.NamesrvAddr}, stop, started)
}
