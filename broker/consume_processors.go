package broker

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// Consume-side limits with no RocketMQ key.
const (
	// defaultMaxHeldPulls bounds the parked long-poll pulls; one more is
	// refused with SYSTEM_BUSY (the client backs off 3 s) rather than
	// answered at once, which would make it pull again in a tight loop.
	defaultMaxHeldPulls = 100_000
	// defaultHoldCheckInterval is how often parked pulls are checked for
	// their deadline, which bounds how late a timeout answer is.
	defaultHoldCheckInterval = 100 * time.Millisecond
	// defaultHoldRecheckInterval is how often every parked pull is compared
	// with its queue's max offset, a safety net behind the arriving
	// listener (RocketMQ's hold service checks every 5 s).
	defaultHoldRecheckInterval = time.Second
	// maxSuspend caps a client's suspendTimeoutMillis; clients use 15-20 s
	// and give up after 30 s.
	maxSuspend = 60 * time.Second
	// notifyQueueLen bounds NOTIFY_CONSUMER_IDS_CHANGED batches waiting to
	// be sent; beyond it a notice is dropped (clients rebalance every 20 s
	// anyway).
	notifyQueueLen = 4096
)

// consumeConfig holds the consume side's settings: the broker config's keys
// converted, plus limits tests shorten.
type consumeConfig struct {
	channelExpiry       time.Duration
	scanInterval        time.Duration
	offsetFlushInterval time.Duration
	longPolling         bool
	shortPolling        time.Duration
	maxHeldPulls        int
	holdCheckInterval   time.Duration
	holdRecheck         time.Duration
	maxTransferBytes    int
	maxTransferCount    int
}

// consumeState holds the consume side of the broker: consumer offsets,
// subscription groups, client channels, queue locks and parked pulls.
// The Broker creates it in New (newConsumeState), starts it once the store
// is open (start) and shuts it down before the store closes (shutdown).
type consumeState struct {
	b   *Broker
	log logrus.FieldLogger
	cfg consumeConfig

	offsets   *ConsumerOffsetManager
	groups    *SubscriptionGroupManager
	consumers *ConsumerManager
	producers *ProducerManager
	locks     *RebalanceLockManager
	hold      *pullHoldService
	filters   *filterCache // compiled SQL92 subscriptions
	// bitmaps is the registry of SQL92 filters whose bitmaps the store
	// computes (enableCalcFilterBitMap), nil when off.
	bitmaps *consumerFilterManager

	notifyCh chan notifyTask

	// stop and wg own notifyLoop, clientScanLoop, offsetPersistLoop and
	// the hold service's holdLoop.
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex // guards started and stopped
	started   bool
	stopped   bool
	closeOnce sync.Once
}

// notifyTask is one NOTIFY_CONSUMER_IDS_CHANGED fan-out.
type notifyTask struct {
	group string
	conns []ClientConn
}

// newConsumeState builds the consume side; nothing runs until start. The
// metadata files live in <storePathRootDir>/config, as RocketMQ keeps them.
func newConsumeState(b *Broker) *consumeState {
	cfgDir := filepath.Join(b.cfg.StorePathRootDir, "config")
	cs := &consumeState{
		b:   b,
		log: b.log.WithField("component", "consume"),
		cfg: consumeConfig{
			channelExpiry:       defaultChannelExpiry,
			scanInterval:        defaultClientScanInterval,
			offsetFlushInterval: time.Duration(b.cfg.FlushConsumerOffsetInterval) * time.Millisecond,
			longPolling:         b.cfg.LongPollingEnable,
			shortPolling:        time.Duration(b.cfg.ShortPollingTimeMills) * time.Millisecond,
			maxHeldPulls:        defaultMaxHeldPulls,
			holdCheckInterval:   defaultHoldCheckInterval,
			holdRecheck:         defaultHoldRecheckInterval,
			maxTransferBytes:    b.cfg.MaxTransferBytesOnMessageInMemory,
			maxTransferCount:    b.cfg.MaxTransferCountOnMessageInMemory,
		},
		offsets:   NewConsumerOffsetManager(filepath.Join(cfgDir, "consumerOffset.json"), b.log),
		groups:    NewSubscriptionGroupManager(filepath.Join(cfgDir, "subscriptionGroup.json"), b.cfg.AutoCreateSubscriptionGroup, b.log),
		producers: NewProducerManager(nil),
		locks:     NewRebalanceLockManager(defaultLockMaxLiveTime, nil),
		notifyCh:  make(chan notifyTask, notifyQueueLen),
		stop:      make(chan struct{}),
	}
	if cs.cfg.offsetFlushInterval <= 0 {
		cs.cfg.offsetFlushInterval = 5 * time.Second
	}
	if cs.cfg.shortPolling <= 0 {
		cs.cfg.shortPolling = time.Second
	}
	if cs.cfg.maxTransferCount <= 0 {
		cs.cfg.maxTransferCount = 32
	}
	cs.filters = &filterCache{}
	cs.consumers = NewConsumerManager(nil, cs.enqueueNotify)
	cs.consumers.compile = func(typ, expr string) *compiledSubscription {
		if typ == protocol.ExpressionSQL92 {
			return cs.filters.get(typ, expr)
		}
		return compileSubscription(typ, expr)
	}
	cs.hold = newPullHoldService(cs)
	if b.cfg.EnableCalcFilterBitMap && b.cfg.EnablePropertyFilter {
		if bloom, err := b.cfg.FilterBloom(); err == nil { // Validate reports an error
			cs.bitmaps = newConsumerFilterManager(filepath.Join(cfgDir, consumerFilterFileName), bloom,
				b.cfg.ExpectConsumerNumUseFilter, time.Duration(b.cfg.FilterDataCleanTimeSpan)*time.Millisecond, b.log)
		}
	}
	return cs
}

