package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// masterBrokerID is the id of a master (MixAll.MASTER_ID), suggested to
// consumers as the broker to pull from next.
const masterBrokerID = 0

// pullRequest is a PULL_MESSAGE accepted for execution: decoded and checked
// once, then run, and maybe parked and run again when a message arrives or
// its suspend time ends. Its fields do not change once it is parked.
type pullRequest struct {
	conn   *remoting.Conn
	req    *remoting.Command
	h      protocol.PullMessageRequestHeader
	group  *protocol.SubscriptionGroupConfig
	filter store.MessageFilter
	// deadline is when a parked request is answered with whatever there is.
	deadline time.Time
}

// processPull serves PULL_MESSAGE. It checks the request as RocketMQ's
// PullMessageProcessor does, reads from the store and answers; a pull that
// finds nothing new with the SUSPEND flag is parked in the hold service and
// the processor returns nil, freeing the worker: the hold service answers it
// through Conn.Reply when a matching message arrives or the suspend time
// ends.
func (cs *consumeState) processPull(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return cs.pull(c, req, false)
}

// processPullInline is processPull on the event loop that read the request.
// It hands the pull to the pull pool (remoting.ErrRunOnPool) when it might
// block: the group must be created (a metadata file written), or the
// records are probably no longer in the page cache (store.InMemory), where
// reading them from disk would stall every connection of the loop.
func (cs *consumeState) processPullInline(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return cs.pull(c, req, true)
}

func (cs *consumeState) pull(c *remoting.Conn, req *remoting.Command, inline bool) (*remoting.Command, error) {
	pr := &pullRequest{conn: c, req: req}
	if err := protocol.DecodeHeader(req.ExtFields, &pr.h); err != nil {
		return badConsumeHeader(req, err), nil
	}
	if inline {
		if cs.groups.Get(pr.h.ConsumerGroup) == nil || !cs.b.store.InMemory(pr.h.Topic, pr.h.QueueID, pr.h.QueueOffset) {
			return nil, remoting.ErrRunOnPool
		}
		req.Body = nil // a pull has none; a parked one must not alias the loop's buffer
	}
	if resp := cs.checkPull(pr); resp != nil {
		return resp, nil
	}
	resp, body := cs.executePull(pr, true)
	if body != nil {
		// Answered here, with the records copied once, straight from the
		// mapped files into the frame.
		cs.writePull(pr, resp, body)
		return nil, nil
	}
	return resp, nil
}

// writePull answers pr with resp and the records held by body, then
// releases body. The records are appended straight into the frame buffer
// (Conn.ReplyWith): one copy out of the mapped files, where building
// resp.Body first would copy them twice. Records that may have to come from
// disk are copied outside the connection's write lock, which its event loop
// takes (Conn.ReplyWithOwnBuffer).
func (cs *consumeState) writePull(pr *pullRequest, resp *remoting.Command, body *store.GetMessageResult) {
	defer body.Release()
	reply := pr.conn.ReplyWith
	if body.FromDisk {
		reply = pr.conn.ReplyWithOwnBuffer
	}
	if err := reply(pr.req, resp, body.BufferTotalSize, body.AppendBody); err != nil && !errors.Is(err, remoting.ErrConnClosed) {
		cs.log.WithFields(logrus.Fields{"peer": pr.conn.RemoteAddr(), "topic": pr.h.Topic}).WithError(err).
			Warn("cannot write pull response")
	}
}

