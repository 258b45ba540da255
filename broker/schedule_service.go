package broker

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
)

// Schedule service timings with no RocketMQ key.
const (
	// schedulePollInterval is how often an idle level looks for new
	// entries; a put signals the loop at once, so this only bounds the case
	// where the signal came before the store dispatched the entry.
	schedulePollInterval = 20 * time.Millisecond
	// scheduleRetryWait is the pause after a failed re-put (RocketMQ: 10 s);
	// the level's offset does not move, so nothing is lost.
	scheduleRetryWait = time.Second
	// scheduleBatch is how many entries one read of a level returns.
	scheduleBatch = 32
)

// maxScheduleQueues bounds the SCHEDULE_TOPIC_XXXX queues looked at: one
// per level, and conf allows at most 1024 levels.
const maxScheduleQueues = 1024

// delayOffsetFile is the schedule progress file under <root>/config.
const delayOffsetFile = "delayOffset.json"

// scheduleService delivers delay-level messages (RocketMQ's
// ScheduleMessageService). A message with DELAY=n is stored in
// SCHEDULE_TOPIC_XXXX, queue n-1, by routeDelay; scheduleLoop reads each
// level's queue in order from its offset, and once an entry's delivery time
// (TIMER_OUT_MS, which is also its consume-queue tags code; else store time
// + the level's delay) has come, re-puts the message to its real topic and
// queue with its original properties and advances the level's offset.
//
// One queue per level holds messages in delivery order (same delay, FIFO),
// so only each level's head needs watching: the loop sleeps until the
// earliest head is due, or a put signals it.
//
// Progress is delayOffset.json ({"offsetTable":{"<level>":<next offset>}}),
// written atomically every flushDelayOffsetInterval and at shutdown. It is
// only written after it was loaded (RocketMQ #6881 overwrote it with an
// empty table), and loaded offsets are clamped into each queue's [min, max]
// (correctDelayOffset). A crash re-delivers at most what was delivered
// since the last write: at-least-once, never an en-masse replay.
type scheduleService struct {
	b      *Broker
	log    logrus.FieldLogger
	levels []time.Duration
	path   string
	flush  time.Duration
	now    func() time.Time

	mu      sync.Mutex // guards offsets, dirty
	offsets map[int32]int64
	dirty   bool

	wake chan struct{}
	serviceLoops

	loaded bool // set by start before the loop runs; read by shutdown after it stopped
	queues int  // schedule queues served: the levels, or more (load); set before the loop runs
}

// newScheduleService builds the service from the broker config (validated,
// so the levels parse).
func newScheduleService(b *Broker) (*scheduleService, error) {
	levels, err := conf.ParseDelayLevels(b.cfg.MessageDelayLevel)
	if err != nil {
		return nil, fmt.Errorf("broker: messageDelayLevel: %w", err)
	}
	return &scheduleService{
		b:       b,
		log:     b.log.WithField("component", "schedule"),
		levels:  levels,
		path:    filepath.Join(b.cfg.StorePathRootDir, "config", delayOffsetFile),
		flush:   time.Duration(b.cfg.FlushDelayOffsetInterval) * time.Millisecond,
		now:     time.Now,
		offsets: make(map[int32]int64),
		wake:    make(chan struct{}, 1),

		serviceLoops: serviceLoops{stop: make(chan struct{})},
	}, nil
}

// signal wakes scheduleLoop without blocking.
func (s *scheduleService) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// delayOffsetTable is delayOffset.json.
type delayOffsetTable struct {
	OffsetTable map[int32]int64 `json:"offsetTable"`
}

