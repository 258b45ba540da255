package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Request-reply (RocketMQ 4.6+): the requester's message carries its client
// id (REPLY_TO_CLIENT) and a fresh CORRELATION_ID; the replier answers with
// CreateReplyMessage and an ordinary send, which goes out as
// SEND_REPLY_MESSAGE_V2 to a broker of the cluster's reply topic; that
// broker pushes the reply (PUSH_REPLY_MESSAGE_TO_CLIENT) over the
// requester's own connection to it, and the requester matches it to the
// waiting call by CORRELATION_ID.

const (
	replyMessageFlag = "reply"        // MSG_TYPE of a reply (MixAll.REPLY_MESSAGE_FLAG)
	replyTopicSuffix = "_REPLY_TOPIC" // "<cluster>_REPLY_TOPIC" (MixAll.getReplyTopic)
)

var (
	// ErrRequestTimeout means no reply came within a request's timeout.
	ErrRequestTimeout = errors.New("client: request timed out waiting for the reply")
	// ErrNotARequest means CreateReplyMessage was given a message that
	// carries no CLUSTER property (a broker adds it to every stored
	// message) or no REPLY_TO_CLIENT (it was not sent by Request).
	ErrNotARequest = errors.New("client: not a request message")
)

// RequestCallback receives RequestAsync's reply, or the error that ended
// the wait (ErrRequestTimeout, the send's failure, ErrNotStarted at
// Shutdown). It runs once, on a goroutine the producer owns.
type RequestCallback func(ctx context.Context, reply *MessageExt, err error)

// ReplyTopic returns the reply topic of a cluster.
func ReplyTopic(cluster string) string { return cluster + replyTopicSuffix }

// CreateReplyMessage builds the reply to request, a message a consumer
// received from Request: it goes to the reply topic of the request's
// cluster and carries the request's correlation id, requester and TTL (the
// official client's consumer.CreateReplyMessage, which also drops body; this
// one keeps it). Send it with any producer's SendSync or SendAsync.
func CreateReplyMessage(request *MessageExt, body []byte) (*Message, error) {
	if request == nil {
		return nil, fmt.Errorf("%w: nil", ErrNotARequest)
	}
	cluster := request.Property(message.PropCluster)
	replyTo := request.Property(message.PropReplyToClient)
	if cluster == "" || replyTo == "" {
		return nil, fmt.Errorf("%w: properties %s=%q %s=%q", ErrNotARequest, message.PropCluster, cluster,
			message.PropReplyToClient, replyTo)
	}
	m := NewMessage(ReplyTopic(cluster), body)
	m.SetProperty(message.PropMessageType, replyMessageFlag)
	m.SetProperty(message.PropCorrelationID, request.Property(message.PropCorrelationID))
	m.SetProperty(message.PropReplyToClient, replyTo)
	if ttl := request.Property(message.PropMessageTTL); ttl != "" {
		m.SetProperty(message.PropMessageTTL, ttl)
	}
	return m, nil
}

// ReplyToClient returns the client id a request's reply goes to.
func ReplyToClient(request *MessageExt) string { return request.Property(message.PropReplyToClient) }

