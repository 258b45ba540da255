package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Pull loop back-offs.
const (
	pullErrorBackoff = time.Second            // transport error or unexpected code
	flowControlWait  = 50 * time.Millisecond  // too many cached messages
	notLockedWait    = 100 * time.Millisecond // orderly queue without its broker lock
	lockLease        = 30 * time.Second       // trust a broker lock this long without renewal
	rebalanceRetry   = time.Second            // next try after an incomplete rebalance
	routeWait        = 3 * time.Second        // Start waits this long for a new topic's route
)

// subscription is one subscribed topic.
type subscription struct {
	topic   string // with namespace
	data    protocol.SubscriptionData
	handler Handler
}

// consumerBase is what push and pull consumers share: subscriptions,
// rebalance, the process queues with their pull loops, offsets and locks.
type consumerBase struct {
	c        *core
	group    string // with namespace
	kind     protocol.ConsumeType
	orderly  bool
	store    offsetStore
	deliver  func(pq *processQueue, msgs []*MessageExt) // called by pull loops
	perQueue func(pq *processQueue)                     // extra per-queue goroutine (orderly push)

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the consumer

	mu       sync.Mutex // guards subs, assigned, pqs
	subs     map[string]*subscription
	assigned map[string][]MessageQueue // pull consumer Assign: topic -> queues
	pqs      map[MessageQueue]*processQueue
	pqsGen   uint64 // bumped whenever pqs changes, so a view of it can be cached

	rebalanceCh chan struct{}
	paused      atomic.Bool // push consumer Suspend: no queue pulls
	// counters count pulls and consumption per topic for running info
	// (consumer_monitor.go).
	counters *consumerCounters
	// firstComplete is set by startBase before rebalanceLoop starts.
	firstComplete bool
}

func newConsumerBase(c *core, kind protocol.ConsumeType) *consumerBase {
	b := &consumerBase{
		c:           c,
		group:       c.wrapName(c.o.group),
		kind:        kind,
		orderly:     c.o.orderly,
		subs:        map[string]*subscription{},
		assigned:    map[string][]MessageQueue{},
		pqs:         map[MessageQueue]*processQueue{},
		rebalanceCh: make(chan struct{}, 1),
		counters:    newConsumerCounters(),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if c.o.model == Broadcasting {
		b.store = newLocalOffsetStore(c.o.offsetDir, b.group, c.o.instanceName)
	} else {
		b.store = newRemoteOffsetStore(c, b.group)
	}
	c.heartbeat = b.heartbeatData
	c.rc.RegisterHandler(remoting.NotifyConsumerIdsChanged, func(string, *remoting.Command) *remoting.Command {
		b.triggerRebalance()
		return nil
	})
	c.rc.RegisterHandler(remoting.ResetConsumerClientOffset, b.handleResetOffset)
	b.registerMonitorHandlers()
	return b
}

func (b *consumerBase) clustering() bool { return b.c.o.model == Clustering }

func (b *consumerBase) maxReconsume() int32 {
	if b.c.o.maxReconsume >= 0 {
		return b.c.o.maxReconsume
	}
	if b.orderly {
		return -1 // unlimited, as Java's Integer.MAX_VALUE
	}
	return 16
}

func (b *consumerBase) goLoop(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// wait sleeps d, or returns false when the consumer or stop closes.
func (b *consumerBase) wait(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.ctx.Done():
		return false
	case <-stop:
		return false
	}
}

func (b *consumerBase) addSubscription(topic string, sel MessageSelector, h Handler) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	if sel.Type == SQL92 && strings.TrimSpace(sel.Expression) == "" {
		return fmt.Errorf("%w: empty SQL92 expression", ErrBadSubscription)
	}
	wrapped := b.c.wrapName(topic)
	b.mu.Lock()
	b.subs[wrapped] = &subscription{topic: wrapped, data: subscriptionData(wrapped, sel), handler: h}
	if b.clustering() && b.kind == protocol.ConsumePassively {
		retry := retryPrefix + b.group
		if _, ok := b.subs[retry]; !ok {
			b.subs[retry] = &subscription{topic: retry, data: subscriptionData(retry, MessageSelector{})}
		}
	}
	b.mu.Unlock()
	return nil
}

func (b *consumerBase) subscription(topic string) *subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subs[topic]
}

