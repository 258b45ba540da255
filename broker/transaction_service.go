package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// Transaction bookkeeping constants.
const (
	// transactionStateFile is the check-back progress under <root>/config.
	transactionStateFile = "transactionState.json"
	// transOpRemoveTag is the tag of op messages (TransactionalMessageUtil.REMOVETAG).
	transOpRemoveTag = "d"
	// transCheckScanMax bounds the half messages one check run looks at;
	// the next run continues (RocketMQ bounds a run to 60 s per queue).
	transCheckScanMax = 20000
	// transReadBatch is how many records one read of a system queue returns.
	transReadBatch = 32
	// transHistoryLen is how many decisions below halfOffset are remembered
	// (in memory only) so a late duplicate END_TRANSACTION is answered with
	// the decision; older ones are answered "already finished".
	transHistoryLen = 1 << 16
	// Decisions recorded for a resolved half message.
	decisionUnknown  int32 = 0  // resolved by an op read back from disk
	decisionCommit   int32 = 8  // TRANSACTION_COMMIT_TYPE
	decisionRollback int32 = 12 // TRANSACTION_ROLLBACK_TYPE
	decisionDiscard  int32 = -1 // checked transactionCheckMax times, moved aside
)

// transactionService keeps the state of half (prepared) messages and runs
// the check-back (RocketMQ's TransactionalMessageService and
// TransactionalMessageCheckService).
//
// A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC, queue 0, with its
// destination in REAL_TOPIC/REAL_QID: no consumer of the real topic sees it.
// END_TRANSACTION commit stores it for real (transaction type COMMIT,
// preparedTransactionOffset = the half record) and then writes an op
// message; rollback writes only the op. An op message (topic
// RMQ_SYS_TRANS_OP_HALF_TOPIC, queue 0, tag "d", body = the half message's
// queue offset in decimal) marks a half message resolved, as in RocketMQ.
//
// Unlike RocketMQ, a check does not append a copy of the half message:
// the number of checks is kept here (persisted), so the half message keeps
// its offsets and a late END_TRANSACTION for it is still recognised as a
// duplicate. The state file transactionState.json holds halfOffset (every
// half message below it is resolved), opOffset (ops read so far), the
// resolved offsets above halfOffset and the check counts; it is written
// atomically after every check run and at shutdown, and ops written after
// it are read back at start, so a restart loses no pending transaction and
// forgets no decision.
//
// Half messages checked transactionCheckMax times without an answer (in
// the first channel-expiry period after a start, 120 s, a check counts only
// when a live producer of the group was asked: producers are unknown until
// their next heartbeat), or older than fileReservedTime with no producer
// online, are moved to
// TRANS_CHECK_MAX_TIME_TOPIC (queue 0, perm read+write, original
// properties including REAL_TOPIC/REAL_QID/PGROUP) and resolved: an
// operator reads that topic with any consumer and re-sends what should
// have been committed.
type transactionService struct {
	b        *Broker
	log      logrus.FieldLogger
	path     string
	timeout  time.Duration
	interval time.Duration
	checkMax int32
	reserved time.Duration // fileReservedTime
	now      func() time.Time
	// producerGrace is how long after start a check that finds no live
	// producer does not count: until every live producer has sent its
	// heartbeat (the client channel expiry), none is known.
	producerGrace time.Duration
	startedAt     time.Time // set by start, before the check loop runs

	mu         sync.Mutex // guards the fields below
	halfOffset int64
	opOffset   int64
	resolved   map[int64]int32
	inflight   map[int64]bool
	checkTimes map[int64]int32
	history    map[int64]int32 // decisions moved below halfOffset, bounded
	historyQ   []int64         // ring of history's keys, oldest at historyAt
	historyAt  int
	dirty      bool
	loaded     bool

	topicOnce sync.Once
	serviceLoops
}

