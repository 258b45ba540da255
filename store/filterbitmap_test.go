package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/internal/testfs"
	"github.com/gorocketmq/gorocketmq/message"
)

// bitmapFilter is the broker's registered SQL92 filter in small: its bits,
// the commitlog range in which units are authoritative for it, and a count
// of the records it was asked to evaluate.
type bitmapFilter struct {
	sqlFilter
	bits    []uint32
	from    atomic.Int64
	retired atomic.Bool
	evals   atomic.Int64
}

func newBitmapFilter(expr string, bits ...uint32) *bitmapFilter {
	return &bitmapFilter{sqlFilter: sqlFilter{filter.MustCompile(expr)}, bits: bits}
}

func (f *bitmapFilter) MatchProperties(p []byte) bool {
	f.evals.Add(1)
	return f.x.Match(p)
}

func (f *bitmapFilter) FilterBitmap() ([]uint32, int64, bool) {
	return f.bits, f.from.Load(), !f.retired.Load()
}

// testCalc is a FilterBitmapCalculator over a fixed set of filters per
// topic (the broker's registry in small).
type testCalc struct {
	mu      sync.Mutex
	filters map[string][]*bitmapFilter
}

func (c *testCalc) CalcFilterBitmap(topic string, props []byte, bm []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return setMatchedBits(c.filters[topic], props, bm)
}

// setMatchedBits sets in bm the bits of the filters of fs that match
// props; false when fs is empty (a topic without filters).
func setMatchedBits(fs []*bitmapFilter, props, bm []byte) bool {
	if len(fs) == 0 {
		return false
	}
	for _, f := range fs {
		if f.x.Match(props) {
			for _, b := range f.bits {
				bm[b>>3] |= 1 << (b & 7)
			}
		}
	}
	return true
}

func (c *testCalc) add(topic string, f *bitmapFilter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.filters == nil {
		c.filters = map[string][]*bitmapFilter{}
	}
	c.filters[topic] = append(c.filters[topic], f)
}

// register adds f as the broker does: the calculator knows it first, then
// its units count from the commitlog end read after that.
func (c *testCalc) register(s *Store, topic string, f *bitmapFilter) {
	f.from.Store(math.MaxInt64)
	c.add(topic, f)
	f.from.Store(s.CommitLogMaxOffset())
}

// registerEU installs a calculator on s and registers with it the filter
// most tests pull with: region = 'eu' on topic T, bits 3, 40 and 101.
func registerEU(s *Store) *bitmapFilter {
	calc := &testCalc{}
	s.SetFilterBitmapCalculator(calc)
	f := newBitmapFilter("region = 'eu'", 3, 40, 101)
	calc.register(s, "T", f)
	return f
}

func bitmapConfig(dir string) *Config {
	cfg := testConfig(dir, AsyncFlush)
	cfg.FilterBitmapBits, cfg.FilterBitmapHashes = 112, 3
	return cfg
}

// putRegions puts n 256-byte messages to T-0, region=eu for every tenth
// from first on, us otherwise; it returns the queue offsets of the eu ones.
func putRegions(t testing.TB, s *Store, first, n int) []int64 {
	t.Helper()
	var eu []int64
	for i := first; i < first+n; i++ {
		m := newTestMessage("T", 0, body(i, 256), "TagA", "")
		region := "us"
		if i%10 == 0 {
			region = "eu"
		}
		m.SetProperty("region", region)
		m.SetProperty("n", strconv.Itoa(i))
		r := mustPut(t, s, m)
		if region == "eu" {
			eu = append(eu, r.QueueOffset)
		}
	}
	waitDispatched(t, s)
	return eu
}

// mustStoreRegionsAndShutdown puts n messages (putRegions) into a store
// at dir with filter bitmaps on and the registerEU filter, then shuts the
// store down for the test to reopen; it returns the filter and the queue
// offsets of the eu messages.
func mustStoreRegionsAndShutdown(t *testing.T, dir string, n int) (*bitmapFilter, []int64) {
	t.Helper()
	s, err := Open(bitmapConfig(dir), nil)
	require.NoError(t, err)
	f := registerEU(s)
	eu := putRegions(t, s, 0, n)
	require.NoError(t, s.Shutdown(context.Background()))
	return f, eu
}

