package broker

import (
	"encoding/json"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// The registry of SQL92 filters whose bitmaps the store computes at dispatch
// (enableCalcFilterBitMap; RocketMQ's ConsumerFilterManager and
// CommitLogDispatcherCalcBitMap). Heartbeats register each group's SQL92
// subscriptions; dispatch asks CalcFilterBitmap for each new message; a pull
// of a registered subscription gets a filter that also offers the bitmap
// (store.BitmapFilter), so the store skips messages whose bitmap lacks its
// bits without reading them.
//
// A filter's units are trusted by its pulls only for messages at or beyond
// its from offset, and only while it is known:
//
//   - registering publishes the filter to dispatch first and then reads the
//     commitlog end as from: dispatch reads that end before it asks for a
//     bitmap, so every record at or beyond from is computed with the filter;
//   - replacing (an expression change) or dropping a filter first makes it
//     unknown, then saves the registry, and only then publishes a snapshot
//     without it: a pull checks known after it fixed its entries, and the
//     store writes a unit before its entry (never after), so a unit a pull
//     trusts was computed while the filter was published;
//   - consumerFilter.json is written before a snapshot without a filter is
//     published, so a restart never trusts units of a filter the last run
//     stopped computing; a new filter is saved first without from (-1,
//     decided again at load) and with it once known.

// consumerFilterFileName is the registry's file under <root>/config.
const consumerFilterFileName = "consumerFilter.json"

// consumerFilterFile is consumerFilter.json: the bloom filter the bit
// positions and units were made with (a file of another is ignored, as
// RocketMQ drops persisted filter data when its bloom filter changed) and
// the filters.
type consumerFilterFile struct {
	BloomK  int            `json:"bloomK"`
	BloomM  int            `json:"bloomM"`
	Filters []filterRecord `json:"filters"`
}

// filterRecord is one filter as saved.
type filterRecord struct {
	Topic          string `json:"topic"`
	ConsumerGroup  string `json:"consumerGroup"`
	ExpressionType string `json:"expressionType"`
	Expression     string `json:"expression"`
	ClientVersion  int64  `json:"clientVersion"` // the subscription's subVersion
	BornTime       int64  `json:"bornTime"`
	DeadTime       int64  `json:"deadTime"`
	// BitmapFrom is the commitlog offset from which on every message's
	// bitmap includes this filter; -1 while not known.
	BitmapFrom int64 `json:"bitmapFrom"`
}

// filterData is one registered filter (one group's SQL92 subscription to
// one topic), and the store filter of its pulls: the expression plus its
// bitmap (store.BitmapFilter). Everything but from, known and deadTime is
// immutable.
type filterData struct {
	sqlFilter                 // the compiled expression
	topic, group, expr string // the expression is SQL92
	subVersion         int64
	bornTime           int64
	deadTime           int64 // ms, 0 while its group subscribes; guarded by the manager's mu
	bits               []uint32
	from               atomic.Int64 // math.MaxInt64 until known
	known              atomic.Bool  // pulls may trust units (see above)
}

// FilterBitmap returns the filter's bits and from offset while it is known.
func (d *filterData) FilterBitmap() ([]uint32, int64, bool) {
	from := d.from.Load()
	return d.bits, from, d.known.Load() && from != math.MaxInt64
}

// filterSnapshot is what dispatch reads: the filters of each topic.
type filterSnapshot struct {
	byTopic map[string][]*filterData
}

// filterStore is the part of the store the registry uses.
type filterStore interface {
	CommitLogMaxOffset() int64
	SetFilterBitmapCalculator(store.FilterBitmapCalculator)
}

// filterRegKey names a registered filter: one per group and topic.
type filterRegKey struct{ topic, group string }

// consumerFilterManager is the registry. Dispatch reads snap without a lock.
type consumerFilterManager struct {
	path     string
	log      logrus.FieldLogger
	bloom    filter.Bloom
	keepDead time.Duration
	now      func() time.Time

	mu      sync.Mutex // guards filters, deadTime fields, dirty, st and the file
	filters map[filterRegKey]*filterData
	dirty   bool // deadTime changes not saved yet
	st      filterStore
	// maxPerTopic caps the filters of one topic (expectConsumerNumUseFilter):
	// dispatch evaluates each of them on every message of the topic, and
	// past the count the bloom filter is sized for, a bitmap skips little.
	// Heartbeats can name any group, so without a cap any client could
	// make every put of a topic evaluate expressions without bound. A
	// subscription over the cap is evaluated as its pulls read, as before
	// it registered. fullWarned (topics) logs that once per topic.
	maxPerTopic int
	fullWarned  map[string]bool

	snap atomic.Pointer[filterSnapshot]
}

func newConsumerFilterManager(path string, bloom filter.Bloom, maxPerTopic int, keepDead time.Duration, log logrus.FieldLogger) *consumerFilterManager {
	return &consumerFilterManager{
		path: path, log: log.WithField("component", "filter-bitmap"), bloom: bloom, keepDead: keepDead,
		now: time.Now, filters: make(map[filterRegKey]*filterData),
		maxPerTopic: maxPerTopic, fullWarned: make(map[string]bool),
	}
}

// topicFull reports whether topic has maxPerTopic filters, counting those
// about to be added; it logs the first refusal for a topic. Caller holds mu.
func (m *consumerFilterManager) topicFull(topic, group string, adding []*filterData) bool {
	n := 0
	for k := range m.filters {
		if k.topic == topic {
			n++
		}
	}
	for _, d := range adding {
		if d.topic == topic {
			n++
		}
	}
	if n < m.maxPerTopic {
		return false
	}
	if !m.fullWarned[topic] {
		m.fullWarned[topic] = true
		m.log.WithFields(logrus.Fields{"topic": topic, "group": group, "filters": n}).
			Warn("filter bitmaps: the topic has expectConsumerNumUseFilter SQL92 filters; further groups are evaluated as their pulls read")
	}
	return true
}

// CalcFilterBitmap sets the bits of the topic's filters that match props
// (store.FilterBitmapCalculator). It takes no lock and allocates nothing.
func (m *consumerFilterManager) CalcFilterBitmap(topic string, props []byte, bm []byte) bool {
	snap := m.snap.Load()
	if snap == nil {
		return false
	}
	fs := snap.byTopic[topic]
	if len(fs) == 0 {
		return false
	}
	for _, d := range fs {
		if d.x.Match(props) {
			for _, b := range d.bits {
				bm[b>>3] |= 1 << (b & 7)
			}
		}
	}
	return true
}

// pullFilter returns the registered filter of group's subscription to topic
// when it is the SQL92 expression the pull filters by, else nil. Lock-free.
func (m *consumerFilterManager) pullFilter(group, topic, expr string) *filterData {
	snap := m.snap.Load()
	if snap == nil {
		return nil
	}
	for _, d := range snap.byTopic[topic] {
		if d.group == group && d.expr == expr {
			return d
		}
	}
	return nil
}

func (m *consumerFilterManager) newData(topic, group, expr string, subVersion, bornTime int64) (*filterData, error) {
	x, err := filter.Compile(expr)
	if err != nil {
		return nil, err
	}
	d := &filterData{sqlFilter: sqlFilter{x: x}, topic: topic, group: group, expr: expr, subVersion: subVersion,
		bornTime: bornTime, bits: m.bloom.BitPositions(group + "#" + topic)}
	d.from.Store(math.MaxInt64)
	return d, nil
}

// start loads consumerFilter.json, hands the registry to the store's
// dispatch and decides from for filters saved without it. A file that does
// not load (nor its .bak) is logged and the registry starts empty: it only
// makes pulls faster, and groups register again with their next
// heartbeat (from the commitlog end then, so no old unit is trusted).
func (m *consumerFilterManager) start(st filterStore) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = st
	// Only the main file's starts are trusted. Its .bak, which loads when
	// the main file is missing or damaged, is the version before the last
	// save: after a drop it still names the dropped filter with its old
	// start, though dispatch stopped computing its bits once the drop was
	// published. Filters loaded from it get their start decided again.
	mainLoads := m.mainFileLoads()
	f, found, err := loadMetadataFile(m.path, "consumer filters", m.log, func(b []byte) (consumerFilterFile, error) {
		var f consumerFilterFile
		err := json.Unmarshal(b, &f)
		return f, err
	})
	if err != nil {
		m.log.WithError(err).Error("consumer filters do not load; starting without them")
		f, found = consumerFilterFile{}, false
	}
	now := m.now().UnixMilli()
	if found && (f.BloomK != m.bloom.K || f.BloomM != m.bloom.M) {
		m.log.WithFields(logrus.Fields{"savedK": f.BloomK, "savedM": f.BloomM, "k": m.bloom.K, "m": m.bloom.M}).
			Info("bloom filter changed: the saved consumer filters are dropped, groups register again")
		f.Filters = nil
	}
	for _, r := range f.Filters {
		if r.ExpressionType != protocol.ExpressionSQL92 {
			continue
		}
		d, err := m.newData(r.Topic, r.ConsumerGroup, r.Expression, r.ClientVersion, r.BornTime)
		if err != nil {
			m.log.WithError(err).WithFields(logrus.Fields{"topic": r.Topic, "group": r.ConsumerGroup}).Warn("saved consumer filter does not compile; dropped")
			continue
		}
		// Until their groups heartbeat again, loaded filters count as gone
		// (RocketMQ does the same); their bitmaps are still computed.
		d.deadTime = r.DeadTime
		if d.deadTime == 0 {
			d.deadTime = now
		}
		if r.BitmapFrom >= 0 && mainLoads {
			d.from.Store(r.BitmapFrom)
			d.known.Store(true)
		}
		m.filters[filterRegKey{d.topic, d.group}] = d
	}
	m.publishLocked()
	st.SetFilterBitmapCalculator(m)
	var pending []*filterData
	for _, d := range m.filters {
		if !d.known.Load() {
			pending = append(pending, d)
		}
	}
	m.markKnownLocked(pending)
}