func newTransactionService(b *Broker) *transactionService {
	return &transactionService{
		b:        b,
		log:      b.log.WithField("component", "transaction"),
		path:     filepath.Join(b.cfg.StorePathRootDir, "config", transactionStateFile),
		timeout:  time.Duration(b.cfg.TransactionTimeOut) * time.Millisecond,
		interval: time.Duration(b.cfg.TransactionCheckInterval) * time.Millisecond,
		checkMax: int32(b.cfg.TransactionCheckMax),
		reserved: time.Duration(b.cfg.FileReservedTime) * time.Hour,
		now:      time.Now,
		resolved: make(map[int64]int32),

		producerGrace: defaultChannelExpiry,
		inflight:      make(map[int64]bool),
		checkTimes:    make(map[int64]int32),
		history:       make(map[int64]int32),

		serviceLoops: serviceLoops{stop: make(chan struct{})},
	}
}

// transactionState is transactionState.json. Map keys are half-queue
// offsets as decimal strings.
type transactionState struct {
	HalfOffset int64            `json:"halfOffset"`
	OpOffset   int64            `json:"opOffset"`
	Resolved   map[string]int32 `json:"resolved"`
	CheckTimes map[string]int32 `json:"checkTimes"`
}

// load reads the state file, or its .bak when it is damaged
// (loadMetadataFile), and the ops written after it. Offsets beyond the ends
// of their queues (a damaged number, or queues that lost their tail in a
// crash the state file outlived) are brought back to the ends and entries
// beyond them dropped, so new half messages are never taken for resolved
// ones.
func (t *transactionService) load() error {
	st, _, err := loadMetadataFile(t.path, "transaction state", t.log, func(data []byte) (transactionState, error) {
		var st transactionState
		if err := fsutil.DecodeJSONObject(data, &st); err != nil {
			return transactionState{}, fmt.Errorf("not a transaction state: %w", err)
		}
		return st, nil
	})
	if err != nil {
		return err
	}
	t.halfOffset, t.opOffset = st.HalfOffset, st.OpOffset
	for k, v := range st.Resolved {
		if n, err := strconv.ParseInt(k, 10, 64); err == nil {
			t.resolved[n] = v
		}
	}
	for k, v := range st.CheckTimes {
		if n, err := strconv.ParseInt(k, 10, 64); err == nil {
			t.checkTimes[n] = v
		}
	}
	ms := t.b.store
	maxHalf := ms.MaxOffsetInQueue(TransHalfTopic, 0)
	if t.halfOffset > maxHalf {
		t.log.WithFields(logrus.Fields{"halfOffset": t.halfOffset, "max": maxHalf}).Warn("transaction half offset beyond its queue, corrected")
		t.halfOffset = maxHalf
	}
	// Decisions and counts for offsets the queue does not hold would be
	// taken for those of the half messages stored there next.
	dropped := 0
	for n := range t.resolved {
		if n >= maxHalf {
			delete(t.resolved, n)
			dropped++
		}
	}
	for n := range t.checkTimes {
		if n >= maxHalf {
			delete(t.checkTimes, n)
			dropped++
		}
	}
	if dropped > 0 {
		t.log.WithFields(logrus.Fields{"entries": dropped, "max": maxHalf}).Warn("transaction state entries beyond the half queue dropped")
	}
	if maxOp := ms.MaxOffsetInQueue(TransOpHalfTopic, 0); t.opOffset > maxOp {
		t.log.WithFields(logrus.Fields{"opOffset": t.opOffset, "max": maxOp}).Warn("transaction op offset beyond its queue, corrected")
		t.opOffset = maxOp
	}
	t.loaded = true
	t.readOps()
	t.advance()
	return nil
}

