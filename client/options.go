package client

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// Option configures a Producer, TransactionProducer, PushConsumer,
// PullConsumer or Admin. Options that do not apply to an object are ignored
// by it, so one option list can be shared.
type Option func(*options) error

// Credentials are an ACL account: requests are signed with SecretKey as
// RocketMQ's Java client signs them (see Sign).
type Credentials struct {
	AccessKey     string
	SecretKey     string
	SecurityToken string
}

func (c Credentials) enabled() bool { return c.AccessKey != "" && c.SecretKey != "" }

// MessageModel says how a consumer group shares messages.
type MessageModel int

const (
	// Clustering shares a topic's queues among the group's members; each
	// message is consumed by one member. Offsets live in the broker.
	Clustering MessageModel = iota
	// Broadcasting gives every member every message. Offsets live in a local
	// file of each member.
	Broadcasting
)

// ConsumeFrom says where a consumer group without a stored offset starts.
type ConsumeFrom int

const (
	// ConsumeFromLastOffset starts at the end of each queue (new messages only).
	ConsumeFromLastOffset ConsumeFrom = iota
	// ConsumeFromFirstOffset starts at the oldest message still stored.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after the
	// time set with WithConsumeTimestamp (default: 30 minutes ago).
	ConsumeFromTimestamp
)

type options struct {
	nameServers  []string
	group        string
	instanceName string
	namespace    string
	retry        int
	sendTimeout  time.Duration
	credentials  Credentials
	tls          *tls.Config // nil: plain connections
	log          logrus.FieldLogger
	headers      HeaderEncoding
	trace        *TraceConfig // nil: no message trace

	// intervals
	routeInterval     time.Duration
	heartbeatInterval time.Duration
	rebalanceInterval time.Duration
	persistInterval   time.Duration
	lockInterval      time.Duration

	// producer
	selector              QueueSelector
	compressOver          int
	compressLevel         int
	maxMessageSize        int
	createTopicKey        string
	defaultTopicQueueNums int32
	faultAvoidance        time.Duration
	maxAsyncInFlight      int

	// consumer
	model             MessageModel
	from              ConsumeFrom
	consumeTimestamp  time.Time
	orderly           bool
	strategy          AllocateStrategy
	consumeBatchSize  int
	pullBatchSize     int32
	consumeGoroutines int
	queueCountLimit   int
	queueSizeLimitMiB int
	maxReconsume      int32
	suspendTimeout    time.Duration
	autoCommit        bool
	offsetDir         string
}

func defaultOptions() *options {
	return &options{
		retry:                 2,
		sendTimeout:           3 * time.Second,
		routeInterval:         30 * time.Second,
		heartbeatInterval:     30 * time.Second,
		rebalanceInterval:     20 * time.Second,
		persistInterval:       5 * time.Second,
		lockInterval:          20 * time.Second,
		compressOver:          4096,
		compressLevel:         5,
		maxMessageSize:        4 << 20,
		createTopicKey:        "TBW102",
		defaultTopicQueueNums: 4,
		faultAvoidance:        30 * time.Second,
		maxAsyncInFlight:      10000,
		strategy:              AllocateAveragely{},
		consumeBatchSize:      1,
		pullBatchSize:         32,
		consumeGoroutines:     20,
		queueCountLimit:       1024,
		queueSizeLimitMiB:     100,
		maxReconsume:          -1,
		suspendTimeout:        20 * time.Second,
		autoCommit:            true,
		consumeTimestamp:      time.Now().Add(-30 * time.Minute),
	}
}

// buildOptions applies opts over the defaults, falls back to NAMESRV_ADDR and
// fills the group name.
func buildOptions(defaultGroup string, opts []Option) (*options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if len(o.nameServers) == 0 {
		o.nameServers = splitAddrs(os.Getenv("NAMESRV_ADDR"))
	}
	if len(o.nameServers) == 0 {
		return nil, ErrNoNameServer
	}
	if o.group == "" {
		o.group = defaultGroup
	}
	if o.log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		o.log = l
	}
	return o, nil
}

// splitAddrs splits a nameserver list the way RocketMQ writes it
// ("a:9876;b:9876"), also accepting commas and dropping http:// prefixes.
func splitAddrs(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		f = strings.TrimPrefix(strings.TrimPrefix(f, "http://"), "https://")
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func badOption(name string, v any) error {
	return fmt.Errorf("%w: %s = %v", ErrBadOption, name, v)
}

// WithNameServer sets the nameserver addresses (host:port). Each element may
// itself be a "a:9876;b:9876" list. Without this option the NAMESRV_ADDR
// environment variable is read.
func WithNameServer(addrs ...string) Option {
	return func(o *options) error {
		var all []string
		for _, a := range addrs {
			all = append(all, splitAddrs(a)...)
		}
		if len(all) == 0 {
			return badOption("nameServer", addrs)
		}
		o.nameServers = all
		return nil
	}
}

// WithGroupName sets the producer or consumer group.
func WithGroupName(group string) Option {
	return func(o *options) error {
		if group == "" {
			return badOption("groupName", group)
		}
		o.group = group
		return nil
	}
}

// WithInstanceName fixes the instance part of the clientId (ip@instance).
// By default every client object gets a unique instance name, so two clients
// never share a clientId; set this only when a stable id is wanted, and make
// it unique per process.
func WithInstanceName(name string) Option {
	return func(o *options) error {
		o.instanceName = name
		return nil
	}
}

// WithNamespace prefixes topics and groups with "namespace%", as RocketMQ's
// clients do; results and delivered messages carry the names without it.
func WithNamespace(ns string) Option {
	return func(o *options) error {
		o.namespace = ns
		return nil
	}
}

// WithRetry sets how many times a failed send is retried (default 2, so
// three attempts), on another broker when there is one.
func WithRetry(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return badOption("retry", n)
		}
		o.retry = n
		return nil
	}
}

