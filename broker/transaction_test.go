package broker

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// t5Half is a sent half message: the ids END_TRANSACTION needs.
type t5Half struct {
	queueOffset int64
	clOffset    int64
	uniq        string
}

// t5SendHalf sends a half message as the Go transaction producer does.
func t5SendHalf(t *testing.T, cl *remoting.Client, b *Broker, group, topic, body string, extra map[string]string) t5Half {
	t.Helper()
	uniq := strconv.FormatInt(time.Now().UnixNano(), 16)
	props := map[string]string{message.PropTransactionPrepared: "true", message.PropProducerGroup: group, message.PropUniqKey: uniq, message.PropTags: "tx"}
	for k, v := range extra {
		props[k] = v
	}
	h := sendHeaderFor(topic, 0, props)
	h.ProducerGroup = group
	h.SysFlag = message.TransactionPreparedType
	resp := baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.SendMessage, protocol.EncodeHeader(h, nil), []byte(body)))
	off := t5Offset(t, resp)
	qo, err := strconv.ParseInt(resp.FieldMap()["queueOffset"], 10, 64)
	require.NoError(t, err)
	assert.Equal(t, uniq, resp.FieldMap()["transactionId"])
	return t5Half{queueOffset: qo, clOffset: off, uniq: uniq}
}

// t5End sends END_TRANSACTION and returns the answer.
func t5End(t *testing.T, cl *remoting.Client, b *Broker, group string, h t5Half, state int32) *remoting.Command {
	t.Helper()
	hd := protocol.EndTransactionRequestHeader{ProducerGroup: group, TranStateTableOffset: h.queueOffset, CommitLogOffset: h.clOffset,
		CommitOrRollback: state, MsgID: h.uniq, TransactionID: h.uniq}
	return baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.EndTransaction, protocol.EncodeHeader(&hd, nil), nil))
}

// t5NoCheckConfig is t5Config without check-back during the test.
func t5NoCheckConfig(t *testing.T) *conf.BrokerConfig {
	cfg := t5Config(t)
	cfg.TransactionCheckInterval = 60_000
	return cfg
}

func TestTransactionCommitRollbackAndDuplicates(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5NoCheckConfig(t))
	bcCreateTopic(t, b, "txT", 2)
	h1 := t5SendHalf(t, cl, b, "pg", "txT", "one", nil)
	h2 := t5SendHalf(t, cl, b, "pg", "txT", "two", nil)
	assert.Equal(t, int64(0), h1.queueOffset)
	assert.Equal(t, int64(1), h2.queueOffset)
	t5WaitArrival(t, b, TransHalfTopic, 0, 2, 5*time.Second)
	assert.Zero(t, b.store.MaxOffsetInQueue("txT", 0), "half messages are invisible")

	resp := t5End(t, cl, b, "pg", h1, message.TransactionCommitType)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "txT", 0, 1, 5*time.Second)
	m := t5Read(t, b, "txT", 0)[0]
	assert.Equal(t, "one", string(m.Body))
	assert.Equal(t, message.TransactionCommitType, message.TransactionType(m.SysFlag))
	assert.Equal(t, h1.clOffset, m.PreparedTransactionOffset)
	assert.Equal(t, "pg", m.Property(message.PropProducerGroup))
	for _, k := range []string{message.PropTransactionPrepared, message.PropRealTopic, message.PropRealQueueID} {
		assert.NotContains(t, m.Properties, k)
	}

	// A duplicate commit (the check-back answer arriving late) is harmless.
	resp = t5End(t, cl, b, "pg", h1, message.TransactionCommitType)
	assert.Equal(t, int32(remoting.Success), resp.Code)
	assert.Contains(t, resp.Remark, "already committed")
	resp = t5End(t, cl, b, "pg", h1, message.TransactionRollbackType)
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
	assert.Contains(t, resp.Remark, "already committed")

	resp = t5End(t, cl, b, "pg", h2, message.TransactionRollbackType)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	resp = t5End(t, cl, b, "pg", h2, message.TransactionCommitType)
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
	assert.Contains(t, resp.Remark, "already rolled back")

	// Unknown: nothing happens.
	h3 := t5SendHalf(t, cl, b, "pg", "txT", "three", nil)
	resp = t5End(t, cl, b, "pg", h3, message.TransactionNotType)
	assert.Equal(t, int32(remoting.Success), resp.Code)

	t5WaitArrival(t, b, TransOpHalfTopic, 0, 2, 5*time.Second)
	ops := t5Read(t, b, TransOpHalfTopic, 0)
	require.Len(t, ops, 2)
	assert.Equal(t, "0", string(ops[0].Body))
	assert.Equal(t, "1", string(ops[1].Body))
	assert.Equal(t, transOpRemoveTag, ops[0].Tags())
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, t5Read(t, b, "txT", 0), 1, "committed once, rollback never delivered")
}

func TestEndTransactionBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5NoCheckConfig(t))
	bcCreateTopic(t, b, "txB", 1)
	h := t5SendHalf(t, cl, b, "pg", "txB", "x", nil)
	normal := t5Offset(t, t5Send(t, cl, b, "txB", 0, "plain", nil))
	t5WaitArrival(t, b, "txB", 0, 1, 5*time.Second)
	cases := []struct {
		name   string
		group  string
		half   t5Half
		state  int32
		remark string
	}{
		{"unknown offset", "pg", t5Half{queueOffset: 0, clOffset: 999_999}, message.TransactionCommitType, "Find prepared transaction message failed"},
		{"not a half message", "pg", t5Half{queueOffset: 0, clOffset: normal}, message.TransactionCommitType, "not a half message"},
		{"wrong group", "other", h, message.TransactionCommitType, "producer group wrong"},
		{"wrong queue offset", "pg", t5Half{queueOffset: 5, clOffset: h.clOffset}, message.TransactionCommitType, "state table offset wrong"},
		{"bad state", "pg", h, 3, "commitOrRollback=3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := t5End(t, cl, b, tc.group, tc.half, tc.state)
			assert.Equal(t, int32(remoting.SystemError), resp.Code)
			assert.Contains(t, resp.Remark, tc.remark)
		})
	}
	assert.Equal(t, int64(1), b.store.MaxOffsetInQueue("txB", 0), "only the plain message")
	resp := t5End(t, cl, b, "pg", h, message.TransactionCommitType)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "txB", 0, 2, 5*time.Second)
}

// t5Producer is a producer connection answering check-backs.
type t5Producer struct {
	cl     *remoting.Client
	checks chan *remoting.Command
}

func t5NewProducer(t *testing.T, b *Broker, group string) *t5Producer {
	t.Helper()
	p := &t5Producer{cl: baClient(t), checks: make(chan *remoting.Command, 64)}
	p.cl.RegisterHandler(remoting.CheckTransactionState, func(_ string, req *remoting.Command) *remoting.Command {
		select {
		case p.checks <- req:
		default:
		}
		return nil
	})
	hb := protocol.HeartbeatData{ClientID: "127.0.0.1@t5", ProducerDataSet: []protocol.ProducerData{{GroupName: group}}}
	body, err := json.Marshal(&hb)
	require.NoError(t, err)
	resp := baInvoke(t, p.cl, b.Addr(), remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	return p
}

func TestTransactionCheckBackResolvesUnknown(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "txC", 4)
	p := t5NewProducer(t, b, "pgc")
	h := t5SendHalf(t, cl, b, "pgc", "txC", "checked", nil)

	var req *remoting.Command
	select {
	case req = <-p.checks:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no CHECK_TRANSACTION_STATE")
	}
	var ch protocol.CheckTransactionStateRequestHeader
	require.NoError(t, protocol.DecodeHeader(req.ExtFields, &ch))
	assert.Equal(t, h.queueOffset, ch.TranStateTableOffset)
	assert.Equal(t, h.clOffset, ch.CommitLogOffset)
	assert.Equal(t, h.uniq, ch.MsgID)
	assert.Equal(t, h.uniq, ch.TransactionID)
	msgs, err := message.DecodeRecords(req.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "txC", msgs[0].Topic, "the body carries the real topic")
	assert.Equal(t, "pgc", msgs[0].Property(message.PropProducerGroup))
	assert.Equal(t, "checked", string(msgs[0].Body))

	end := protocol.EndTransactionRequestHeader{ProducerGroup: "pgc", TranStateTableOffset: ch.TranStateTableOffset, CommitLogOffset: ch.CommitLogOffset,
		CommitOrRollback: message.TransactionCommitType, FromTransactionCheck: true, MsgID: ch.MsgID, TransactionID: ch.TransactionID}
	resp := baInvoke(t, p.cl, b.Addr(), remoting.NewRequest(remoting.EndTransaction, protocol.EncodeHeader(&end, nil), nil))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "txC", 0, 1, 5*time.Second)
	// Resolved: no more checks.
	time.Sleep(300 * time.Millisecond)
	for len(p.checks) > 0 {
		<-p.checks
	}
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, p.checks, "a resolved half message is not checked again")
}