// persist writes the state atomically if it changed.
func (t *transactionService) persist(force bool) error {
	t.mu.Lock()
	if !t.loaded || (!t.dirty && !force) {
		t.mu.Unlock()
		return nil
	}
	st := transactionState{HalfOffset: t.halfOffset, OpOffset: t.opOffset,
		Resolved: make(map[string]int32, len(t.resolved)), CheckTimes: make(map[string]int32, len(t.checkTimes))}
	for k, v := range t.resolved {
		st.Resolved[strconv.FormatInt(k, 10)] = v
	}
	for k, v := range t.checkTimes {
		st.CheckTimes[strconv.FormatInt(k, 10)] = v
	}
	t.dirty = false
	t.mu.Unlock()
	if err := writeMetadataJSON(t.path, "transaction state", &st); err != nil {
		t.mu.Lock()
		t.dirty = true
		t.mu.Unlock()
		return err
	}
	return nil
}

// start loads the state and starts transactionCheckLoop.
func (t *transactionService) start() error {
	t.rearm()
	// A restart (controller mode: master again) starts from the state
	// file and the op queue, as a fresh start does.
	t.mu.Lock()
	t.halfOffset, t.opOffset, t.loaded, t.dirty = 0, 0, false, false
	clear(t.resolved)
	clear(t.inflight)
	clear(t.checkTimes)
	clear(t.history)
	t.historyQ, t.historyAt = nil, 0
	t.mu.Unlock()
	if err := t.load(); err != nil {
		return err
	}
	t.startedAt = t.now()
	t.goLoop(t.transactionCheckLoop)
	return nil
}

// shutdown stops the check loop and writes the state. Safe to call twice
// and without start.
func (t *transactionService) shutdown() {
	t.stopLoops(func() {
		if err := t.persist(true); err != nil {
			t.log.WithError(err).Error("persist transaction state at shutdown")
		}
	})
}

func (t *transactionService) transactionCheckLoop() {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.check()
		if err := t.persist(false); err != nil {
			t.log.WithError(err).Error("persist transaction state")
		}
	}
}

// ensureTopics registers the half and op topics once (RocketMQ creates them
// on demand with one queue).
func (t *transactionService) ensureTopics() {
	t.topicOnce.Do(func() {
		for _, topic := range []string{TransHalfTopic, TransOpHalfTopic} {
			if _, err := t.b.topics.CreateTopicInSendBackMethod(topic, 1, protocol.PermRead|protocol.PermWrite, 0); err != nil {
				t.log.WithError(err).WithField("topic", topic).Error("create transaction topic")
			}
		}
	})
}

// prepare turns a half message into what is stored
// (TransactionalMessageBridge.parseHalfMessageInner): destination in
// REAL_TOPIC/REAL_QID, transaction type NOT so it gets a queue entry in
// the half topic, queue 0.
func (t *transactionService) prepare(msg *message.MessageExt) {
	t.ensureTopics()
	msg.SetProperty(message.PropRealTopic, msg.Topic)
	msg.SetProperty(message.PropRealQueueID, strconv.Itoa(int(msg.QueueID)))
	msg.SysFlag = message.ResetTransactionType(msg.SysFlag, message.TransactionNotType)
	msg.Topic = TransHalfTopic
	msg.QueueID = 0
}

// Errors of END_TRANSACTION bookkeeping.
var (
	// ErrTransactionFinished means the half message was already committed,
	// rolled back or discarded.
	ErrTransactionFinished = errors.New("broker: transaction already finished")
	// ErrTransactionInFlight means another END_TRANSACTION for the same half
	// message is being applied.
	ErrTransactionInFlight = errors.New("broker: transaction being finished by another request")
)

// begin claims the half message at queue offset off for one END_TRANSACTION
// (or discard); finish or abort must follow. It returns the earlier
// decision with ErrTransactionFinished.
func (t *transactionService) begin(off int64) (int32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off < t.halfOffset {
		return t.history[off], ErrTransactionFinished
	}
	if d, ok := t.resolved[off]; ok {
		return d, ErrTransactionFinished
	}
	if t.inflight[off] {
		return 0, ErrTransactionInFlight
	}
	t.inflight[off] = true
	return 0, nil
}

