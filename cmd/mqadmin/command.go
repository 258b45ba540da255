package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// command is one mqadmin subcommand.
type command struct {
	name    string
	aliases []string // other names it answers to (Java's commandAlias)
	desc    string
	opts    []option // its own options, in Java's declaration order
	run     func(e *env) error
	// needOneOf names options of which at least one must be given (Java's
	// required OptionGroup, or commands that print help without -b/-c).
	needOneOf []string
}

// option is one command-line option, as commons-cli declares it. Options
// of ours that Java's mqadmin lacks (TLS) have no short name.
type option struct {
	short    string
	long     string
	hasArg   bool
	required bool
	desc     string
}

// key is the name values keep the option under: its short name, else its
// long one.
func (o option) key() string {
	if o.short == "" {
		return o.long
	}
	return o.short
}

// display is how usage names the option on the command line.
func (o option) display() string {
	if o.short == "" {
		return "--" + o.long
	}
	return "-" + o.short
}

// globalOptions every command accepts (ServerUtil.buildCommandlineOptions).
var globalOptions = []option{
	{short: "h", long: "help", desc: "Print help"},
	{short: "n", long: "namesrvAddr", hasArg: true, desc: "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"},
	{long: "tls", desc: "Connect over TLS (implied by the other --tls options)"},
	{long: "tlsTrustCertPath", hasArg: true, desc: "CA certificates (PEM) the servers' certificates must chain to; default the system's"},
	{long: "tlsCertPath", hasArg: true, desc: "Client certificate (PEM), for servers with tls.server.need.client.auth"},
	{long: "tlsKeyPath", hasArg: true, desc: "Client certificate's key (PEM)"},
	{long: "tlsKeyPassword", hasArg: true, desc: "Password of an encrypted PKCS#8 client key"},
	{long: "tlsVerify", hasArg: true, desc: "How to check server certificates: full (chain and address, default), chain, or none (as the official Go client)"},
}

// values are parsed options by short name.
type values map[string]string

func (v values) has(short string) bool { _, ok := v[short]; return ok }

func (v values) get(short string) string { return strings.TrimSpace(v[short]) }

// int returns an integer option, or def when absent.
func (v values) int(short string, def int64) (int64, error) {
	if !v.has(short) {
		return def, nil
	}
	n, err := strconv.ParseInt(v.get(short), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: option -%s wants an integer, got %q", errUsage, short, v.get(short))
	}
	return n, nil
}

// bool parses a true/false option as Java's Boolean.parseBoolean does:
// anything but "true" (any case) is false.
func (v values) bool(short string, def bool) bool {
	if !v.has(short) {
		return def
	}
	return strings.EqualFold(v.get(short), "true")
}

func (c *command) allOptions() []option {
	return append(append([]option{}, c.opts...), globalOptions...)
}

func (c *command) lookup(name string, long bool) (option, bool) {
	for _, o := range c.allOptions() {
		if (!long && o.short != "" && o.short == name) || (long && o.long == name) {
			return o, true
		}
	}
	return option{}, false
}