// handlerFor returns the handler of a delivered message's (restored) topic.
func (b *consumerBase) handlerFor(topic string) Handler {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.subs[b.c.wrapName(topic)]; s != nil {
		return s.handler
	}
	return nil
}

func (b *consumerBase) heartbeatData() *protocol.HeartbeatData {
	b.mu.Lock()
	subs := make([]protocol.SubscriptionData, 0, len(b.subs))
	for _, s := range b.subs {
		subs = append(subs, s.data)
	}
	b.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Topic < subs[j].Topic })
	model := protocol.Clustering
	if !b.clustering() {
		model = protocol.Broadcasting
	}
	from := protocol.ConsumeFromLastOffset
	switch b.c.o.from {
	case ConsumeFromFirstOffset:
		from = protocol.ConsumeFromFirstOffset
	case ConsumeFromTimestamp:
		from = protocol.ConsumeFromTimestamp
	}
	return &protocol.HeartbeatData{
		ClientID:        b.c.clientID,
		ProducerDataSet: []protocol.ProducerData{},
		ConsumerDataSet: []protocol.ConsumerData{{
			GroupName: b.group, ConsumeType: b.kind, MessageModel: model, ConsumeFromWhere: from,
			SubscriptionDataSet: subs,
		}},
	}
}

// start is startBase, undone (loops stopped, core shut down) when it fails:
// a consumer that did not start holds nothing.
func (b *consumerBase) start() error {
	if err := b.startBase(); err != nil {
		b.stopBase()
		b.c.shutdown()
		return err
	}
	return nil
}

// startBase reads the routes of the subscribed topics, heartbeats, does a
// first rebalance and starts the rebalance and persist loops.
func (b *consumerBase) startBase() error {
	if err := b.c.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	b.mu.Lock()
	var topics []string
	for t := range b.subs {
		topics = append(topics, t)
	}
	for t := range b.assigned {
		topics = append(topics, t)
	}
	b.mu.Unlock()
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) {
			continue // created by the broker on our first heartbeat, below
		}
		if err := b.awaitRoute(ctx, t); err != nil {
			return fmt.Errorf("client: subscribe %s: %w", t, err)
		}
	}
	if err := b.checkClientConfig(ctx); err != nil {
		return err
	}
	b.c.sendHeartbeats(ctx)
	// The broker creates the retry topic on the first heartbeat.
	for _, t := range topics {
		if strings.HasPrefix(t, retryPrefix) {
			_, _ = b.c.updateRoute(ctx, t)
		}
	}
	b.firstComplete = b.rebalance(ctx)
	b.goLoop(b.rebalanceLoop)
	b.goLoop(b.persistLoop)
	if b.orderly && b.clustering() {
		b.goLoop(b.lockLoop)
	}
	return nil
}

// checkClientConfig asks every master serving a subscribed topic whether it
// can serve the subscription, for each one that is not a tag expression
// (CHECK_CLIENT_CONFIG, as the Java consumer does at start): a broker with
// enablePropertyFilter off, or a SQL92 expression that does not parse, makes
// Start fail with the broker's answer (a *BrokerError whose remark holds the
// parse error) instead of pulls refused in the background.
func (b *consumerBase) checkClientConfig(ctx context.Context) error {
	b.mu.Lock()
	var sds []protocol.SubscriptionData
	for _, sub := range b.subs {
		if typ := sub.data.ExpressionType; typ != "" && typ != protocol.ExpressionTag {
			sds = append(sds, sub.data)
		}
	}
	b.mu.Unlock()
	for i := range sds {
		r, err := b.c.route(ctx, sds[i].Topic)
		if err != nil {
			return fmt.Errorf("client: subscribe %s: %w", sds[i].Topic, err)
		}
		body, err := json.Marshal(&protocol.CheckClientRequestBody{ClientID: b.c.clientID, Group: b.group, SubscriptionData: &sds[i]})
		if err != nil {
			return err
		}
		for _, bd := range r.data.BrokerDatas {
			addr, ok := bd.BrokerAddrs[protocol.MasterID]
			if !ok {
				continue
			}
			if _, err := b.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.CheckClientConfig, nil, body), 3*time.Second); err != nil {
				return fmt.Errorf("%w: %s subscription %q on %s: %w", ErrBadSubscription, sds[i].ExpressionType, sds[i].SubString, sds[i].Topic, err)
			}
		}
	}
	return nil
}

