package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// countingBitmapFilter counts the records the store evaluates for a
// registered filter.
type countingBitmapFilter struct {
	*filterData
	evals atomic.Int64
}

func (f *countingBitmapFilter) MatchProperties(p []byte) bool {
	f.evals.Add(1)
	return f.filterData.MatchProperties(p)
}

func bitmapBrokerConfig(t *testing.T) *conf.BrokerConfig {
	cfg := testBrokerConfig(t)
	cfg.EnablePropertyFilter = true
	cfg.EnableCalcFilterBitMap = true
	return cfg
}

// fbSend stores n messages to F-0 through SEND_MESSAGE, region=eu for every
// tenth from first on; it returns how many were eu.
func fbSend(t *testing.T, b *Broker, first, n int) int {
	t.Helper()
	cl := baClient(t)
	eu := 0
	for i := first; i < first+n; i++ {
		region := "us"
		if i%10 == 0 {
			region, eu = "eu", eu+1
		}
		resp := baInvoke(t, cl, b.Addr(), sendReq("F", 0, []byte("m"+strconv.Itoa(i)), map[string]string{
			message.PropUniqKey: strconv.Itoa(i), "region": region,
		}))
		require.EqualValues(t, 0, resp.Code, resp.Remark)
	}
	require.Eventually(t, func() bool { return b.store.DispatchBehindBytes() == 0 }, 5*time.Second, time.Millisecond)
	return eu
}

// fbPull reads F-0 from the start through the store with f, returning the
// regions of what it got.
func fbPull(t *testing.T, b *Broker, f store.MessageFilter) []string {
	t.Helper()
	var regions []string
	for off, i := int64(0), 0; i < 1000; i++ {
		r, err := b.store.GetMessage("g", "F", 0, off, 32, 0, f)
		require.NoError(t, err)
		for _, rec := range r.Messages {
			m, _, err := message.DecodeRecord(rec.Bytes)
			require.NoError(t, err)
			regions = append(regions, m.Property("region"))
		}
		next, st := r.NextBeginOffset, r.Status
		r.Release()
		if st != store.Found && st != store.NoMatchedMessage {
			return regions
		}
		off = next
	}
	t.Fatal("pull did not finish")
	return nil
}