// start loads consumerOffset.json and subscriptionGroup.json, hooks the
// store's arriving listener (long polling) and starts the loops.
func (cs *consumeState) start() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.started || cs.stopped {
		return nil
	}
	if err := cs.offsets.Load(); err != nil {
		return err
	}
	if err := cs.groups.Load(); err != nil {
		return err
	}
	if cs.bitmaps != nil && cs.b.store.FilterBitmapsEnabled() {
		cs.bitmaps.start(cs.b.store)
	}
	cs.b.store.SetArrivingListener(cs.hold.notifyMessageArriving)
	cs.started = true
	cs.wg.Add(4)
	go cs.notifyLoop()
	go cs.clientScanLoop()
	go cs.offsetPersistLoop()
	go cs.hold.holdLoop()
	return nil
}

// stopHolding answers every parked pull and refuses new parking. It is
// safe to call more than once; shutdown calls it too. Called before the
// server closes its connections, the parked clients get their answer
// instead of a reset.
func (cs *consumeState) stopHolding() { cs.hold.shutdown() }

// shutdown answers parked pulls, stops the loops and persists offsets and
// groups. Safe to call twice and without start.
func (cs *consumeState) shutdown() {
	cs.mu.Lock()
	started := cs.started
	cs.stopped = true
	cs.mu.Unlock()
	cs.closeOnce.Do(func() {
		cs.stopHolding()
		close(cs.stop)
		cs.wg.Wait()
		if !started {
			return
		}
		if st := cs.b.store; st != nil {
			st.SetArrivingListener(nil)
		}
		if cs.bitmaps != nil {
			cs.bitmaps.stop()
		}
		if err := cs.offsets.Persist(); err != nil {
			cs.log.WithError(err).Error("persist consumer offsets at shutdown")
		}
		if err := cs.groups.Persist(); err != nil {
			cs.log.WithError(err).Error("persist subscription groups at shutdown")
		}
	})
}

// enqueueNotify hands a membership change to notifyLoop without blocking
// (it runs on the event loop when a connection closes).
func (cs *consumeState) enqueueNotify(group string, conns []ClientConn) {
	select {
	case cs.notifyCh <- notifyTask{group: group, conns: conns}:
	default:
		cs.log.WithField("group", group).Warn("notify queue full: dropping NOTIFY_CONSUMER_IDS_CHANGED")
	}
}

// notifyLoop sends NOTIFY_CONSUMER_IDS_CHANGED (oneway, as Java's
// Broker2Client) to each remaining member of a changed group.
func (cs *consumeState) notifyLoop() {
	defer cs.wg.Done()
	for {
		select {
		case <-cs.stop:
			return
		case t := <-cs.notifyCh:
			ext := protocol.EncodeHeader(&protocol.GroupRequestHeader{ConsumerGroup: t.group}, nil)
			for _, c := range t.conns {
				req := remoting.NewRequest(remoting.NotifyConsumerIdsChanged, copyExt(ext), nil)
				req.Language = remoting.LangJava
				if err := c.InvokeOneway(req); err != nil {
					cs.log.WithFields(logrus.Fields{"group": t.group, "peer": c.RemoteAddr()}).WithError(err).
						Debug("notify consumer ids changed")
				}
			}
		}
	}
}