func queueOffsets(t testing.TB, s *Store, f MessageFilter) []int64 {
	t.Helper()
	var out []int64
	for _, m := range pullAll(t, s, "T", 0, f) {
		out = append(out, m.QueueOffset)
	}
	return out
}

// A filter registered before the messages: the pull returns exactly the
// matches and evaluates no other record (its bits are set only by matches),
// and the consume-queue files are byte for byte those of a store without
// bitmaps.
func TestFilterBitmapSkipsNonMatching(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, bitmapConfig(dir))
	f := registerEU(s)
	eu := putRegions(t, s, 0, 1000)

	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, len(eu), f.evals.Load(), "only the matches are read")
	files, err := os.ReadDir(filepath.Join(dir, filterUnitDirName, "T", "0"))
	require.NoError(t, err)
	assert.Len(t, files, 5, "one sidecar file per consume-queue file (200 entries each)")

	// The same messages in a store without bitmaps: same consume queue.
	plain := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	putRegions(t, plain, 0, 1000)
	a, b := s.consumeQueue("T", 0).Files().Files(), plain.consumeQueue("T", 0).Files().Files()
	require.Equal(t, len(b), len(a))
	for i := range a {
		assert.True(t, bytes.Equal(a[i].Buffer(), b[i].Buffer()), "consume-queue file %d differs", i)
	}
	_, err = os.Stat(filepath.Join(plain.cfg.StorePathRootDir, filterUnitDirName))
	assert.True(t, os.IsNotExist(err), "no sidecar without filter bitmaps")
}

// Messages stored before the filter registered have units without its
// bits: they are evaluated, never skipped. The negative control shows the
// units would have hidden them.
func TestFilterBitmapMessagesBeforeRegistration(t *testing.T) {
	s := MustOpen(t, bitmapConfig(t.TempDir()))
	calc := &testCalc{}
	s.SetFilterBitmapCalculator(calc)
	other := newBitmapFilter("n < 0", 7, 8, 9) // another group: units get written
	calc.register(s, "T", other)
	eu := putRegions(t, s, 0, 500)
	f := newBitmapFilter("region = 'eu'", 3, 40, 101)
	calc.register(s, "T", f)
	eu = append(eu, putRegions(t, s, 500, 500)...)

	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.Less(t, f.evals.Load(), int64(600), "the second half is decided by units")

	liar := newBitmapFilter("region = 'eu'", 3, 40, 101) // claims units from offset 0
	assert.Len(t, queueOffsets(t, s, liar), 50, "units without the bits do hide messages")
}

// Units of other groups' filters that share bits (bloom false positives)
// make the pull evaluate, and the evaluation decides.
func TestFilterBitmapFalsePositiveEvaluated(t *testing.T) {
	s := MustOpen(t, bitmapConfig(t.TempDir()))
	calc := &testCalc{}
	s.SetFilterBitmapCalculator(calc)
	f := newBitmapFilter("region = 'eu'", 3, 40, 101)
	twin := newBitmapFilter("n >= 300 AND n < 400", 3, 40, 101, 5)
	calc.register(s, "T", f)
	calc.register(s, "T", twin)
	eu := putRegions(t, s, 0, 1000)
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, 100+90, f.evals.Load(), "matches and twin's matches are evaluated")
}

// An expression change registers a new filter with the same bits (bits
// come from group and topic) and a new start: the old version's units are
// not trusted for it, and the old version, withdrawn before the calculator
// forgets it, trusts no unit any more.
func TestFilterBitmapExpressionChange(t *testing.T) {
	s := MustOpen(t, bitmapConfig(t.TempDir()))
	calc := &testCalc{}
	s.SetFilterBitmapCalculator(calc)
	v1 := newBitmapFilter("region = 'us'", 3, 40, 101)
	calc.register(s, "T", v1)
	putRegions(t, s, 0, 400)
	v2 := newBitmapFilter("region = 'eu'", 3, 40, 101)
	// Replace: v1 is withdrawn, then v2 takes its place.
	v1.retired.Store(true)
	calc.mu.Lock()
	calc.filters["T"] = nil
	calc.mu.Unlock()
	calc.register(s, "T", v2)
	putRegions(t, s, 400, 600)

	var wantEU, wantUS []int64
	for i := range int64(1000) {
		if i%10 == 0 {
			wantEU = append(wantEU, i)
		} else {
			wantUS = append(wantUS, i)
		}
	}
	assert.Equal(t, wantEU, queueOffsets(t, s, v2))
	assert.Equal(t, wantUS, queueOffsets(t, s, v1))
}

