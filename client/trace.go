package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
)

// Message trace, as RocketMQ's clients write it: a traced producer records
// each send (Pub) and a traced consumer each delivery (SubBefore) and its
// outcome (SubAfter). Records are batched and sent by an inner producer of
// group _INNER_TRACE_PRODUCER to the trace topic, keyed by the message ids
// they are about, so `mqadmin queryMsgTraceById` finds them by key. The
// record text is the official Go client's (internal/trace.go), which Java's
// TraceDataEncoder reads:
//
//	Pub       ts region group topic msgId tags keys storeHost bodyLen cost msgType offsetMsgId success clientHost
//	SubBefore ts region group requestId msgId retryTimes keys clientHost
//	SubAfter  requestId msgId cost success keys contextCode ts group
//
// fields separated by 0x01, records ended by 0x02.

// DefaultTraceTopic is the trace topic unless TraceConfig names another
// (TopicValidator.RMQ_SYS_TRACE_TOPIC; a broker's msgTraceTopicName).
const DefaultTraceTopic = "RMQ_SYS_TRACE_TOPIC"

const (
	traceGroup       = "_INNER_TRACE_PRODUCER" // the inner producer's group, as the official clients
	traceContentSep  = '\x01'                  // TraceConstants.CONTENT_SPLITOR
	traceFieldSep    = '\x02'                  // TraceConstants.FIELD_SPLITOR
	traceBatchSize   = 100                     // records per flush at most
	traceMaxBodySize = 118000                  // bytes per trace message (128000 - 10000, as the official clients)
	traceFlushDelay  = 10 * time.Millisecond   // a record waits at most this long for company
	traceQueueLen    = 4096                    // records buffered; more are dropped (and counted)
	traceSendTimeout = 5 * time.Second
)

// Trace record types (TraceType).
const (
	TracePub       = "Pub"
	TraceSubBefore = "SubBefore"
	TraceSubAfter  = "SubAfter"
)

// Message types of a Pub record (MessageType ordinals).
const (
	traceNormalMsg = 0
	traceTransHalf = 1
	traceDelayMsg  = 3
)

// Consume outcomes of a SubAfter record (ConsumeReturnType ordinals).
const (
	traceConsumeSuccess   = 0
	traceConsumeException = 2
	traceConsumeFailed    = 4
)

// TraceConfig turns on message trace (WithTrace), as the official client's
// primitive.TraceConfig.
type TraceConfig struct {
	// TraceTopic is where records go; DefaultTraceTopic when empty. The
	// broker creates it with traceTopicEnable (msgTraceTopicName); else the
	// first record auto-creates it where autoCreateTopicEnable allows.
	TraceTopic string
	// NameServers of the cluster that keeps the records; the client's own
	// when empty.
	NameServers []string
	// Credentials sign the records' sends; the client's own when zero.
	Credentials Credentials
}

// WithTrace records every send of a Producer and every delivery of a
// PushConsumer in the trace topic. A nil config turns trace off.
func WithTrace(cfg *TraceConfig) Option {
	return func(o *options) error {
		if cfg == nil {
			o.trace = nil
			return nil
		}
		c := *cfg
		if c.TraceTopic == "" {
			c.TraceTopic = DefaultTraceTopic
		}
		if err := checkTopic(c.TraceTopic); err != nil {
			return fmt.Errorf("%w: trace topic: %w", ErrBadOption, err)
		}
		o.trace = &c
		return nil
	}
}

// traceRecord is one record to write (TraceContext with its beans).
type traceRecord struct {
	kind        string
	timestamp   int64 // ms
	region      string
	group       string
	requestID   string
	cost        int64 // ms
	success     bool
	contextCode int
	// the message (TraceBean)
	topic, msgID, offsetMsgID, tags, keys, storeHost, clientHost string
	bodyLen, retryTimes, msgType                                 int
}

// appendRecord writes r in the official Go client's layout.
func appendRecord(b *strings.Builder, r *traceRecord) {
	f := func(s string) {
		b.WriteString(s)
		b.WriteByte(traceContentSep)
	}
	i := func(n int64) { f(strconv.FormatInt(n, 10)) }
	switch r.kind {
	case TracePub:
		f(r.kind)
		i(r.timestamp)
		f(r.region)
		f(r.group)
		f(r.topic)
		f(r.msgID)
		f(r.tags)
		f(r.keys)
		f(r.storeHost)
		i(int64(r.bodyLen))
		i(r.cost)
		i(int64(r.msgType))
		f(r.offsetMsgID)
		f(strconv.FormatBool(r.success))
		b.WriteString(r.clientHost)
	case TraceSubBefore:
		f(r.kind)
		i(r.timestamp)
		f(r.region)
		f(r.group)
		f(r.requestID)
		f(r.msgID)
		i(int64(r.retryTimes))
		f(nullWrap(r.keys))
		b.WriteString(r.clientHost)
	case TraceSubAfter:
		f(r.kind)
		f(r.requestID)
		f(r.msgID)
		i(r.cost)
		f(strconv.FormatBool(r.success))
		f(nullWrap(r.keys))
		i(int64(r.contextCode))
		i(r.timestamp)
		b.WriteString(r.group)
	}
	b.WriteByte(traceFieldSep)
}

