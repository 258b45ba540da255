package client

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// LocalTransactionState is a transaction listener's verdict.
type LocalTransactionState int

const (
	// CommitMessageState makes the half message visible to consumers.
	CommitMessageState LocalTransactionState = iota + 1
	// RollbackMessageState discards the half message.
	RollbackMessageState
	// UnknownState leaves the decision for later: the broker will ask
	// CheckLocalTransaction again.
	UnknownState
)

// TransactionListener runs the local side of a transaction message.
type TransactionListener interface {
	// ExecuteLocalTransaction runs after the half message is stored; its
	// result commits or rolls the message back.
	ExecuteLocalTransaction(ctx context.Context, msg *Message) LocalTransactionState
	// CheckLocalTransaction answers the broker's question about a half
	// message whose outcome it never learnt (the producer crashed, or
	// returned UnknownState).
	CheckLocalTransaction(msg *MessageExt) LocalTransactionState
}

// TransactionSendResult is a SendResult with the local transaction's verdict.
type TransactionSendResult struct {
	SendResult
	State LocalTransactionState
}

// TransactionProducer sends transaction messages: a half message the
// consumers cannot see, then commit or rollback once the local transaction
// ran. It also answers the broker's CHECK_TRANSACTION_STATE questions.
type TransactionProducer struct {
	p        *Producer
	listener TransactionListener
}

// NewTransactionProducer returns a transaction producer; listener must not
// be nil. The group (WithGroupName) is how brokers find a producer to ask
// about a pending transaction, so every instance of it must be able to
// answer for the others.
func NewTransactionProducer(listener TransactionListener, opts ...Option) (*TransactionProducer, error) {
	if listener == nil {
		return nil, ErrTransactionListener
	}
	p, err := NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	tp := &TransactionProducer{p: p, listener: listener}
	p.txHandler = tp.handleCheck
	return tp, nil
}

// ClientID is the id this producer shows brokers.
func (tp *TransactionProducer) ClientID() string { return tp.p.ClientID() }

// Start starts the producer.
func (tp *TransactionProducer) Start() error { return tp.p.Start() }

// Shutdown stops the producer. Safe to call twice.
func (tp *TransactionProducer) Shutdown() error { return tp.p.Shutdown() }

func stateToFlag(s LocalTransactionState) int32 {
	switch s {
	case CommitMessageState:
		return message.TransactionCommitType
	case RollbackMessageState:
		return message.TransactionRollbackType
	}
	return message.TransactionNotType
}

// SendMessageInTransaction stores msg as a half message, runs the local
// transaction and reports its outcome to the broker (END_TRANSACTION). If
// the half message is not stored the local transaction does not run.
func (tp *TransactionProducer) SendMessageInTransaction(ctx context.Context, msg *Message) (*TransactionSendResult, error) {
	p := tp.p
	if msg.Property(message.PropDelayTimeLevel) != "" {
		msg.RemoveProperty(message.PropDelayTimeLevel) // brokers ignore delay on half messages
	}
	msg.SetProperty(message.PropTransactionPrepared, "true")
	msg.SetProperty(message.PropProducerGroup, p.groupName())
	out, err := p.prepare([]*Message{msg}, message.TransactionPreparedType)
	if err != nil {
		return nil, err
	}
	res, err := p.send(ctx, out, false)
	if err != nil {
		return nil, err
	}
	state := RollbackMessageState
	remark := ""
	if res.Status == SendOK {
		if res.TransactionID != "" {
			msg.SetProperty(message.PropTransactionID, res.TransactionID)
		}
		state = tp.execute(ctx, msg, &remark)
	}
	if err := tp.endTransaction(ctx, res, msg, state, remark); err != nil {
		// The broker will ask CheckLocalTransaction later; the caller's
		// outcome is known, so report it rather than fail.
		p.c.log.WithFields(logrus.Fields{"msgId": res.MsgID, "err": err}).Warn("END_TRANSACTION failed; the broker will check back")
	}
	return &TransactionSendResult{SendResult: *res, State: state}, nil
}

func (tp *TransactionProducer) execute(ctx context.Context, msg *Message, remark *string) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			*remark = fmt.Sprintf("executeLocalTransactionBranch exception: %v", r)
			state = UnknownState
		}
	}()
	return tp.listener.ExecuteLocalTransaction(ctx, msg)
}

