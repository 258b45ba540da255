package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
	"github.com/gorocketmq/gorocketmq/store/timer"
)

// Timer service timings with no RocketMQ key.
const (
	// timerPollInterval bounds how long a message put into the timer topic
	// waits to be read into the wheel when the put's signal came before the
	// store dispatched it.
	timerPollInterval = 20 * time.Millisecond
	// timerFlushInterval is how often the timerlog is synced and the
	// checkpoint written (what a power loss can deliver twice).
	timerFlushInterval = 500 * time.Millisecond
	// timerRetryWait is the pause after a failed delivery put.
	timerRetryWait = time.Second
	// timerDirName is the timer's directory under the store root.
	timerDirName = "timer"
	// timerCancelSlack is how long after its own delivery time a cancel
	// marker still cancels: RocketMQ 5 matches a marker with the messages
	// of its wheel slot (1 s by default), so a marker whose time was
	// rounded differently from its message's still works.
	timerCancelSlack = time.Second
	// timerCancelSweep is how often expired cancels are dropped from the
	// set (a pass over it).
	timerCancelSweep = time.Second
	// maxTimerCancels bounds the cancels waiting for their time (about
	// 100 bytes of heap each); past it new markers are refused at send
	// (ErrTimerCancelsFull). Markers already stored are always kept.
	maxTimerCancels = 1 << 18
)

// ErrTimerCancelsFull means a cancel marker (TIMER_DEL_UNIQKEY) was refused
// because maxTimerCancels cancels are already waiting.
var ErrTimerCancelsFull = errors.New("broker: too many timer cancels waiting")

// timerService delivers messages with an arbitrary delivery time. routeDelay
// stores them in rmq_sys_wheel_timer, queue 0, with TIMER_OUT_MS; timerLoop
// reads that queue into a timer.Wheel (timerlog + in-memory wheel, see
// package store/timer) and, when an entry is due, re-puts the message to its
// real topic and queue with its properties (TIMER_OUT_MS kept, as RocketMQ 5
// does; the request properties removed so a forwarded copy is not delayed
// again). The wheel is owned by timerLoop alone.
//
// Cancels (RocketMQ 5's TIMER_DEL_UNIQKEY): a marker is a timer message
// whose TIMER_DEL_UNIQKEY names the message to cancel, "topic+uniqKey"
// (RocketMQ 5.2 on) or the uniq key alone (5.0, 5.1), due at that
// message's delivery time. enqueue adds it to the wheel as a cancel entry
// due timerCancelSlack after its time and to cancels; a due message found
// in cancels is dropped instead of delivered; the marker itself is never
// delivered, and its cancel is dropped from the set once the wheel has
// fired past the entry's time. The timerlog keeps the markers, so start
// rebuilds the set from the markers still pending: a cancel survives a
// restart. A marker for a message already delivered, or for no message,
// only waits for its time and goes.
type timerService struct {
	b     *Broker
	log   logrus.FieldLogger
	cfg   timer.Config
	now   func() time.Time
	wheel *timer.Wheel

	// cancels maps a marker's TIMER_DEL_UNIQKEY to the time its cancel
	// ends (the marker entry's DeliverMs). Owned by timerLoop.
	cancels   map[string]int64
	lastSweep time.Time
	// nCancels is len(cancels) for the send path's bound.
	nCancels atomic.Int64

	wake chan struct{}
	serviceLoops

	mu      sync.Mutex // guards pending (a copy of the wheel's count for readers)
	pending int
}

// timerRollsPerRetention is how many roll windows fit in fileReservedTime
// at least: a waiting message is stored anew every roll window, so its
// newest copy is never old enough for retention to delete its file.
const timerRollsPerRetention = 3

func newTimerService(b *Broker) *timerService {
	t := &timerService{
		b:       b,
		log:     b.log.WithField("component", "timer"),
		now:     time.Now,
		cancels: make(map[string]int64),
		wake:    make(chan struct{}, 1),

		serviceLoops: serviceLoops{stop: make(chan struct{})},
	}
	reserved := time.Duration(b.cfg.FileReservedTime) * time.Hour
	t.cfg = timer.Config{
		Dir:        filepath.Join(b.cfg.StorePathRootDir, timerDirName),
		RollWindow: min(timer.DefaultRollWindow, reserved/timerRollsPerRetention),
		Roll:       t.reput,
		Log:        t.log,
	}
	return t
}

