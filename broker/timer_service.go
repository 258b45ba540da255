package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
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
)

// timerService delivers messages with an arbitrary delivery time. routeDelay
// stores them in rmq_sys_wheel_timer, queue 0, with TIMER_OUT_MS; timerLoop
// reads that queue into a timer.Wheel (timerlog + in-memory wheel, see
// package store/timer) and, when an entry is due, re-puts the message to its
// real topic and queue with its properties (TIMER_OUT_MS kept, as RocketMQ 5
// does; the request properties removed so a forwarded copy is not delayed
// again). The wheel is owned by timerLoop alone.
type timerService struct {
	b     *Broker
	log   logrus.FieldLogger
	cfg   timer.Config
	now   func() time.Time
	wheel *timer.Wheel

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
		b:    b,
		log:  b.log.WithField("component", "timer"),
		now:  time.Now,
		wake: make(chan struct{}, 1),

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
	t.goLoop(t.timerLoop)
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
			if err := w.Add(e, now); err != nil {
				res.Release()
				t.log.WithError(err).Error("add to the timer wheel")
				return
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

// deliver re-puts one due message to its real topic.
func (t *timerService) deliver(e timer.Entry) error {
	m, err := t.b.store.LookMessageByOffset(e.CommitLogOffset)
	if err == nil {
		err = t.b.restoreParked(m)
	}
	if err != nil {
		// Gone (retention) or not a timer message: nothing to deliver.
		t.log.WithError(err).WithField("commitLogOffset", e.CommitLogOffset).Error("timer entry cannot be delivered, dropped")
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
