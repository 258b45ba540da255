package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Backoff for SYSTEM_BUSY answers: a busy broker sheds load, so hammering it
// again at once only makes it busier.
const (
	busyBackoffBase = 50 * time.Millisecond
	busyBackoffMax  = time.Second
)

// Producer sends messages. Create it with NewProducer, Start it, and
// Shutdown it when done; it is safe for concurrent use.
type Producer struct {
	c        *core
	selector QueueSelector
	defSel   *HashSelector // used when no selector is set
	faults   *faultTracker
	asyncSem chan struct{}

	shutdownOnce sync.Once
	zpool        sync.Pool // *zlib.Writer at the configured level
	// group overrides the option's group (the consumer's inner sender).
	group string

	// txHandler answers CHECK_TRANSACTION_STATE; set by TransactionProducer.
	txHandler remoting.RequestHandler

	// requests are the Request/RequestAsync calls waiting for a reply.
	requests replyTable
	// replyPathMu serialises ensureReplyPath; replyPathReady holds the
	// request topics whose reply brokers have had this client's heartbeat.
	replyPathMu    sync.Mutex
	replyPathReady map[string]bool
	// tracer records sends (WithTrace); nil without trace.
	tracer *tracer
}

// NewProducer returns a producer (group DEFAULT_PRODUCER unless set).
func NewProducer(opts ...Option) (*Producer, error) {
	o, err := buildOptions("DEFAULT_PRODUCER", opts)
	if err != nil {
		return nil, err
	}
	return newProducer(o), nil
}

// newProducer returns a producer with built options.
func newProducer(o *options) *Producer {
	p := &Producer{
		c:        newCore(o, "producer"),
		selector: o.selector,
		defSel:   NewHashSelector(),
		faults:   newFaultTracker(o.faultAvoidance),
		asyncSem: make(chan struct{}, o.maxAsyncInFlight),
	}
	p.c.heartbeat = p.heartbeatData
	p.tracer = newTracer(o, p.c.ip.String())
	return p
}

// ClientID is the id this producer shows brokers.
func (p *Producer) ClientID() string { return p.c.clientID }

// Start starts the route refresh and heartbeat loops.
func (p *Producer) Start() error {
	if p.txHandler != nil {
		p.c.rc.RegisterHandler(remoting.CheckTransactionState, p.txHandler)
	}
	p.c.rc.RegisterHandler(remoting.PushReplyMessageToClient, p.handleReply)
	if err := p.c.start(); err != nil {
		return err
	}
	if p.tracer != nil {
		if err := p.tracer.start(); err != nil {
			return fmt.Errorf("client: start trace: %w", err)
		}
	}
	return nil
}

// Shutdown waits for SendAsync calls in flight, then stops every goroutine
// and closes every connection. Safe to call twice.
func (p *Producer) Shutdown() error {
	p.shutdownOnce.Do(func() {
		// Requests still waiting end now, and their callbacks return
		// before the slots below are taken.
		p.requests.closeAll(ErrNotStarted)
		// Take every async slot: once all are held no send is in flight.
		for i := 0; i < cap(p.asyncSem); i++ {
			p.asyncSem <- struct{}{}
		}
		if p.tracer != nil {
			p.tracer.shutdown() // after the sends: their records go out too
		}
		if p.c.running() {
			p.c.unregister(p.groupName(), "")
		}
		p.c.shutdown()
	})
	return nil
}

func (p *Producer) groupName() string {
	if p.group != "" {
		return p.group
	}
	return p.c.wrapName(p.c.o.group)
}

func (p *Producer) heartbeatData() *protocol.HeartbeatData {
	return &protocol.HeartbeatData{
		ClientID:        p.c.clientID,
		ProducerDataSet: []protocol.ProducerData{{GroupName: p.c.wrapName(p.c.o.group)}, {GroupName: "CLIENT_INNER_PRODUCER"}},
		ConsumerDataSet: []protocol.ConsumerData{},
	}
}