func (t *timerService) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// start opens the wheel (relinking what is pending) and starts timerLoop.
func (t *timerService) start() error {
	t.rearm()
	w, err := timer.Open(t.cfg, t.now())
	if err != nil {
		return fmt.Errorf("broker: open timer wheel: %w", err)
	}
	t.wheel = w
	t.setPending(w.Pending())
	for _, e := range w.RecoveredCancels() {
		m, err := t.b.store.LookMessageByOffset(e.CommitLogOffset)
		if err != nil {
			// Its commitlog file is gone: the message it cancels, stored
			// before it, is gone too.
			t.log.WithError(err).WithField("commitLogOffset", e.CommitLogOffset).Warn("timer cancel marker cannot be read, ignored")
			continue
		}
		t.addCancel(m.Property(message.PropTimerDelUniqKey), e.DeliverMs)
	}
	t.goLoop(t.timerLoop)
	return nil
}

// addCancel records a cancel until endMs (a later end wins).
func (t *timerService) addCancel(key string, endMs int64) {
	if old, ok := t.cancels[key]; !ok || old < endMs {
		t.cancels[key] = endMs
		t.nCancels.Store(int64(len(t.cancels)))
	}
}

// cancelled reports whether a message of topic with uniq key uniq was
// cancelled, in either of RocketMQ's key forms.
func (t *timerService) cancelled(topic, uniq string) bool {
	if len(t.cancels) == 0 || uniq == "" {
		return false
	}
	if _, ok := t.cancels[topic+"+"+uniq]; ok {
		return true
	}
	_, ok := t.cancels[uniq]
	return ok
}

// sweepCancels drops the cancels that ended by firedMs, a time the wheel
// fired through: every message they could cancel was decided by then.
func (t *timerService) sweepCancels(firedMs int64) {
	for k, end := range t.cancels {
		if end <= firedMs {
			delete(t.cancels, k)
		}
	}
	t.nCancels.Store(int64(len(t.cancels)))
}

// checkCancelRoom refuses a new cancel marker when maxTimerCancels wait.
func (t *timerService) checkCancelRoom() error {
	if n := t.nCancels.Load(); n >= maxTimerCancels {
		return fmt.Errorf("%w: %d, at most %d", ErrTimerCancelsFull, n, maxTimerCancels)
	}
	return nil
}

// shutdown stops timerLoop and closes the wheel (sync + checkpoint). Safe to
// call twice and without start.
func (t *timerService) shutdown() {
	t.stopLoops(func() {
		if t.wheel != nil {
			if err := t.wheel.Close(); err != nil {
				t.log.WithError(err).Error("close timer wheel")
			}
		}
	})
}

func (t *timerService) setPending(n int) {
	t.mu.Lock()
	t.pending = n
	t.mu.Unlock()
}

// Pending returns the number of timer messages not delivered yet.
func (t *timerService) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

