package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
)

// TimerTopic holds messages with an arbitrary delivery time until they are
// due (RocketMQ 5's TimerMessageStore.TIMER_TOPIC); queue 0 only.
const TimerTopic = SystemTopicPrefix + "wheel_timer"

// PropStartDeliverTime is the delivery-time property of the OpenMessaging
// binding and Aliyun's clients (absolute ms), accepted like TIMER_DELIVER_MS.
const PropStartDeliverTime = "__STARTDELIVERTIME"

// Errors of the delivery-time rewrite; the send path answers them with
// MESSAGE_ILLEGAL and the error text as remark.
var (
	// ErrTimerDisabled means a message asks for an arbitrary delivery time
	// while timerWheelEnable is false.
	ErrTimerDisabled = errors.New("broker: arbitrary delivery time is disabled on this broker (timerWheelEnable=false)")
	// ErrTimerTooLate means the delivery time is further ahead than
	// timerMaxDelaySec allows.
	ErrTimerTooLate = errors.New("broker: delivery time beyond the maximum delay")
	// ErrTimerBadValue means a timer property is not a number.
	ErrTimerBadValue = errors.New("broker: malformed delivery-time property")
)

// timerProps are the properties that ask for an arbitrary delivery time, in
// the order they are looked at.
var timerProps = [...]string{message.PropTimerDeliverMS, message.PropTimerDelaySec, message.PropTimerDelayMS, PropStartDeliverTime}

// routeDelay applies the put-time rewrites RocketMQ makes in
// CommitLog.asyncPutMessage (delay levels) and HookUtils (5.x timers) to a
// message that is about to be stored for its real topic:
//
//   - DELAY > 0 (transaction type NOT or COMMIT): the level is clamped to the
//     highest configured level, REAL_TOPIC/REAL_QID keep the destination and
//     the message goes to SCHEDULE_TOPIC_XXXX, queue level-1. TIMER_* props
//     are dropped: the level wins, as in RocketMQ 5.
//   - a timer property: the delivery time is computed; in the past or now the
//     message is stored as is (delivered at once), beyond timerMaxDelaySec it
//     is refused, else it goes to rmq_sys_wheel_timer, queue 0. A cancel
//     marker (TIMER_DEL_UNIQKEY) always goes there (timerService).
//
// Both record the delivery time as TIMER_OUT_MS, which the store's dispatch
// writes as the consume-queue tags code. It reports whether msg was parked.
func (b *Broker) routeDelay(msg *message.MessageExt, now time.Time) (bool, error) {
	tt := message.TransactionType(msg.SysFlag)
	if tt != message.TransactionNotType && tt != message.TransactionCommitType {
		return false, nil
	}
	if level := msg.DelayTimeLevel(); level > 0 && b.schedule != nil {
		for _, k := range timerProps {
			delete(msg.Properties, k)
		}
		level = min(level, len(b.schedule.levels))
		deliver := now.Add(b.schedule.levels[level-1]).UnixMilli()
		b.park(msg, ScheduleTopic, int32(level-1), deliver)
		msg.Properties[message.PropDelayTimeLevel] = strconv.Itoa(level)
		return true, nil
	}
	deliver, ok, err := b.checkDeliveryTime(msg.Properties, now)
	if err != nil || !ok {
		return false, err
	}
	// A cancel marker is parked even when its time has passed: it must
	// never reach consumers, and the timer service drops it when due.
	_, isCancel := msg.Properties[message.PropTimerDelUniqKey]
	if deliver <= now.UnixMilli() && !isCancel {
		return false, nil
	}
	if isCancel {
		if err := b.timer.checkCancelRoom(); err != nil {
			return false, err
		}
	}
	b.park(msg, TimerTopic, 0, deliver)
	return true, nil
}

// checkDeliveryTime returns the delivery time a message asks for with a
// timer property (ok false: none, or a DELAY level that wins), refusing a
// malformed or too distant one, or any when timers are disabled. Half
// messages are checked with it at send time, so their commit cannot fail.
func (b *Broker) checkDeliveryTime(props map[string]string, now time.Time) (int64, bool, error) {
	if n, err := strconv.Atoi(props[message.PropDelayTimeLevel]); err == nil && n > 0 {
		return 0, false, nil
	}
	deliver, ok, err := timerDeliverTime(props, now)
	if err != nil || !ok {
		return 0, false, err
	}
	if !b.cfg.TimerWheelEnable || b.timer == nil {
		return 0, false, ErrTimerDisabled
	}
	// Compared in ms: a far-future time as a Duration would overflow.
	if ahead := deliver - now.UnixMilli(); ahead > b.cfg.TimerMaxDelaySec*1000 {
		return 0, false, fmt.Errorf("%w: the message is due in %ds, this broker accepts at most %ds (timerMaxDelaySec=%d)",
			ErrTimerTooLate, ahead/1000, b.cfg.TimerMaxDelaySec, b.cfg.TimerMaxDelaySec)
	}
	return deliver, true, nil
}