func TestTransactionDiscardedAfterCheckMax(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t)) // checkMax 3, every 100 ms
	bcCreateTopic(t, b, "txD", 1)
	silent := t5NewProducer(t, b, "silent") // is asked, never answers
	h := t5SendHalf(t, cl, b, "silent", "txD", "orphan", nil)
	t5WaitArrival(t, b, TransCheckMaxTimeTopic, 0, 1, 5*time.Second)
	// The third check is one-way and may still be on its way when the
	// moved copy is visible.
	require.Eventually(t, func() bool { return len(silent.checks) == 3 }, 5*time.Second, 5*time.Millisecond,
		"asked transactionCheckMax times")
	m := t5Read(t, b, TransCheckMaxTimeTopic, 0)[0]
	assert.Equal(t, "orphan", string(m.Body))
	assert.Equal(t, "txD", m.Property(message.PropRealTopic))
	assert.Equal(t, "3", m.Property(message.PropTransactionCheckTimes))
	// The moved copy can be visible before the discard is recorded; until
	// then an END_TRANSACTION is told to retry.
	var resp *remoting.Command
	require.Eventually(t, func() bool {
		resp = t5End(t, cl, b, "silent", h, message.TransactionCommitType)
		return !strings.Contains(resp.Remark, ErrTransactionInFlight.Error())
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, int32(remoting.SystemError), resp.Code)
	assert.Contains(t, resp.Remark, "discarded")
	assert.Zero(t, b.store.MaxOffsetInQueue("txD", 0))
}

func TestTransactionCheckWithoutProducerDoesNotCount(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t)) // checkMax 3, every 100 ms
	bcCreateTopic(t, b, "txN", 1)
	t5SendHalf(t, cl, b, "late", "txN", "waiting", nil)
	time.Sleep(800 * time.Millisecond) // several check runs with nobody to ask
	assert.Zero(t, b.store.MaxOffsetInQueue(TransCheckMaxTimeTopic, 0), "not discarded while no producer could be asked")
	p := t5NewProducer(t, b, "late")
	select {
	case <-p.checks:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the producer that came online was never asked")
	}
}

func TestTransactionStateSurvivesRestart(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5NoCheckConfig(t)
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "txR", 1)
	h1 := t5SendHalf(t, cl, b, "pg", "txR", "a", nil)
	h2 := t5SendHalf(t, cl, b, "pg", "txR", "b", nil)
	h3 := t5SendHalf(t, cl, b, "pg", "txR", "c", map[string]string{message.PropDelayTimeLevel: "1"})
	require.Equal(t, int32(remoting.Success), t5End(t, cl, b, "pg", h2, message.TransactionCommitType).Code)
	mustShutdownBroker(t, b)

	b2, cl2 := t5Start(t, cfg)
	resp := t5End(t, cl2, b2, "pg", h2, message.TransactionCommitType)
	assert.Contains(t, resp.Remark, "already committed", "the decision survived the restart")
	require.Equal(t, int32(remoting.Success), t5End(t, cl2, b2, "pg", h1, message.TransactionCommitType).Code)
	require.Equal(t, int32(remoting.Success), t5End(t, cl2, b2, "pg", h3, message.TransactionCommitType).Code)
	t5WaitArrival(t, b2, "txR", 0, 3, 5*time.Second)
	bodies := map[string]int{}
	for _, m := range t5Read(t, b2, "txR", 0) {
		bodies[string(m.Body)]++
	}
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, bodies)
	require.Eventually(t, func() bool { return b2.trans.pending() == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestTransactionConfigValidated(t *testing.T) {
	cfg := conf.DefaultBrokerConfig()
	cfg.TransactionCheckMax = 0
	require.Error(t, cfg.Validate())
}

// TestTransactionCrashKeepsResolutions stops the transaction service without
// writing its state (a crash): the ops on disk still resolve the half
// messages, so nothing is checked back or committed twice.
func TestTransactionCrashKeepsResolutions(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5NoCheckConfig(t)
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "txX", 1)
	h1 := t5SendHalf(t, cl, b, "pg", "txX", "a", nil)
	h2 := t5SendHalf(t, cl, b, "pg", "txX", "b", nil)
	require.Equal(t, int32(remoting.Success), t5End(t, cl, b, "pg", h1, message.TransactionCommitType).Code)
	tr := b.trans
	tr.once.Do(func() {
		close(tr.stop)
		tr.wg.Wait()
	})
	mustShutdownBroker(t, b)

	cfg.TransactionCheckInterval = 100
	b2, cl2 := t5Start(t, cfg)
	p := t5NewProducer(t, b2, "pg")
	select {
	case req := <-p.checks:
		var ch protocol.CheckTransactionStateRequestHeader
		require.NoError(t, protocol.DecodeHeader(req.ExtFields, &ch))
		assert.Equal(t, h2.queueOffset, ch.TranStateTableOffset, "only the unresolved half message is checked")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no check for the pending half message")
	}
	resp := t5End(t, cl2, b2, "pg", h1, message.TransactionCommitType)
	assert.Equal(t, int32(remoting.Success), resp.Code)
	assert.Contains(t, resp.Remark, "already")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, int64(1), b2.store.MaxOffsetInQueue("txX", 0), "committed once")
}