// outgoing is a send prepared once for all attempts.
type outgoing struct {
	topic    string // with namespace
	first    *Message
	batch    bool
	body     []byte
	sysFlag  int32
	flag     int32
	props    string
	msgIDs   string
	sharding bool
	reply    bool // MSG_TYPE=reply: sent as SEND_REPLY_MESSAGE_V2
}

// prepare validates msgs and encodes them: one message as itself (UNIQ_KEY
// added, body compressed over the threshold), several as one batch body with
// a UNIQ_KEY per member.
func (p *Producer) prepare(msgs []*Message, sysFlag int32) (*outgoing, error) {
	if len(msgs) == 0 {
		return nil, ErrNoMessage
	}
	topic := msgs[0].Topic
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	out := &outgoing{topic: p.c.wrapName(topic), first: msgs[0], sysFlag: sysFlag}
	var ids []string
	for _, m := range msgs {
		if m.Topic != topic {
			return nil, ErrMixedTopics
		}
		if len(m.Body) == 0 {
			return nil, ErrEmptyBody
		}
		if len(m.Body) > p.c.o.maxMessageSize {
			// Checked before compression, as the Java client does.
			return nil, fmt.Errorf("%w: %d bytes > %d", ErrMessageTooLarge, len(m.Body), p.c.o.maxMessageSize)
		}
		id := m.UniqKey()
		if id == "" {
			id = p.c.uniq.Next()
			m.SetProperty(message.PropUniqKey, id)
		}
		ids = append(ids, id)
	}
	out.msgIDs = strings.Join(ids, ",")
	out.sharding = msgs[0].ShardingKey() != ""
	if len(msgs) == 1 {
		m := msgs[0]
		out.flag = m.Flag
		out.body = m.Body
		if p.c.o.compressOver > 0 && len(m.Body) > p.c.o.compressOver {
			z, err := p.compress(m.Body)
			if err == nil && len(z) < len(m.Body) {
				out.body = z
				out.sysFlag |= message.FlagCompressed
			}
		}
		out.props = string(message.MarshalProperties(m.Properties))
		out.reply = m.Properties[message.PropMessageType] == replyMessageFlag
	} else {
		plain := make([]*message.Message, len(msgs))
		for i, m := range msgs {
			plain[i] = &m.Message
		}
		body, err := message.AppendBatch(nil, plain)
		if err != nil {
			return nil, err
		}
		out.batch, out.body = true, body
	}
	if len(out.body) > p.c.o.maxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrMessageTooLarge, len(out.body), p.c.o.maxMessageSize)
	}
	return out, nil
}

