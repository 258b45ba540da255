package client

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// The requests a broker forwards to a consumer for admin tools, answered
// as RocketMQ's clients answer them: GET_CONSUMER_RUNNING_INFO (mqadmin
// consumerStatus), GET_CONSUMER_STATUS_FROM_CLIENT (the group's offsets as
// the client holds them) and, for push consumers, CONSUME_MESSAGE_DIRECTLY
// (run the listener on one stored message and say how it went).

// clientVersionDesc is PROP_CLIENT_VERSION in running info.
const clientVersionDesc = "gorocketmq"

// topicCounters count one topic's pulls and consumption in a consumer, for
// the rates in its running info. Atomics: pull loops and consume
// goroutines count without a lock.
type topicCounters struct {
	pulls, pulledMsgs, pullNanos                 atomic.Int64
	consumeOK, consumeFailed, consumeNanos, runs atomic.Int64
}

// counterSample is topicCounters read at one time.
type counterSample struct {
	at                                           time.Time
	pulls, pulledMsgs, pullNanos                 int64
	consumeOK, consumeFailed, consumeNanos, runs int64
}

func (c *topicCounters) read(at time.Time) counterSample {
	return counterSample{at: at, pulls: c.pulls.Load(), pulledMsgs: c.pulledMsgs.Load(), pullNanos: c.pullNanos.Load(),
		consumeOK: c.consumeOK.Load(), consumeFailed: c.consumeFailed.Load(), consumeNanos: c.consumeNanos.Load(), runs: c.runs.Load()}
}

// consumerCounters are a consumer's per-topic counters in a copy-on-write
// map (a lookup is one atomic load), and the samples the last running-info
// answer took, so each answer's rates cover the time since the one before
// (or since start).
type consumerCounters struct {
	start time.Time

	writeMu sync.Mutex // serialises adding a topic
	topics  atomic.Pointer[map[string]*topicCounters]

	sampleMu sync.Mutex // guards last
	last     map[string]counterSample
}

func newConsumerCounters() *consumerCounters {
	return &consumerCounters{start: time.Now(), last: map[string]counterSample{}}
}

// topic returns the counters of topic (as the user sees it).
func (cc *consumerCounters) topic(t string) *topicCounters {
	if m := cc.topics.Load(); m != nil {
		if c := (*m)[t]; c != nil {
			return c
		}
	}
	cc.writeMu.Lock()
	defer cc.writeMu.Unlock()
	old := cc.topics.Load()
	if old != nil {
		if c := (*old)[t]; c != nil {
			return c
		}
	}
	next := map[string]*topicCounters{}
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	c := &topicCounters{}
	next[t] = c
	cc.topics.Store(&next)
	return c
}

// status computes each topic's ConsumeStatus over the time since the last
// call, and takes new samples.
func (cc *consumerCounters) status(now time.Time) map[string]protocol.ConsumeStatus {
	out := map[string]protocol.ConsumeStatus{}
	m := cc.topics.Load()
	if m == nil {
		return out
	}
	cc.sampleMu.Lock()
	defer cc.sampleMu.Unlock()
	for t, c := range *m {
		cur := c.read(now)
		prev, ok := cc.last[t]
		if !ok {
			prev = counterSample{at: cc.start}
		}
		secs := cur.at.Sub(prev.at).Seconds()
		if secs <= 0 {
			secs = 1
		}
		st := protocol.ConsumeStatus{
			PullTPS:           float64(cur.pulledMsgs-prev.pulledMsgs) / secs,
			ConsumeOKTPS:      float64(cur.consumeOK-prev.consumeOK) / secs,
			ConsumeFailedTPS:  float64(cur.consumeFailed-prev.consumeFailed) / secs,
			ConsumeFailedMsgs: cur.consumeFailed,
		}
		if n := cur.pulls - prev.pulls; n > 0 {
			st.PullRT = float64(cur.pullNanos-prev.pullNanos) / float64(n) / 1e6
		}
		if n := cur.runs - prev.runs; n > 0 {
			st.ConsumeRT = float64(cur.consumeNanos-prev.consumeNanos) / float64(n) / 1e6
		}
		out[t] = st
		cc.last[t] = cur
	}
	return out
}

// registerMonitorHandlers answers the broker-forwarded admin requests every
// consumer answers.
func (b *consumerBase) registerMonitorHandlers() {
	b.c.rc.RegisterHandler(remoting.GetConsumerRunningInfo, b.handleRunningInfo)
	b.c.rc.RegisterHandler(remoting.GetConsumerStatusFromClient, b.handleConsumerStatus)
}