func (tp *TransactionProducer) endTransaction(ctx context.Context, res *SendResult, msg *Message, state LocalTransactionState, remark string) error {
	p := tp.p
	_, commitOffset, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return err
	}
	addr, err := p.c.findMaster(ctx, p.c.wrapName(res.Queue.Topic), res.Queue.BrokerName)
	if err != nil {
		return err
	}
	txID := res.TransactionID
	if txID == "" {
		txID = msg.UniqKey()
	}
	h := &protocol.EndTransactionRequestHeader{
		ProducerGroup: p.groupName(), TranStateTableOffset: res.QueueOffset, CommitLogOffset: commitOffset,
		CommitOrRollback: stateToFlag(state), MsgID: msg.UniqKey(), TransactionID: txID, BrokerName: res.Queue.BrokerName,
	}
	req := remoting.NewRequest(remoting.EndTransaction, protocol.EncodeHeader(h, nil), nil)
	req.Remark = remark
	return tp.sendEnd(ctx, addr, req, state, p.c.o.sendTimeout)
}

// sendEnd sends END_TRANSACTION. A Java broker answers commit and rollback
// but not "unknown" (EndTransactionProcessor returns no response), so the
// unknown verdict goes oneway rather than waiting out a timeout.
func (tp *TransactionProducer) sendEnd(ctx context.Context, addr string, req *remoting.Command, state LocalTransactionState, timeout time.Duration) error {
	if stateToFlag(state) == message.TransactionNotType {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return tp.p.c.rc.InvokeOneway(ctx, addr, req)
	}
	_, err := tp.p.c.invokeOK(ctx, addr, req, timeout)
	return err
}

// handleCheck answers CHECK_TRANSACTION_STATE: it asks the listener and
// reports the verdict with END_TRANSACTION to the broker that asked.
func (tp *TransactionProducer) handleCheck(addr string, req *remoting.Command) *remoting.Command {
	p := tp.p
	var h protocol.CheckTransactionStateRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		p.c.log.WithError(err).Warn("bad CHECK_TRANSACTION_STATE header")
		return nil
	}
	m, _, err := message.DecodeRecord(req.Body)
	if err != nil {
		p.c.log.WithError(err).Warn("bad CHECK_TRANSACTION_STATE body")
		return nil
	}
	if g := m.Property(message.PropProducerGroup); g != "" && g != p.groupName() {
		return nil // a check meant for another group sharing this connection
	}
	if m.SysFlag&message.FlagCompressed != 0 {
		if plain, err := message.UncompressBody(m.SysFlag, m.Body); err == nil {
			m.Body = plain
			m.SysFlag &^= message.FlagCompressed
		}
	}
	m.Topic = p.c.unwrapName(m.Topic)
	state := tp.check(m)
	msgID := m.UniqKey()
	if msgID == "" {
		msgID = h.MsgID
	}
	txID := m.Property(message.PropTransactionID)
	if txID == "" {
		txID = h.TransactionID
	}
	if txID == "" {
		txID = msgID
	}
	eh := &protocol.EndTransactionRequestHeader{
		ProducerGroup: p.groupName(), TranStateTableOffset: h.TranStateTableOffset, CommitLogOffset: h.CommitLogOffset,
		CommitOrRollback: stateToFlag(state), FromTransactionCheck: true, MsgID: msgID, TransactionID: txID,
	}
	ctx, cancel := context.WithTimeout(p.c.ctx, 3*time.Second)
	defer cancel()
	if err := tp.sendEnd(ctx, addr, remoting.NewRequest(remoting.EndTransaction, protocol.EncodeHeader(eh, nil), nil), state, 3*time.Second); err != nil {
		p.c.log.WithFields(logrus.Fields{"msgId": msgID, "err": err}).Warn("END_TRANSACTION after check failed")
	}
	return nil
}

func (tp *TransactionProducer) check(m *MessageExt) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.p.c.log.WithField("panic", r).Error("CheckLocalTransaction panicked")
			state = UnknownState
		}
	}()
	return tp.listener.CheckLocalTransaction(m)
}

// String names the state as RocketMQ's LocalTransactionState enum.
func (s LocalTransactionState) String() string {
	switch s {
	case CommitMessageState:
		return "COMMIT_MESSAGE"
	case RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	case UnknownState:
		return "UNKNOW"
	}
	return "INVALID"
}
