package client

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Handler consumes messages delivered by a PushConsumer. It gets at most
// WithConsumeMessageBatchMaxSize messages, all of one topic. Returning
// ConsumeRetryLater or an error (or panicking) asks for redelivery. ctx is
// cancelled when Shutdown begins; Shutdown waits for running handlers.
type Handler func(ctx context.Context, msgs ...*MessageExt) (ConsumeResult, error)

// Redelivery timing.
const (
	localRetryDelay  = time.Second // a failed send-back is retried in place after this
	orderlySuspend   = time.Second // an orderly queue pauses this long after a failure
	sendBackTimeout  = 3 * time.Second
	dlqDelayLevel    = -1 // CONSUMER_SEND_MSG_BACK straight to the dead-letter queue
	brokerDelayLevel = 0  // let the broker pick 3 + reconsumeTimes
)

// PushConsumer delivers messages to handlers as they arrive. Create it with
// NewPushConsumer, Subscribe, Start, and Shutdown when done.
type PushConsumer struct {
	b      *consumerBase
	pool   chan struct{} // bounds the goroutines running handlers
	sender *Producer     // fallback for failed CONSUMER_SEND_MSG_BACK
	tracer *tracer       // records deliveries (WithTrace); nil without trace

	stateMu  sync.Mutex
	started  bool
	shutdown bool
}

// NewPushConsumer returns a push consumer (group DEFAULT_CONSUMER unless set).
func NewPushConsumer(opts ...Option) (*PushConsumer, error) {
	o, err := buildOptions("DEFAULT_CONSUMER", opts)
	if err != nil {
		return nil, err
	}
	c := newCore(o, "push-consumer")
	pc := &PushConsumer{pool: make(chan struct{}, o.consumeGoroutines)}
	pc.b = newConsumerBase(c, protocol.ConsumePassively)
	pc.b.deliver = pc.deliver
	if o.orderly {
		pc.b.perQueue = pc.orderlyLoop
	}
	pc.sender = &Producer{c: c, defSel: NewHashSelector(), faults: newFaultTracker(o.faultAvoidance),
		asyncSem: make(chan struct{}, 1), group: "CLIENT_INNER_PRODUCER"}
	pc.tracer = newTracer(o, c.ip.String())
	return pc, nil
}

// ClientID is the id this consumer shows brokers.
func (pc *PushConsumer) ClientID() string { return pc.b.c.clientID }

// Subscribe registers h for topic's messages matching sel. Call it before
// Start; calls after Start take effect at the next heartbeat and rebalance.
func (pc *PushConsumer) Subscribe(topic string, sel MessageSelector, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrBadSubscription)
	}
	if err := pc.b.addSubscription(topic, sel, h); err != nil {
		return err
	}
	if pc.b.c.running() {
		pc.b.c.triggerHeartbeat()
		pc.b.triggerRebalance()
	}
	return nil
}

// Unsubscribe stops consuming topic.
func (pc *PushConsumer) Unsubscribe(topic string) error {
	pc.b.mu.Lock()
	delete(pc.b.subs, pc.b.c.wrapName(topic))
	pc.b.mu.Unlock()
	if pc.b.c.running() {
		pc.b.c.triggerHeartbeat()
		pc.b.triggerRebalance()
	}
	return nil
}

// Start reads the routes of the subscribed topics (failing if one has none),
// registers with the brokers and starts consuming.
func (pc *PushConsumer) Start() error {
	pc.stateMu.Lock()
	defer pc.stateMu.Unlock()
	if pc.started {
		return ErrAlreadyStarted
	}
	pc.b.mu.Lock()
	n := len(pc.b.subs)
	pc.b.mu.Unlock()
	if n == 0 {
		return fmt.Errorf("%w: no subscription", ErrBadSubscription)
	}
	pc.started = true
	if pc.tracer != nil {
		if err := pc.tracer.start(); err != nil {
			pc.shutdown = true
			return fmt.Errorf("client: start trace: %w", err)
		}
	}
	if err := pc.b.start(); err != nil {
		pc.shutdown = true
		if pc.tracer != nil {
			pc.tracer.shutdown()
		}
		return err
	}
	return nil
}

// Shutdown stops pulling, waits for the handlers running, stores the
// offsets, releases queue locks and closes every connection. Safe to call
// twice.
func (pc *PushConsumer) Shutdown() error {
	pc.stateMu.Lock()
	defer pc.stateMu.Unlock()
	if pc.shutdown {
		return nil
	}
	pc.shutdown = true
	pc.b.stopBase()
	if pc.tracer != nil {
		pc.tracer.shutdown() // after the handlers: their SubAfter records go out too
	}
	pc.b.c.shutdown()
	return nil
}

// Suspend stops pulling every queue, including queues assigned later, until
// Resume; messages already pulled are still consumed.
func (pc *PushConsumer) Suspend() { pc.setPaused(true) }

// Resume undoes Suspend.
func (pc *PushConsumer) Resume() { pc.setPaused(false) }