// handleRunningInfo answers GET_CONSUMER_RUNNING_INFO: properties,
// subscriptions, per-queue state, per-topic rates and, when asked
// (jstackEnable), every goroutine's stack in jstack's place.
func (b *consumerBase) handleRunningInfo(_ string, req *remoting.Command) *remoting.Command {
	var h protocol.GetConsumerRunningInfoRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if h.ConsumerGroup != b.group {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The Consumer Group <%s> not exist in this consumer", h.ConsumerGroup))
	}
	info := protocol.ConsumerRunningInfo{
		Properties: map[string]string{
			"PROP_NAMESERVER_ADDR":          strings.Join(b.c.o.nameServers, ";"),
			"PROP_CONSUME_TYPE":             string(b.kind),
			"PROP_CLIENT_VERSION":           clientVersionDesc,
			"PROP_CONSUMEORDERLY":           strconv.FormatBool(b.orderly),
			"PROP_THREADPOOL_CORE_SIZE":     strconv.Itoa(b.c.o.consumeGoroutines),
			"PROP_CONSUMER_START_TIMESTAMP": strconv.FormatInt(b.counters.start.UnixMilli(), 10),
		},
		MQTable:     map[protocol.MessageQueue]protocol.ProcessQueueInfo{},
		StatusTable: map[string]protocol.ConsumeStatus{},
	}
	b.mu.Lock()
	for _, s := range b.subs {
		info.SubscriptionSet = append(info.SubscriptionSet, s.data)
	}
	pqs := make([]*processQueue, 0, len(b.pqs))
	for _, pq := range b.pqs {
		pqs = append(pqs, pq)
	}
	b.mu.Unlock()
	now := time.Now()
	for _, pq := range pqs {
		n, size := pq.cached()
		pq.mu.Lock()
		pi := protocol.ProcessQueueInfo{
			CommitOffset: b.store.current(pq.mq), CachedMsgCount: int64(n), CachedMsgSizeInMiB: size >> 20,
			Locked: now.Before(pq.lockUntil), Droped: pq.dropped.Load(), NextOffset: pq.nextOffset,
		}
		if low, ok := pq.lowestLocked(); ok {
			pi.CachedMsgMinOffset, pi.CachedMsgMaxOffset = low, pq.maxOffset
		}
		pq.mu.Unlock()
		info.MQTable[pq.mq] = pi
	}
	for t, st := range b.counters.status(now) {
		info.StatusTable[b.c.wrapName(t)] = st
	}
	if h.JstackEnable {
		var sb strings.Builder
		if p := pprof.Lookup("goroutine"); p != nil {
			_ = p.WriteTo(&sb, 2)
		}
		info.Jstack = sb.String()
	}
	body, err := info.Encode()
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Language = remoting.LangGo
	resp.Body = body
	return resp
}

// handleConsumerStatus answers GET_CONSUMER_STATUS_FROM_CLIENT with the
// offsets this client holds for the topic's queues.
func (b *consumerBase) handleConsumerStatus(_ string, req *remoting.Command) *remoting.Command {
	var h protocol.GetConsumerStatusRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if h.Group != b.group {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The Consumer Group <%s> not exist in this consumer", h.Group))
	}
	body := protocol.GetConsumerStatusBody{MessageQueueTable: map[protocol.MessageQueue]int64{}}
	b.mu.Lock()
	var mqs []MessageQueue
	for mq := range b.pqs {
		if mq.Topic == h.Topic {
			mqs = append(mqs, mq)
		}
	}
	b.mu.Unlock()
	for _, mq := range mqs {
		if off := b.store.current(mq); off >= 0 {
			body.MessageQueueTable[mq] = off
		}
	}
	enc, err := body.Encode()
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = enc
	return resp
}

// handleConsumeDirectly answers CONSUME_MESSAGE_DIRECTLY: the broker sent
// one stored record; the push consumer runs its listener on it once, on
// this goroutine, and reports the result. Nothing is acknowledged or sent
// back: the message's own queue offset is untouched, as in RocketMQ.
func (pc *PushConsumer) handleConsumeDirectly(_ string, req *remoting.Command) *remoting.Command {
	var h protocol.ConsumeMessageDirectlyResultRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b := pc.b
	if h.ConsumerGroup != b.group {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The Consumer Group <%s> not exist in this consumer", h.ConsumerGroup))
	}
	msgs, err := message.DecodeRecords(req.Body)
	if err != nil || len(msgs) != 1 {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("the request does not carry one stored message: %v", err))
	}
	m := msgs[0]
	if m.SysFlag&message.FlagCompressed != 0 {
		plain, err := message.UncompressBody(m.SysFlag, m.Body)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, "cannot uncompress the message: "+err.Error())
		}
		m.Body, m.SysFlag = plain, m.SysFlag&^message.FlagCompressed
	}
	// A retried or dead-lettered message goes to the listener of the topic
	// it was first sent to (resetRetryAndNamespace).
	if rt := m.Property(message.PropRetryTopic); rt != "" {
		m.Topic = rt
	}
	m.Topic = b.c.unwrapName(m.Topic)
	start := time.Now()
	res := protocol.ConsumeMessageDirectlyResult{Order: b.orderly, AutoCommit: true}
	if b.handlerFor(m.Topic) == nil {
		res.ConsumeResult = protocol.CRThrowException
		res.Remark = fmt.Sprintf("this consumer does not subscribe to %s", m.Topic)
	} else {
		r, perr := pc.callDirect(m)
		switch {
		case perr != nil:
			res.ConsumeResult, res.Remark = protocol.CRThrowException, perr.Error()
		case r == ConsumeSuccess:
			res.ConsumeResult = protocol.CRSuccess
		default:
			res.ConsumeResult = protocol.CRLater
		}
	}
	res.SpentTimeMills = time.Since(start).Milliseconds()
	body, err := json.Marshal(&res)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// callDirect runs the listener of m's topic on m, reporting a panic or a
// returned error as an error.
func (pc *PushConsumer) callDirect(m *MessageExt) (res ConsumeResult, err error) {
	h := pc.b.handlerFor(m.Topic)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("client: listener panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithCancel(pc.b.ctx)
	defer cancel()
	m.SetProperty(message.PropConsumeStartTime, strconv.FormatInt(time.Now().UnixMilli(), 10))
	return h(ctx, m)
}