// mainFileLoads reports whether consumerFilter.json itself (not its .bak)
// parses.
func (m *consumerFilterManager) mainFileLoads() bool {
	b, err := os.ReadFile(m.path)
	if err != nil {
		return false
	}
	var f consumerFilterFile
	return json.Unmarshal(b, &f) == nil
}

// stop detaches the registry from dispatch and the store, and saves it.
func (m *consumerFilterManager) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st != nil {
		m.st.SetFilterBitmapCalculator(nil)
	}
	// Detached, register and clean do nothing: a heartbeat a worker still
	// handles after the server's shutdown deadline must not publish or save
	// a filter dispatch no longer computes, nor take its start from a
	// store that may be closed (its commitlog end then reads 0).
	m.st = nil
	if m.dirty {
		if err := m.saveLocked(); err != nil {
			m.log.WithError(err).Error("save consumer filters at shutdown")
		}
	}
}

// register records the SQL92 subscriptions of a group's heartbeat: new ones
// and changed expressions get a new filter, unchanged ones are kept alive,
// and the group's filters of topics it no longer subscribes count as gone.
func (m *consumerFilterManager) register(group string, subs []protocol.SubscriptionData) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return
	}
	now := m.now().UnixMilli()
	var added, replaced []*filterData
	subscribed := make(map[string]bool, len(subs))
	for _, sd := range subs {
		if sd.ExpressionType != protocol.ExpressionSQL92 || sd.SubString == "" {
			continue
		}
		subscribed[sd.Topic] = true
		k := filterRegKey{sd.Topic, group}
		old := m.filters[k]
		if old != nil && old.expr == sd.SubString {
			if old.deadTime != 0 {
				old.deadTime = 0
				m.dirty = true
			}
			continue
		}
		if old != nil && sd.SubVersion <= old.subVersion {
			// An older subscription (members of a group in the middle of a
			// change): RocketMQ keeps the newer one too, rather than
			// flipping with every heartbeat.
			continue
		}
		if old == nil && m.topicFull(sd.Topic, group, added) {
			continue
		}
		d, err := m.newData(sd.Topic, group, sd.SubString, sd.SubVersion, now)
		if err != nil {
			continue // its pulls are refused (SUBSCRIPTION_PARSE_FAILED)
		}
		if old != nil {
			replaced = append(replaced, old)
		}
		added = append(added, d)
	}
	for k, d := range m.filters {
		if k.group == group && !subscribed[k.topic] && d.deadTime == 0 {
			d.deadTime = now
			m.dirty = true
		}
	}
	if len(added) == 0 {
		return
	}
	// Withdraw the versions replaced from pulls, save, then publish.
	for _, d := range replaced {
		d.known.Store(false)
	}
	for _, d := range added {
		m.filters[filterRegKey{d.topic, d.group}] = d
	}
	if err := m.saveLocked(); err != nil {
		// Dispatch still computes the old versions: they may be trusted
		// again, and the new ones wait for the next heartbeat.
		for _, d := range added {
			delete(m.filters, filterRegKey{d.topic, d.group})
		}
		for _, d := range replaced {
			m.filters[filterRegKey{d.topic, d.group}] = d
			d.known.Store(true)
		}
		m.log.WithError(err).WithField("group", group).Error("cannot save consumer filters; their bitmaps wait")
		return
	}
	m.publishLocked()
	m.markKnownLocked(added)
	for _, d := range added {
		m.log.WithFields(logrus.Fields{"topic": d.topic, "group": d.group, "expression": d.expr, "from": d.from.Load()}).
			Info("consumer filter registered: bitmaps computed from here on")
	}
}