// WithSendTimeout bounds each send attempt (default 3 s). The caller's
// context bounds all attempts together.
func WithSendTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return badOption("sendTimeout", d)
		}
		o.sendTimeout = d
		return nil
	}
}

// WithCredentials signs every request for a broker with RocketMQ's ACL.
func WithCredentials(c Credentials) Option {
	return func(o *options) error {
		o.credentials = c
		return nil
	}
}

// HeaderEncoding is how the client encodes request headers on the wire.
// Servers answer in the encoding of the request.
type HeaderEncoding int

const (
	// HeadersBinary is RocketMQ's binary header (serialize type ROCKETMQ, the
	// Java client's rocketmq.serialize.type=ROCKETMQ): about half the cost of
	// JSON to decode at the broker and back at the client. The default.
	HeadersBinary HeaderEncoding = iota
	// HeadersJSON is the JSON header the Java and official Go clients send by
	// default; readable in a packet capture.
	HeadersJSON
)

// WithHeaderEncoding chooses the request header encoding (default
// HeadersBinary). Apache RocketMQ servers and ours read both.
func WithHeaderEncoding(e HeaderEncoding) Option {
	return func(o *options) error {
		if e != HeadersBinary && e != HeadersJSON {
			return badOption("header encoding", e)
		}
		o.headers = e
		return nil
	}
}

// WithLogger sends the client's logs to l. The default logs warnings and
// errors to stderr.
func WithLogger(l logrus.FieldLogger) Option {
	return func(o *options) error {
		if l == nil {
			return badOption("logger", l)
		}
		o.log = l
		return nil
	}
}

func positiveDuration(name string, d time.Duration, dst *time.Duration) error {
	if d <= 0 {
		return badOption(name, d)
	}
	*dst = d
	return nil
}

// WithRouteRefreshInterval sets how often topic routes are re-read from the
// nameserver (default 30 s). A miss is always read at once.
func WithRouteRefreshInterval(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("routeRefreshInterval", d, &o.routeInterval) }
}

// WithHeartbeatInterval sets how often the client heartbeats every broker
// (default 30 s; brokers drop clients silent for 120 s).
func WithHeartbeatInterval(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("heartbeatInterval", d, &o.heartbeatInterval) }
}

// WithRebalanceInterval sets how often a consumer re-divides queues
// (default 20 s); it also rebalances when the broker says members changed.
func WithRebalanceInterval(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("rebalanceInterval", d, &o.rebalanceInterval) }
}

// WithPersistInterval sets how often consumed offsets are stored (default 5 s).
func WithPersistInterval(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("persistInterval", d, &o.persistInterval) }
}

// WithRebalanceLockInterval sets how often an orderly consumer renews its
// broker queue locks (default 20 s; brokers expire them after 60 s).
func WithRebalanceLockInterval(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("rebalanceLockInterval", d, &o.lockInterval) }
}

// WithQueueSelector replaces the producer's queue choice. By default a
// message with a sharding key goes to the queue its key hashes to and other
// messages go round-robin.
func WithQueueSelector(s QueueSelector) Option {
	return func(o *options) error {
		if s == nil {
			return badOption("queueSelector", s)
		}
		o.selector = s
		return nil
	}
}

// WithCompressMsgBodyOver compresses single-message bodies longer than n
// bytes with zlib (default 4096; 0 or less disables compression).
func WithCompressMsgBodyOver(n int) Option {
	return func(o *options) error {
		o.compressOver = n
		return nil
	}
}

// WithCompressLevel sets the zlib level, 1 (fast) to 9 (small); default 5.
func WithCompressLevel(level int) Option {
	return func(o *options) error {
		if level < 1 || level > 9 {
			return badOption("compressLevel", level)
		}
		o.compressLevel = level
		return nil
	}
}

// WithMaxMessageSize refuses bodies (or batch bodies) over n bytes before they
// are sent (default 4 MiB, the broker's default maxMessageSize).
func WithMaxMessageSize(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return badOption("maxMessageSize", n)
		}
		o.maxMessageSize = n
		return nil
	}
}

// WithCreateTopicKey sets the template topic a broker with
// autoCreateTopicEnable copies for unknown topics (default TBW102), and the
// queue count such topics get (default 4).
func WithCreateTopicKey(key string, queueNums int32) Option {
	return func(o *options) error {
		if key == "" || queueNums <= 0 {
			return badOption("createTopicKey", key)
		}
		o.createTopicKey, o.defaultTopicQueueNums = key, queueNums
		return nil
	}
}