// A group's SQL92 heartbeat registers its filter: messages stored after it
// are decided by their bitmaps, those before are evaluated, and a restart
// keeps the registration (from consumerFilter.json) and the bitmaps.
func TestFilterBitmapBrokerRegisterPullRestart(t *testing.T) {
	cfg := bitmapBrokerConfig(t)
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	bcCreateTopic(t, b, "F", 1)
	before := fbSend(t, b, 0, 50)

	cl := baClient(t)
	bcHeartbeat(t, cl, b.Addr(), "client-1", "g", protocol.ConsumeFromFirstOffset, sqlSub("F", "region = 'eu'"))
	pf := b.consume.bitmaps.pullFilter("g", "F", "region = 'eu'")
	require.NotNil(t, pf)
	bits, from, ok := pf.FilterBitmap()
	require.True(t, ok)
	assert.Equal(t, b.store.CommitLogMaxOffset(), from, "units count from the commitlog end at registration")
	assert.Equal(t, filter.Bloom{K: 3, M: 112}.BitPositions("g#F"), bits)
	assert.Nil(t, b.consume.bitmaps.pullFilter("g", "F", "region = 'us'"), "another expression has no bitmap")
	assert.Nil(t, b.consume.bitmaps.pullFilter("h", "F", "region = 'eu'"))
	after := fbSend(t, b, 50, 150)

	cf := &countingBitmapFilter{filterData: pf}
	assert.Equal(t, slices.Repeat([]string{"eu"}, before+after), fbPull(t, b, cf))
	assert.EqualValues(t, 50+after, cf.evals.Load(), "the messages before registration and the matches after it")

	// The pull processor hands the store the registered filter.
	pr := &pullRequest{req: bcPullReq(bcPullHeader("g", "F", 0, 0, 0, 0))}
	pr.h = *bcPullHeader("g", "F", 0, 0, 0, 0)
	require.Nil(t, b.consume.checkPull(pr))
	assert.Same(t, pf, pr.filter)
	pr.h.SysFlag, pr.h.ExpressionType, pr.h.Subscription = protocol.PullFlagSubscription, protocol.ExpressionSQL92, "region = 'eu'"
	require.Nil(t, b.consume.checkPull(pr))
	assert.Same(t, pf, pr.filter, "a subscription sent with the pull uses it too when it is the same")

	mustShutdownBroker(t, b)
	raw, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", consumerFilterFileName))
	require.NoError(t, err)
	var saved consumerFilterFile
	require.NoError(t, json.Unmarshal(raw, &saved))
	require.Len(t, saved.Filters, 1)
	assert.Equal(t, filterRecord{Topic: "F", ConsumerGroup: "g", ExpressionType: protocol.ExpressionSQL92,
		Expression: "region = 'eu'", ClientVersion: saved.Filters[0].ClientVersion, BornTime: saved.Filters[0].BornTime,
		BitmapFrom: from}, saved.Filters[0])
	assert.Positive(t, saved.Filters[0].ClientVersion)

	b = MustStartBroker(t, cfg)
	pf = b.consume.bitmaps.pullFilter("g", "F", "region = 'eu'")
	require.NotNil(t, pf, "the registration survives a restart")
	_, from2, ok := pf.FilterBitmap()
	assert.True(t, ok)
	assert.Equal(t, from, from2)
	cf = &countingBitmapFilter{filterData: pf}
	assert.Equal(t, slices.Repeat([]string{"eu"}, before+after), fbPull(t, b, cf))
	assert.EqualValues(t, 50+after, cf.evals.Load(), "the bitmaps survive a restart")

	// An expression change: the old version is withdrawn, the new one
	// counts from the end at the change.
	bcHeartbeat(t, baClient(t), b.Addr(), "client-1", "g", protocol.ConsumeFromFirstOffset, sqlSub("F", "region = 'us'"))
	_, _, ok = pf.FilterBitmap()
	assert.False(t, ok, "the replaced version trusts no unit")
	us := b.consume.bitmaps.pullFilter("g", "F", "region = 'us'")
	require.NotNil(t, us)
	_, fromUS, ok := us.FilterBitmap()
	assert.True(t, ok)
	assert.Equal(t, b.store.CommitLogMaxOffset(), fromUS)
	fbSend(t, b, 200, 100)
	cf = &countingBitmapFilter{filterData: us}
	assert.Len(t, fbPull(t, b, cf), 270)
	assert.EqualValues(t, 200+90, cf.evals.Load())
	assert.Len(t, fbPull(t, b, pf), 30, "the old version still filters right, by evaluation")
}

// fakeFilterStore is the store as the registry sees it.
type fakeFilterStore struct {
	end  atomic.Int64
	calc atomic.Pointer[store.FilterBitmapCalculator]
}

// newFakeFilterStore is a fakeFilterStore whose commitlog ends at end.
func newFakeFilterStore(end int64) *fakeFilterStore {
	st := &fakeFilterStore{}
	st.end.Store(end)
	return st
}

func (s *fakeFilterStore) CommitLogMaxOffset() int64 { return s.end.Load() }
func (s *fakeFilterStore) SetFilterBitmapCalculator(c store.FilterBitmapCalculator) {
	if c == nil {
		s.calc.Store(nil)
		return
	}
	s.calc.Store(&c)
}

