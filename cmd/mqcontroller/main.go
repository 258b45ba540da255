// Command mqcontroller runs a member of a controller group on its own
// (RocketMQ 5's standalone controller): the Raft group that keeps every
// broker group's master, epoch and in-sync set and replaces dead masters.
//
//	mqcontroller [-c controller.conf] [-p]
//
// -c reads a RocketMQ properties-style file or YAML (controllerDLegerPeers,
// controllerDLegerSelfId, controllerStorePath, listenPort...); -p prints the
// effective configuration and exits. Brokers reach it on listenPort
// (controllerAddr); the Raft log is replicated on the peer addresses.
// SIGINT or SIGTERM stops it gracefully. A controller can also run inside a
// nameserver (mqnamesrv with enableControllerInNamesrv=true).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gorocketmq/gorocketmq/cmd/internal/daemon"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 15 * time.Second

func main() {
	sigs := daemon.StopSignals()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs, nil))
}

// run is main without the process: it returns the exit code. started, when
// not nil, receives the listening address once the controller is up.
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal, started chan<- string) int {
	fs := flag.NewFlagSet("mqcontroller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("c", "", "config file (RocketMQ properties style, or .yaml)")
	printConfig := fs.Bool("p", false, "print the effective configuration and exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code, ok := daemon.ParseFlags(fs, args); !ok {
		return code
	}
	log, err := daemon.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: -log-level: %v\n", err)
		return daemon.ExitUsage
	}
	cfg, err := conf.LoadControllerConfig(*configFile, log)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %v\n", err)
		return daemon.ExitFail
	}
	if *printConfig {
		fmt.Fprint(stdout, conf.Format(&cfg))
		return daemon.ExitOK
	}
	srv := remoting.NewServer(remoting.ServerConfig{
		Addr:          cfg.ListenAddr(),
		Logger:        log.WithField("component", "controller"),
		IdleTimeout:   time.Duration(cfg.ServerChannelMaxIdleTimeSeconds) * time.Second,
		NumEventLoops: cfg.ServerSelectorThreads,
	})
	hosted, err := daemon.HostController(srv, srv, &cfg.ControllerKeys, cfg.ScanInterval(), log)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %v\n", err)
		return daemon.ExitFail
	}
	return daemon.Run(hosted, log, shutdownTimeout, "The Controller boot success.", nil, stop, started)
}