// Units that are zero, torn, of another message or otherwise damaged
// never make a pull skip a match: random damage to random units, the pull
// still returns exactly the matches.
func TestFilterBitmapDamagedUnitsNeverLoseMatches(t *testing.T) {
	s := MustOpen(t, bitmapConfig(t.TempDir()))
	f := registerEU(s)
	eu := putRegions(t, s, 0, 1000)
	u := s.consumeQueue("T", 0).units
	stride := u.l.stride
	unit := func(idx int) []byte {
		mf := u.q.FindMappedFileByOffset(int64(idx*stride), false)
		require.NotNil(t, mf)
		pos := idx*stride - int(mf.FileFromOffset())
		return mf.Buffer()[pos : pos+stride]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		for range 50 {
			idx := int(eu[rng.IntN(len(eu))]) // damage the units of matches
			b := unit(idx)
			switch rng.IntN(6) {
			case 0: // zero
				clear(b)
			case 1: // bitmap cleared, header kept (a torn write)
				clear(b[filterUnitHeader:])
			case 2: // the unit of another message
				copy(b, unit(idx+1+rng.IntN(5)))
			case 3: // random bytes
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
			case 4: // one bit flipped anywhere
				b[rng.IntN(u.l.checkAt()+4)] ^= 1 << rng.IntN(8)
			case 5: // the offset of another message, checksum recomputed
				copy(b[:8], unit(idx + 1)[:8])
				clear(b[filterUnitHeader:])
				binary.BigEndian.PutUint32(b[u.l.checkAt():], u.l.check(b))
			}
		}
		require.Equal(t, eu, queueOffsets(t, s, f), "round %d", round)
	}
}

// A reopened store keeps its units; a store reopened with bitmaps off
// deletes them, and one reopened with other bloom parameters does not
// trust them.
func TestFilterBitmapRestart(t *testing.T) {
	dir := t.TempDir()
	f, eu := mustStoreRegionsAndShutdown(t, dir, 1000)

	s, err := Open(bitmapConfig(dir), nil)
	require.NoError(t, err)
	f.evals.Store(0)
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, len(eu), f.evals.Load(), "units survive a restart")
	require.NoError(t, s.Shutdown(context.Background()))

	cfg := bitmapConfig(dir)
	cfg.FilterBitmapHashes = 4 // another bloom filter: units are not trusted
	s, err = Open(cfg, nil)
	require.NoError(t, err)
	f.evals.Store(0)
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, 1000, f.evals.Load())
	require.NoError(t, s.Shutdown(context.Background()))

	s = MustOpen(t, testConfig(dir, AsyncFlush))
	_, err = os.Stat(filepath.Join(dir, filterUnitDirName))
	assert.True(t, os.IsNotExist(err), "bitmaps off: the sidecar is deleted")
	assert.Equal(t, eu, queueOffsets(t, s, f))
}