// finish records the decision for off.
func (t *transactionService) finish(off int64, decision int32) {
	t.mu.Lock()
	delete(t.inflight, off)
	if off >= t.halfOffset {
		t.resolved[off] = decision
	}
	delete(t.checkTimes, off)
	t.dirty = true
	t.mu.Unlock()
}

// abort releases a claim that did not change anything.
func (t *transactionService) abort(off int64) {
	t.mu.Lock()
	delete(t.inflight, off)
	t.mu.Unlock()
}

// writeOp stores the op message resolving the half message at queue offset off.
func (t *transactionService) writeOp(off int64) error {
	t.ensureTopics()
	b := t.b
	m := &message.MessageExt{
		Message: message.Message{
			Topic: TransOpHalfTopic,
			Properties: map[string]string{
				message.PropTags:           transOpRemoveTag,
				message.PropUniqKey:        b.uniqIDs.Next(),
				message.PropWaitStoreMsgOK: "false",
			},
			Body: []byte(strconv.FormatInt(off, 10)),
		},
		BornTimestamp: t.now().UnixMilli(),
		BornHost:      b.StoreHost(),
		StoreHost:     b.StoreHost(),
	}
	res := b.store.PutMessage(context.Background(), m)
	if !res.OK() {
		return fmt.Errorf("broker: write transaction op for half offset %d: %s: %w", off, res.Status, res.Err)
	}
	return nil
}

// readOps reads op messages written since opOffset into resolved.
func (t *transactionService) readOps() {
	st := t.b.store
	t.mu.Lock()
	from := t.opOffset
	t.mu.Unlock()
	if minOff := st.MinOffsetInQueue(TransOpHalfTopic, 0); from < minOff {
		from = minOff
	}
	for from < st.MaxOffsetInQueue(TransOpHalfTopic, 0) {
		res, err := st.GetMessage("", TransOpHalfTopic, 0, from, transReadBatch, 0, nil)
		if err != nil || res.Status != store.Found {
			next := int64(-1)
			if err == nil {
				next = res.NextBeginOffset
				res.Release()
			}
			if next <= from {
				break
			}
			from = next
			continue
		}
		var offs []int64
		for i := range res.Messages {
			r, err := message.ParseRecord(res.Messages[i].Bytes)
			if err != nil {
				from++
				continue
			}
			from = r.QueueOffset() + 1
			if n, err := strconv.ParseInt(string(r.Body()), 10, 64); err == nil {
				offs = append(offs, n)
			}
		}
		res.Release()
		t.mu.Lock()
		for _, n := range offs {
			if _, ok := t.resolved[n]; !ok && n >= t.halfOffset {
				t.resolved[n] = decisionUnknown
			}
			delete(t.checkTimes, n)
		}
		t.opOffset = from
		t.dirty = true
		t.mu.Unlock()
	}
}

