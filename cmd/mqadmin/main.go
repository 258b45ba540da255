// Command mqadmin is RocketMQ's operator CLI over gorocketmq's admin API
// (client.Admin). Command names, short options and output tables follow
// Apache RocketMQ 4.9's tools module, so runbooks work unchanged:
//
//	mqadmin                          # list the commands
//	mqadmin help <command>           # one command's options
//	mqadmin <command> [options]      # run it
//
// Every command takes -n/--namesrvAddr ("ip:port;ip:port", else env
// NAMESRV_ADDR) and -h/--help. A bad command line prints the command's
// usage and exits 2; a failed command prints "<cmd> command failed: why"
// on stderr and exits 1.
//
// Commands: updateTopic deleteTopic updateSubGroup deleteSubGroup
// updateBrokerConfig updateTopicPerm topicRoute topicStatus topicClusterList
// brokerStatus (a broker's runtime figures: RocketMQ's name for
// getBrokerRuntime) queryMsgById queryMsgByKey queryMsgByUniqueKey
// queryMsgByOffset printMsg printMsgByQueue brokerConsumeStats
// producerConnection consumerConnection consumerProgress consumerStatus
// cloneGroupOffset clusterList topicList updateKvConfig deleteKvConfig
// resetOffsetByTime skipAccumulatedMessage updateOrderConf cleanExpiredCQ
// deleteExpiredCommitLog statsAll getNamesrvConfig updateNamesrvConfig
// getBrokerConfig getConsumerConfig sendMessage consumeMessage
// updateAclConfig deleteAclConfig (deleteAccessConfig)
// clusterAclConfigVersion updateGlobalWhiteAddr getAclConfig; and from
// RocketMQ 5, haStatus. clusterList and haStatus -i repeat until Ctrl-C.
//
// On a terminal, long runs (printMsg, printMsgByQueue, consumeMessage,
// statsAll, consumerStatus, consumerProgress without -g, the offset resets)
// draw a progress line on stderr; piped or redirected, they print only
// their output.
//
// On a broker with aclEnable, commands sign their requests with the
// accessKey and secretKey of $ROCKETMQ_HOME/conf/tools.yml, as RocketMQ's
// mqadmin does.
//
// Java's other commands (wipeWritePerm, export...) are
// absent rather than approximated. Options absent too: consumerProgress -s,
// queryMsgById -u, queryMsgByUniqueKey -g/-d, updateTopic -u/-s,
// resetOffsetByTime -c. Where Java prints data the SDK does not return (a
// consumer's client IP in consumerProgress) the cell says NA.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // bad command line
)

// commandTimeout bounds one command run; every admin request inside has its
// own shorter timeout.
const commandTimeout = 2 * time.Minute

var (
	// errUsage means the command line is wrong; the command's help follows.
	errUsage = errors.New("mqadmin: bad usage")
)

func main() {
	// Ctrl-C or SIGTERM ends a repeating command (-i) between rounds, or
	// cancels the requests of the one running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := newApp(os.Stdout, os.Stderr)
	a.ctx = ctx
	code := a.run(os.Args[1:])
	stop()
	os.Exit(code)
}

// app holds what commands share: output streams and the environment.
type app struct {
	out, err io.Writer
	getenv   func(string) string
	// ctx ends every command run when it is cancelled (main: on a signal).
	ctx context.Context
	// maxRounds, when positive, stops a repeating command (-i) after that
	// many rounds; tests set it, operators stop it with Ctrl-C.
	maxRounds int
	// bodyDir is where queryMsg* commands write message bodies, as Java's
	// mqadmin does (/tmp/rocketmq/msgbodys).
	bodyDir  string
	commands []*command
	byName   map[string]*command
}

func newApp(stdout, stderr io.Writer) *app {
	a := &app{out: stdout, err: stderr, getenv: os.Getenv, ctx: context.Background(),
		bodyDir: filepath.Join(os.TempDir(), "rocketmq", "msgbodys"), byName: map[string]*command{}}
	for _, c := range allCommands() {
		a.commands = append(a.commands, c)
		a.byName[c.name] = c
		for _, alias := range c.aliases {
			a.byName[alias] = c
		}
	}
	return a
}