// Retention deletes sidecar files with their consume-queue files, a cut
// queue zeroes its units beyond the cut, and a deleted topic takes its
// sidecar along.
func TestFilterBitmapFilesFollowTheQueue(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, bitmapConfig(dir))
	registerEU(s)
	putRegions(t, s, 0, 1000)
	cq := s.consumeQueue("T", 0)
	unitDir := filepath.Join(dir, filterUnitDirName, "T", "0")
	names := func() []string {
		es, err := os.ReadDir(unitDir)
		require.NoError(t, err)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	require.Len(t, names(), 5)

	// Retention: the consume-queue files of entries 0-399 go.
	e, ok := cq.Entry(450)
	require.True(t, ok)
	assert.Equal(t, 2, cq.DeleteExpired(e.CommitLogOffset, time.Second))
	assert.Equal(t, []string{fileName(400 * 32), fileName(600 * 32), fileName(800 * 32)}, names())
	assert.Equal(t, int64(400), cq.units.q.MinOffset()/32)

	// A cut: units from entry 900 on are zeroed.
	e, ok = cq.Entry(900)
	require.True(t, ok)
	require.NoError(t, cq.TruncateDirty(e.CommitLogOffset))
	require.Equal(t, int64(900), cq.MaxOffsetInQueue())
	mf := cq.units.q.LastMappedFile()
	tail := mf.Buffer()[(900-800)*32:]
	assert.True(t, isZero(tail), "units beyond the cut are zeroed")
	assert.False(t, isZero(mf.Buffer()[:(900-800)*32]), "units before it stay")

	require.NoError(t, s.DeleteTopic("T"))
	_, err := os.Stat(filepath.Join(dir, filterUnitDirName, "T"))
	assert.True(t, os.IsNotExist(err), "the topic's sidecar is deleted")
}

// A unit that cannot be written (here its directory cannot be made; a
// full disk fails the same way) does not hold dispatch up, and its
// messages are evaluated.
func TestFilterBitmapUnwritableUnitsDoNotBlockDispatch(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, bitmapConfig(dir))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, filterUnitDirName), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, filterUnitDirName, "T"), []byte("in the way"), 0o644))
	f := registerEU(s)
	eu := putRegions(t, s, 0, 300)
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, 300, f.evals.Load(), "no unit: every record is evaluated")
	assert.Positive(t, s.reput.unitErrs.Load())
}

// Dispatch with filter bitmaps off, or on without filters for the topic,
// writes no sidecar.
func TestFilterBitmapNoFiltersNoSidecar(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, bitmapConfig(dir))
	s.SetFilterBitmapCalculator(&testCalc{})
	putRegions(t, s, 0, 50)
	_, err := os.Stat(filepath.Join(dir, filterUnitDirName, "T"))
	assert.True(t, os.IsNotExist(err))
}

// Units of a queue whose consume-queue directory was removed by hand are
// deleted at open: the queue created again must not meet them.
func TestFilterBitmapOrphanUnitsRemoved(t *testing.T) {
	dir := t.TempDir()
	mustStoreRegionsAndShutdown(t, dir, 50)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, consumeQueueDirName, "T")))

	MustOpen(t, bitmapConfig(dir))
	_, err := os.Stat(filepath.Join(dir, filterUnitDirName, "T"))
	assert.True(t, os.IsNotExist(err), "orphan units are deleted")
}

// On a full disk a unit whose blocks cannot be reserved is left out: the
// sidecar reserves before it writes (no SIGBUS), dispatch is not held up
// (the consume queue had its blocks already) and the pull still returns
// exactly the matches, evaluating the messages without units.
func TestFilterBitmapDiskFullLeavesUnitsOut(t *testing.T) {
	root := testfs.MustMountTmpfs(t, 12<<20)
	cfg := bitmapConfig(filepath.Join(root, "store"))
	cfg.MappedFileSizeConsumeQ = 10000 * CQStoreUnitSize // fully reserved at creation
	cfg.MessageIndexEnable = false                       // index files would wait for space
	s := MustOpen(t, cfg, lowUsage())
	f := registerEU(s)
	eu := putRegions(t, s, 0, 100) // the sidecar reserved its first 64 KiB: 2048 units
	ballast := testfs.Fill(t, root, 0)
	eu = append(eu, putRegions(t, s, 100, 2400)...) // beyond unit 2048: no room
	assert.False(t, s.DiskFull(), "a unit left out does not refuse writes")
	assert.Positive(t, s.reput.unitErrs.Load())

	f.evals.Store(0)
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, 2048/10+1+(2500-2048), f.evals.Load(), "units up to 2048, every message after")
	require.NoError(t, os.Remove(ballast))
}