// load reads delayOffset.json, or its .bak when it is damaged
// (loadMetadataFile; neither: every level starts at its queue's min offset),
// and clamps each offset into its queue.
func (s *scheduleService) load() error {
	t, _, err := loadMetadataFile(s.path, "delay offsets", s.log, func(data []byte) (delayOffsetTable, error) {
		var t delayOffsetTable
		// fastjsonIntKey (consumer_offset_manager.go) quotes the integer
		// keys a Java broker writes ({1:5}), so its file loads too.
		if err := fsutil.DecodeJSONObject(fastjsonIntKey.ReplaceAll(data, []byte(`$1"$2"$3`)), &t); err != nil {
			return delayOffsetTable{}, fmt.Errorf("not a delay offset table: %w", err)
		}
		return t, nil
	})
	if err != nil {
		return err
	}
	// Built aside and swapped in under mu: in controller mode start runs
	// while GET_ALL_DELAY_OFFSET is served (a replica becoming master).
	offsets := make(map[int32]int64, len(t.OffsetTable))
	for k, v := range t.OffsetTable {
		offsets[k] = v
	}
	st := s.b.store
	// Queues of levels no longer configured (messageDelayLevel shortened
	// while messages waited there) are still served: their messages carry
	// their delivery time (TIMER_OUT_MS), and were otherwise never read
	// again.
	s.queues = len(s.levels)
	for q := s.queues; q < maxScheduleQueues; q++ {
		if st.MaxOffsetInQueue(ScheduleTopic, int32(q)) > 0 {
			s.queues = q + 1
		}
	}
	if s.queues > len(s.levels) {
		s.log.WithFields(logrus.Fields{"levels": len(s.levels), "queues": s.queues}).
			Warn("SCHEDULE_TOPIC_XXXX has queues beyond messageDelayLevel: their messages are delivered at their recorded time")
	}
	for i := range s.queues {
		level := int32(i + 1)
		qid := level - 1
		minOff, maxOff := st.MinOffsetInQueue(ScheduleTopic, qid), st.MaxOffsetInQueue(ScheduleTopic, qid)
		off, ok := offsets[level]
		switch {
		case !ok || off < minOff:
			off = minOff
		case off > maxOff:
			s.log.WithFields(logrus.Fields{"level": level, "offset": off, "max": maxOff}).Warn("delay offset beyond its queue, corrected")
			off = maxOff
		}
		offsets[level] = off
	}
	s.mu.Lock()
	clear(s.offsets)
	maps.Copy(s.offsets, offsets)
	s.mu.Unlock()
	s.loaded = true
	return nil
}

// persist writes delayOffset.json atomically if anything moved.
func (s *scheduleService) persist(force bool) error {
	if !s.loaded {
		return nil
	}
	s.mu.Lock()
	if !s.dirty && !force {
		s.mu.Unlock()
		return nil
	}
	t := delayOffsetTable{OffsetTable: make(map[int32]int64, len(s.offsets))}
	for k, v := range s.offsets {
		t.OffsetTable[k] = v
	}
	s.dirty = false
	s.mu.Unlock()
	if err := writeMetadataJSON(s.path, "delay offsets", &t); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// start loads the offsets and starts scheduleLoop and the persist loop.
func (s *scheduleService) start() error {
	s.rearm()
	// A restart (controller mode: master again) takes the offsets from the
	// file, which the slave sync wrote from the master meanwhile; load
	// replaces the whole table.
	if err := s.load(); err != nil {
		return err
	}
	s.goLoop(s.scheduleLoop)
	s.goLoop(s.persistLoop)
	return nil
}

// shutdown stops the loops and writes the offsets a last time. Safe to
// call twice and without start.
func (s *scheduleService) shutdown() {
	s.stopLoops(func() {
		if err := s.persist(true); err != nil {
			s.log.WithError(err).Error("persist delay offsets at shutdown")
		}
	})
}

// Offset returns the next queue offset of level (for tests and admin).
func (s *scheduleService) Offset(level int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offsets[level]
}

func (s *scheduleService) persistLoop() {
	t := time.NewTicker(s.flush)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.persist(false); err != nil {
				s.log.WithError(err).Error("persist delay offsets")
			}
		}
	}
}