// markKnownLocked sets from for filters dispatch already computes (they
// are published) and saves the result. Lock should be held.
func (m *consumerFilterManager) markKnownLocked(ds []*filterData) {
	if len(ds) == 0 {
		return
	}
	from := m.st.CommitLogMaxOffset()
	for _, d := range ds {
		d.from.Store(from)
		d.known.Store(true)
	}
	if err := m.saveLocked(); err != nil {
		// The file keeps from unknown: a restart decides it again.
		m.dirty = true
		m.log.WithError(err).Warn("cannot save consumer filters")
	}
}

// clean marks the filters whose group no longer subscribes with them as
// gone and drops those gone longer than keepDead (RocketMQ's
// filterDataCleanTimeSpan). subscribed reports whether group is online and
// subscribes to topic with expression expr.
func (m *consumerFilterManager) clean(subscribed func(group, topic, expr string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return
	}
	now := m.now().UnixMilli()
	var drop []*filterData
	for _, d := range m.filters {
		alive := subscribed(d.group, d.topic, d.expr)
		switch {
		case alive && d.deadTime != 0:
			d.deadTime = 0
			m.dirty = true
		case !alive && d.deadTime == 0:
			d.deadTime = now
			m.dirty = true
		case !alive && now-d.deadTime >= m.keepDead.Milliseconds():
			drop = append(drop, d)
		}
	}
	if len(drop) > 0 {
		for _, d := range drop {
			d.known.Store(false)
			delete(m.filters, filterRegKey{d.topic, d.group})
		}
		if err := m.saveLocked(); err != nil {
			for _, d := range drop {
				m.filters[filterRegKey{d.topic, d.group}] = d
				d.known.Store(true)
			}
			m.log.WithError(err).Error("cannot save consumer filters; dropping waits")
			return
		}
		m.publishLocked()
		for _, d := range drop {
			m.log.WithFields(logrus.Fields{"topic": d.topic, "group": d.group}).Info("consumer filter dropped: its group is gone")
		}
		return
	}
	if m.dirty {
		if err := m.saveLocked(); err != nil {
			m.log.WithError(err).Warn("cannot save consumer filters")
		}
	}
}