// BenchmarkStorePutAndDispatchFilterBitmap is BenchmarkStorePutAndDispatch
// with filter bitmaps on and two SQL92 filters registered for the topic:
// what dispatch pays for each message's unit (evaluation and write).
func BenchmarkStorePutAndDispatchFilterBitmap(b *testing.B) {
	benchStorePutAndDispatch(b, bitmapConfig(b.TempDir()), func(s *Store, m *message.MessageExt) {
		s.SetFilterBitmapCalculator(&benchCalcN{topic: "T", fs: []*bitmapFilter{
			newBitmapFilter("region = 'eu'", 3, 40, 101), newBitmapFilter("n > 100", 7, 50, 90)}})
		m.SetProperty("region", "eu")
		m.SetProperty("n", "7")
	})
}

// benchCalcN is testCalc without its lock, as the broker's (a snapshot),
// for the filters fs of one topic.
type benchCalcN struct {
	topic string
	fs    []*bitmapFilter
}

func (c *benchCalcN) CalcFilterBitmap(topic string, props []byte, bm []byte) bool {
	if topic != c.topic {
		return false
	}
	return setMatchedBits(c.fs, props, bm)
}

// A unit is never rewritten once its entry is published (a record
// dispatched again keeps its unit): what a pull read cannot change under
// it, computed by a later calculator.
func TestFilterBitmapPublishedUnitNotRewritten(t *testing.T) {
	s := MustOpen(t, bitmapConfig(t.TempDir()))
	registerEU(s)
	putRegions(t, s, 0, 20)
	cq := s.consumeQueue("T", 0)
	mf := cq.units.q.FirstMappedFile()
	before := bytes.Clone(mf.Buffer()[:20*32])
	e, ok := cq.Entry(5)
	require.True(t, ok)
	// Entry 5 (region us) has a unit without bits: a rewrite with every
	// bit set, as a calculator that now matches it would write, would show.
	require.NoError(t, cq.putUnit(5, e.CommitLogOffset, e.Size, bytes.Repeat([]byte{0xff}, 14)))
	assert.Equal(t, before, mf.Buffer()[:20*32])
	// The next entry's unit is written.
	require.NoError(t, cq.putUnit(20, 12345, 99, make([]byte, 14)))
	assert.NotEqual(t, make([]byte, 32), mf.Buffer()[20*32:21*32])
}

// Units beyond a consume queue's recovered end are zeroed at open: the
// entries rebuilt there by dispatch (before the broker hands its
// calculator back) have none, and their messages are evaluated.
func TestFilterBitmapRecoveryCutsUnits(t *testing.T) {
	dir := t.TempDir()
	f, eu := mustStoreRegionsAndShutdown(t, dir, 300)

	// Entries 250-299 lost (the second consume-queue file holds 200-399).
	cqFile := filepath.Join(dir, consumeQueueDirName, "T", "0", fileName(200*CQStoreUnitSize))
	b, err := os.ReadFile(cqFile)
	require.NoError(t, err)
	clear(b[50*CQStoreUnitSize:])
	require.NoError(t, os.WriteFile(cqFile, b, 0o644))

	s := MustOpen(t, bitmapConfig(dir))
	cq := s.consumeQueue("T", 0)
	require.Equal(t, int64(300), cq.MaxOffsetInQueue(), "dispatch rebuilt the entries")
	mf := cq.units.q.FindMappedFileByOffset(250*32, false)
	require.NotNil(t, mf)
	assert.True(t, isZero(mf.Buffer()[50*32:100*32]), "their units were cut")
	assert.False(t, isZero(mf.Buffer()[:50*32]))
	assert.Equal(t, eu, queueOffsets(t, s, f))
	assert.EqualValues(t, 25+50, f.evals.Load())
}

// A slave's store computes filter units for what it replicates: replica
// bytes go through the same dispatch.
func TestFilterBitmapSlaveComputesUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	scfg := bitmapConfig(t.TempDir())
	scfg.Slave = true
	slave := MustOpen(t, scfg)
	f := registerEU(slave)
	eu := putRegions(t, master, 0, 500)
	replicate(t, master, slave, 0, rng)
	waitDispatched(t, slave)
	assert.Equal(t, eu, queueOffsets(t, slave, f))
	assert.EqualValues(t, len(eu), f.evals.Load(), "only the matches are read on the slave")
}