// awaitRoute reads topic's route, retrying for up to routeWait: a topic a
// producer just created is registered with the nameservers a moment later.
func (b *consumerBase) awaitRoute(ctx context.Context, topic string) error {
	deadline := time.Now().Add(routeWait)
	for {
		_, err := b.c.updateRoute(ctx, topic)
		if err == nil || !errors.Is(err, ErrNoRoute) || time.Now().After(deadline) {
			return err
		}
		if !b.wait(100*time.Millisecond, nil) {
			return err
		}
	}
}

// stopBase stops every queue and loop, then stores the offsets and releases
// the queue locks. The core is shut down by the caller afterwards.
//
// Cancelling the context stops every loop; the queues are dropped only after
// the handlers still running have returned, because an ack on a dropped
// queue does not move its offset (the queue may be another member's by
// then). The queues are still ours until unregister, so those acks count and
// the next owner does not consume the same messages again.
func (b *consumerBase) stopBase() {
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	pqs := make([]*processQueue, 0, len(b.pqs))
	for _, pq := range b.pqs {
		pq.drop()
		pqs = append(pqs, pq)
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mqs := make([]MessageQueue, 0, len(pqs))
	for _, pq := range pqs {
		mqs = append(mqs, pq.mq)
	}
	b.store.persist(ctx, mqs)
	if b.orderly && b.clustering() {
		b.unlock(ctx, mqs)
	}
	if b.c.running() {
		b.c.unregister("", b.group)
	}
}

func (b *consumerBase) triggerRebalance() {
	select {
	case b.rebalanceCh <- struct{}{}:
	default:
	}
}

// rebalanceLoop rebalances on the interval and when triggered; after an
// incomplete rebalance it tries again within a second rather than waiting
// the whole interval.
func (b *consumerBase) rebalanceLoop() {
	wait := b.c.o.rebalanceInterval
	if !b.firstComplete {
		wait = min(wait, rebalanceRetry)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-b.rebalanceCh:
			if !t.Stop() {
				<-t.C
			}
		}
		wait = b.c.o.rebalanceInterval
		if !b.rebalance(b.ctx) {
			wait = min(wait, rebalanceRetry)
		}
		t.Reset(wait)
	}
}

func (b *consumerBase) persistLoop() {
	t := time.NewTicker(b.c.o.persistInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.store.persist(b.ctx, b.queues())
	}
}

// queues lists the queues being consumed.
func (b *consumerBase) queues() []MessageQueue {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]MessageQueue, 0, len(b.pqs))
	for mq := range b.pqs {
		out = append(out, mq)
	}
	sortQueues(out)
	return out
}

// sortQueues orders queues by topic, broker and id: the order every member
// of a group must allocate over.
func sortQueues(mqs []MessageQueue) {
	sort.Slice(mqs, func(i, j int) bool { return queueLess(mqs[i], mqs[j]) })
}

func queueLess(a, b MessageQueue) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.QueueID < b.QueueID
}

// rebalance recomputes which queues this member consumes, topic by topic.
// It reports false when it could not finish (a queue lock held by another
// member, no route, no member list), so the loop retries soon.
func (b *consumerBase) rebalance(ctx context.Context) bool {
	complete := true
	b.mu.Lock()
	topics := map[string]bool{}
	for t := range b.subs {
		topics[t] = false
	}
	for t := range b.assigned {
		topics[t] = true
	}
	b.mu.Unlock()
	for t, manual := range topics {
		if ctx.Err() != nil {
			return false
		}
		var mine []MessageQueue
		if manual {
			b.mu.Lock()
			mine = append(mine, b.assigned[t]...)
			b.mu.Unlock()
		} else {
			tr, err := b.c.route(ctx, t)
			if err != nil {
				b.c.log.WithFields(logrus.Fields{"topic": t, "err": err}).Debug("rebalance: no route")
				complete = false
				continue
			}
			mqs := append([]MessageQueue(nil), tr.subscribe...)
			sortQueues(mqs)
			if !b.clustering() {
				mine = mqs
			} else {
				cids, err := b.consumerIDs(ctx, t, tr)
				if err != nil || len(cids) == 0 {
					b.c.log.WithFields(logrus.Fields{"topic": t, "err": err}).Debug("rebalance: no consumer list")
					complete = false
					continue
				}
				sort.Strings(cids)
				mine = b.c.o.strategy.Allocate(b.group, b.c.clientID, mqs, cids)
			}
		}
		if !b.updateQueues(ctx, t, mine) {
			complete = false
		}
	}
	// Queues of topics no longer subscribed or assigned go too.
	b.mu.Lock()
	var stale []*processQueue
	for mq, pq := range b.pqs {
		if _, ok := topics[mq.Topic]; !ok {
			stale = append(stale, pq)
		}
	}
	b.mu.Unlock()
	for _, pq := range stale {
		b.removeQueue(ctx, pq)
	}
	return complete
}