func (a *app) run(args []string) int {
	if len(args) == 0 {
		a.printCommands()
		return exitOK
	}
	name := args[0]
	if name == "help" {
		if len(args) < 2 {
			a.printCommands()
			return exitOK
		}
		c := a.byName[args[1]]
		if c == nil {
			fmt.Fprintf(a.err, "The sub command %s not exist.\n", args[1])
			return exitUsage
		}
		c.printUsage(a.out)
		return exitOK
	}
	c := a.byName[name]
	if c == nil {
		fmt.Fprintf(a.err, "The sub command %s not exist.\n", name)
		return exitUsage
	}
	vals, err := c.parse(args[1:])
	if err != nil {
		fmt.Fprintln(a.err, err)
		c.printUsage(a.err)
		return exitUsage
	}
	if vals.has("h") {
		c.printUsage(a.out)
		return exitOK
	}
	ctx, cancel := context.WithTimeout(a.ctx, commandTimeout)
	defer cancel()
	e := &env{app: a, cmd: c, vals: vals, ctx: ctx, out: a.out}
	defer e.close()
	if err := c.run(e); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintln(a.err, err)
			c.printUsage(a.err)
			return exitUsage
		}
		fmt.Fprintf(a.err, "%s command failed: %v\n", c.name, describe(err))
		return exitFail
	}
	return exitOK
}

// printCommands prints the command list, as MQAdminStartup does.
func (a *app) printCommands() {
	fmt.Fprintln(a.out, "The most commonly used mqadmin commands are:")
	for _, c := range a.commands {
		fmt.Fprintf(a.out, "   %-25s %s\n", c.name, c.desc)
	}
	fmt.Fprintln(a.out)
	fmt.Fprintln(a.out, "See 'mqadmin help <command>' for more information on a specific command.")
}

// describe turns the errors operators hit most into plain sentences, and
// keeps the cause.
func describe(err error) string {
	var be *client.BrokerError
	switch {
	case errors.Is(err, client.ErrNoRoute):
		return fmt.Sprintf("topic not exist (no route on the name server): %v", err)
	case errors.Is(err, client.ErrNoNameServer):
		return "no name server address: use -n ip:port;ip:port or set NAMESRV_ADDR"
	case errors.As(err, &be):
		return fmt.Sprintf("%s answered code %d: %s", be.Addr, int32(be.Code), be.Remark)
	}
	return err.Error()
}

// env is one command run: its parsed options and a lazily started admin.
type env struct {
	*app
	cmd   *command
	vals  values
	ctx   context.Context
	out   io.Writer
	admin *client.Admin
	// adminGroup, when set before the admin starts, is the group its
	// pulls name (mqadmin consumeMessage -g); TOOLS_CONSUMER otherwise.
	adminGroup string
}

// nameServers returns -n, else NAMESRV_ADDR, split on ';'.
func (e *env) nameServers() []string {
	s := e.vals.get("n")
	if s == "" {
		s = e.getenv("NAMESRV_ADDR")
	}
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		out = append(out, f)
	}
	return out
}

// Admin returns the admin client, started on first use.
func (e *env) Admin() (*client.Admin, error) {
	if e.admin != nil {
		return e.admin, nil
	}
	ns := e.nameServers()
	if len(ns) == 0 {
		return nil, client.ErrNoNameServer
	}
	opts := []client.Option{client.WithNameServer(strings.Join(ns, ";")), client.WithLogger(e.logger()),
		client.WithInstanceName(fmt.Sprintf("mqadmin-%d", time.Now().UnixNano()))}
	if e.adminGroup != "" {
		opts = append(opts, client.WithGroupName(e.adminGroup))
	}
	tlsOpt, err := e.tlsOption()
	if err != nil {
		return nil, err
	}
	if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	cred, err := e.toolsCredentials()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithCredentials(cred))
	a, err := client.NewAdmin(opts...)
	if err != nil {
		return nil, err
	}
	e.admin = a
	return a, nil
}

// tlsOption is the SDK option the --tls* options ask for, or nil for plain
// connections.
func (e *env) tlsOption() (client.Option, error) {
	keys := []string{"tls", "tlsTrustCertPath", "tlsCertPath", "tlsKeyPath", "tlsKeyPassword", "tlsVerify"}
	on := false
	for _, k := range keys {
		on = on || e.vals.has(k)
	}
	if !on {
		return nil, nil
	}
	o := client.TLSOptions{
		TrustCertPath: e.vals.get("tlsTrustCertPath"),
		CertPath:      e.vals.get("tlsCertPath"),
		KeyPath:       e.vals.get("tlsKeyPath"),
		KeyPassword:   e.vals.get("tlsKeyPassword"),
	}
	switch v := strings.ToLower(e.vals.get("tlsVerify")); v {
	case "", "full":
		o.Verify = client.VerifyFull
	case "chain":
		o.Verify = client.VerifyChain
	case "none":
		o.Verify = client.VerifyNone
	default:
		return nil, fmt.Errorf("%w: --tlsVerify wants full, chain or none, got %q", errUsage, v)
	}
	return client.WithTLS(o), nil
}

// logger reports the SDK's warnings on stderr.
func (e *env) logger() logrus.FieldLogger {
	log := logrus.New()
	log.SetOutput(e.app.err)
	log.SetLevel(logrus.WarnLevel)
	return log
}

func (e *env) close() {
	if e.admin != nil {
		_ = e.admin.Close()
	}
}

func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.out, format, args...) }
