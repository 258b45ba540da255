// Command mqbench measures a RocketMQ-compatible cluster the way RocketMQ's
// own benchmark does, so its numbers can be compared line for line.
//
//	mqbench producer [-n 127.0.0.1:9876] [-t BenchmarkTest] [-w 64] [-s 1024] [-d 60s] [--count N]
//	                 [--mode sync|async|oneway] [--batch N] [--delay-level L] [--keys] [--queues Q]
//	mqbench consumer [-n ...] [-t ...] [-g group] [--from first|last] [-d 60s] [--count N]
//	mqbench latency  [-n ...] [-t ...] [--rate 5000] [-w 8] [-s 1024] [-d 30s]
//	mqbench hacatchup --master ip:port --slave ip:port [--from-offset N] [-d 300s]
//	mqbench replag   [-n ...] [-t ...] --master ip:port --slave ip:port [--rate 10000] [-d 30s]
//
// Every second it prints a line in RocketMQ's shape (redrawn in place on a
// terminal, one line per second when piped), then at the end:
//
//	[Complete] Send Total: N Send TPS: X Max RT(ms): Y Average RT(ms): Z Send Failed: F Response Failed: R
//	p50/p99/p999 RT(ms): a b c
//	[CPU] mqbench used ...
//
// The last line is the tool's own CPU use: with client and broker on one
// host, a tool that eats the cores measures itself. Every run is bounded by
// -d (and --count when given); SIGINT or SIGTERM ends it early with the
// summary of what ran.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
)

func main() {
	// The tool allocates per message and keeps little: collecting less often
	// keeps its CPU share down (GOGC in the environment still wins).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: mqbench <producer|consumer|latency> [flags]
  producer   send messages and report Send TPS and response times
  consumer   consume a topic and report Consume TPS and born/store-to-consume latency
  latency    send at a fixed rate and report publish-to-receive percentiles
  hacatchup  time a slave catching up with its master (run it as the slave starts)
  replag     send at a fixed rate and report how much later a slave serves each message
Run "mqbench <command> -h" for the command's flags.
`

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "producer":
		err = runProducer(ctx, args[1:], stdout, stderr)
	case "consumer":
		err = runConsumer(ctx, args[1:], stdout, stderr)
	case "latency":
		err = runLatency(ctx, args[1:], stdout, stderr)
	case "hacatchup":
		err = runHACatchup(ctx, args[1:], stdout, stderr)
	case "replag":
		err = runReplag(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mqbench: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "mqbench: %v\n", err)
		return 1
	}
}

// errUsage means bad flags; the flag package has already said why.
var errUsage = errors.New("mqbench: bad usage")

// commonFlags are shared by every command.
type commonFlags struct {
	namesrv  string
	topic    string
	duration time.Duration
	count    int64
	logLevel string
	cpuprof  string

	tls       bool
	tlsCA     string
	tlsCert   string
	tlsKey    string
	tlsVerify string

	// accessKey and secretKey sign every request for a broker with
	// aclEnable (RocketMQ's benchmark: -ak, -sk).
	accessKey string
	secretKey string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("NAMESRV_ADDR")
	if def == "" {
		def = "127.0.0.1:9876"
	}
	fs.StringVar(&c.namesrv, "n", def, "nameserver addresses, ';'-separated (default NAMESRV_ADDR)")
	fs.StringVar(&c.topic, "t", "BenchmarkTest", "topic")
	fs.DurationVar(&c.duration, "d", time.Minute, "how long to run (the run also ends at --count)")
	fs.Int64Var(&c.count, "count", 0, "stop after this many messages (0: only -d bounds the run)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "client log level: debug, info, warn, error")
	fs.StringVar(&c.cpuprof, "cpuprofile", "", "write the tool's own CPU profile to this file")
	fs.BoolVar(&c.tls, "tls", false, "connect to nameservers and brokers over TLS")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA certificates (PEM) server certificates must chain to (implies --tls; default: the system's)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate (PEM), for servers that ask for one (implies --tls)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the client certificate's key (PEM)")
	fs.StringVar(&c.tlsVerify, "tls-verify", "full", "server certificate check: full (chain and address), chain, or none")
	fs.StringVar(&c.accessKey, "ak", "", "ACL AccessKey: sign every request (with -sk) for a broker with aclEnable")
	fs.StringVar(&c.secretKey, "sk", "", "ACL SecretKey (with -ak)")
}

// tlsOptions is what the --tls flags ask for; false: plain connections.
func (c *commonFlags) tlsOptions() (client.TLSOptions, bool) {
	if !c.tls && c.tlsCA == "" && c.tlsCert == "" {
		return client.TLSOptions{}, false
	}
	o := client.TLSOptions{TrustCertPath: c.tlsCA, CertPath: c.tlsCert, KeyPath: c.tlsKey}
	switch c.tlsVerify {
	case "chain":
		o.Verify = client.VerifyChain
	case "none":
		o.Verify = client.VerifyNone
	}
	return o, true
}

// credentials is what -ak/-sk ask for (zero without them).
func (c *commonFlags) credentials() client.Credentials {
	return client.Credentials{AccessKey: c.accessKey, SecretKey: c.secretKey}
}

// withTLS appends to opts the options every connection of the tool takes:
// the TLS the --tls flags ask for, if any, and the -ak/-sk signature.
func (c *commonFlags) withTLS(opts ...client.Option) []client.Option {
	if o, ok := c.tlsOptions(); ok {
		opts = append(opts, client.WithTLS(o))
	}
	return append(opts, client.WithCredentials(c.credentials()))
}

// startProfile starts the tool's CPU profile when asked; the returned func
// stops it.
func (c *commonFlags) startProfile() (func(), error) {
	if c.cpuprof == "" {
		return func() {}, nil
	}
	f, err := os.Create(c.cpuprof)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// validate checks the bounds every run needs.
func (c *commonFlags) validate() error {
	if c.duration <= 0 {
		return fmt.Errorf("%w: -d must be > 0 (every run is bounded in time)", errBadFlag)
	}
	if c.count < 0 {
		return fmt.Errorf("%w: --count must be >= 0", errBadFlag)
	}
	if c.topic == "" {
		return fmt.Errorf("%w: -t must name a topic", errBadFlag)
	}
	switch c.tlsVerify {
	case "full", "chain", "none":
	default:
		return fmt.Errorf("%w: --tls-verify must be full, chain or none", errBadFlag)
	}
	if (c.accessKey == "") != (c.secretKey == "") {
		return fmt.Errorf("%w: -ak and -sk go together", errBadFlag)
	}
	return nil
}

// errBadFlag is a flag value out of range.
var errBadFlag = errors.New("bad flag")

// commandFlags is one command's flag set: commonFlags plus its own.
type commandFlags interface {
	register(fs *flag.FlagSet)
	validate() error
	common() *commonFlags
}

func (c *commonFlags) common() *commonFlags { return c }

// setupRun does what every command does before it runs: parse and check
// its flags, start the CPU profile when asked (stopProfile ends it; the
// caller defers it), and build the client logger. name is the command
// ("producer"), which the flag package names in its messages.
func setupRun(name string, f commandFlags, args []string, stderr io.Writer) (log logrus.FieldLogger, stopProfile func(), err error) {
	fs := flag.NewFlagSet("mqbench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	c := f.common()
	stopProfile, err = c.startProfile()
	if err != nil {
		return nil, nil, err
	}
	if log, err = newLogger(stderr, c.logLevel); err != nil {
		stopProfile()
		return nil, nil, err
	}
	return log, stopProfile, nil
}

// parseFlags parses args into fs, mapping the flag package's errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	return nil
}