// consumerIDs asks a broker of topic for the group's members.
func (b *consumerBase) consumerIDs(ctx context.Context, topic string, tr *topicRoute) ([]string, error) {
	var lastErr error = ErrBrokerNotFound
	bds := append([]*protocol.BrokerData(nil), tr.data.BrokerDatas...)
	sort.Slice(bds, func(i, j int) bool { return bds[i].BrokerName < bds[j].BrokerName })
	for _, bd := range bds {
		addr := b.c.brokerAddr(bd.BrokerName, protocol.MasterID)
		if addr == "" {
			continue
		}
		req := remoting.NewRequest(remoting.GetConsumerListByGroup, protocol.EncodeHeader(&protocol.GroupRequestHeader{ConsumerGroup: b.group}, nil), nil)
		resp, err := b.c.invokeOK(ctx, addr, req, 3*time.Second)
		if err != nil {
			lastErr = err
			continue
		}
		var body protocol.ConsumerListBody
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			lastErr = fmt.Errorf("%w: consumer list: %w", protocol.ErrBadBody, err)
			continue
		}
		return body.ConsumerIDList, nil
	}
	return nil, lastErr
}

// updateQueues makes topic's process queues exactly mine; false when some
// could not be taken yet.
func (b *consumerBase) updateQueues(ctx context.Context, topic string, mine []MessageQueue) bool {
	complete := true
	want := map[MessageQueue]bool{}
	for _, mq := range mine {
		want[mq] = true
	}
	b.mu.Lock()
	var gone []*processQueue
	for mq, pq := range b.pqs {
		if mq.Topic == topic && !want[mq] {
			gone = append(gone, pq)
		}
	}
	var added []MessageQueue
	for _, mq := range mine {
		if _, ok := b.pqs[mq]; !ok {
			added = append(added, mq)
		}
	}
	b.mu.Unlock()
	for _, pq := range gone {
		b.removeQueue(ctx, pq)
	}
	for _, mq := range added {
		var lockedUntil time.Time
		if b.orderly && b.clustering() {
			ok := b.lock(ctx, mq.BrokerName, []MessageQueue{mq})
			if !ok[mq] {
				if ctx.Err() != nil {
					// The broker may have granted the lock whose answer was
					// abandoned. The queues after this one were never
					// locked: Shutdown need not wait on a request for each.
					b.abandonLock(ctx, mq)
					return false
				}
				complete = false // the previous owner has not released it yet
				continue
			}
			lockedUntil = time.Now().Add(lockLease)
		}
		off, err := b.startOffset(ctx, mq)
		if err != nil {
			b.c.log.WithFields(logrus.Fields{"queue": mq, "err": err}).Warn("cannot compute start offset")
			if !lockedUntil.IsZero() {
				b.abandonLock(ctx, mq)
			}
			if ctx.Err() != nil {
				return false
			}
			complete = false
			continue
		}
		pq := newProcessQueue(mq, off)
		pq.lockUntil = lockedUntil
		b.mu.Lock()
		if b.ctx.Err() != nil {
			b.mu.Unlock()
			if !lockedUntil.IsZero() {
				b.abandonLock(ctx, mq) // Shutdown releases only the queues in pqs
			}
			return false
		}
		b.pqs[mq] = pq
		b.pqsGen++
		b.mu.Unlock()
		b.startQueue(pq)
		b.c.log.WithFields(logrus.Fields{"queue": mq, "offset": off}).Debug("queue assigned")
	}
	return complete
}

