package store

import (
	"strconv"
	"testing"

	"github.com/gorocketmq/gorocketmq/message"
)

// backlogSize and backlogBody shape the stored backlog the pull benchmarks
// drain: 1 KiB messages, one in ten tagged TagA (and region=eu), the rest
// TagB (region=us), each with the properties a producer and the broker
// write.
const (
	backlogSize = 20000
	backlogBody = 1024
)

// mustBacklog opens a store holding the backlog in topic "B", queue 0.
func mustBacklog(b *testing.B) *Store { return mustBacklogWith(b, nil) }

// mustBacklogWith is mustBacklog; a non-nil f is registered as a filter of
// topic "B" before the backlog is stored, with filter bitmaps on.
func mustBacklogWith(b *testing.B, f *bitmapFilter) *Store {
	b.Helper()
	cfg := testConfig(b.TempDir(), AsyncFlush)
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MappedFileSizeConsumeQ = 300000 * CQStoreUnitSize
	if f != nil {
		cfg.FilterBitmapBits, cfg.FilterBitmapHashes = 112, 3
	}
	s := MustOpen(b, cfg)
	if f != nil {
		s.SetFilterBitmapCalculator(&benchCalcN{topic: "B", fs: []*bitmapFilter{f}})
		f.from.Store(s.CommitLogMaxOffset())
	}
	for i := range backlogSize {
		tag, region := "TagB", "us"
		if i%10 == 0 {
			tag, region = "TagA", "eu"
		}
		m := newTestMessage("B", 0, body(i, backlogBody), tag, "order-"+strconv.Itoa(i))
		m.SetProperty(message.PropUniqKey, "7F0000010F6B18B4AAC27D8A5B8E"+strconv.Itoa(10000+i%10000))
		m.SetProperty(message.PropCluster, "DefaultCluster")
		m.SetProperty(message.PropWaitStoreMsgOK, "true")
		m.SetProperty("region", region)
		m.SetProperty("amount", strconv.Itoa(i%1000))
		mustPut(b, s, m)
	}
	waitDispatched(b, s)
	return s
}

// drainBacklog pulls the whole backlog, 32 messages at a time, as a
// consumer catching up does, and returns the messages found.
func drainBacklog(b *testing.B, s *Store, filter MessageFilter) int {
	found := 0
	for off := int64(0); off < backlogSize; {
		r, err := s.GetMessage("g", "B", 0, off, 32, 0, filter)
		if err != nil || r.NextBeginOffset <= off {
			b.Fatalf("pull at %d: %v %v next %d", off, err, r.Status, r.NextBeginOffset)
		}
		found += len(r.Messages)
		off = r.NextBeginOffset
		r.Release()
	}
	return found
}

// BenchmarkPullBacklog drains a stored backlog without a filter and with a
// tag filter matching one message in ten; msgs/s counts the messages
// returned. One op is one drain of the whole backlog.
func BenchmarkPullBacklog(b *testing.B) {
	s := mustBacklog(b)
	for _, bc := range []struct {
		name   string
		filter MessageFilter
		want   int
	}{
		{"unfiltered", nil, backlogSize},
		{"tag", NewTagFilter("TagA"), backlogSize / 10},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n := drainBacklog(b, s, bc.filter); n != bc.want {
					b.Fatalf("%d messages, want %d", n, bc.want)
				}
			}
			b.ReportMetric(float64(bc.want)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkPullBacklogSQL92Bitmap drains the backlog of BenchmarkPullBacklog
// with the SQL92 filter registered before it was stored (filter bitmaps
// on): only the matches are read from the commitlog.
func BenchmarkPullBacklogSQL92Bitmap(b *testing.B) {
	f := newBitmapFilter("region = 'eu'", 3, 40, 101)
	s := mustBacklogWith(b, f)
	b.ReportAllocs()
	for b.Loop() {
		if n := drainBacklog(b, s, f); n != backlogSize/10 {
			b.Fatalf("%d messages, want %d", n, backlogSize/10)
		}
	}
	b.ReportMetric(float64(backlogSize/10)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
