package store

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/message"
)

// sqlFilter is the broker's SQL92 filter in small: it passes every
// consume-queue entry and decides on the record's properties.
type sqlFilter struct{ x *filter.Expression }

func (f sqlFilter) IsMatchedByConsumeQueue(int64) bool { return true }

func (f sqlFilter) IsMatchedByCommitLog(rec []byte) bool {
	p, ok := message.RecordProperties(rec)
	return ok && f.x.Match(p)
}

func (f sqlFilter) MatchProperties(p []byte) bool { return f.x.Match(p) }

// recordFilter is sqlFilter without MatchProperties: GetMessage takes its
// general path, one held record per entry.
type recordFilter struct{ f sqlFilter }

func (f recordFilter) IsMatchedByConsumeQueue(c int64) bool { return f.f.IsMatchedByConsumeQueue(c) }
func (f recordFilter) IsMatchedByCommitLog(rec []byte) bool { return f.f.IsMatchedByCommitLog(rec) }

// TestStorePropertyFilter checks the property-filter path against the
// general one across commitlog and consume-queue file boundaries: same
// messages, same statuses and next offsets, and no hold left behind.
func TestStorePropertyFilter(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			s := MustOpen(t, testConfig(t.TempDir(), ft))
			const n = 1500 // 1 KiB each: two commitlog files, eight consume-queue files
			for i := range n {
				m := newTestMessage("T", 0, body(i, 1024), "TagA", "")
				m.SetProperty("n", strconv.Itoa(i))
				if i%7 == 0 {
					m.SetProperty("vip", "yes")
				}
				mustPut(t, s, m)
			}
			waitDispatched(t, s)
			for _, expr := range []string{"vip = 'yes'", "n > 1400", "n BETWEEN 990 AND 1010", "vip IS NULL AND n < 20", "FALSE"} {
				sf := sqlFilter{filter.MustCompile(expr)}
				got := pullAll(t, s, "T", 0, sf)
				want := pullAll(t, s, "T", 0, recordFilter{sf})
				require.Equal(t, len(want), len(got), expr)
				for i := range got {
					assert.Equal(t, want[i].QueueOffset, got[i].QueueOffset, expr)
					assert.Equal(t, want[i].Body, got[i].Body, expr)
					assert.True(t, sf.x.MatchMap(got[i].Properties), expr)
				}
				for off := int64(0); off < n; off += 97 {
					a, err := s.GetMessage("g", "T", 0, off, 32, 0, sf)
					require.NoError(t, err)
					b, err := s.GetMessage("g", "T", 0, off, 32, 0, recordFilter{sf})
					require.NoError(t, err)
					assert.Equal(t, b.Status, a.Status, "%s at %d", expr, off)
					assert.Equal(t, b.NextBeginOffset, a.NextBeginOffset, "%s at %d", expr, off)
					assert.Equal(t, b.MessageCount(), a.MessageCount(), "%s at %d", expr, off)
					a.Release()
					b.Release()
				}
			}
			// Every hold was released: each file is back to its owner's
			// one reference.
			for _, mf := range s.CommitLog().Files().Files() {
				assert.EqualValues(t, 1, mf.refs.Load(), mf.path)
			}
		})
	}
}

// TestStorePropertyFilterDeletedFile: a pull whose records are gone
// (retention deleted the file) reports them as removing, as without a
// filter.
func TestStorePropertyFilterDeletedFile(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	for i := range 1500 {
		mustPut(t, s, newTestMessage("T", 0, body(i, 1024), "TagA", ""))
	}
	waitDispatched(t, s)
	first := s.CommitLog().Files().FirstMappedFile()
	first.available.Store(false) // what deletion does first
	sf := sqlFilter{filter.MustCompile("TAGS = 'TagA'")}
	r, err := s.GetMessage("g", "T", 0, 0, 32, 0, sf)
	require.NoError(t, err)
	w, err := s.GetMessage("g", "T", 0, 0, 32, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, w.Status, r.Status)
	assert.Equal(t, MessageWasRemoving, r.Status)
	r.Release()
	w.Release()
	first.available.Store(true)
}

// BenchmarkPullBacklogSQL92VsTag drains the same stored backlog with a tag
// filter and with the SQL92 expression selecting the same one message in
// ten, alternating within each op, and reports both rates and their ratio.
// This is the store's share of a pull only: the consumption rate a client
// sees (BenchmarkConsumeBacklogSQL92VsTag in broker) adds the transfer and
// decoding of the messages returned, which both filters pay alike.
func BenchmarkPullBacklogSQL92VsTag(b *testing.B) {
	s := mustBacklog(b)
	tag := NewTagFilter("TagA")
	sql := sqlFilter{filter.MustCompile("region = 'eu'")}
	want := backlogSize / 10
	var tagTime, sqlTime float64
	b.ReportAllocs()
	for b.Loop() {
		start := b.Elapsed()
		if n := drainBacklog(b, s, tag); n != want {
			b.Fatalf("tag: %d messages, want %d", n, want)
		}
		mid := b.Elapsed()
		if n := drainBacklog(b, s, sql); n != want {
			b.Fatalf("sql92: %d messages, want %d", n, want)
		}
		tagTime += (mid - start).Seconds()
		sqlTime += (b.Elapsed() - mid).Seconds()
	}
	tagRate, sqlRate := float64(want*b.N)/tagTime, float64(want*b.N)/sqlTime
	b.ReportMetric(tagRate, "tag-msgs/s")
	b.ReportMetric(sqlRate, "sql92-msgs/s")
	b.ReportMetric(sqlRate/tagRate, "sql92/tag")
}

// BenchmarkPullBacklogSQL92 drains the backlog with SQL92 expressions of
// several shapes (one message in ten matching).
func BenchmarkPullBacklogSQL92(b *testing.B) {
	s := mustBacklog(b)
	for _, expr := range []string{"region = 'eu'", "TAGS IN ('TagA', 'TagC')", "region = 'eu' AND amount >= 0", "vip IS NOT NULL OR region = 'eu'"} {
		x := filter.MustCompile(expr)
		want := backlogSize / 10
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n := drainBacklog(b, s, sqlFilter{x}); n != want {
					b.Fatalf("%d messages, want %d", n, want)
				}
			}
			b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