func copyExt(ext map[string]string) map[string]string {
	out := make(map[string]string, len(ext))
	for k, v := range ext {
		out[k] = v
	}
	return out
}

// clientScanLoop drops and closes client channels silent for longer than
// the expiry (RocketMQ's ClientHousekeepingService) and forgets expired
// queue locks.
func (cs *consumeState) clientScanLoop() {
	defer cs.wg.Done()
	t := time.NewTicker(cs.cfg.scanInterval)
	defer t.Stop()
	for {
		select {
		case <-cs.stop:
			return
		case <-t.C:
		}
		expired := cs.consumers.ScanExpired(cs.cfg.channelExpiry)
		expired = append(expired, cs.producers.ScanExpired(cs.cfg.channelExpiry)...)
		for _, c := range expired {
			cs.log.WithField("peer", c.RemoteAddr()).Info("closing a client silent for too long")
			_ = c.Close()
		}
		cs.locks.RemoveExpired()
		if cs.bitmaps != nil {
			cs.bitmaps.clean(cs.subscribesWith)
		}
	}
}

// subscribesWith reports whether group is online and subscribes to topic
// with the SQL92 expression expr (the filter registry's liveness check).
func (cs *consumeState) subscribesWith(group, topic, expr string) bool {
	sd, _, found, online := cs.consumers.Subscription(group, topic)
	return online && found && sd.ExpressionType == protocol.ExpressionSQL92 && sd.SubString == expr
}

// withBitmap returns the registered filter of the group's subscription when
// it filters by the same SQL92 expression (the store then checks bitmaps
// before it reads records), else f.
func (cs *consumeState) withBitmap(f store.MessageFilter, group, topic, typ, expr string) store.MessageFilter {
	if cs.bitmaps == nil || typ != protocol.ExpressionSQL92 {
		return f
	}
	if bf := cs.bitmaps.pullFilter(group, topic, expr); bf != nil {
		return bf
	}
	return f
}

// offsetPersistLoop writes consumerOffset.json every
// flushConsumerOffsetInterval (only when something changed).
func (cs *consumeState) offsetPersistLoop() {
	defer cs.wg.Done()
	t := time.NewTicker(cs.cfg.offsetFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-cs.stop:
			return
		case <-t.C:
		}
		if err := cs.offsets.Persist(); err != nil {
			cs.log.WithError(err).Error("persist consumer offsets")
		}
	}
}

// onConnClose removes a closed connection's clients at once. It runs on the
// event loop: the managers only take short locks and notices are queued.
func (cs *consumeState) onConnClose(c *remoting.Conn) {
	cs.consumers.ConnClosed(c.ID())
	cs.producers.ConnClosed(c.ID())
}

// registerConsumeProcessors routes the consume-side request codes. Pools
// follow RocketMQ's executors: heartbeats on clientManage, offsets and
// consumer lists on consumerManage, pulls on pull, message queries on
// query, the rest on admin.
func registerConsumeProcessors(b *Broker) {
	cs := b.consume
	s := b.server
	p := b.pools
	s.OnConnClose(cs.onConnClose)

	s.Handle(remoting.HeartBeat, p.ClientManage, cs.processHeartbeat)
	s.Handle(remoting.UnregisterClient, p.ClientManage, cs.processUnregisterClient)
	s.Handle(remoting.CheckClientConfig, p.ClientManage, cs.processCheckClientConfig)
	s.Handle(remoting.GetConsumerListByGroup, p.ConsumerManage, cs.processGetConsumerList)
	s.Handle(remoting.QueryConsumerOffset, p.ConsumerManage, cs.processQueryConsumerOffset)
	s.Handle(remoting.UpdateConsumerOffset, p.ConsumerManage, cs.processUpdateConsumerOffset)

	s.HandleInline(remoting.PullMessage, p.Pull, cs.processPullInline, cs.processPull)

	s.Handle(remoting.QueryMessage, p.Query, cs.processQueryMessage)
	s.Handle(remoting.ViewMessageByID, p.Query, cs.processViewMessageByID)

	s.Handle(remoting.GetMaxOffset, p.Admin, cs.processGetMaxOffset)
	s.Handle(remoting.GetMinOffset, p.Admin, cs.processGetMinOffset)
	s.Handle(remoting.SearchOffsetByTimestamp, p.Admin, cs.processSearchOffsetByTimestamp)
	s.Handle(remoting.GetEarliestMsgStoreTime, p.Admin, cs.processGetEarliestMsgStoreTime)
	s.Handle(remoting.GetConsumeStats, p.Admin, cs.processGetConsumeStats)
	s.Handle(remoting.GetAllConsumerOffset, p.Admin, cs.processGetAllConsumerOffset)
	s.Handle(remoting.QueryTopicConsumeByWho, p.Admin, cs.processQueryTopicConsumeByWho)
	s.Handle(remoting.GetConsumerConnectionList, p.Admin, cs.processGetConsumerConnectionList)
	s.Handle(remoting.LockBatchMQ, p.Admin, cs.processLockBatchMQ)
	s.Handle(remoting.UnlockBatchMQ, p.Admin, cs.processUnlockBatchMQ)
	s.Handle(remoting.UpdateAndCreateSubscription, p.Admin, cs.processUpdateSubscriptionGroup)
	s.Handle(remoting.DeleteSubscriptionGroup, p.Admin, cs.processDeleteSubscriptionGroup)
	s.Handle(remoting.GetAllSubscriptionGroupConfig, p.Admin, cs.processGetAllSubscriptionGroup)
}

