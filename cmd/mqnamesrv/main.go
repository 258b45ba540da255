// Command mqnamesrv runs a RocketMQ-compatible nameserver.
//
//	mqnamesrv [-c namesrv.conf] [-p]
//
// -c reads a RocketMQ properties-style file (listenPort=9876) or YAML;
// -p prints the effective configuration and exits. SIGINT or SIGTERM stops
// the server gracefully. With enableControllerInNamesrv=true the nameserver
// also runs a member of the controller group (the controller* keys), served
// on its own port.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gorocketmq/gorocketmq/cmd/internal/daemon"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/metrics"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// shutdownTimeout bounds a graceful stop: running requests finish, then
// connections close.
const shutdownTimeout = 15 * time.Second

func main() {
	sigs := daemon.StopSignals()
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
	if code, ok := daemon.ParseFlags(fs, args); !ok {
		return code
	}
	log, err := daemon.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: -log-level: %v\n", err)
		return 2
	}

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
	var srv daemon.Server = ns
	if cfg.EnableControllerInNamesrv {
		hosted, err := daemon.HostController(ns, ns.Server(), &cfg.ControllerKeys, cfg.ScanInterval(), log)
		if err != nil {
			fmt.Fprintf(stderr, "mqnamesrv: %v\n", err)
			return 1
		}
		srv = hosted
	}
	if cfg.PromEnabled() {
		// /metrics starts once the nameserver (and its controller) listens
		// and stops before it.
		exp, err := metrics.NewExporter(cfg.PromListenAddr(cfg.BindAddress), metrics.NewNameServerCollector(ns))
		if err != nil {
			fmt.Fprintf(stderr, "mqnamesrv: %v\n", err)
			return 1
		}
		srv = daemon.Chain(srv, daemon.Logged(exp, log, "Prometheus metrics on /metrics"))
	}
	return daemon.Run(srv, log, shutdownTimeout, "The Name Server boot success.", nil, stop, started)
}