// newTestFilterManager is a registry saved at path, with the default bloom
// filter and cap (RocketMQ's), that drops a group gone for an hour; its
// clock stands at 1,000,000 ms until the test moves now.
func newTestFilterManager(t *testing.T, path string) (m *consumerFilterManager, now *atomic.Int64) {
	t.Helper()
	cfg := conf.DefaultBrokerConfig()
	bloom, err := cfg.FilterBloom()
	require.NoError(t, err)
	m = newConsumerFilterManager(path, bloom, cfg.ExpectConsumerNumUseFilter, time.Hour, baLogger())
	now = new(atomic.Int64)
	now.Store(1_000_000)
	m.now = func() time.Time { return time.UnixMilli(now.Load()) }
	return m, now
}

// Dispatch's view: bits of the matching filters, false for a topic
// without filters; groups that stop subscribing are marked gone, and
// dropped (withdrawn first) once gone for filterDataCleanTimeSpan.
func TestConsumerFilterManagerCalcAndClean(t *testing.T) {
	path := filepath.Join(t.TempDir(), consumerFilterFileName)
	m, now := newTestFilterManager(t, path)
	bloom := m.bloom
	st := newFakeFilterStore(4096)
	m.start(st)
	require.NotNil(t, st.calc.Load())

	m.register("g1", []protocol.SubscriptionData{sqlSub("T", "a = 1"), bcTagSub("U", "*")})
	m.register("g2", []protocol.SubscriptionData{sqlSub("T", "a = 2")})
	props := func(kv ...string) []byte {
		p := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return message.MarshalProperties(p)
	}
	bm := make([]byte, bloom.M/8)
	assert.False(t, m.CalcFilterBitmap("U", props("a", "1"), bm), "tag subscriptions register nothing")
	assert.True(t, m.CalcFilterBitmap("T", props("a", "1"), bm))
	has := func(bm []byte, bits []uint32) bool {
		for _, b := range bits {
			if bm[b>>3]&(1<<(b&7)) == 0 {
				return false
			}
		}
		return true
	}
	g1, g2 := bloom.BitPositions("g1#T"), bloom.BitPositions("g2#T")
	assert.True(t, has(bm, g1))
	clear(bm)
	assert.True(t, m.CalcFilterBitmap("T", props("a", "3"), bm))
	assert.False(t, has(bm, g1) || has(bm, g2), "no filter matches: no bits")
	p2 := props("a", "2")
	assert.Zero(t, testing.AllocsPerRun(100, func() { clear(bm); m.CalcFilterBitmap("T", p2, bm) }))
	assert.True(t, has(bm, g2))

	f1 := m.pullFilter("g1", "T", "a = 1")
	require.NotNil(t, f1)
	subscribed := map[string]bool{"g1": true, "g2": true}
	alive := func(group, _, _ string) bool { return subscribed[group] }
	m.clean(alive)
	_, _, ok := f1.FilterBitmap()
	assert.True(t, ok)
	subscribed["g1"] = false
	m.clean(alive)
	now.Add(time.Hour.Milliseconds() - 1)
	m.clean(alive)
	_, _, ok = f1.FilterBitmap()
	assert.True(t, ok, "a group gone for less than the span keeps its bitmaps")
	now.Add(1)
	m.clean(alive)
	_, _, ok = f1.FilterBitmap()
	assert.False(t, ok, "dropped: withdrawn from pulls")
	assert.Nil(t, m.pullFilter("g1", "T", "a = 1"))
	clear(bm)
	m.CalcFilterBitmap("T", props("a", "1"), bm)
	assert.Equal(t, make([]byte, len(bm)), bm, "dispatch forgot it")

	// Saved without g1; a manager loading it knows g2, counted gone until a
	// heartbeat, with its start kept.
	m.stop()
	assert.Nil(t, st.calc.Load())
	m2, _ := newTestFilterManager(t, path)
	st.end.Store(1 << 20)
	m2.start(st)
	f2 := m2.pullFilter("g2", "T", "a = 2")
	require.NotNil(t, f2)
	_, from, ok := f2.FilterBitmap()
	assert.True(t, ok)
	assert.Equal(t, int64(4096), from)
	assert.NotZero(t, m2.filters[filterRegKey{"T", "g2"}].deadTime)
	assert.Nil(t, m2.pullFilter("g1", "T", "a = 1"))
	older := sqlSub("T", "a = 9")
	older.SubVersion = 1
	m2.register("g2", []protocol.SubscriptionData{older})
	assert.NotNil(t, m2.pullFilter("g2", "T", "a = 2"), "an older subVersion does not replace the filter")
	assert.Nil(t, m2.pullFilter("g2", "T", "a = 9"))

	// Another bloom filter: the saved filters are dropped.
	other, err := filter.NewBloom(10, 32)
	require.NoError(t, err)
	m3 := newConsumerFilterManager(path, other, m.maxPerTopic, time.Hour, baLogger())
	m3.start(st)
	assert.Nil(t, m3.pullFilter("g2", "T", "a = 2"))
}

