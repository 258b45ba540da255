package broker

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// registerTransactionProcessor routes END_TRANSACTION to its own pool.
func (b *Broker) registerTransactionProcessor() {
	b.server.Handle(remoting.EndTransaction, b.pools.EndTransaction, b.processEndTransaction)
}

// decisionName names a decision for remarks.
func decisionName(d int32) string {
	switch d {
	case decisionCommit:
		return "committed"
	case decisionRollback:
		return "rolled back"
	case decisionDiscard:
		return "discarded after too many checks"
	default:
		return "finished"
	}
}

// processEndTransaction answers END_TRANSACTION (EndTransactionProcessor):
// the half message at commitLogOffset is checked against the header
// (half topic, producer group, queue offset), then committed (stored for
// its real topic, then an op written) or rolled back (op only). A second
// END_TRANSACTION for a finished half message changes nothing and says so.
// The official clients send it without waiting for the answer; the answer
// still carries a code and remark for tools and tests.
func (b *Broker) processEndTransaction(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.EndTransactionRequestHeader
	if err := protocol.DecodeHeader(req.ExtFields, &h); err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	if !b.acceptWrites.Load() {
		return respond(req, remoting.SlaveNotAvailable, "Transaction message cannot be ended on a slave broker"), nil
	}
	fields := logrus.Fields{"group": h.ProducerGroup, "halfOffset": h.TranStateTableOffset, "commitLogOffset": h.CommitLogOffset,
		"msgId": h.MsgID, "fromCheck": h.FromTransactionCheck, "peer": c.RemoteAddr()}
	var decision int32
	switch h.CommitOrRollback {
	case message.TransactionNotType:
		// The producer does not know yet: the check-back will ask again.
		b.log.WithFields(fields).Debug("END_TRANSACTION with state unknown")
		return respond(req, remoting.Success, "transaction state unknown: the broker will check back later"), nil
	case message.TransactionCommitType:
		decision = decisionCommit
	case message.TransactionRollbackType:
		decision = decisionRollback
	default:
		return respond(req, remoting.SystemError, fmt.Sprintf("commitOrRollback=%d is not 0 (unknown), 8 (commit) or 12 (rollback)", h.CommitOrRollback)), nil
	}
	half, err := b.store.LookMessageByOffset(h.CommitLogOffset)
	if err != nil {
		return respond(req, remoting.SystemError, fmt.Sprintf("Find prepared transaction message failed: no message at commitlog offset %d", h.CommitLogOffset)), nil
	}
	switch {
	case half.Topic != TransHalfTopic:
		return respond(req, remoting.SystemError, fmt.Sprintf("the message at commitlog offset %d is not a half message (topic %s)", h.CommitLogOffset, half.Topic)), nil
	case half.Property(message.PropProducerGroup) != h.ProducerGroup:
		return respond(req, remoting.SystemError, fmt.Sprintf("The producer group wrong: the half message belongs to %q, the request names %q",
			half.Property(message.PropProducerGroup), h.ProducerGroup)), nil
	case half.QueueOffset != h.TranStateTableOffset:
		return respond(req, remoting.SystemError, fmt.Sprintf("The transaction state table offset wrong: the half message is at %d, the request names %d",
			half.QueueOffset, h.TranStateTableOffset)), nil
	}
	t := b.trans
	if prev, err := t.begin(half.QueueOffset); err != nil {
		if errors.Is(err, ErrTransactionFinished) {
			b.log.WithFields(fields).Debug("duplicate END_TRANSACTION ignored")
			code := remoting.Success
			if prev != decision && prev != decisionUnknown {
				code = remoting.SystemError
			}
			return respond(req, code, fmt.Sprintf("the transaction of half message %d is already %s; nothing done", half.QueueOffset, decisionName(prev))), nil
		}
		return respond(req, remoting.SystemError, fmt.Sprintf("half message %d: %v; retry later", half.QueueOffset, err)), nil
	}
	if decision == decisionCommit {
		msg := committedMessage(half)
		msg.StoreHost = b.StoreHost()
		res, err := b.putMessage(msg)
		if err != nil || !res.OK() {
			t.abort(half.QueueOffset)
			remark := fmt.Sprintf("commit of half message %d failed: %s", half.QueueOffset, res.Status)
			if res.Err != nil {
				remark += ": " + res.Err.Error()
			}
			return respond(req, remoting.SystemError, remark), nil
		}
		b.stats.onPut(msg.Topic, 1, res.WroteBytes)
	}
	if err := t.writeOp(half.QueueOffset); err != nil {
		if decision == decisionRollback {
			t.abort(half.QueueOffset)
			return respond(req, remoting.SystemError, err.Error()), nil
		}
		// Committed but the op is not on disk: remembered in memory and in
		// the next state file; only a crash before that can check it again.
		b.log.WithFields(fields).WithError(err).Error("committed, but the op message was not stored")
	}
	t.finish(half.QueueOffset, decision)
	b.log.WithFields(fields).WithField("decision", decisionName(decision)).Debug("transaction ended")
	return respond(req, remoting.Success, ""), nil
}

// committedMessage builds the message stored on commit
// (EndTransactionProcessor.endMessageTransaction): real topic and queue,
// the half message's body, flag and properties without REAL_TOPIC,
// REAL_QID and TRAN_MSG, transaction type COMMIT, and
// preparedTransactionOffset pointing at the half record.
func committedMessage(half *message.MessageExt) *message.MessageExt {
	props := make(map[string]string, len(half.Properties))
	for k, v := range half.Properties {
		props[k] = v
	}
	topic, qid := props[message.PropRealTopic], props[message.PropRealQueueID]
	delete(props, message.PropRealTopic)
	delete(props, message.PropRealQueueID)
	delete(props, message.PropTransactionPrepared)
	delete(props, message.PropTransactionCheckTimes)
	var queueID int32
	if n, err := parseInt32(qid); err == nil && n >= 0 {
		queueID = n
	}
	return &message.MessageExt{
		Message: message.Message{
			Topic:      topic,
			Flag:       half.Flag,
			Properties: props,
			Body:       half.Body,
		},
		QueueID:                   queueID,
		SysFlag:                   message.ResetTransactionType(half.SysFlag, message.TransactionCommitType),
		BornTimestamp:             half.BornTimestamp,
		BornHost:                  half.BornHost,
		ReconsumeTimes:            half.ReconsumeTimes,
		PreparedTransactionOffset: half.CommitLogOffset,
	}
}

func parseInt32(s string) (int32, error) {
	var n int32
	_, err := fmt.Sscan(s, &n)
	return n, err
}