func (pc *PushConsumer) setPaused(p bool) { pc.b.paused.Store(p) }

// Queues lists the queues this member consumes now.
func (pc *PushConsumer) Queues() []MessageQueue {
	qs := pc.b.queues()
	for i := range qs {
		qs[i].Topic = pc.b.c.unwrapName(qs[i].Topic)
	}
	return qs
}

// deliver hands newly pulled messages of a concurrent consumer to the pool,
// in batches of one topic. It blocks while the pool is full: that stops the
// queue's pull loop, which is the back-pressure we want.
func (pc *PushConsumer) deliver(pq *processQueue, msgs []*MessageExt) {
	if pc.b.orderly {
		return // the queue's orderlyLoop takes them from pq
	}
	size := pc.b.c.o.consumeBatchSize
	for len(msgs) > 0 {
		n := 1
		for n < len(msgs) && n < size && msgs[n].Topic == msgs[0].Topic {
			n++
		}
		batch := msgs[:n]
		msgs = msgs[n:]
		select {
		case pc.pool <- struct{}{}:
		case <-pq.stop:
			return
		case <-pc.b.ctx.Done():
			return
		}
		pc.b.goLoop(func() {
			defer func() { <-pc.pool }()
			pc.consumeConcurrently(pq, batch)
		})
	}
}

// call runs the handler, turning a panic into a retry.
func (pc *PushConsumer) call(msgs []*MessageExt) (res ConsumeResult) {
	h := pc.b.handlerFor(msgs[0].Topic)
	if h == nil {
		return ConsumeRetryLater
	}
	defer func() {
		if r := recover(); r != nil {
			pc.b.c.log.WithFields(logrus.Fields{"topic": msgs[0].Topic, "panic": r}).Error("handler panicked")
			res = ConsumeRetryLater
		}
	}()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, m := range msgs {
		m.SetProperty(message.PropConsumeStartTime, now)
	}
	if pc.tracer != nil {
		return pc.callTraced(h, msgs)
	}
	r, err := h(pc.b.ctx, msgs...)
	if err != nil {
		return ConsumeRetryLater
	}
	return r
}

// callTraced is call's handler run with SubBefore and SubAfter records
// (the official consumer trace interceptor). Messages the broker stored
// with TRACE_ON=false are not traced.
func (pc *PushConsumer) callTraced(h Handler, msgs []*MessageExt) (res ConsumeResult) {
	t := pc.tracer
	begin := time.Now()
	reqID := pc.b.c.uniq.Next()
	group := pc.b.c.o.group
	var traced []*MessageExt
	for _, m := range msgs {
		if m.Property(message.PropTraceSwitch) == "false" {
			continue
		}
		traced = append(traced, m)
		t.add(traceRecord{kind: TraceSubBefore, timestamp: begin.UnixMilli(), region: m.Property(message.PropMsgRegion), group: group,
			requestID: reqID, msgID: m.MsgID(), retryTimes: int(m.ReconsumeTimes), keys: m.Keys(), clientHost: t.clientHost})
	}
	code := traceConsumeException // a panic leaves it so
	defer func() {
		for _, m := range traced {
			t.add(traceRecord{kind: TraceSubAfter, timestamp: time.Now().UnixMilli(), group: group, requestID: reqID,
				cost: time.Since(begin).Milliseconds(), success: code == traceConsumeSuccess, contextCode: code,
				msgID: m.MsgID(), keys: m.Keys()})
		}
	}()
	r, err := h(pc.b.ctx, msgs...)
	switch {
	case err != nil:
		r = ConsumeRetryLater
	case r == ConsumeSuccess:
		code = traceConsumeSuccess
	default:
		code = traceConsumeFailed
	}
	return r
}

func (pc *PushConsumer) consumeConcurrently(pq *processQueue, msgs []*MessageExt) {
	for !pq.dropped.Load() && pc.b.ctx.Err() == nil {
		if pc.call(msgs) == ConsumeSuccess {
			pc.ack(pq, msgs)
			return
		}
		if !pc.b.clustering() {
			// Broadcasting has no retry topic: a failed message is dropped,
			// as in RocketMQ's clients.
			pc.b.c.log.WithField("queue", pq.mq).Warn("broadcast message consumption failed; dropped")
			pc.ack(pq, msgs)
			return
		}
		var kept []*MessageExt
		for _, m := range msgs {
			if err := pc.sendBack(pq, m, brokerDelayLevel); err != nil {
				pc.b.c.log.WithFields(logrus.Fields{"msgId": m.MsgID(), "err": err}).Warn("send back failed; retrying locally")
				kept = append(kept, m)
			}
		}
		sent := make([]*MessageExt, 0, len(msgs)-len(kept))
		for _, m := range msgs {
			if !contains(kept, m) {
				sent = append(sent, m)
			}
		}
		if len(sent) > 0 {
			pc.ack(pq, sent)
		}
		if len(kept) == 0 {
			return
		}
		msgs = kept
		for _, m := range msgs {
			m.ReconsumeTimes++
		}
		if !pc.b.wait(localRetryDelay, pq.stop) {
			return
		}
	}
}