// startQueue starts pq's pull loop (and its consume loop when orderly);
// pq.done closes when they have ended.
func (b *consumerBase) startQueue(pq *processQueue) {
	if b.perQueue == nil {
		b.goLoop(func() { defer close(pq.done); b.pullLoop(pq) })
		return
	}
	var inner sync.WaitGroup
	inner.Add(2)
	b.goLoop(func() { defer inner.Done(); b.pullLoop(pq) })
	b.goLoop(func() { defer inner.Done(); b.perQueue(pq) })
	b.goLoop(func() { inner.Wait(); close(pq.done) })
}

// removeQueue stops consuming pq: its offset is stored, and an orderly
// consumer waits for the batch in progress and releases the broker lock.
func (b *consumerBase) removeQueue(ctx context.Context, pq *processQueue) {
	b.mu.Lock()
	if b.pqs[pq.mq] == pq {
		delete(b.pqs, pq.mq)
		b.pqsGen++
	}
	b.mu.Unlock()
	pq.drop()
	// Wait for the batch in progress, so its offset is stored and, when
	// orderly, the next owner cannot start before it ends.
	t := time.NewTimer(10 * time.Second)
	select {
	case <-pq.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	b.store.persist(ctx, []MessageQueue{pq.mq})
	if b.clustering() {
		b.store.remove(pq.mq)
	}
	if b.orderly && b.clustering() {
		b.unlock(ctx, []MessageQueue{pq.mq})
	}
	b.c.log.WithField("queue", pq.mq).Debug("queue released")
}

// startOffset is where consumption of mq begins: the stored offset, else
// the ConsumeFromWhere choice.
func (b *consumerBase) startOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	off, err := b.store.read(ctx, mq)
	if err != nil {
		return -1, err
	}
	if off >= 0 {
		return off, nil
	}
	retry := strings.HasPrefix(mq.Topic, retryPrefix)
	switch b.c.o.from {
	case ConsumeFromFirstOffset:
		return 0, nil
	case ConsumeFromTimestamp:
		if retry {
			return b.queryOffset(ctx, remoting.GetMaxOffset, mq, 0)
		}
		return b.queryOffset(ctx, remoting.SearchOffsetByTimestamp, mq, b.c.o.consumeTimestamp.UnixMilli())
	default:
		if retry {
			return 0, nil
		}
		return b.queryOffset(ctx, remoting.GetMaxOffset, mq, 0)
	}
}

// queryOffset asks mq's broker for GET_MAX_OFFSET, GET_MIN_OFFSET or
// SEARCH_OFFSET_BY_TIMESTAMP.
func (b *consumerBase) queryOffset(ctx context.Context, code remoting.RequestCode, mq MessageQueue, ts int64) (int64, error) {
	addr, err := b.c.findMaster(ctx, mq.Topic, mq.BrokerName)
	if err != nil {
		return -1, err
	}
	var ext map[string]string
	if code == remoting.SearchOffsetByTimestamp {
		ext = protocol.EncodeHeader(&protocol.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: mq.QueueID, Timestamp: ts, BrokerName: mq.BrokerName}, nil)
	} else {
		ext = protocol.EncodeHeader(&protocol.TopicQueueRequestHeader{Topic: mq.Topic, QueueID: mq.QueueID, BrokerName: mq.BrokerName}, nil)
	}
	resp, err := b.c.invokeOK(ctx, addr, remoting.NewRequest(code, ext, nil), 3*time.Second)
	if err != nil {
		return -1, err
	}
	var h protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return -1, err
	}
	return h.Offset, nil
}

// pullLoop pulls pq's messages with long polling until pq is dropped.
func (b *consumerBase) pullLoop(pq *processQueue) {
	o := b.c.o
	for !pq.dropped.Load() && b.ctx.Err() == nil {
		if pq.paused.Load() || b.paused.Load() {
			b.wait(flowControlWait, pq.stop)
			continue
		}
		if n, size := pq.cached(); n >= o.queueCountLimit || size >= int64(o.queueSizeLimitMiB)<<20 {
			b.wait(flowControlWait, pq.stop)
			continue
		}
		if b.orderly && b.clustering() && !pq.locked() {
			if ok := b.lock(b.ctx, pq.mq.BrokerName, []MessageQueue{pq.mq}); ok[pq.mq] {
				pq.setLocked(time.Now().Add(lockLease))
			} else {
				b.wait(notLockedWait, pq.stop)
			}
			continue
		}
		sub := b.subscription(pq.mq.Topic)
		if sub == nil && b.kind == protocol.ConsumePassively {
			b.wait(pullErrorBackoff, pq.stop)
			continue
		}
		if !b.pullOnce(pq, sub) {
			b.wait(pullErrorBackoff, pq.stop)
		}
	}
}