// TestTransactionOrphanWithoutProducerIsDiscarded: once the broker has run
// longer than the producers' heartbeat grace, a check that finds no live
// producer counts. A half message of a group that is gone was otherwise
// kept (and kept halfOffset, with every later decision in memory and in
// transactionState.json) for fileReservedTime.
func TestTransactionOrphanWithoutProducerIsDiscarded(t *testing.T) {
	baVerifyNoLeaks(t)
	b, err := New(t5Config(t), baLogger()) // checkMax 3, every 100 ms
	require.NoError(t, err)
	b.trans.producerGrace = 0
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	cl := baClient(t)
	bcCreateTopic(t, b, "txO", 1)
	h := t5SendHalf(t, cl, b, "gone", "txO", "orphan", nil)
	t5WaitArrival(t, b, TransCheckMaxTimeTopic, 0, 1, 10*time.Second)
	m := t5Read(t, b, TransCheckMaxTimeTopic, 0)[0]
	assert.Equal(t, "orphan", string(m.Body))
	assert.Equal(t, "3", m.Property(message.PropTransactionCheckTimes))
	require.Eventually(t, func() bool { return b.trans.pending() == 0 }, 5*time.Second, 10*time.Millisecond)
	resp := t5End(t, cl, b, "gone", h, message.TransactionCommitType)
	assert.Contains(t, resp.Remark, "discarded")
	assert.Zero(t, b.store.MaxOffsetInQueue("txO", 0))
}

// TestTransactionCheckRunHoldsNoRecords: a check run lists up to
// transCheckScanMax half messages; it used to copy each one's whole record
// into the list (up to maxMessageSize each, chosen by clients) before
// checking any, and decoded it again later. It now lists offsets and reads
// each message once, when checked.
func TestTransactionCheckRunHoldsNoRecords(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5NoCheckConfig(t)
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "txMem", 1)
	const n, size = 48, 32 << 10
	body := strings.Repeat("b", size)
	for range n {
		t5SendHalf(t, cl, b, "nobody", "txMem", body, nil)
	}
	time.Sleep(150 * time.Millisecond) // older than transactionTimeOut (100 ms)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.trans.check()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a check run allocated %d bytes for %d bytes of bodies", allocated, n*size)
	assert.Less(t, allocated, uint64(n*size*3/2), "a check run allocates about one copy of each body, not two")
	assert.Zero(t, b.store.MaxOffsetInQueue(TransCheckMaxTimeTopic, 0), "nothing discarded: no producer was asked")
}

// Under SYNC_MASTER with no slave, END_TRANSACTION's commit stores the real
// message with SLAVE_NOT_AVAILABLE: that is stored, so the commit answers
// SUCCESS and a retried commit stores no second copy (it used to be taken
// for a failure, undone, and stored again on every retry).
func TestTransactionCommitOnSyncMasterWithoutSlave(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5NoCheckConfig(t))
	bcCreateTopic(t, b, "txS", 1)
	h := t5SendHalf(t, cl, b, "pg", "txS", "one", nil) // t5SendHalf wants SEND_OK: sent before the role
	t5WaitArrival(t, b, TransHalfTopic, 0, 1, 5*time.Second)
	b.store.SetReplicaWaiter(b.ha.master.Load().WaitReplicated) // what brokerRole=SYNC_MASTER sets up
	resp := t5End(t, cl, b, "pg", h, message.TransactionCommitType)
	assert.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "txS", 0, 1, 5*time.Second)
	t5End(t, cl, b, "pg", h, message.TransactionCommitType) // a producer's retry
	assert.EqualValues(t, 1, b.store.MaxOffsetInQueue("txS", 0), "one copy of the committed message")
}