func contains(ms []*MessageExt, m *MessageExt) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// ack removes consumed messages and moves the queue's offset forward.
func (pc *PushConsumer) ack(pq *processQueue, msgs []*MessageExt) {
	off := pq.remove(msgs)
	if !pq.dropped.Load() {
		pc.b.store.update(pq.mq, off, true)
	}
}

// sendBack returns a failed message to the broker for redelivery through
// the group's retry topic (CONSUMER_SEND_MSG_BACK); if the broker cannot,
// the message is sent to %RETRY%<group> as a normal message.
func (pc *PushConsumer) sendBack(pq *processQueue, m *MessageExt, delayLevel int32) error {
	b := pc.b
	ctx, cancel := context.WithTimeout(context.Background(), sendBackTimeout)
	defer cancel()
	h := &protocol.ConsumerSendMsgBackRequestHeader{
		Offset: m.CommitLogOffset, Group: b.group, DelayLevel: delayLevel, OriginMsgID: m.MsgID(),
		OriginTopic: b.c.wrapName(m.Topic), MaxReconsumeTimes: b.maxReconsume(), BrokerName: pq.mq.BrokerName,
	}
	if h.MaxReconsumeTimes < 0 {
		h.MaxReconsumeTimes = 1<<31 - 1
	}
	addr := b.c.masterAddr(pq.mq.BrokerName)
	if addr == "" {
		addr = m.StoreHost.String()
	}
	_, err := b.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.ConsumerSendMsgBack, protocol.EncodeHeader(h, nil), nil), sendBackTimeout)
	if err == nil {
		return nil
	}
	b.c.log.WithFields(logrus.Fields{"msgId": m.MsgID(), "err": err}).Debug("CONSUMER_SEND_MSG_BACK failed, sending to the retry topic")
	retry := NewMessage(retryPrefix+pc.b.c.o.group, m.Body)
	retry.Flag = m.Flag
	for k, v := range m.Properties {
		retry.SetProperty(k, v)
	}
	if retry.Property(message.PropRetryTopic) == "" {
		retry.SetProperty(message.PropRetryTopic, b.c.wrapName(m.Topic))
	}
	retry.SetProperty(message.PropOriginMessageID, m.MsgID())
	retry.SetProperty(message.PropReconsumeTime, strconv.Itoa(int(m.ReconsumeTimes)+1))
	retry.SetProperty(message.PropMaxReconsumeTimes, strconv.Itoa(int(h.MaxReconsumeTimes)))
	if delayLevel >= 0 {
		retry.SetProperty(message.PropDelayTimeLevel, strconv.Itoa(3+int(m.ReconsumeTimes)))
	}
	retry.RemoveProperty(message.PropUniqKey)
	out, perr := pc.sender.prepare([]*Message{retry}, 0)
	if perr != nil {
		return perr
	}
	_, serr := pc.sender.send(ctx, out, false)
	return serr
}

// orderlyLoop consumes one queue in offset order, one batch at a time. A
// failed batch is retried in place after a pause (moved to the dead-letter
// queue once WithMaxReconsumeTimes is exceeded), so nothing behind it
// overtakes it.
func (pc *PushConsumer) orderlyLoop(pq *processQueue) {
	b := pc.b
	for {
		select {
		case <-pq.stop:
			return
		case <-b.ctx.Done():
			return
		case <-pq.ready:
		}
		for !pq.dropped.Load() && b.ctx.Err() == nil {
			if b.clustering() && !pq.locked() {
				if !b.wait(notLockedWait, pq.stop) {
					return
				}
				continue
			}
			msgs := pq.takeOrdered(b.c.o.consumeBatchSize)
			if len(msgs) == 0 {
				break
			}
			// One topic per call: a retry queue can mix topics.
			n := 1
			for n < len(msgs) && msgs[n].Topic == msgs[0].Topic {
				n++
			}
			pq.giveBack(msgs[n:])
			msgs = msgs[:n]
			if pc.call(msgs) == ConsumeSuccess {
				pc.ack(pq, msgs)
				continue
			}
			if max := b.maxReconsume(); max >= 0 && msgs[0].ReconsumeTimes >= max {
				if pc.toDLQ(pq, msgs) {
					continue
				}
			}
			for _, m := range msgs {
				m.ReconsumeTimes++
			}
			pq.giveBack(msgs)
			if !b.wait(orderlySuspend, pq.stop) {
				return
			}
		}
	}
}

// toDLQ moves msgs to the dead-letter queue; true when all went.
func (pc *PushConsumer) toDLQ(pq *processQueue, msgs []*MessageExt) bool {
	for _, m := range msgs {
		if err := pc.sendBack(pq, m, dlqDelayLevel); err != nil {
			return false
		}
	}
	pc.ack(pq, msgs)
	return true
}