// pullOnce makes one pull; false asks the loop to back off.
func (b *consumerBase) pullOnce(pq *processQueue, sub *subscription) bool {
	o := b.c.o
	pq.mu.Lock()
	offset, gen, bid := pq.nextOffset, pq.generation, pq.suggestID
	pq.mu.Unlock()
	// The broker the last answer suggested, or a stand-in (brokerAddr):
	// while the master is out of the route a slave serves the pulls.
	addr, err := b.c.findBroker(b.ctx, pq.mq.Topic, pq.mq.BrokerName, bid)
	if err != nil {
		return false
	}
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup: b.group, Topic: pq.mq.Topic, QueueID: pq.mq.QueueID, QueueOffset: offset,
		MaxMsgNums: o.pullBatchSize, SysFlag: protocol.PullFlagSuspend,
		SuspendTimeoutMillis: o.suspendTimeout.Milliseconds(), ExpressionType: protocol.ExpressionTag,
		Subscription: protocol.SubAll, BrokerName: pq.mq.BrokerName,
	}
	var sd *protocol.SubscriptionData
	if sub != nil {
		sd = &sub.data
		h.Subscription, h.ExpressionType = sub.data.SubString, sub.data.ExpressionType
	}
	// Send the expression with every pull, so the broker filters right even
	// before it has seen our heartbeat.
	h.SysFlag |= protocol.PullFlagSubscription
	// Only a master takes the offset a pull carries (a slave ignores it),
	// so it is sent only there, as the official clients clear the flag
	// for a slave.
	if b.clustering() && b.kind == protocol.ConsumePassively && addr == b.c.masterAddr(pq.mq.BrokerName) {
		if co := b.store.current(pq.mq); co > 0 {
			h.SysFlag |= protocol.PullFlagCommitOffset
			h.CommitOffset = co
		}
	}
	pullStart := time.Now()
	resp, err := b.c.invoke(b.ctx, addr, remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(&h, nil), nil), o.suspendTimeout+10*time.Second)
	if err != nil {
		if b.ctx.Err() == nil {
			b.c.log.WithFields(logrus.Fields{"queue": pq.mq, "err": err}).Debug("pull failed")
		}
		return false
	}
	var rh protocol.PullMessageResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &rh); err != nil {
		return false
	}
	pq.mu.Lock()
	if pq.generation != gen {
		pq.mu.Unlock()
		return true // seeked while the pull was in flight
	}
	switch resp.ResponseCode() {
	case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
		// The broker to pull from next (updatePullFromWhichNode); an error
		// answer carries no suggestion and keeps the last one.
		pq.suggestID = rh.SuggestWhichBrokerID
	}
	pq.mu.Unlock()
	switch resp.ResponseCode() {
	case remoting.Success:
		msgs, err := b.decode(pq, resp.Body, sd)
		if err != nil {
			b.c.log.WithFields(logrus.Fields{"queue": pq.mq, "err": err}).Warn("bad pull body")
			return false
		}
		tc := b.counters.topic(pq.mq.Topic)
		tc.pulls.Add(1)
		tc.pulledMsgs.Add(int64(len(msgs)))
		tc.pullNanos.Add(int64(time.Since(pullStart)))
		if !b.advance(pq, gen, rh.NextBeginOffset) {
			return true
		}
		if len(msgs) > 0 {
			pq.put(msgs)
			b.deliver(pq, msgs)
		} else if n, _ := pq.cached(); n == 0 {
			b.store.update(pq.mq, rh.NextBeginOffset, true)
		}
		return true
	case remoting.PullNotFound, remoting.PullRetryImmediately:
		if b.advance(pq, gen, rh.NextBeginOffset) {
			if n, _ := pq.cached(); n == 0 {
				b.store.update(pq.mq, rh.NextBeginOffset, true)
			}
		}
		return true
	case remoting.PullOffsetMoved:
		b.c.log.WithFields(logrus.Fields{"queue": pq.mq, "offset": offset, "next": rh.NextBeginOffset}).Warn("pull offset illegal, moving on")
		pq.reset(rh.NextBeginOffset)
		b.store.update(pq.mq, rh.NextBeginOffset, false)
		b.store.persist(b.ctx, []MessageQueue{pq.mq})
		return true
	default:
		b.c.log.WithFields(logrus.Fields{"queue": pq.mq, "err": brokerError(addr, resp)}).Debug("pull refused")
		return false
	}
}