// publishLocked hands dispatch a snapshot of the filters. Lock should be
// held.
func (m *consumerFilterManager) publishLocked() {
	s := &filterSnapshot{byTopic: make(map[string][]*filterData)}
	for _, d := range m.filters {
		s.byTopic[d.topic] = append(s.byTopic[d.topic], d)
	}
	m.snap.Store(s)
}

// saveLocked writes consumerFilter.json. Lock should be held.
func (m *consumerFilterManager) saveLocked() error {
	f := consumerFilterFile{BloomK: m.bloom.K, BloomM: m.bloom.M, Filters: make([]filterRecord, 0, len(m.filters))}
	for _, d := range m.filters {
		from := int64(-1)
		if d.known.Load() {
			from = d.from.Load()
		}
		f.Filters = append(f.Filters, filterRecord{Topic: d.topic, ConsumerGroup: d.group, ExpressionType: protocol.ExpressionSQL92,
			Expression: d.expr, ClientVersion: d.subVersion, BornTime: d.bornTime, DeadTime: d.deadTime, BitmapFrom: from})
	}
	sort.Slice(f.Filters, func(i, j int) bool {
		a, b := f.Filters[i], f.Filters[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.ConsumerGroup < b.ConsumerGroup)
	})
	if err := writeMetadataJSON(m.path, "consumer filters", f); err != nil {
		return err
	}
	m.dirty = false
	return nil
}