// parse reads args the way commons-cli's PosixParser does for the forms
// operators type: "-t T", "-tT", "--topic T", "--topic=T", and flags
// without a value ("-c", "--clusterModel").
func (c *command) parse(args []string) (values, error) {
	vals := values{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		var name, inline string
		var long, hasInline bool
		switch {
		case strings.HasPrefix(arg, "--") && len(arg) > 2:
			long = true
			name, inline, hasInline = strings.Cut(arg[2:], "=")
		case strings.HasPrefix(arg, "-") && len(arg) > 2 && c.hasShort(arg[1:]):
			name = arg[1:] // a short name of several letters (electMaster's -bn)
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			name = arg[1:2]
			if len(arg) > 2 {
				inline, hasInline = arg[2:], true
			}
		default:
			return nil, fmt.Errorf("Unrecognized argument: %s", arg)
		}
		o, ok := c.lookup(name, long)
		if !ok {
			return nil, fmt.Errorf("Unrecognized option: %s", arg)
		}
		if !o.hasArg {
			if hasInline {
				return nil, fmt.Errorf("Unrecognized option: %s", arg)
			}
			vals[o.key()] = ""
			continue
		}
		if hasInline {
			vals[o.key()] = inline
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("Missing argument for option: %s", o.key())
		}
		i++
		vals[o.key()] = args[i]
	}
	if vals.has("h") {
		return vals, nil
	}
	var missing []string
	for _, o := range c.opts {
		if o.required && !vals.has(o.short) {
			missing = append(missing, o.short)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return nil, fmt.Errorf("Missing required option: %s", missing[0])
	default:
		return nil, fmt.Errorf("Missing required options: %s", strings.Join(missing, ", "))
	}
	if len(c.needOneOf) > 0 {
		found := false
		for _, s := range c.needOneOf {
			found = found || vals.has(s)
		}
		if !found {
			return nil, fmt.Errorf("Missing required option: one of -%s", strings.Join(c.needOneOf, ", -"))
		}
	}
	return vals, nil
}

// printUsage prints the options the way commons-cli's HelpFormatter lays
// them out: a usage line, then one line per option sorted by short name.
func (c *command) printUsage(w io.Writer) {
	opts := c.allOptions()
	sort.SliceStable(opts, func(i, j int) bool { return strings.ToLower(opts[i].key()) < strings.ToLower(opts[j].key()) })
	var b strings.Builder
	b.WriteString("usage: mqadmin " + c.name)
	for _, o := range opts {
		s := o.display()
		if o.hasArg {
			s += " <arg>"
		}
		if !o.required {
			s = "[" + s + "]"
		}
		b.WriteString(" " + s)
	}
	fmt.Fprintln(w, b.String())
	width := 0
	lefts := make([]string, len(opts))
	for i, o := range opts {
		lefts[i] = " -" + o.short + ",--" + o.long
		if o.short == "" {
			lefts[i] = "    --" + o.long
		}
		if o.hasArg {
			lefts[i] += " <arg>"
		}
		width = max(width, len(lefts[i]))
	}
	for i, o := range opts {
		fmt.Fprintf(w, "%-*s   %s\n", width, lefts[i], o.desc)
	}
}

// allCommands lists the commands in Java's registration order
// (MQAdminStartup.initCommand).
func allCommands() []*command {
	return []*command{
		updateTopicCmd(),
		deleteTopicCmd(),
		updateSubGroupCmd(),
		deleteSubGroupCmd(),
		updateBrokerConfigCmd(),
		updateTopicPermCmd(),
		topicRouteCmd(),
		topicStatusCmd(),
		topicClusterListCmd(),
		brokerStatusCmd(),
		queryMsgByIDCmd(),
		queryMsgByKeyCmd(),
		queryMsgByUniqueKeyCmd(),
		queryMsgByOffsetCmd(),
		printMsgCmd(),
		printMsgByQueueCmd(),
		brokerConsumeStatsCmd(),
		producerConnectionCmd(),
		queryMsgTraceByIDCmd(),
		consumerConnectionCmd(),
		consumerProgressCmd(),
		consumerStatusCmd(),
		cloneGroupOffsetCmd(),
		clusterListCmd(),
		haStatusCmd(),
		getSyncStateSetCmd(),
		getBrokerEpochCmd(),
		getControllerMetaDataCmd(),
		electMasterCmd(),
		topicListCmd(),
		updateKvConfigCmd(),
		deleteKvConfigCmd(),
		resetOffsetByTimeCmd(),
		skipAccumulatedMessageCmd(),
		updateOrderConfCmd(),
		cleanExpiredCQCmd(),
		deleteExpiredCommitLogCmd(),
		statsAllCmd(),
		getNamesrvConfigCmd(),
		updateNamesrvConfigCmd(),
		getBrokerConfigCmd(),
		getConsumerConfigCmd(),
		sendMessageCmd(),
		consumeMessageCmd(),
		updateAclConfigCmd(),
		deleteAclConfigCmd(),
		clusterAclConfigVersionCmd(),
		updateGlobalWhiteAddrCmd(),
		getAclConfigCmd(),
	}
}

// hasShort reports whether the command has an option with this short name.
func (c *command) hasShort(name string) bool {
	for _, o := range c.opts {
		if o.short == name {
			return true
		}
	}
	return false
}

// front returns s cut to at most n runes (UtilAll.frontStringAtLeast).
func front(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n])
	}
	return s
}