// A filter saved before its start was known (a crash between the two
// saves) gets its start at load, after dispatch has it.
func TestConsumerFilterManagerUnknownStartAtLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), consumerFilterFileName)
	m, _ := newTestFilterManager(t, path)
	raw, err := json.Marshal(consumerFilterFile{BloomK: m.bloom.K, BloomM: m.bloom.M, Filters: []filterRecord{{
		Topic: "T", ConsumerGroup: "g", ExpressionType: protocol.ExpressionSQL92, Expression: "a = 1", BitmapFrom: -1,
	}, {
		Topic: "T", ConsumerGroup: "bad", ExpressionType: protocol.ExpressionSQL92, Expression: "a = = 1", BitmapFrom: 0,
	}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	m.start(newFakeFilterStore(777))
	f := m.pullFilter("g", "T", "a = 1")
	require.NotNil(t, f)
	_, from, ok := f.FilterBitmap()
	assert.True(t, ok)
	assert.Equal(t, int64(777), from)
	assert.Len(t, m.filters, 1, "an expression that does not compile is dropped")
}

// A consumerFilter.json that does not load (nor its .bak) costs the
// registrations, not the broker's start.
func TestConsumerFilterManagerDamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), consumerFilterFileName)
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	m, _ := newTestFilterManager(t, path)
	st := &fakeFilterStore{}
	m.start(st)
	assert.NotNil(t, st.calc.Load())
	m.register("g", []protocol.SubscriptionData{sqlSub("T", "a = 1")})
	require.NotNil(t, m.pullFilter("g", "T", "a = 1"))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"consumerGroup": "g"`, "the registry is saved again")
}

// consumerFilter.json.bak is the version before the last save: after a
// drop it still names the dropped filter with its old start, though
// dispatch stopped computing its bits when the drop was published. A
// restart that falls back to it (the main file removed or damaged) must
// not trust the units written meanwhile: the filter's start is decided
// again at load.
func TestConsumerFilterManagerBackupStartNotTrusted(t *testing.T) {
	path := filepath.Join(t.TempDir(), consumerFilterFileName)
	m, now := newTestFilterManager(t, path)
	st := newFakeFilterStore(4096)
	m.start(st)
	m.register("g", []protocol.SubscriptionData{sqlSub("T", "a = 1")})
	gone := func(string, string, string) bool { return false }
	m.clean(gone)
	now.Add(time.Hour.Milliseconds())
	m.clean(gone) // dropped: saved without g, then dispatch forgets it
	require.Nil(t, m.pullFilter("g", "T", "a = 1"))
	raw, err := os.ReadFile(path + ".bak")
	require.NoError(t, err)
	require.Contains(t, string(raw), `"consumerGroup": "g"`, "the backup still has the dropped filter")
	m.stop()

	// Messages up to 8192 were dispatched without g's bits. The main file
	// is lost; the backup loads.
	st.end.Store(8192)
	require.NoError(t, os.Remove(path))
	m2, _ := newTestFilterManager(t, path)
	m2.start(st)
	f := m2.pullFilter("g", "T", "a = 1")
	if f != nil {
		_, from, ok := f.FilterBitmap()
		assert.False(t, ok && from < 8192, "units written after the drop (from %d) must not be trusted", from)
	}

	// The same with a damaged main file.
	require.NoError(t, os.WriteFile(path, []byte("{damaged"), 0o644))
	require.NoError(t, os.WriteFile(path+".bak", raw, 0o644))
	m3, _ := newTestFilterManager(t, path)
	m3.start(st)
	if f := m3.pullFilter("g", "T", "a = 1"); f != nil {
		_, from, ok := f.FilterBitmap()
		assert.False(t, ok && from < 8192, "units written after the drop (from %d) must not be trusted", from)
	}
}

// A heartbeat a worker still handles after the registry stopped (the
// server's shutdown deadline passed) registers nothing: dispatch no longer
// computes bitmaps, and the store may be closed already, its commitlog
// end reading 0. A start saved then would have a restart trust every unit
// written before the filter existed.
func TestConsumerFilterManagerRegisterAfterStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), consumerFilterFileName)
	m, _ := newTestFilterManager(t, path)
	st := newFakeFilterStore(4096)
	m.start(st)
	m.register("g", []protocol.SubscriptionData{sqlSub("T", "a = 1")})
	m.stop()
	st.end.Store(0) // the store is closed

	m.register("h", []protocol.SubscriptionData{sqlSub("T", "b = 1")})
	m.register("g", []protocol.SubscriptionData{sqlSub("T", "a = 2")})
	m.clean(func(string, string, string) bool { return false })

	st.end.Store(8192) // the next run
	m2, _ := newTestFilterManager(t, path)
	m2.start(st)
	for _, c := range []struct{ group, expr string }{{"h", "b = 1"}, {"g", "a = 2"}} {
		if f := m2.pullFilter(c.group, "T", c.expr); f != nil {
			_, from, ok := f.FilterBitmap()
			assert.False(t, ok && from < 8192, "%s registered after stop must not trust units from %d", c.group, from)
		}
	}
	f := m2.pullFilter("g", "T", "a = 1")
	require.NotNil(t, f, "what was registered before the stop is kept")
	_, from, ok := f.FilterBitmap()
	assert.True(t, ok)
	assert.Equal(t, int64(4096), from)
}

// A topic takes at most expectConsumerNumUseFilter filters: heartbeats can
// name any group, and dispatch evaluates every filter of a topic on each of
// its messages. An expression change of a registered group still replaces
// its filter.
func TestConsumerFilterManagerCapsFiltersPerTopic(t *testing.T) {
	bloom, err := filter.NewBloom(20, 4)
	require.NoError(t, err)
	m := newConsumerFilterManager(filepath.Join(t.TempDir(), consumerFilterFileName), bloom, 4, time.Hour, baLogger())
	st := &fakeFilterStore{}
	m.start(st)
	defer m.stop()
	count := func(topic string) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for k := range m.filters {
			if k.topic == topic {
				n++
			}
		}
		return n
	}
	for i := range 10 {
		m.register(fmt.Sprintf("g%d", i), []protocol.SubscriptionData{sqlSub("T", fmt.Sprintf("a = %d", i)), sqlSub("U", "a = 1")})
	}
	assert.Equal(t, 4, count("T"))
	assert.Equal(t, 4, count("U"))
	m.mu.Lock()
	_, late := m.filters[filterRegKey{"T", "g9"}]
	m.mu.Unlock()
	assert.False(t, late, "a group past the cap is not registered")

	m.register("g0", []protocol.SubscriptionData{sqlSub("T", "a = 100")})
	m.mu.Lock()
	assert.Equal(t, "a = 100", m.filters[filterRegKey{"T", "g0"}].expr, "a registered group's change is taken")
	m.mu.Unlock()
	assert.Equal(t, 4, count("T"))
}