// nullWrap writes an empty value as "null", as the Java console expects.
func nullWrap(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

// TraceView is one trace record about a message, as mqadmin shows it
// (Java's TraceView).
type TraceView struct {
	Type        string // TracePub, TraceSubBefore or TraceSubAfter
	MsgID       string
	Topic       string // Pub only
	Tags        string // Pub only
	Keys        string
	Group       string // producer or consumer group
	Timestamp   int64  // ms: send time (Pub), delivery (SubBefore), end of consumption (SubAfter)
	CostTime    int64  // ms (Pub, SubAfter)
	Success     bool
	StoreHost   string // the broker that stored the message (Pub)
	OffsetMsgID string // Pub
	ClientHost  string // the host that wrote the record
	RequestID   string // ties a SubBefore to its SubAfter
	RegionID    string
	ContextCode int // SubAfter: 0 success, 1 timeout, 2 exception, 3 null, 4 failed
}

// Status is "success" or "failed", as Java's tool prints it.
func (v *TraceView) Status() string {
	if v.Success {
		return "success"
	}
	return "failed"
}

// DecodeTraceData parses the records of a trace message body (Java's
// TraceDataEncoder.decoderFromTraceDataString, which accepts the shorter
// layouts of older clients). Malformed records are skipped.
func DecodeTraceData(data string) []TraceView {
	var out []TraceView
	for _, rec := range strings.Split(data, string(rune(traceFieldSep))) {
		f := strings.Split(rec, string(rune(traceContentSep)))
		num := func(i int) (int64, bool) {
			if i >= len(f) {
				return 0, false
			}
			n, err := strconv.ParseInt(f[i], 10, 64)
			return n, err == nil
		}
		var v TraceView
		switch f[0] {
		case TracePub:
			if len(f) < 13 {
				continue
			}
			ts, ok1 := num(1)
			cost, ok2 := num(10)
			if !ok1 || !ok2 {
				continue
			}
			v = TraceView{Type: TracePub, Timestamp: ts, RegionID: f[2], Group: f[3], Topic: f[4], MsgID: f[5], Tags: f[6],
				Keys: f[7], StoreHost: f[8], CostTime: cost}
			if len(f) == 13 {
				v.Success = f[12] == "true"
			} else {
				v.OffsetMsgID, v.Success = f[12], f[13] == "true"
			}
			if len(f) >= 15 {
				v.ClientHost = f[14]
			}
		case TraceSubBefore:
			if len(f) < 8 {
				continue
			}
			ts, ok := num(1)
			if !ok {
				continue
			}
			v = TraceView{Type: TraceSubBefore, Timestamp: ts, RegionID: f[2], Group: f[3], RequestID: f[4], MsgID: f[5], Keys: f[7], Success: true}
			if len(f) >= 9 {
				v.ClientHost = f[8]
			}
		case TraceSubAfter:
			if len(f) < 6 {
				continue
			}
			cost, ok := num(3)
			if !ok {
				continue
			}
			v = TraceView{Type: TraceSubAfter, RequestID: f[1], MsgID: f[2], CostTime: cost, Success: f[4] == "true", Keys: f[5]}
			if code, ok := num(6); ok {
				v.ContextCode = int(code)
			}
			if len(f) >= 9 {
				v.Timestamp, _ = num(7)
				v.Group = f[8]
			}
		default:
			continue
		}
		out = append(out, v)
	}
	return out
}

// QueryTrace returns the trace records about msgID (a SendResult.MsgID) in
// traceTopic (DefaultTraceTopic when empty), in the order stored. Each
// record's ClientHost is the address its trace message came from, as
// Java's tool shows it.
func (a *Admin) QueryTrace(ctx context.Context, traceTopic, msgID string) ([]TraceView, error) {
	if traceTopic == "" {
		traceTopic = DefaultTraceTopic
	}
	msgs, err := a.QueryMessageByKey(ctx, traceTopic, msgID, 64, time.UnixMilli(0), time.Now().Add(time.Hour))
	if err != nil {
		return nil, err
	}
	var out []TraceView
	for _, m := range msgs {
		for _, v := range DecodeTraceData(string(m.Body)) {
			if v.MsgID != msgID {
				continue
			}
			if m.BornHost.IsValid() {
				v.ClientHost = m.BornHost.Addr().String()
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// tracer batches a client's records and sends them with its own producer
// on traceLoop. Appending never blocks: a full queue drops the record and
// counts it, so tracing cannot slow the traced sends or handlers down.
type tracer struct {
	topic      string
	clientHost string
	p          *Producer
	log        logrus.FieldLogger

	in      chan traceRecord
	stop    chan struct{}
	wg      sync.WaitGroup
	dropped atomic.Int64
	once    sync.Once
}

// newTracer returns the tracer of a client with options o (nil without
// WithTrace). Its producer shares o's transport settings but has no trace,
// namespace or instance name of its own.
func newTracer(o *options, clientHost string) *tracer {
	if o.trace == nil {
		return nil
	}
	io := *o
	io.trace = nil
	io.group = traceGroup
	io.instanceName = ""
	io.namespace = ""
	if len(o.trace.NameServers) > 0 {
		io.nameServers = o.trace.NameServers
	}
	if o.trace.Credentials.enabled() {
		io.credentials = o.trace.Credentials
	}
	return &tracer{
		topic:      o.trace.TraceTopic,
		clientHost: clientHost,
		p:          newProducer(&io),
		log:        o.log.WithField("component", "trace"),
		in:         make(chan traceRecord, traceQueueLen),
		stop:       make(chan struct{}),
	}
}

// start starts the tracer's producer and loop.
func (t *tracer) start() error {
	if err := t.p.Start(); err != nil {
		return err
	}
	t.wg.Add(1)
	go t.traceLoop()
	return nil
}

// shutdown sends what is queued and stops. Safe to call twice.
func (t *tracer) shutdown() {
	t.once.Do(func() {
		close(t.stop)
		t.wg.Wait()
		_ = t.p.Shutdown()
		if n := t.dropped.Load(); n > 0 {
			t.log.WithField("dropped", n).Warn("trace records dropped: the trace queue was full")
		}
	})
}

// add queues a record without blocking.
func (t *tracer) add(r traceRecord) {
	select {
	case t.in <- r:
	default:
		t.dropped.Add(1)
	}
}

// traceLoop collects records and sends them in batches: when traceBatchSize
// are waiting, or traceFlushDelay after the first of a batch; at shutdown
// whatever is queued.
func (t *tracer) traceLoop() {
	defer t.wg.Done()
	batch := make([]traceRecord, 0, traceBatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case r := <-t.in:
			batch = append(batch, r)
			if len(batch) == 1 {
				timer.Reset(traceFlushDelay)
			}
			if len(batch) < traceBatchSize {
				continue
			}
			timer.Stop()
		case <-timer.C:
		case <-t.stop:
			for {
				select {
				case r := <-t.in:
					batch = append(batch, r)
					continue
				default:
				}
				break
			}
			t.flush(batch)
			return
		}
		t.flush(batch)
		batch = batch[:0]
	}
}

// flush sends records as trace messages of at most traceMaxBodySize bytes,
// each keyed by the message ids (and keys) its records are about.
func (t *tracer) flush(recs []traceRecord) {
	var b strings.Builder
	keys := map[string]bool{}
	send := func() {
		if b.Len() == 0 {
			return
		}
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		m := NewMessage(t.topic, []byte(b.String())).WithKeys(ks...)
		ctx, cancel := context.WithTimeout(context.Background(), traceSendTimeout)
		defer cancel()
		if _, err := t.p.SendSync(ctx, m); err != nil {
			t.log.WithFields(logrus.Fields{"topic": t.topic, "err": err}).Warn("trace records not sent")
		}
		b.Reset()
		clear(keys)
	}
	for i := range recs {
		appendRecord(&b, &recs[i])
		keys[recs[i].msgID] = true
		for _, k := range strings.Fields(recs[i].keys) {
			keys[k] = true
		}
		if b.Len() > traceMaxBodySize {
			send()
		}
	}
	send()
}

// tracePub records a send (the official producer trace interceptor): only
// when the broker answered with trace on.
func (p *Producer) tracePub(begin time.Time, out *outgoing, res *SendResult, err error) {
	t := p.tracer
	if res == nil || err != nil || !res.TraceOn || out.batch || p.c.unwrapName(out.topic) == t.topic {
		return
	}
	m := out.first
	mt := traceNormalMsg
	switch {
	case m.Property(message.PropTransactionPrepared) == "true":
		mt = traceTransHalf
	case m.Property(message.PropDelayTimeLevel) != "" || m.Property(message.PropTimerDeliverMS) != "" ||
		m.Property(message.PropTimerDelaySec) != "" || m.Property(message.PropTimerDelayMS) != "":
		mt = traceDelayMsg
	}
	t.add(traceRecord{
		kind: TracePub, timestamp: begin.UnixMilli(), region: res.RegionID, group: p.c.o.group,
		cost: time.Since(begin).Milliseconds(), success: res.Status == SendOK,
		topic: m.Topic, msgID: res.MsgID, offsetMsgID: res.OffsetMsgID, tags: m.Property(message.PropTags),
		keys: m.Property(message.PropKeys), storeHost: p.c.masterAddr(res.Queue.BrokerName), clientHost: t.clientHost, bodyLen: len(m.Body), msgType: mt,
	})
}