// consumeResp builds a response with a header struct (nil for none).
func consumeResp(req *remoting.Command, code remoting.ResponseCode, remark string, header any) *remoting.Command {
	resp := remoting.NewResponse(req, code, remark)
	if header != nil {
		resp.ExtFields = protocol.EncodeHeader(header, nil)
	}
	return resp
}

// badConsumeHeader answers a request whose header does not decode, as
// RocketMQ does for a RemotingCommandException: SYSTEM_ERROR naming the key.
func badConsumeHeader(req *remoting.Command, err error) *remoting.Command {
	return remoting.NewResponse(req, remoting.SystemError, err.Error())
}

// processLockBatchMQ locks the requested queues for the client and answers
// with those it now holds (LOCK_BATCH_MQ).
func (cs *consumeState) processLockBatchMQ(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := protocol.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	locked := cs.locks.TryLockBatch(body.ConsumerGroup, body.MQSet, body.ClientID)
	out, err := json.Marshal(&protocol.LockBatchResponseBody{LockOKMQSet: locked})
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = out
	return resp, nil
}

// processUnlockBatchMQ releases the queues the client holds (UNLOCK_BATCH_MQ).
func (cs *consumeState) processUnlockBatchMQ(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := protocol.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	cs.locks.UnlockBatch(body.ConsumerGroup, body.MQSet, body.ClientID)
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processUpdateSubscriptionGroup creates or replaces a group's config
// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) and persists the table.
func (cs *consumeState) processUpdateSubscriptionGroup(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var c protocol.SubscriptionGroupConfig
	if err := json.Unmarshal(req.Body, &c); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "the body is not a SubscriptionGroupConfig JSON: "+err.Error()), nil
	}
	if err := cs.groups.Update(&c); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	if err := cs.groups.Persist(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "group updated in memory but not persisted: "+err.Error()), nil
	}
	cs.log.WithField("group", c.GroupName).Info("subscription group updated")
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processDeleteSubscriptionGroup removes a group's config, and its offsets
// when removeOffset is set (DELETE_SUBSCRIPTIONGROUP).
func (cs *consumeState) processDeleteSubscriptionGroup(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.DeleteSubscriptionGroupRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	cs.groups.Delete(h.GroupName)
	cs.b.stats.removeGroup(h.GroupName)
	if h.RemoveOffset {
		cs.offsets.RemoveGroup(h.GroupName)
		if err := cs.offsets.Persist(); err != nil {
			cs.log.WithError(err).Error("persist consumer offsets")
		}
	}
	if err := cs.groups.Persist(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "group deleted in memory but not persisted: "+err.Error()), nil
	}
	cs.log.WithFields(logrus.Fields{"group": h.GroupName, "removeOffset": h.RemoveOffset}).Info("subscription group deleted")
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// processGetAllSubscriptionGroup answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
func (cs *consumeState) processGetAllSubscriptionGroup(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := cs.groups.Encode()
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// isRetryTopic reports whether topic is a group's retry topic.
func isRetryTopic(topic string) bool { return strings.HasPrefix(topic, protocol.RetryGroupTopicPrefix) }