// advance moves halfOffset over resolved offsets (and over half messages
// retention removed), forgetting their entries.
func (t *transactionService) advance() {
	minOff := t.b.store.MinOffsetInQueue(TransHalfTopic, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	start := t.halfOffset
	if t.halfOffset < minOff {
		t.halfOffset = minOff
	}
	for {
		if _, ok := t.resolved[t.halfOffset]; !ok {
			break
		}
		t.halfOffset++
	}
	if t.halfOffset != start {
		for k, d := range t.resolved {
			if k < t.halfOffset {
				delete(t.resolved, k)
				if d != decisionUnknown {
					t.remember(k, d)
				}
			}
		}
		for k := range t.checkTimes {
			if k < t.halfOffset {
				delete(t.checkTimes, k)
			}
		}
		t.dirty = true
	}
}

// remember keeps a decision below halfOffset in the bounded history.
// Lock must be held.
func (t *transactionService) remember(off int64, d int32) {
	if len(t.historyQ) < transHistoryLen {
		t.historyQ = append(t.historyQ, off)
	} else {
		delete(t.history, t.historyQ[t.historyAt])
		t.historyQ[t.historyAt] = off
		t.historyAt = (t.historyAt + 1) % transHistoryLen
	}
	t.history[off] = d
}

// pendingCheck is a half message a check run acts on: its offsets only.
// A run may list transCheckScanMax of them, and holding their records
// (each up to maxMessageSize) would make its memory the clients' choice;
// checkOne reads each one when its turn comes.
type pendingCheck struct {
	off int64 // queue offset in the half topic
	phy int64 // commitlog offset
}

// check runs one check-back pass: ops are read, then every unresolved half
// message older than transactionTimeOut (or its CHECK_IMMUNITY_TIME_IN_SECONDS)
// is either discarded after transactionCheckMax checks or checked with a
// live producer of its group.
func (t *transactionService) check() {
	t.readOps()
	t.advance()
	st := t.b.store
	now := t.now().UnixMilli()
	t.mu.Lock()
	off := t.halfOffset
	t.mu.Unlock()
	maxOff := st.MaxOffsetInQueue(TransHalfTopic, 0)
	var todo []pendingCheck
	for scanned := 0; off < maxOff && scanned < transCheckScanMax; {
		res, err := st.GetMessage("", TransHalfTopic, 0, off, transReadBatch, 0, nil)
		if err != nil {
			t.log.WithError(err).Error("read half queue")
			break
		}
		if res.Status != store.Found {
			next := res.NextBeginOffset
			res.Release()
			if next <= off {
				break
			}
			off = next
			continue
		}
		young := false
		for i := range res.Messages {
			r, err := message.ParseRecord(res.Messages[i].Bytes)
			scanned++
			if err != nil {
				off++
				continue
			}
			qo := r.QueueOffset()
			off = qo + 1
			t.mu.Lock()
			_, done := t.resolved[qo]
			busy := t.inflight[qo]
			t.mu.Unlock()
			if done || busy {
				continue
			}
			age := now - r.StoreTimestamp()
			if age < t.timeout.Milliseconds() {
				young = true // later half messages are younger still
				break
			}
			if v, ok := r.Property(message.PropCheckImmunityTimeInSeconds); ok {
				if sec, err := strconv.ParseInt(string(v), 10, 64); err == nil && age < sec*1000 {
					continue
				}
			}
			todo = append(todo, pendingCheck{off: qo, phy: r.PhysicalOffset()})
		}
		res.Release()
		if young {
			break
		}
	}
	for _, p := range todo {
		select {
		case <-t.stop:
			return
		default:
		}
		t.checkOne(p)
	}
}

// checkOne discards or checks one unresolved half message.
func (t *transactionService) checkOne(p pendingCheck) {
	m, err := t.b.store.LookMessageByOffset(p.phy)
	if err != nil {
		t.log.WithError(err).WithField("halfOffset", p.off).Error("unreadable half message")
		return
	}
	t.mu.Lock()
	times := t.checkTimes[p.off]
	t.mu.Unlock()
	if times >= t.checkMax {
		t.discard(p.off, m, times)
		return
	}
	group := m.Property(message.PropProducerGroup)
	chans := t.b.consume.producers.Channels(group)
	fields := logrus.Fields{"halfOffset": p.off, "group": group, "check": times + 1, "msgId": m.UniqKey()}
	if len(chans) == 0 {
		// A group that never comes back is discarded once the message is
		// as old as the commitlog retention (RocketMQ's needDiscard by
		// fileReservedTime).
		if age := t.now().UnixMilli() - m.StoreTimestamp; age > t.reserved.Milliseconds() {
			t.discard(p.off, m, times)
			return
		}
		// Right after a start the producers are unknown until their next
		// heartbeat, and counting would discard half messages a live
		// producer could still resolve. Later, a group with no producer is
		// gone and the check counts, as in RocketMQ: otherwise one orphan
		// would hold halfOffset for fileReservedTime (72 h) while every
		// later transaction's decision piles up in resolved and in
		// transactionState.json.
		if t.now().Sub(t.startedAt) < t.producerGrace {
			t.log.WithFields(fields).Debug("no live producer of the group to check a half message with")
			return
		}
	}
	t.mu.Lock()
	t.checkTimes[p.off] = times + 1
	t.dirty = true
	t.mu.Unlock()
	if len(chans) == 0 {
		t.log.WithFields(fields).Info("no live producer of the group: the check counts")
		return
	}
	ch := chans[rand.IntN(len(chans))]
	req, err := t.checkRequest(p.off, m, times+1)
	if err != nil {
		t.log.WithFields(fields).WithError(err).Error("build CHECK_TRANSACTION_STATE")
		return
	}
	if err := ch.Conn.InvokeOneway(req); err != nil {
		t.log.WithFields(fields).WithError(err).Warn("send CHECK_TRANSACTION_STATE")
		return
	}
	t.log.WithFields(fields).WithField("producer", ch.ClientID).Debug("half message checked")
}

// checkRequest builds CHECK_TRANSACTION_STATE for a half message: header
// with its offsets and ids, body = the stored record with the real topic
// and queue (AbstractTransactionalMessageCheckListener.sendCheckMessage).
func (t *transactionService) checkRequest(off int64, m *message.MessageExt, times int32) (*remoting.Command, error) {
	offsetMsgID := m.OffsetMsgID()
	uniq := m.UniqKey()
	if err := t.b.restoreParked(m); err != nil {
		return nil, err
	}
	m.RemoveProperty(message.PropWaitStoreMsgOK)
	m.SetProperty(message.PropTransactionCheckTimes, strconv.Itoa(int(times)))
	body, err := message.EncodeRecord(nil, m)
	if err != nil {
		return nil, err
	}
	h := protocol.CheckTransactionStateRequestHeader{
		TranStateTableOffset: off,
		CommitLogOffset:      m.CommitLogOffset,
		MsgID:                uniq,
		TransactionID:        uniq,
		OffsetMsgID:          offsetMsgID,
	}
	req := remoting.NewRequest(remoting.CheckTransactionState, protocol.EncodeHeader(&h, nil), body)
	req.Language = remoting.LangJava
	return req, nil
}

// discard moves a half message checked too often to
// TRANS_CHECK_MAX_TIME_TOPIC and resolves it.
func (t *transactionService) discard(off int64, m *message.MessageExt, times int32) {
	if _, err := t.begin(off); err != nil {
		return
	}
	b := t.b
	if _, err := b.topics.CreateTopicInSendBackMethod(TransCheckMaxTimeTopic, 1, protocol.PermRead|protocol.PermWrite, 0); err != nil {
		t.log.WithError(err).Error("create " + TransCheckMaxTimeTopic)
	}
	d := *m
	d.Topic = TransCheckMaxTimeTopic
	d.QueueID = 0
	d.StoreHost = b.StoreHost()
	d.Properties = make(map[string]string, len(m.Properties)+1)
	for k, v := range m.Properties {
		d.Properties[k] = v
	}
	d.Properties[message.PropTransactionCheckTimes] = strconv.Itoa(int(times))
	d.Properties[message.PropWaitStoreMsgOK] = "false"
	if res := b.store.PutMessage(context.Background(), &d); !res.OK() {
		t.abort(off)
		t.log.WithFields(logrus.Fields{"halfOffset": off, "status": res.Status}).WithError(res.Err).Error("discard half message")
		return
	}
	if err := t.writeOp(off); err != nil {
		t.log.WithError(err).Error("discard half message")
	}
	t.finish(off, decisionDiscard)
	t.log.WithFields(logrus.Fields{"halfOffset": off, "group": m.Property(message.PropProducerGroup), "checks": times,
		"realTopic": m.Property(message.PropRealTopic)}).Warn("half message unresolved after transactionCheckMax checks, moved to " + TransCheckMaxTimeTopic)
}

// pending returns how many half messages at or after halfOffset are not
// resolved yet (tests).
func (t *transactionService) pending() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.store.MaxOffsetInQueue(TransHalfTopic, 0) - t.halfOffset - int64(len(t.resolved))
}
