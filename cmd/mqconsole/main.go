// Command mqconsole serves gorocketmq's web console: cluster, topics,
// consumer groups and messages in a browser, with a live chart of send and
// consume TPS. It is one binary with its pages embedded, talking to the
// cluster through the SDK's admin client, like mqadmin.
//
//	mqconsole [-n 127.0.0.1:9876] [-addr 127.0.0.1:8080] [-read-only]
//
// -n names the nameservers (';'-separated, else NAMESRV_ADDR); -addr is
// where the console listens (loopback by default: put it behind a proxy
// with authentication before exposing it); -read-only hides and refuses
// every write action. -tls, -tls-ca, -tls-verify reach TLS clusters and
// -ak/-sk sign requests for brokers with aclEnable. SIGINT or SIGTERM
// stops it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/cmd/internal/daemon"
	"github.com/gorocketmq/gorocketmq/console"
)

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 10 * time.Second

func main() {
	sigs := daemon.StopSignals()
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr, sigs, nil))
}

// errBadFlag means the flags do not make sense together.
var errBadFlag = errors.New("mqconsole: bad flags")

// run is main without the process; started, when not nil, receives the
// listening address.
func run(args []string, getenv func(string) string, stderr io.Writer, stop <-chan os.Signal, started chan<- string) int {
	fs := flag.NewFlagSet("mqconsole", flag.ContinueOnError)
	fs.SetOutput(stderr)
	namesrv := fs.String("n", "", "nameserver addresses, ';'-separated (default NAMESRV_ADDR)")
	addr := fs.String("addr", "127.0.0.1:8080", "HTTP address to serve the console on")
	readOnly := fs.Bool("read-only", false, "disable every write action (create/delete topics, send, resend, reset offsets)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	useTLS := fs.Bool("tls", false, "connect to nameservers and brokers over TLS")
	tlsCA := fs.String("tls-ca", "", "CA certificates (PEM) server certificates must chain to (implies -tls)")
	tlsVerify := fs.String("tls-verify", "full", "server certificate check: full, chain or none")
	ak := fs.String("ak", "", "ACL AccessKey (with -sk), for brokers with aclEnable")
	sk := fs.String("sk", "", "ACL SecretKey (with -ak)")
	if code, ok := daemon.ParseFlags(fs, args); !ok {
		return code
	}
	log, err := daemon.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "mqconsole: -log-level: %v\n", err)
		return daemon.ExitUsage
	}
	ns := *namesrv
	if ns == "" {
		ns = getenv("NAMESRV_ADDR")
	}
	opts, err := clientOptions(ns, *useTLS, *tlsCA, *tlsVerify, *ak, *sk, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return daemon.ExitUsage
	}
	c, err := console.New(console.Config{Addr: *addr, ClientOptions: opts, ReadOnly: *readOnly, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "mqconsole: %v\n", err)
		return daemon.ExitFail
	}
	return daemon.Run(c, log, shutdownTimeout, "The console is up: open http://<addr>/ in a browser",
		logrus.Fields{"namesrv": ns, "readOnly": *readOnly}, stop, started)
}

// clientOptions turns the flags into the SDK's options.
func clientOptions(ns string, useTLS bool, ca, verify, ak, sk string, log logrus.FieldLogger) ([]client.Option, error) {
	if strings.TrimSpace(ns) == "" {
		return nil, fmt.Errorf("%w: no nameserver: use -n ip:port;ip:port or set NAMESRV_ADDR", errBadFlag)
	}
	if (ak == "") != (sk == "") {
		return nil, fmt.Errorf("%w: -ak and -sk go together", errBadFlag)
	}
	opts := []client.Option{client.WithNameServer(ns), client.WithLogger(log), client.WithInstanceName(fmt.Sprintf("mqconsole-%d", os.Getpid()))}
	// -tls-verify is checked even without -tls: a typo is an error, not
	// a setting silently ignored.
	o := client.TLSOptions{TrustCertPath: ca}
	switch verify {
	case "full":
		o.Verify = client.VerifyFull
	case "chain":
		o.Verify = client.VerifyChain
	case "none":
		o.Verify = client.VerifyNone
	default:
		return nil, fmt.Errorf("%w: -tls-verify must be full, chain or none", errBadFlag)
	}
	if useTLS || ca != "" {
		opts = append(opts, client.WithTLS(o))
	}
	if ak != "" {
		opts = append(opts, client.WithCredentials(client.Credentials{AccessKey: ak, SecretKey: sk}))
	}
	return opts, nil
}