func (t *timerService) timerLoop() {
	w := t.wheel
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastFlush := t.now()
	var retryAt time.Time
	for {
		t.enqueue()
		now := t.now()
		if now.After(retryAt) {
			if err := w.Fire(now, t.deliver); err != nil {
				t.log.WithError(err).Warn("timer delivery failed, will retry")
				retryAt = now.Add(timerRetryWait)
			} else if len(t.cancels) > 0 && now.Sub(t.lastSweep) >= timerCancelSweep {
				t.sweepCancels(now.UnixMilli())
				t.lastSweep = now
			}
		}
		t.setPending(w.Pending())
		if now.Sub(lastFlush) >= timerFlushInterval {
			if err := w.Flush(); err != nil {
				t.log.WithError(err).Error("flush timer wheel")
			}
			lastFlush = now
		}
		wait := min(w.NextWake().Sub(t.now()), timerPollInterval)
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-t.stop:
			return
		case <-t.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// enqueue reads new timer-topic messages into the wheel.
func (t *timerService) enqueue() {
	st := t.b.store
	w := t.wheel
	for {
		off := w.EnqueueOffset()
		if off >= st.MaxOffsetInQueue(TimerTopic, 0) {
			return
		}
		res, err := st.GetMessage("", TimerTopic, 0, off, scheduleBatch, 0, nil)
		if err != nil {
			t.log.WithError(err).Error("read timer queue")
			return
		}
		if res.Status != store.Found {
			next := res.NextBeginOffset
			res.Release()
			if next <= off {
				return
			}
			t.log.WithFields(logrus.Fields{"from": off, "to": next}).Warn("timer enqueue offset corrected")
			w.SetEnqueueOffset(next)
			continue
		}
		now := t.now()
		for i := range res.Messages {
			r, err := message.ParseRecord(res.Messages[i].Bytes)
			if err != nil {
				t.log.WithError(err).WithField("offset", off).Error("unreadable timer entry, skipped")
				off++
				w.SetEnqueueOffset(off)
				continue
			}
			due := r.StoreTimestamp()
			if v, ok := r.Property(message.PropTimerOutMS); ok {
				if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
					due = n
				}
			}
			e := timer.Entry{DeliverMs: due, CommitLogOffset: r.PhysicalOffset(), Size: int32(r.Size()), QueueOffset: r.QueueOffset()}
			key, isCancel := r.Property(message.PropTimerDelUniqKey)
			if isCancel {
				e.DeliverMs, e.Cancel = due+timerCancelSlack.Milliseconds(), true
			}
			if err := w.Add(e, now); err != nil {
				res.Release()
				t.log.WithError(err).Error("add to the timer wheel")
				return
			}
			if isCancel {
				t.addCancel(string(key), e.DeliverMs)
			}
			off = r.QueueOffset() + 1
		}
		res.Release()
	}
}

// errTimerRetry marks a delivery to try again.
var errTimerRetry = errors.New("broker: timer delivery put failed")

// putFailure describes a put that did not store, for a retry.
func putFailure(what string, res store.PutResult) error {
	if res.Err != nil {
		return fmt.Errorf("%w: %s: %s: %w", errTimerRetry, what, res.Status, res.Err)
	}
	return fmt.Errorf("%w: %s: %s", errTimerRetry, what, res.Status)
}

// reput is the wheel's Roll: a message still more than a roll window from
// its delivery time is stored again in the timer topic (same properties,
// same TIMER_OUT_MS; enqueue reads the copy back into the wheel) and the
// old unit is done. Commitlog retention deletes files by age whatever waits
// in them, so without the copy a timer longer than fileReservedTime (7 days
// allowed, 72 h kept by default) would lose its message; RocketMQ 5 re-puts
// on roll for the same reason. A message that cannot be read is left to
// the wheel (deliver reports it when due).
func (t *timerService) reput(e timer.Entry) (bool, error) {
	m, err := t.b.store.LookMessageByOffset(e.CommitLogOffset)
	if err != nil || m.Topic != TimerTopic {
		t.log.WithError(err).WithField("commitLogOffset", e.CommitLogOffset).Warn("timer message to roll cannot be read, rolled in place")
		return false, nil
	}
	m.StoreHost = t.b.StoreHost()
	m.SetProperty(message.PropWaitStoreMsgOK, "false")
	if res := t.b.store.PutMessage(context.Background(), m); !res.OK() {
		return false, putFailure("roll", res)
	}
	return true, nil
}

// deliver re-puts one due message to its real topic, unless it was
// cancelled. A cancel marker is never delivered (RocketMQ 5 refuses to put
// one too); its cancel ends with the next sweep.
func (t *timerService) deliver(e timer.Entry) error {
	if e.Cancel {
		return nil
	}
	m, err := t.b.store.LookMessageByOffset(e.CommitLogOffset)
	if err == nil {
		err = t.b.restoreParked(m)
	}
	if err != nil {
		// Gone (retention) or not a timer message: nothing to deliver.
		t.log.WithError(err).WithField("commitLogOffset", e.CommitLogOffset).Error("timer entry cannot be delivered, dropped")
		return nil
	}
	if _, ok := m.Properties[message.PropTimerDelUniqKey]; ok {
		return nil // a marker added to the wheel before markers were flagged
	}
	if t.cancelled(m.Topic, m.UniqKey()) {
		t.log.WithFields(logrus.Fields{"topic": m.Topic, "msgId": m.UniqKey(), "timerOffset": e.CommitLogOffset}).Info("timer message cancelled")
		return nil
	}
	for _, k := range timerProps {
		m.RemoveProperty(k)
	}
	res := t.b.store.PutMessage(context.Background(), m)
	switch {
	case res.OK():
		return nil
	case refusedForGood(res.Status):
		// An error would stop every later timer behind this one for ever.
		t.log.WithFields(logrus.Fields{"topic": m.Topic, "status": res.Status, "msgId": m.UniqKey(), "timerOffset": e.CommitLogOffset}).
			WithError(res.Err).Error("due timer message refused by the store for good (e.g. over a lowered maxMessageSize), skipped; it stays readable in " + TimerTopic)
		return nil
	default:
		return putFailure("delivery", res)
	}
}