// WithFaultAvoidance sets how long a broker that timed out or refused a
// connection is avoided by the producer when another broker can take the
// message (default 30 s; 0 disables avoidance).
func WithFaultAvoidance(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return badOption("faultAvoidance", d)
		}
		o.faultAvoidance = d
		return nil
	}
}

// WithMaxAsyncInFlight bounds the SendAsync calls in flight (default 10000);
// beyond it SendAsync waits for a slot or its context.
func WithMaxAsyncInFlight(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return badOption("maxAsyncInFlight", n)
		}
		o.maxAsyncInFlight = n
		return nil
	}
}

// WithConsumerModel selects Clustering (default) or Broadcasting.
func WithConsumerModel(m MessageModel) Option {
	return func(o *options) error {
		if m != Clustering && m != Broadcasting {
			return badOption("consumerModel", m)
		}
		o.model = m
		return nil
	}
}

// WithConsumeFromWhere selects where a group with no stored offset starts
// (default ConsumeFromLastOffset).
func WithConsumeFromWhere(w ConsumeFrom) Option {
	return func(o *options) error {
		if w < ConsumeFromLastOffset || w > ConsumeFromTimestamp {
			return badOption("consumeFromWhere", w)
		}
		o.from = w
		return nil
	}
}

// WithConsumeTimestamp sets the start time used with ConsumeFromTimestamp.
func WithConsumeTimestamp(t time.Time) Option {
	return func(o *options) error {
		o.consumeTimestamp = t
		return nil
	}
}

// WithConsumerOrder makes a push consumer orderly: it holds a broker lock on
// each queue it consumes and hands a queue's messages to the handler one
// batch at a time, in queue order.
func WithConsumerOrder(orderly bool) Option {
	return func(o *options) error {
		o.orderly = orderly
		return nil
	}
}

// WithStrategy sets the queue allocation strategy (default AllocateAveragely).
func WithStrategy(s AllocateStrategy) Option {
	return func(o *options) error {
		if s == nil {
			return badOption("strategy", s)
		}
		o.strategy = s
		return nil
	}
}

// WithConsumeMessageBatchMaxSize sets how many messages one handler call gets
// at most (default 1).
func WithConsumeMessageBatchMaxSize(n int) Option {
	return func(o *options) error {
		if n <= 0 || n > 1024 {
			return badOption("consumeMessageBatchMaxSize", n)
		}
		o.consumeBatchSize = n
		return nil
	}
}

// WithPullBatchSize sets how many messages one pull asks for (default 32).
func WithPullBatchSize(n int32) Option {
	return func(o *options) error {
		if n <= 0 || n > 1024 {
			return badOption("pullBatchSize", n)
		}
		o.pullBatchSize = n
		return nil
	}
}

// WithConsumeGoroutineNums bounds the goroutines running handlers of a
// concurrent push consumer (default 20).
func WithConsumeGoroutineNums(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return badOption("consumeGoroutineNums", n)
		}
		o.consumeGoroutines = n
		return nil
	}
}

// WithPullThresholdForQueue pauses pulling a queue while this many of its
// messages wait for consumption (default 1024).
func WithPullThresholdForQueue(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return badOption("pullThresholdForQueue", n)
		}
		o.queueCountLimit = n
		return nil
	}
}

// WithPullThresholdSizeForQueue pauses pulling a queue while this many MiB of
// its message bodies wait for consumption (default 100).
func WithPullThresholdSizeForQueue(mib int) Option {
	return func(o *options) error {
		if mib <= 0 {
			return badOption("pullThresholdSizeForQueue", mib)
		}
		o.queueSizeLimitMiB = mib
		return nil
	}
}

// WithMaxReconsumeTimes sets how often a failed message is redelivered before
// the broker moves it to the dead-letter topic (default 16).
func WithMaxReconsumeTimes(n int32) Option {
	return func(o *options) error {
		o.maxReconsume = n
		return nil
	}
}

// WithSuspendTimeout sets how long the broker may hold a pull that finds no
// message (long polling, default 20 s).
func WithSuspendTimeout(d time.Duration) Option {
	return func(o *options) error { return positiveDuration("suspendTimeout", d, &o.suspendTimeout) }
}

// WithAutoCommit makes a pull consumer commit what Poll returned on the next
// Poll (default true). Without it call Commit.
func WithAutoCommit(on bool) Option {
	return func(o *options) error {
		o.autoCommit = on
		return nil
	}
}

// WithOffsetStoreDir sets the directory of a broadcasting consumer's offset
// file (default $HOME/.gorocketmq/offsets). The file is
// <dir>/<group>/offsets.json, or <dir>/<group>/<instance>/offsets.json with
// WithInstanceName: give each broadcasting member on one host its own
// instance name (or directory) so they do not share a file, and keep it
// across restarts so a member resumes where it stopped.
func WithOffsetStoreDir(dir string) Option {
	return func(o *options) error {
		o.offsetDir = dir
		return nil
	}
}