// Request sends msg and waits up to timeout (and ctx) for its reply, as the
// official client's Producer.Request. The reply's ARRIVE_TIME property says
// when it reached this client.
func (p *Producer) Request(ctx context.Context, timeout time.Duration, msg *Message) (*MessageExt, error) {
	out, corr, err := p.prepareRequest(ctx, timeout, msg)
	if err != nil {
		return nil, err
	}
	w := &replyWaiter{ch: make(chan replyOutcome, 1)}
	if err := p.requests.add(corr, w, 0, nil); err != nil {
		return nil, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	if _, err := p.send(ctx, out, false); err != nil {
		p.requests.take(corr)
		return nil, err
	}
	select {
	case o := <-w.ch:
		return o.reply, o.err
	case <-t.C:
	case <-ctx.Done():
	}
	if p.requests.take(corr) == nil {
		o := <-w.ch // the reply won the race
		return o.reply, o.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %s after %v (correlation id %s)", ErrRequestTimeout, msg.Topic, timeout, corr)
}

// RequestAsync sends msg and calls cb once with the reply or the error that
// ended the wait (timeout after timeout, a failed send, Shutdown). It
// returns an error, and never calls cb, when msg is invalid or the
// producer is not running.
func (p *Producer) RequestAsync(ctx context.Context, timeout time.Duration, cb RequestCallback, msg *Message) error {
	if cb == nil {
		return fmt.Errorf("%w: nil RequestCallback", ErrBadOption)
	}
	out, corr, err := p.prepareRequest(ctx, timeout, msg)
	if err != nil {
		return err
	}
	w := &replyWaiter{cb: cb, ctx: ctx}
	err = p.requests.add(corr, w, timeout, func() {
		if p.requests.take(corr) != nil {
			p.requests.complete(w, nil, fmt.Errorf("%w: %s after %v (correlation id %s)", ErrRequestTimeout, msg.Topic, timeout, corr))
		}
	})
	if err != nil {
		return err
	}
	err = p.sendAsyncPrepared(ctx, out, func(_ context.Context, _ *SendResult, err error) {
		if err != nil && p.requests.take(corr) != nil {
			p.requests.complete(w, nil, err)
		}
	})
	if err != nil && p.requests.take(corr) != nil {
		w.timer.Stop()
		p.requests.wg.Done()
		return err
	}
	// Else the send is under way, or Shutdown took the waiter meanwhile and
	// told cb: either way cb owns the outcome.
	return nil
}

// prepareRequest validates a request, marks it with this client's id, a
// fresh correlation id and the TTL, and makes sure every broker that may
// push its reply knows this client (see ensureReplyPath).
func (p *Producer) prepareRequest(ctx context.Context, timeout time.Duration, msg *Message) (*outgoing, string, error) {
	if timeout <= 0 {
		return nil, "", fmt.Errorf("%w: request timeout %v", ErrBadOption, timeout)
	}
	if msg == nil {
		return nil, "", ErrNoMessage
	}
	if !p.c.running() {
		return nil, "", ErrNotStarted
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	corr := hex.EncodeToString(b[:])
	msg.SetProperty(message.PropCorrelationID, corr)
	msg.SetProperty(message.PropReplyToClient, p.c.clientID)
	msg.SetProperty(message.PropMessageTTL, strconv.Itoa(int(timeout.Seconds())))
	out, err := p.prepare([]*Message{msg}, 0)
	if err != nil {
		return nil, "", err
	}
	if err := p.ensureReplyPath(ctx, out.topic); err != nil {
		return nil, "", err
	}
	return out, corr, nil
}

// ensureReplyPath makes the brokers that may push a reply to this client
// know its connection before the first request to topic goes out: a reply
// is pushed by whichever broker of the cluster's reply topic the replier
// sent it to, over the requester's connection to that broker, and brokers
// learn connections from heartbeats. So the routes of the topic and of the
// reply topics of its clusters are loaded (their brokers join the heartbeat
// list, and the route refresh keeps them there), and a heartbeat goes out
// at once when one of them was new. The official clients heartbeat the
// request topic's brokers only; a replier's retry on another broker covers
// the rest there.
func (p *Producer) ensureReplyPath(ctx context.Context, topic string) error {
	// One caller does the work while the others wait: a request must not go
	// out before the heartbeat that lets every broker push its reply.
	p.replyPathMu.Lock()
	defer p.replyPathMu.Unlock()
	if p.replyPathReady[topic] {
		return nil
	}
	fresh := false
	r, known := p.c.cachedRoute(topic)
	if !known {
		var err error
		if r, err = p.c.route(ctx, topic); err != nil {
			// An unknown topic is created by the first send
			// (autoCreateTopicEnable); the next request looks again.
			r = nil
		}
		fresh = true
	}
	clusters := map[string]bool{}
	if r != nil {
		for _, bd := range r.data.BrokerDatas {
			if bd.Cluster != "" {
				clusters[bd.Cluster] = true
			}
		}
	}
	for cl := range clusters {
		rt := ReplyTopic(cl)
		if _, ok := p.c.cachedRoute(rt); ok {
			continue
		}
		if _, err := p.c.route(ctx, rt); err != nil {
			p.c.log.WithFields(logrus.Fields{"topic": rt, "err": err}).Debug("no route for the reply topic")
			continue
		}
		fresh = true
	}
	if fresh {
		p.c.sendHeartbeats(ctx)
	}
	if r != nil && len(clusters) > 0 {
		if p.replyPathReady == nil {
			p.replyPathReady = make(map[string]bool)
		}
		p.replyPathReady[topic] = true // the route refresh keeps the brokers known
	}
	return nil
}

// handleReply takes a PUSH_REPLY_MESSAGE_TO_CLIENT: the reply goes to the
// request waiting under its CORRELATION_ID. A reply no request waits for
// (timed out, or never ours) is dropped and still acknowledged, as the
// official clients do: the broker could do nothing better with a refusal.
func (p *Producer) handleReply(addr string, req *remoting.Command) *remoting.Command {
	arrive := time.Now().UnixMilli()
	var h protocol.ReplyMessageRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		p.c.log.WithFields(logrus.Fields{"broker": addr, "err": err}).Warn("bad PUSH_REPLY_MESSAGE_TO_CLIENT header")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	m := &MessageExt{
		Message:        message.Message{Topic: h.Topic, Flag: h.Flag, Body: req.Body, Properties: message.ParseProperties(h.Properties)},
		QueueID:        h.QueueID,
		SysFlag:        h.SysFlag,
		BornTimestamp:  h.BornTimestamp,
		StoreTimestamp: h.StoreTimestamp,
		ReconsumeTimes: h.ReconsumeTimes,
	}
	m.BornHost, _ = netip.ParseAddrPort(h.BornHost)
	m.StoreHost, _ = netip.ParseAddrPort(h.StoreHost)
	if m.SysFlag&message.FlagCompressed != 0 {
		if plain, err := message.UncompressBody(m.SysFlag, m.Body); err == nil {
			m.Body = plain
			m.SysFlag &^= message.FlagCompressed
		}
	}
	m.SetProperty(message.PropReplyMessageArriveTime, strconv.FormatInt(arrive, 10))
	corr := m.Property(message.PropCorrelationID)
	w := p.requests.take(corr)
	if w == nil {
		p.c.log.WithFields(logrus.Fields{"broker": addr, "correlationId": corr}).Debug("reply matches no waiting request")
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if w.ch != nil {
		p.requests.complete(w, m, nil)
	} else {
		// Not on this handler goroutine: the broker waits for this answer.
		go p.requests.complete(w, m, nil)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

type replyOutcome struct {
	reply *MessageExt
	err   error
}

// replyWaiter is one request waiting for its reply: Request's channel, or
// RequestAsync's callback with its timeout timer.
type replyWaiter struct {
	ch    chan replyOutcome // Request: buffered, receives exactly one outcome
	cb    RequestCallback   // RequestAsync
	ctx   context.Context
	timer *time.Timer
}

// finish hands the outcome to the waiter.
func (w *replyWaiter) finish(reply *MessageExt, err error) {
	if w.ch != nil {
		w.ch <- replyOutcome{reply, err}
		return
	}
	w.cb(w.ctx, reply, err)
}

// replyTable holds the waiting requests by correlation id. Whoever takes a
// waiter out of the table (the reply, the timeout, a failed send,
// closeAll) is the one that completes it, so each completes once. wg counts
// RequestAsync waiters until their callback returned, so Shutdown waits for
// callbacks in flight.
type replyTable struct {
	mu     sync.Mutex // guards m and closed
	m      map[string]*replyWaiter
	closed bool
	wg     sync.WaitGroup
}

// add registers w under corr; it fails after closeAll. A callback waiter
// gets its timer here, under the lock, so whoever takes it sees the timer.
func (t *replyTable) add(corr string, w *replyWaiter, timeout time.Duration, onTimeout func()) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrNotStarted
	}
	if t.m == nil {
		t.m = make(map[string]*replyWaiter)
	}
	t.m[corr] = w
	if w.cb != nil {
		t.wg.Add(1)
		w.timer = time.AfterFunc(timeout, onTimeout)
	}
	return nil
}

// take removes and returns the waiter of corr, or nil.
func (t *replyTable) take(corr string) *replyWaiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.m[corr]
	delete(t.m, corr)
	return w
}

// pending counts the waiting requests (tests check for leaks).
func (t *replyTable) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// closeAll ends every waiting request with err, refuses new ones, and
// waits for RequestAsync callbacks in flight.
func (t *replyTable) closeAll(err error) {
	t.mu.Lock()
	t.closed = true
	ws := t.m
	t.m = nil
	t.mu.Unlock()
	for _, w := range ws {
		t.complete(w, nil, err)
	}
	t.wg.Wait()
}

// complete ends w, which its caller took out of the table, with the
// outcome: it stops a callback waiter's timer, hands the outcome over, and
// for a callback waiter releases its count in wg once the callback
// returned.
func (t *replyTable) complete(w *replyWaiter, reply *MessageExt, err error) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.finish(reply, err)
	if w.cb != nil {
		t.wg.Done()
	}
}