// compress zlib-compresses b. Writers are pooled: each holds ~800 KB of
// deflate state, too much to allocate per message.
func (p *Producer) compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(b) / 2)
	w, _ := p.zpool.Get().(*zlib.Writer)
	if w == nil {
		var err error
		if w, err = zlib.NewWriterLevel(&buf, p.c.o.compressLevel); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	defer p.zpool.Put(w)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// request builds the send command for one attempt at queue q. Every send
// goes out as SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE with the one-letter keys
// the Java client uses, appended straight into the command's RawExt (no
// header map, no reflective EncodeHeader): at tens of thousands of sends per
// second a map per send was a tenth of the sender's CPU, and the long keys
// cost the broker's parser too.
func (p *Producer) request(out *outgoing, q MessageQueue) *remoting.Command {
	code := remoting.SendMessageV2
	switch {
	case out.batch:
		code = remoting.SendBatchMessage
	case out.reply:
		code = remoting.SendReplyMessageV2
	}
	req := sendRequests.Get().(*remoting.Command)
	f := req.RawExt[:0]
	f = remoting.AppendField(f, "a", p.groupName())
	f = remoting.AppendField(f, "b", out.topic)
	f = remoting.AppendField(f, "c", p.c.o.createTopicKey)
	f = remoting.AppendIntField(f, "d", int64(p.c.o.defaultTopicQueueNums))
	f = remoting.AppendIntField(f, "e", int64(q.QueueID))
	f = remoting.AppendIntField(f, "f", int64(out.sysFlag))
	f = remoting.AppendIntField(f, "g", time.Now().UnixMilli())
	f = remoting.AppendIntField(f, "h", int64(out.flag))
	f = remoting.AppendField(f, "i", out.props)
	var reconsume, maxReconsume int64
	if strings.HasPrefix(out.topic, retryPrefix) {
		if rt, err := strconv.Atoi(out.first.Property(message.PropReconsumeTime)); err == nil {
			reconsume = int64(int32(rt))
		}
		if mr, err := strconv.Atoi(out.first.Property(message.PropMaxReconsumeTimes)); err == nil {
			maxReconsume = int64(int32(mr))
		}
	}
	f = remoting.AppendIntField(f, "j", reconsume)
	f = remoting.AppendField(f, "k", "false")
	f = remoting.AppendIntField(f, "l", maxReconsume)
	f = remoting.AppendField(f, "m", strconv.FormatBool(out.batch))
	if q.BrokerName != "" {
		f = remoting.AppendField(f, "n", q.BrokerName)
	}
	*req = *remoting.NewRequest(code, nil, out.body)
	req.RawExt = f
	return req
}

// sendRequests recycles send requests with their header buffers: the
// transport encodes a request before InvokeSync, InvokeAsync or
// InvokeOneway returns, so once they return the request can serve the next
// send.
var sendRequests = sync.Pool{New: func() any {
	return &remoting.Command{RawExt: make([]byte, 0, 512)}
}}

// releaseRequest returns a request made by request once it was sent. A
// header grown past 64 KiB by one huge properties string is dropped.
func releaseRequest(req *remoting.Command) {
	f := req.RawExt[:0]
	if cap(f) > 64<<10 {
		f = nil
	}
	*req = remoting.Command{RawExt: f}
	sendRequests.Put(req)
}

// publishQueues returns topic's writable queues, falling back to the
// auto-create template route when the topic is unknown (the broker then
// creates it on first send, if its autoCreateTopicEnable allows).
func (p *Producer) publishQueues(ctx context.Context, topic string) ([]MessageQueue, error) {
	tr, err := p.c.route(ctx, topic)
	if err == nil && len(tr.publish) > 0 {
		return tr.publish, nil
	}
	if err != nil && !errors.Is(err, ErrNoRoute) {
		return nil, err
	}
	tmpl, terr := p.c.route(ctx, p.c.o.createTopicKey)
	if terr != nil || len(tmpl.publish) == 0 {
		return nil, fmt.Errorf("%w %s", ErrNoRoute, topic)
	}
	// Re-aim the template's queues at topic, clamped to the configured count.
	var qs []MessageQueue
	perBroker := map[string]int32{}
	for _, q := range tmpl.publish {
		if perBroker[q.BrokerName] >= p.c.o.defaultTopicQueueNums {
			continue
		}
		perBroker[q.BrokerName]++
		qs = append(qs, MessageQueue{Topic: topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	// The route of topic will exist after the first send; read it next time.
	p.c.forgetRoute(topic)
	return qs, nil
}

// choose picks the queue for one attempt.
func (p *Producer) choose(out *outgoing, queues []MessageQueue, lastBroker string) (MessageQueue, error) {
	if p.selector != nil {
		return p.selector.Select(out.first, queues, lastBroker)
	}
	if out.sharding {
		// Order matters more than availability: always the key's queue.
		return p.defSel.Select(out.first, queues, "")
	}
	return p.defSel.Select(out.first, p.faults.filter(queues), lastBroker)
}

// retryable says whether a failed attempt may be retried, and whether the
// broker should be avoided for a while.
func retryable(err error) (retry, avoid bool) {
	if isTransportErr(err) {
		return true, true
	}
	switch responseCode(err) {
	case remoting.TopicNotExist, remoting.ServiceNotAvailable, remoting.SystemError, remoting.NoPermission:
		return true, false
	case remoting.SystemBusy:
		return true, false
	}
	return false, false
}

// busyBackoff is the wait before retry n (0-based) after SYSTEM_BUSY.
func busyBackoff(n int) time.Duration {
	d := busyBackoffBase << n
	if d > busyBackoffMax || d <= 0 {
		d = busyBackoffMax
	}
	return d
}

// send runs one send (SendSync, SendOneWay, Request, a transaction's half
// message) and, with WithTrace, records it: every send that waits for an
// answer is traced, as by the official clients' send hook.
func (p *Producer) send(ctx context.Context, out *outgoing, oneway bool) (*SendResult, error) {
	if p.tracer == nil || oneway {
		return p.sendAttempts(ctx, out, oneway)
	}
	begin := time.Now()
	res, err := p.sendAttempts(ctx, out, false)
	p.tracePub(begin, out, res, err)
	return res, err
}

// sendAttempts runs the attempts of one send: up to 1+retry, each with its
// own timeout, a failed broker avoided on the next attempt.
func (p *Producer) sendAttempts(ctx context.Context, out *outgoing, oneway bool) (*SendResult, error) {
	if !p.c.running() {
		return nil, ErrNotStarted
	}
	attempts := 1 + p.c.o.retry
	var lastErr error
	lastBroker := ""
	busy := 0
	for i := 0; i < attempts; i++ {
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%w (last attempt: %w)", err, lastErr)
			}
			return nil, err
		}
		queues, err := p.publishQueues(ctx, out.topic)
		if err != nil {
			return nil, err
		}
		q, err := p.choose(out, queues, lastBroker)
		if err != nil {
			return nil, err
		}
		res, err := p.sendTo(ctx, out, q, oneway)
		if err == nil {
			p.faults.clear(q.BrokerName)
			return res, nil
		}
		lastErr, lastBroker = err, q.BrokerName
		retry, avoid := retryable(err)
		if avoid && ctx.Err() == nil { // the caller giving up is not the broker's fault
			p.faults.mark(q.BrokerName)
		}
		p.c.log.WithFields(logrus.Fields{"topic": out.topic, "broker": q.BrokerName, "attempt": i + 1, "err": err}).Debug("send attempt failed")
		if !retry {
			return nil, err
		}
		if responseCode(err) == remoting.TopicNotExist {
			p.c.forgetRoute(out.topic)
		} else if avoid {
			p.c.suspectRoute(out.topic)
		}
		if responseCode(err) == remoting.SystemBusy {
			t := time.NewTimer(busyBackoff(busy))
			busy++
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return nil, lastErr
}

// sendTo makes one attempt at queue q.
func (p *Producer) sendTo(ctx context.Context, out *outgoing, q MessageQueue, oneway bool) (*SendResult, error) {
	addr, err := p.c.findMaster(ctx, out.topic, q.BrokerName)
	if err != nil {
		return nil, err
	}
	req := p.request(out, q)
	defer releaseRequest(req)
	if oneway {
		wctx, cancel := context.WithTimeout(ctx, p.c.o.sendTimeout)
		defer cancel()
		return nil, p.c.rc.InvokeOneway(wctx, addr, req)
	}
	resp, err := p.c.invoke(ctx, addr, req, p.c.o.sendTimeout)
	if err != nil {
		return nil, err
	}
	return p.result(addr, out, q, resp)
}

// result turns a send response into a SendResult or an error.
func (p *Producer) result(addr string, out *outgoing, q MessageQueue, resp *remoting.Command) (*SendResult, error) {
	var status SendStatus
	switch resp.ResponseCode() {
	case remoting.Success:
		status = SendOK
	case remoting.FlushDiskTimeout:
		status = SendFlushDiskTimeout
	case remoting.FlushSlaveTimeout:
		status = SendFlushSlaveTimeout
	case remoting.SlaveNotAvailable:
		status = SendSlaveNotAvailable
	default:
		return nil, brokerError(addr, resp)
	}
	h, err := decodeSendResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("client: send response from %s: %w", addr, err)
	}
	q.Topic = p.c.unwrapName(q.Topic)
	q.QueueID = h.QueueID
	return &SendResult{
		Status:        status,
		MsgID:         out.msgIDs,
		OffsetMsgID:   h.MsgID,
		Queue:         q,
		QueueOffset:   h.QueueOffset,
		TransactionID: h.TransactionID,
		RegionID:      h.MsgRegion,
		TraceOn:       h.TraceOn == "true",
	}, nil
}

// decodeSendResponse is protocol.DecodeHeader for SendMessageResponseHeader
// without reflection (every send decodes one), with the same checks: the
// required keys present, the integers parsable. A binary answer's fields
// are read from RawExt in one pass, sharing one string; a JSON one's from
// ExtFields.
func decodeSendResponse(resp *remoting.Command) (protocol.SendMessageResponseHeader, error) {
	var h protocol.SendMessageResponseHeader
	var qid, qoff string
	var hasMsgID, hasQID, hasQOff bool
	if resp.RawExt != nil {
		for k, v := range remoting.StringFields(string(resp.RawExt)) {
			switch k {
			case "msgId":
				h.MsgID, hasMsgID = v, true
			case "queueId":
				qid, hasQID = v, true
			case "queueOffset":
				qoff, hasQOff = v, true
			case "transactionId":
				h.TransactionID = v
			case message.PropMsgRegion:
				h.MsgRegion = v
			case message.PropTraceSwitch:
				h.TraceOn = v
			}
		}
	}
	if ext := resp.ExtFields; len(ext) > 0 {
		h.MsgID, hasMsgID = ext["msgId"]
		qid, hasQID = ext["queueId"]
		qoff, hasQOff = ext["queueOffset"]
		h.TransactionID = ext["transactionId"]
		h.MsgRegion = ext[message.PropMsgRegion]
		h.TraceOn = ext[message.PropTraceSwitch]
	}
	if !hasMsgID {
		return h, fmt.Errorf("%w: the custom field <msgId> is null", protocol.ErrBadHeader)
	}
	if !hasQID {
		return h, fmt.Errorf("%w: the custom field <queueId> is null", protocol.ErrBadHeader)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(qid), 10, 32)
	if err != nil {
		return h, fmt.Errorf("%w: <queueId> = %q is not a 32-bit integer", protocol.ErrBadHeader, qid)
	}
	h.QueueID = int32(n)
	if !hasQOff {
		return h, fmt.Errorf("%w: the custom field <queueOffset> is null", protocol.ErrBadHeader)
	}
	if h.QueueOffset, err = strconv.ParseInt(strings.TrimSpace(qoff), 10, 64); err != nil {
		return h, fmt.Errorf("%w: <queueOffset> = %q is not a 64-bit integer", protocol.ErrBadHeader, qoff)
	}
	return h, nil
}

// SendSync sends msgs and waits for the broker: one message, or several of
// one topic as a single batch. A failed attempt is retried (WithRetry) on
// another broker when there is one.
func (p *Producer) SendSync(ctx context.Context, msgs ...*Message) (*SendResult, error) {
	out, err := p.prepare(msgs, 0)
	if err != nil {
		return nil, err
	}
	return p.send(ctx, out, false)
}

// CancelScheduled cancels a message sent with a delivery time
// (WithDeliveryTime or another timer property) before it is delivered, as
// RocketMQ 5 does: it sends a cancel marker (TIMER_DEL_UNIQKEY) due at the
// same time to the broker holding the message. q and msgID are the
// message's SendResult.Queue and SendResult.MsgID, deliverAt the time it
// was sent with (the broker matches the marker with messages due around
// the same second). Cancelling a message already delivered, or one that
// never existed, does nothing; a nil error means the broker stored the
// marker, not that a message was found.
func (p *Producer) CancelScheduled(ctx context.Context, q MessageQueue, msgID string, deliverAt time.Time) error {
	if msgID == "" || deliverAt.IsZero() {
		return fmt.Errorf("%w: cancel needs the message id and its delivery time", ErrBadOption)
	}
	topic := p.c.wrapName(q.Topic)
	key := topic + "+" + msgID
	marker := NewMessage(q.Topic, []byte(key)).WithDeliveryTime(deliverAt).WithProperty(message.PropTimerDelUniqKey, key)
	out, err := p.prepare([]*Message{marker}, 0)
	if err != nil {
		return err
	}
	if !p.c.running() {
		return ErrNotStarted
	}
	// The broker that holds the message, whatever the selector: the
	// cancel set is the broker's own.
	q.Topic = topic
	for i := 0; ; i++ {
		_, err = p.sendTo(ctx, out, q, false)
		if err == nil || i >= p.c.o.retry || ctx.Err() != nil {
			return err
		}
		if retry, _ := retryable(err); !retry {
			return err
		}
	}
}

// SendAsync sends msgs in the background and calls cb with the outcome, on a
// goroutine the producer owns. It returns an error (and never calls cb) when
// the messages are invalid, the producer is not running, or ctx ends while
// waiting for one of the WithMaxAsyncInFlight slots. Retries apply as for
// SendSync; ctx bounds them.
func (p *Producer) SendAsync(ctx context.Context, cb func(context.Context, *SendResult, error), msgs ...*Message) error {
	out, err := p.prepare(msgs, 0)
	if err != nil {
		return err
	}
	return p.sendAsyncPrepared(ctx, out, cb)
}

// sendAsyncPrepared is SendAsync of a prepared send (SendAsync,
// RequestAsync); with WithTrace it records the send before cb runs.
func (p *Producer) sendAsyncPrepared(ctx context.Context, out *outgoing, cb func(context.Context, *SendResult, error)) error {
	if !p.c.running() {
		return ErrNotStarted
	}
	if p.tracer != nil {
		begin, userCB := time.Now(), cb
		cb = func(ctx context.Context, res *SendResult, err error) {
			p.tracePub(begin, out, res, err)
			userCB(ctx, res, err)
		}
	}
	select {
	case p.asyncSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.c.stopCh:
		return ErrNotStarted
	}
	if !p.c.running() {
		<-p.asyncSem
		return ErrNotStarted
	}
	s := &asyncSend{p: p, ctx: ctx, out: out, cb: cb}
	if ctx.Done() != nil {
		// InvokeAsync bounds an attempt by its timeout only; the caller's
		// cancellation must end the send as it ends SendSync's.
		s.stopCtx = context.AfterFunc(ctx, s.cancelled)
	}
	s.next(true)
	return nil
}

// asyncSend is one SendAsync in flight: the attempt loop of send, driven by
// remoting.Client.InvokeAsync callbacks instead of a goroutine blocked in
// InvokeSync per message. It holds one asyncSem slot until cb has returned,
// so Shutdown waits for it.
type asyncSend struct {
	p       *Producer
	ctx     context.Context
	out     *outgoing
	cb      func(context.Context, *SendResult, error)
	stopCtx func() bool

	// Attempt state, touched by one attempt at a time (each attempt starts
	// only after the previous one ended).
	attempt    int
	busy       int
	lastErr    error
	lastBroker string

	done atomic.Bool // cb called (or about to be)
}

// cancelled ends the send when its context ends, even with an attempt in
// flight (that attempt's outcome is then dropped).
func (s *asyncSend) cancelled() {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	// Not s.stopCtx: this runs because the context ended, perhaps before
	// SendAsync stored it.
	s.complete(nil, s.ctx.Err(), false)
}

// next starts attempts until one is in flight or the send is over. inline
// says it runs on SendAsync's caller, where cb must not run (a caller may
// wait for cb's effect right after SendAsync returns).
func (s *asyncSend) next(inline bool) {
	p := s.p
	for !s.done.Load() {
		if s.attempt >= 1+p.c.o.retry {
			s.finish(nil, s.lastErr, inline)
			return
		}
		if err := s.ctx.Err(); err != nil {
			if s.lastErr != nil {
				err = fmt.Errorf("%w (last attempt: %w)", err, s.lastErr)
			}
			s.finish(nil, err, inline)
			return
		}
		s.attempt++
		queues, err := p.publishQueues(s.ctx, s.out.topic)
		if err != nil {
			s.finish(nil, err, inline)
			return
		}
		q, err := p.choose(s.out, queues, s.lastBroker)
		if err != nil {
			s.finish(nil, err, inline)
			return
		}
		addr, err := p.c.findMaster(s.ctx, s.out.topic, q.BrokerName)
		if err == nil {
			timeout := p.c.o.sendTimeout
			if dl, ok := s.ctx.Deadline(); ok {
				if left := time.Until(dl); left < timeout {
					timeout = left
				}
			}
			req := p.request(s.out, q)
			err = p.c.rc.InvokeAsync(s.ctx, addr, req, timeout, func(resp *remoting.Command, err error) {
				var res *SendResult
				if err == nil {
					res, err = p.result(addr, s.out, q, resp)
				}
				if s.failed(q, res, err, false) {
					s.next(false)
				}
			})
			releaseRequest(req)
			if err == nil {
				return // the callback takes over
			}
		}
		if !s.failed(q, nil, err, inline) {
			return
		}
	}
}

// failed ends the send with res or a final err, or records a retryable
// failure of an attempt at q and reports that the next attempt is due now.
// A SYSTEM_BUSY answer schedules the next attempt after the back-off instead.
func (s *asyncSend) failed(q MessageQueue, res *SendResult, err error, inline bool) bool {
	p := s.p
	if err == nil {
		p.faults.clear(q.BrokerName)
		s.finish(res, nil, inline)
		return false
	}
	s.lastErr, s.lastBroker = err, q.BrokerName
	retry, avoid := retryable(err)
	if avoid && s.ctx.Err() == nil {
		p.faults.mark(q.BrokerName)
	}
	p.c.log.WithFields(logrus.Fields{"topic": s.out.topic, "broker": q.BrokerName, "attempt": s.attempt, "err": err}).Debug("send attempt failed")
	if !retry {
		s.finish(nil, err, inline)
		return false
	}
	if responseCode(err) == remoting.TopicNotExist {
		p.c.forgetRoute(s.out.topic)
	} else if avoid {
		p.c.suspectRoute(s.out.topic)
	}
	if responseCode(err) == remoting.SystemBusy && s.attempt < 1+p.c.o.retry {
		d := busyBackoff(s.busy)
		s.busy++
		// The slot held until cb returns keeps Shutdown waiting for this
		// timer; a cancelled ctx ends the send at once through stopCtx.
		time.AfterFunc(d, func() { s.next(false) })
		return false
	}
	return true
}

// finish calls cb once and frees the send's slot. From the caller's
// goroutine cb runs on a new one.
func (s *asyncSend) finish(res *SendResult, err error, inline bool) {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	if s.stopCtx != nil {
		s.stopCtx() // set before the first attempt started
	}
	s.complete(res, err, inline)
}

// complete calls cb and frees the slot.
func (s *asyncSend) complete(res *SendResult, err error, inline bool) {
	done := func() {
		defer func() { <-s.p.asyncSem }()
		s.cb(s.ctx, res, err)
	}
	if inline {
		go done()
		return
	}
	done()
}

// SendOneWay sends msgs without waiting for the broker's answer: fastest,
// and a lost message goes unnoticed. Only failures to reach a broker are
// retried.
func (p *Producer) SendOneWay(ctx context.Context, msgs ...*Message) error {
	out, err := p.prepare(msgs, 0)
	if err != nil {
		return err
	}
	_, err = p.send(ctx, out, true)
	return err
}

// Queues returns the writable queues of topic, for a custom selector or a
// ManualSelector.
func (p *Producer) Queues(ctx context.Context, topic string) ([]MessageQueue, error) {
	qs, err := p.publishQueues(ctx, p.c.wrapName(topic))
	if err != nil {
		return nil, err
	}
	out := make([]MessageQueue, len(qs))
	for i, q := range qs {
		q.Topic = p.c.unwrapName(q.Topic)
		out[i] = q
	}
	return out, nil
}