// advance sets the next pull offset unless a seek intervened.
func (b *consumerBase) advance(pq *processQueue, gen, next int64) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if pq.generation != gen {
		return false
	}
	pq.nextOffset = next
	return true
}

// decode turns a pull body into messages ready for the user: bodies
// uncompressed, tags re-checked, retry topics and namespaces undone.
//
// The bodies alias body: the remoting client gives every response a body
// of its own (remoting.ReadCommand) and the pull path drops the response
// after this, so the messages can keep it instead of a second copy of each
// record's body. TestPulledBodiesOutliveLaterPulls fails if that changes.
func (b *consumerBase) decode(pq *processQueue, body []byte, sd *protocol.SubscriptionData) ([]*MessageExt, error) {
	recs, err := message.DecodeRecordsAliased(body)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, m := range recs {
		if !matchTags(sd, m) {
			continue
		}
		if m.SysFlag&message.FlagCompressed != 0 {
			// A body that does not uncompress (damaged, an unknown
			// compression, or past message.MaxUncompressedBody) is
			// delivered as stored, its flag still set, as the official
			// Go client does: failing the pull would stop the queue at
			// it for good.
			if plain, err := message.UncompressBody(m.SysFlag, m.Body); err != nil {
				b.c.log.WithFields(logrus.Fields{"topic": m.Topic, "msgId": m.MsgID, "queueOffset": m.QueueOffset}).
					WithError(err).Warn("message body does not uncompress: delivered compressed")
			} else {
				m.Body = plain
				m.SysFlag &^= message.FlagCompressed
			}
		}
		if strings.HasPrefix(m.Topic, retryPrefix) {
			if rt := m.Property(message.PropRetryTopic); rt != "" {
				m.Topic = rt
			}
		}
		m.Topic = b.c.unwrapName(m.Topic)
		out = append(out, m)
	}
	return out, nil
}

// lock asks brokerName's master for queue locks and returns the ones held.
func (b *consumerBase) lock(ctx context.Context, brokerName string, mqs []MessageQueue) map[MessageQueue]bool {
	held := map[MessageQueue]bool{}
	addr, err := b.c.findMaster(ctx, mqs[0].Topic, brokerName)
	if err != nil {
		return held
	}
	body, _ := json.Marshal(protocol.LockBatchRequestBody{ConsumerGroup: b.group, ClientID: b.c.clientID, MQSet: mqs})
	resp, err := b.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.LockBatchMQ, nil, body), 3*time.Second)
	if err != nil {
		return held
	}
	var rb protocol.LockBatchResponseBody
	if err := json.Unmarshal(resp.Body, &rb); err != nil {
		return held
	}
	for _, mq := range rb.LockOKMQSet {
		held[mq] = true
	}
	return held
}

// abandonLock releases the broker lock on mq, a queue that is not being
// taken after all, so that its next owner need not wait out the lease. It
// is sent even when ctx is cancelled: that is how Shutdown gets here.
func (b *consumerBase) abandonLock(ctx context.Context, mq MessageQueue) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	b.unlock(ctx, []MessageQueue{mq})
}

// unlock releases queue locks, broker by broker.
func (b *consumerBase) unlock(ctx context.Context, mqs []MessageQueue) {
	byBroker := map[string][]MessageQueue{}
	for _, mq := range mqs {
		byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
	}
	for broker, qs := range byBroker {
		addr := b.c.masterAddr(broker)
		if addr == "" {
			continue
		}
		body, _ := json.Marshal(protocol.LockBatchRequestBody{ConsumerGroup: b.group, ClientID: b.c.clientID, MQSet: qs})
		_, _ = b.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.UnlockBatchMQ, nil, body), time.Second)
	}
}