// scheduleLoop delivers due messages level by level and sleeps until the
// earliest head is due, a put signals, or the poll interval passes.
func (s *scheduleService) scheduleLoop() {
	// nextDue caches each level's head delivery time so a waiting head is
	// not read again on every wake-up; 0 means unknown.
	nextDue := make([]int64, s.queues)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.now().UnixMilli()
		wait := schedulePollInterval
		for i := range s.queues {
			if nextDue[i] > now {
				wait = min(wait, time.Duration(nextDue[i]-now)*time.Millisecond)
				continue
			}
			due, retry := s.deliverLevel(int32(i + 1))
			nextDue[i] = due
			switch {
			case retry:
				nextDue[i] = now + scheduleRetryWait.Milliseconds()
				wait = min(wait, scheduleRetryWait)
			case due > 0:
				wait = min(wait, time.Duration(due-s.now().UnixMilli())*time.Millisecond)
			}
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-s.stop:
			return
		case <-s.wake:
			// A new entry can only be due later than the cached heads of
			// its level, but an empty level has no cached head.
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

// deliverLevel re-puts every due message at the head of level's queue. It
// returns the delivery time of the first message not yet due (0 when the
// queue is drained) and whether a put failed (retry later).
func (s *scheduleService) deliverLevel(level int32) (nextDue int64, retry bool) {
	st := s.b.store
	qid := level - 1
	for {
		select {
		case <-s.stop:
			return 0, false
		default:
		}
		s.mu.Lock()
		off := s.offsets[level]
		s.mu.Unlock()
		if off >= st.MaxOffsetInQueue(ScheduleTopic, qid) {
			return 0, false
		}
		res, err := st.GetMessage("", ScheduleTopic, qid, off, scheduleBatch, 0, nil)
		if err != nil {
			s.log.WithError(err).WithField("level", level).Error("read schedule queue")
			return 0, true
		}
		if res.Status != store.Found {
			next := res.NextBeginOffset
			res.Release()
			if next > off {
				// Entries gone (retention) or the offset is off the queue:
				// follow the store's correction.
				s.log.WithFields(logrus.Fields{"level": level, "from": off, "to": next}).Warn("delay offset corrected")
				s.setOffset(level, next)
				continue
			}
			return 0, false
		}
		for i := range res.Messages {
			rec := res.Messages[i].Bytes
			due, qoff, err := s.dueTime(rec, level)
			if err != nil {
				s.log.WithError(err).WithFields(logrus.Fields{"level": level, "offset": off}).Error("unreadable schedule entry, skipped")
				s.setOffset(level, off+1)
				off++
				continue
			}
			if due > s.now().UnixMilli() {
				res.Release()
				return due, false
			}
			if !s.deliver(rec, level) {
				res.Release()
				return 0, true
			}
			s.setOffset(level, qoff+1)
			off = qoff + 1
		}
		res.Release()
	}
}

func (s *scheduleService) setOffset(level int32, off int64) {
	s.mu.Lock()
	s.offsets[level] = off
	s.dirty = true
	s.mu.Unlock()
}

// dueTime returns the delivery time and queue offset of a stored schedule
// record. TIMER_OUT_MS is the time routeDelay computed; without it (a
// record written by another broker) it is store time + the level's delay.
// A time later than now + the level's delay cannot be right and is
// corrected to now (correctDeliverTimestamp).
func (s *scheduleService) dueTime(rec []byte, level int32) (int64, int64, error) {
	r, err := message.ParseRecord(rec)
	if err != nil {
		return 0, 0, err
	}
	delay := s.levels[min(int(level), len(s.levels))-1].Milliseconds()
	due := r.StoreTimestamp() + delay
	if v, ok := r.Property(message.PropTimerOutMS); ok {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			due = n
		}
	}
	now := s.now().UnixMilli()
	if due > now+delay {
		due = now
	}
	return due, r.QueueOffset(), nil
}

// deliver re-puts one due record to its real topic; false means retry. A
// record that can never be delivered (no real topic, or a half message,
// which RocketMQ drops here) is logged and skipped.
func (s *scheduleService) deliver(rec []byte, level int32) bool {
	m, _, err := message.DecodeRecord(rec)
	if err == nil {
		err = s.b.restoreParked(m)
	}
	if err != nil {
		s.log.WithError(err).WithField("level", level).Error("schedule entry cannot be delivered, skipped")
		return true
	}
	if m.Topic == TransHalfTopic {
		s.log.WithField("offset", m.CommitLogOffset).Warn("schedule entry for the half topic dropped")
		return true
	}
	m.RemoveProperty(message.PropTimerOutMS)
	res := s.b.store.PutMessage(context.Background(), m)
	switch {
	case res.OK():
		return true
	case refusedForGood(res.Status):
		// Retrying would hold every later message of the level behind this
		// one for ever (RocketMQ 5 skips these statuses too).
		s.log.WithFields(logrus.Fields{"level": level, "topic": m.Topic, "status": res.Status, "msgId": m.UniqKey(),
			"scheduleOffset": m.CommitLogOffset}).WithError(res.Err).
			Error("due delay message refused by the store for good (e.g. over a lowered maxMessageSize), skipped; it stays readable in " + ScheduleTopic)
		return true
	default:
		s.log.WithFields(logrus.Fields{"level": level, "topic": m.Topic, "status": res.Status}).WithError(res.Err).
			Warn("re-put of a due delay message failed, will retry")
		return false
	}
}

// refusedForGood reports whether the store refused a put for what the
// message is, so the same put can never succeed: a parked message being
// delivered is then skipped instead of retried.
func refusedForGood(st store.PutStatus) bool {
	return st == store.MessageIllegal || st == store.PropertiesSizeExceeded
}