// park moves msg to a holding topic, remembering where it belongs.
func (b *Broker) park(msg *message.MessageExt, topic string, queueID int32, deliverMs int64) {
	msg.SetProperty(message.PropRealTopic, msg.Topic)
	msg.SetProperty(message.PropRealQueueID, strconv.Itoa(int(msg.QueueID)))
	msg.SetProperty(message.PropTimerOutMS, strconv.FormatInt(deliverMs, 10))
	msg.Topic = topic
	msg.QueueID = queueID
}

// timerDeliverTime returns the delivery time (unix ms) a message asks for
// through one of the timer properties, and whether it asks at all.
func timerDeliverTime(props map[string]string, now time.Time) (int64, bool, error) {
	for _, k := range timerProps {
		v, ok := props[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("%w: %s=%q is not a non-negative integer", ErrTimerBadValue, k, truncate(v, 32))
		}
		switch k {
		case message.PropTimerDelaySec:
			if n > 1<<40 {
				n = 1 << 40 // far beyond any maximum; avoids overflow
			}
			return now.UnixMilli() + n*1000, true, nil
		case message.PropTimerDelayMS:
			if n > 1<<50 {
				n = 1 << 50
			}
			return now.UnixMilli() + n, true, nil
		default:
			return n, true, nil
		}
	}
	return 0, false, nil
}

// appendMessage stores a message for its real topic after routeDelay: the
// one path for sends, send-backs and transaction commits. A routing refusal
// (bad or too late delivery time) is the error; nothing is stored then.
// mustWait is store.Store.AppendMessage's: the caller acknowledges only once
// OnDurable reports the message durable.
func (b *Broker) appendMessage(msg *message.MessageExt) (res store.PutResult, mustWait bool, err error) {
	parked := false
	if msg.Properties != nil { // a plain send's string (plainProperties) asks for no delay
		parked, err = b.routeDelay(msg, time.Now())
		if err != nil {
			return store.PutResult{Status: store.MessageIllegal, Err: err}, false, err
		}
	}
	res, mustWait = b.store.AppendMessage(msg)
	if parked && res.OK() {
		switch msg.Topic {
		case ScheduleTopic:
			b.schedule.signal()
		case TimerTopic:
			b.timer.signal()
		}
	}
	return res, mustWait, nil
}

// putMessage is appendMessage that waits for the flush when one is due
// (send-backs and transaction commits answer only once stored for good).
func (b *Broker) putMessage(msg *message.MessageExt) (store.PutResult, error) {
	res, mustWait, err := b.appendMessage(msg)
	if err != nil || !mustWait {
		return res, err
	}
	flushed := make(chan store.PutResult, 1)
	b.store.OnDurable(res, func(r store.PutResult) { flushed <- r }) // bounded by SyncFlushTimeout
	return <-flushed, nil
}

// restoreParked turns a message read back from a holding topic into the
// message to deliver: real topic and queue, holding properties removed,
// WAIT=false (nobody waits for this put), store host of this broker.
func (b *Broker) restoreParked(m *message.MessageExt) error {
	realTopic := m.Property(message.PropRealTopic)
	if realTopic == "" {
		return fmt.Errorf("broker: parked message at offset %d has no %s", m.CommitLogOffset, message.PropRealTopic)
	}
	qid, err := strconv.ParseInt(m.Property(message.PropRealQueueID), 10, 32)
	if err != nil || qid < 0 {
		return fmt.Errorf("broker: parked message at offset %d has a bad %s %q", m.CommitLogOffset, message.PropRealQueueID, m.Property(message.PropRealQueueID))
	}
	m.Topic = realTopic
	m.QueueID = int32(qid)
	m.RemoveProperty(message.PropRealTopic)
	m.RemoveProperty(message.PropRealQueueID)
	m.RemoveProperty(message.PropDelayTimeLevel)
	m.SetProperty(message.PropWaitStoreMsgOK, "false")
	m.StoreHost = b.StoreHost()
	return nil
}