// checkPull validates the request and picks its filter; it returns the
// rejection, or nil.
func (cs *consumeState) checkPull(pr *pullRequest) *remoting.Command {
	req, h := pr.req, &pr.h
	reject := func(code remoting.ResponseCode, format string, args ...any) *remoting.Command {
		return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
	}
	if !protocol.IsReadable(cs.b.cfg.BrokerPermission) {
		return reject(remoting.NoPermission, "the broker[%s] pulling message is forbidden", cs.b.cfg.BrokerName)
	}
	gc, created := cs.groups.Find(h.ConsumerGroup)
	if created {
		if err := cs.groups.Persist(); err != nil {
			cs.log.WithError(err).Error("persist subscription groups")
		}
	}
	if gc == nil {
		return reject(remoting.SubscriptionGroupNotExist, "subscription group [%s] does not exist, create it first (or set autoCreateSubscriptionGroup=true)", h.ConsumerGroup)
	}
	if !gc.ConsumeEnable {
		return reject(remoting.NoPermission, "subscription group no permission, %s", h.ConsumerGroup)
	}
	pr.group = gc
	tc := cs.b.topics.Get(h.Topic)
	if tc == nil {
		return reject(remoting.TopicNotExist, "topic[%s] not exist, apply first please!", h.Topic)
	}
	if !protocol.IsReadable(tc.Perm) {
		return reject(remoting.NoPermission, "the topic[%s] pulling message is forbidden", h.Topic)
	}
	if h.QueueID < 0 || h.QueueID >= tc.ReadQueueNums {
		return reject(remoting.SystemError, "queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			h.QueueID, h.Topic, tc.ReadQueueNums, pr.conn.RemoteAddr())
	}

	if h.SysFlag&protocol.PullFlagSubscription != 0 {
		// The client sent its subscription (pull consumers, and push
		// consumers with PostSubscriptionWhenPull).
		if isTagExpression(h.ExpressionType) {
			pr.filter = store.NewTagFilter(h.Subscription)
			return nil
		}
		c := cs.filters.get(h.ExpressionType, h.Subscription)
		if resp := cs.refuseFilter(req, h.ExpressionType, c); resp != nil {
			return resp
		}
		pr.filter = cs.withBitmap(c.filter, h.ConsumerGroup, h.Topic, h.ExpressionType, h.Subscription)
		return nil
	}
	// Otherwise the subscription is the one the group registered by
	// heartbeat (the official Go push consumer sends an empty one).
	sd, compiled, found, online := cs.consumers.Subscription(h.ConsumerGroup, h.Topic)
	if !online {
		return reject(remoting.SubscriptionNotExist, "the consumer's group info not exist (no heartbeat from group %s yet)", h.ConsumerGroup)
	}
	if model, _, _ := cs.consumers.GroupMode(h.ConsumerGroup); model == protocol.Broadcasting && !gc.ConsumeBroadcastEnable {
		return reject(remoting.NoPermission, "the consumer group[%s] can not consume by broadcast way", h.ConsumerGroup)
	}
	if !found {
		return reject(remoting.SubscriptionNotExist, "the consumer's subscription not exist (group %s does not subscribe to %s)", h.ConsumerGroup, h.Topic)
	}
	if sd.SubVersion < h.SubVersion {
		return reject(remoting.SubscriptionNotLatest, "the consumer's subscription not latest")
	}
	if resp := cs.refuseFilter(req, sd.ExpressionType, compiled); resp != nil {
		return resp
	}
	pr.filter = cs.withBitmap(compiled.filter, h.ConsumerGroup, h.Topic, sd.ExpressionType, sd.SubString)
	return nil
}

func isTagExpression(t string) bool { return t == "" || t == protocol.ExpressionTag }

// executePull reads from the store and builds the answer. With
// allowSuspend (the first run) it may park the request and return nil, and
// it stores commitOffset; runs after a wake-up answer whatever they find,
// as RocketMQ's executeRequestWhenWakeup does.
//
// When messages were found it also returns body, the store result still
// holding them: the caller answers with writePull, which releases it.
func (cs *consumeState) executePull(pr *pullRequest, allowSuspend bool) (resp *remoting.Command, body *store.GetMessageResult) {
	h := &pr.h
	maxNums := int(min(h.MaxMsgNums, int32(cs.cfg.maxTransferCount)))
	res, err := cs.b.store.GetMessage(h.ConsumerGroup, h.Topic, h.QueueID, h.QueueOffset, maxNums, cs.cfg.maxTransferBytes, pr.filter)
	if err != nil {
		return remoting.NewResponse(pr.req, remoting.SystemError, "store getMessage failed: "+err.Error()), nil
	}
	slave := !cs.b.acceptWrites.Load()
	code, remark := pullCode(res.Status, h.QueueOffset)
	next := res.NextBeginOffset
	if code == remoting.PullOffsetMoved && slave {
		// A slave may lag behind its master: it does not move the client's
		// offset, it asks it to retry (offsetCheckInSlave=false).
		code, next = remoting.PullRetryImmediately, h.QueueOffset
	}
	resp = consumeResp(pr.req, code, remark, &protocol.PullMessageResponseHeader{
		SuggestWhichBrokerID: cs.suggestBroker(pr, res),
		NextBeginOffset:      next,
		MinOffset:            res.MinOffset,
		MaxOffset:            res.MaxOffset,
	})
	status := res.Status
	if code == remoting.Success {
		// The holds stay until the records are in the frame (writePull).
		body = res
		cs.b.stats.onGet(h.ConsumerGroup, h.Topic, res.MessageCount(), res.BufferTotalSize, res.FromDisk)
	} else {
		res.Release()
	}
	if code == remoting.PullOffsetMoved {
		cs.log.WithFields(logrus.Fields{
			"group": h.ConsumerGroup, "topic": h.Topic, "queueId": h.QueueID,
			"requestOffset": h.QueueOffset, "newOffset": next, "status": status.String(),
		}).Info("pull offset moved")
	}

	if allowSuspend && h.SysFlag&protocol.PullFlagCommitOffset != 0 && !slave {
		cs.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	}
	if code == remoting.PullNotFound && allowSuspend && h.SysFlag&protocol.PullFlagSuspend != 0 {
		suspend := time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
		if !cs.cfg.longPolling {
			suspend = cs.cfg.shortPolling
		}
		if suspend > 0 {
			pr.deadline = time.Now().Add(min(suspend, maxSuspend))
			switch cs.hold.park(pr) {
			case parked:
				return nil, nil
			case holdFull:
				return remoting.NewResponse(pr.req, remoting.SystemBusy,
					"[PULL]too many pulls are waiting for messages, try again later"), nil
			case holdDown:
				return shuttingDownPull(pr.req), nil
			}
		}
	}
	return resp, body
}

// suggestBroker is the broker id a pull answer tells the consumer to pull
// from next (RocketMQ's PullMessageProcessor): the master unless
// slaveReadEnable, then the group's whichBrokerWhenConsumeSlowly when the
// consumer reads data no longer in memory, else the group's brokerId.
func (cs *consumeState) suggestBroker(pr *pullRequest, res *store.GetMessageResult) int64 {
	switch {
	case !cs.b.cfg.SlaveReadEnable || pr.group == nil:
		return masterBrokerID
	case res.SuggestPullingFromSlave:
		return pr.group.WhichBrokerWhenConsumeSlowly
	default:
		return pr.group.BrokerID
	}
}

// pullCode maps a store status to the pull response code, as RocketMQ's
// PullMessageProcessor does.
func pullCode(st store.GetMessageStatus, offset int64) (remoting.ResponseCode, string) {
	switch st {
	case store.Found:
		return remoting.Success, ""
	case store.MessageWasRemoving, store.NoMatchedMessage:
		return remoting.PullRetryImmediately, ""
	case store.NoMatchedLogicQueue, store.NoMessageInQueue:
		if offset != 0 {
			return remoting.PullOffsetMoved, "the queue is empty but the offset is not 0"
		}
		return remoting.PullNotFound, ""
	case store.OffsetFoundNull, store.OffsetOverflowOne:
		return remoting.PullNotFound, ""
	case store.OffsetOverflowBadly:
		return remoting.PullOffsetMoved, "the offset is beyond the queue's max offset"
	case store.OffsetTooSmall:
		return remoting.PullOffsetMoved, "the offset is below the queue's min offset"
	}
	return remoting.SystemError, "unknown store status " + st.String()
}

// shuttingDownPull answers a pull that found nothing while the broker stops.
// Not PULL_NOT_FOUND: the official Go client re-pulls at once on that, into
// the closing connection, and that lost request stalls the consumer for its
// 30 s pull timeout. On SYSTEM_BUSY it backs off 3 s and then reconnects.
func shuttingDownPull(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.SystemBusy, "[SHUTDOWN]the broker is shutting down, pull again later")
}