// lockLoop renews the broker locks of every queue of an orderly consumer.
func (b *consumerBase) lockLoop() {
	t := time.NewTicker(b.c.o.lockInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		byBroker := map[string][]*processQueue{}
		for mq, pq := range b.pqs {
			byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], pq)
		}
		b.mu.Unlock()
		for broker, pqs := range byBroker {
			mqs := make([]MessageQueue, len(pqs))
			for i, pq := range pqs {
				mqs[i] = pq.mq
			}
			held := b.lock(b.ctx, broker, mqs)
			for _, pq := range pqs {
				if held[pq.mq] {
					pq.setLocked(time.Now().Add(lockLease))
				} else {
					pq.setLocked(time.Time{})
				}
			}
		}
	}
}

// handleResetOffset applies RESET_CONSUMER_CLIENT_OFFSET pushed by a broker:
// every listed queue this member consumes restarts at the given offset.
func (b *consumerBase) handleResetOffset(_ string, req *remoting.Command) *remoting.Command {
	var h protocol.ResetOffsetRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil || h.Group != b.group {
		return nil
	}
	table, err := decodeResetOffsetBody(req.Body)
	if err != nil {
		b.c.log.WithError(err).Warn("bad reset offset body")
		return nil
	}
	for mq, off := range table {
		b.store.update(mq, off, false)
		b.mu.Lock()
		pq := b.pqs[mq]
		b.mu.Unlock()
		if pq != nil {
			pq.reset(off)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	mqs := make([]MessageQueue, 0, len(table))
	for mq := range table {
		mqs = append(mqs, mq)
	}
	b.store.persist(ctx, mqs)
	b.c.log.WithFields(logrus.Fields{"topic": h.Topic, "queues": len(table)}).Info("offsets reset by broker")
	return nil
}

// decodeResetOffsetBody reads ResetOffsetBody in either of the shapes
// brokers send: gson-style [[{mq},offset],...] or fastjson's object-keyed
// map {{mq}:offset,...}, which is not JSON and is split by hand.
func decodeResetOffsetBody(body []byte) (map[MessageQueue]int64, error) {
	out := map[MessageQueue]int64{}
	var arr struct {
		OffsetTable [][2]json.RawMessage `json:"offsetTable"`
	}
	if err := json.Unmarshal(body, &arr); err == nil {
		for _, pair := range arr.OffsetTable {
			var mq MessageQueue
			var off int64
			if json.Unmarshal(pair[0], &mq) != nil || json.Unmarshal(pair[1], &off) != nil {
				return nil, fmt.Errorf("%w: reset offset entry", protocol.ErrBadBody)
			}
			out[mq] = off
		}
		return out, nil
	}
	s := string(body)
	i := strings.Index(s, `"offsetTable"`)
	if i < 0 {
		return nil, fmt.Errorf("%w: no offsetTable", protocol.ErrBadBody)
	}
	s = strings.TrimSpace(s[i+len(`"offsetTable"`):])
	if !strings.HasPrefix(s, ":") {
		return nil, fmt.Errorf("%w: offsetTable", protocol.ErrBadBody)
	}
	s = strings.TrimSpace(s[1:])
	if !strings.HasPrefix(s, "{") {
		return nil, fmt.Errorf("%w: offsetTable", protocol.ErrBadBody)
	}
	s = s[1:]
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		if s == "" || s[0] == '}' {
			break
		}
		end := strings.Index(s, "}")
		if s[0] != '{' || end < 0 {
			return nil, fmt.Errorf("%w: reset offset key", protocol.ErrBadBody)
		}
		key := s[:end+1]
		rest := strings.TrimSpace(s[end+1:])
		if !strings.HasPrefix(rest, ":") {
			return nil, fmt.Errorf("%w: reset offset entry %q", protocol.ErrBadBody, key)
		}
		rest = rest[1:]
		stop := strings.IndexAny(rest, ",}")
		if stop < 0 {
			stop = len(rest)
		}
		var mq MessageQueue
		var off int64
		if json.Unmarshal([]byte(key), &mq) != nil || json.Unmarshal([]byte(strings.TrimSpace(rest[:stop])), &off) != nil {
			return nil, fmt.Errorf("%w: reset offset entry %q", protocol.ErrBadBody, key)
		}
		out[mq] = off
		s = rest[stop:]
	}
	if len(out) == 0 {
		return nil, errors.Join(protocol.ErrBadBody, errors.New("client: empty reset offset table"))
	}
	return out, nil
}
