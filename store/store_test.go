package store

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var flushTypes = []FlushDiskType{AsyncFlush, SyncFlush}

// testConfig returns a small store: 1 MiB commitlog files (boundaries are
// crossed after ~1000 1 KiB messages), 200-entry consume-queue files and a
// tiny index, with fast flushes and a clean loop driven by the test.
func testConfig(dir string, flush FlushDiskType) *Config {
	cfg := DefaultConfig(dir)
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MappedFileSizeConsumeQ = 200 * CQStoreUnitSize
	cfg.FlushDiskType = flush
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.FlushIntervalConsumeQ = 20 * time.Millisecond
	cfg.MaxHashSlotNum = 512
	cfg.MaxIndexNum = 2048
	cfg.CleanResourceInterval = time.Hour
	cfg.DeleteFilesInterval = 0
	cfg.DestroyMappedFileForce = time.Second
	return cfg
}

// MustOpen opens a store and shuts it down at the end of the test.
func MustOpen(t testing.TB, cfg *Config, opts ...Option) *Store {
	t.Helper()
	s, err := Open(cfg, nil, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

var testBornHost = netip.MustParseAddrPort("10.0.0.7:50000")

func newTestMessage(topic string, queueID int32, body []byte, tags, keys string) *message.MessageExt {
	m := &message.MessageExt{QueueID: queueID, BornHost: testBornHost, BornTimestamp: time.Now().UnixMilli()}
	m.Topic = topic
	m.Body = body
	if tags != "" {
		m.SetProperty(message.PropTags, tags)
	}
	if keys != "" {
		m.SetProperty(message.PropKeys, keys)
	}
	return m
}

func mustPut(t testing.TB, s *Store, m *message.MessageExt) PutResult {
	t.Helper()
	r := s.PutMessage(context.Background(), m)
	require.Equal(t, PutOK, r.Status, "%v", r.Err)
	return r
}

// waitDispatched waits until every put is in the consume queues.
func waitDispatched(t testing.TB, s *Store) {
	t.Helper()
	require.Eventually(t, func() bool { return s.DispatchBehindBytes() == 0 }, 5*time.Second, time.Millisecond)
}

// pullAll reads a queue from offset 0 to its end, returning the decoded
// messages and checking the next-begin-offset chain.
func pullAll(t testing.TB, s *Store, topic string, queueID int32, filter MessageFilter) []*message.MessageExt {
	t.Helper()
	var out []*message.MessageExt
	offset := s.MinOffsetInQueue(topic, queueID)
	for i := 0; i < 100000; i++ {
		r, err := s.GetMessage("g", topic, queueID, offset, 32, 0, filter)
		require.NoError(t, err)
		status, next := r.Status, r.NextBeginOffset
		for _, rec := range r.Messages {
			m, n, err := message.DecodeRecord(rec.Bytes)
			require.NoError(t, err)
			require.Equal(t, len(rec.Bytes), n)
			out = append(out, m)
		}
		r.Release()
		switch status {
		case Found, NoMatchedMessage:
			require.Greater(t, next, offset)
			offset = next
		case OffsetOverflowOne:
			return out
		default:
			t.Fatalf("unexpected status %v at offset %d", status, offset)
		}
	}
	t.Fatal("pull did not finish")
	return nil
}

func body(i, size int) []byte {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("message-%06d|", i))
	return b
}

func TestStoreRoundTripAcrossFiles(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			s := MustOpen(t, cfg)
			const n = 1200 // 2 KB each, ~2.5 MiB: three commitlog files, six consume-queue files
			var arrived sync.Map
			s.SetArrivingListener(func(topic string, qid int32, logicOffset, tagsCode, ts int64) {
				arrived.Store(topic+strconv.Itoa(int(qid)), logicOffset)
			})
			for i := 0; i < n; i++ {
				m := newTestMessage("TopicA", int32(i%2), body(i, 2000), "", "")
				r := mustPut(t, s, m)
				assert.EqualValues(t, i/2, r.QueueOffset)
			}
			waitDispatched(t, s)
			assert.GreaterOrEqual(t, s.CommitLog().Files().Len(), 3)
			for q := int32(0); q < 2; q++ {
				assert.EqualValues(t, 0, s.MinOffsetInQueue("TopicA", q))
				assert.EqualValues(t, n/2, s.MaxOffsetInQueue("TopicA", q))
				v, ok := arrived.Load("TopicA" + strconv.Itoa(int(q)))
				require.True(t, ok)
				assert.EqualValues(t, n/2, v, "listener gets the new max offset")
				msgs := pullAll(t, s, "TopicA", q, nil)
				require.Equal(t, n/2, len(msgs))
				for j, m := range msgs {
					assert.EqualValues(t, j, m.QueueOffset, "contiguous queue offsets")
					assert.Equal(t, body(2*j+int(q), 2000), m.Body)
					assert.Equal(t, q, m.QueueID)
				}
			}
			assert.Equal(t, s.CommitLogMaxOffset(), s.CommitLog().MaxOffset())
			assert.EqualValues(t, 0, s.CommitLogMinOffset())
		})
	}
}

func TestStoreConcurrentPutAndPull(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			s := MustOpen(t, cfg)
			const writers, perWriter = 4, 300
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perWriter; i++ {
						m := newTestMessage("C", int32(w%2), body(w*perWriter+i, 2000), "", "")
						if r := s.PutMessage(context.Background(), m); r.Status != PutOK {
							t.Errorf("put: %v %v", r.Status, r.Err)
							return
						}
					}
				}()
			}
			// Readers follow the queues while writers append and files roll.
			for q := int32(0); q < 2; q++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seen := map[string]bool{}
					offset := int64(0)
					deadline := time.Now().Add(20 * time.Second)
					for len(seen) < writers/2*perWriter && time.Now().Before(deadline) {
						r, err := s.GetMessage("g", "C", q, offset, 32, 0, nil)
						if err != nil {
							t.Error(err)
							return
						}
						expect := offset
						for _, rec := range r.Messages {
							m, _, err := message.DecodeRecord(rec.Bytes)
							if err != nil {
								t.Errorf("decode: %v", err)
								continue
							}
							if m.QueueOffset != expect {
								t.Errorf("queue offset %d, want %d", m.QueueOffset, expect)
							}
							expect++
							seen[string(m.Body[:16])] = true
						}
						if r.Status == Found {
							offset = r.NextBeginOffset
						} else {
							time.Sleep(time.Millisecond)
						}
						r.Release()
					}
					if len(seen) != writers/2*perWriter {
						t.Errorf("queue %d: saw %d messages", q, len(seen))
					}
				}()
			}
			wg.Wait()
			assert.EqualValues(t, writers/2*perWriter, s.MaxOffsetInQueue("C", 0))
		})
	}
}

func TestStoreGetMessageStatuses(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	r, err := s.GetMessage("g", "Nope", 0, 5, 32, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, NoMessageInQueue, r.Status)
	assert.EqualValues(t, 0, r.NextBeginOffset)
	r.Release()
	r, err = s.GetMessage("g", "", 0, 0, 32, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, NoMatchedLogicQueue, r.Status)
	r.Release()

	for i := 0; i < 10; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 100), "", ""))
	}
	waitDispatched(t, s)
	tests := []struct {
		offset   int64
		max      int
		bytes    int
		status   GetMessageStatus
		next     int64
		messages int
	}{
		{0, 32, 0, Found, 10, 10},
		{3, 4, 0, Found, 7, 4},
		{0, 32, 450, Found, 2, 2}, // byte limit: two ~200-byte records
		{10, 32, 0, OffsetOverflowOne, 10, 0},
		{11, 32, 0, OffsetOverflowBadly, 0, 0}, // min offset 0: back to 0
	}
	for _, tt := range tests {
		r, err := s.GetMessage("g", "T", 0, tt.offset, tt.max, tt.bytes, nil)
		require.NoError(t, err)
		assert.Equal(t, tt.status, r.Status, "offset %d", tt.offset)
		assert.Equal(t, tt.next, r.NextBeginOffset, "offset %d", tt.offset)
		assert.Len(t, r.Messages, tt.messages, "offset %d", tt.offset)
		assert.EqualValues(t, 0, r.MinOffset)
		assert.EqualValues(t, 10, r.MaxOffset)
		body := r.AppendBody(nil)
		assert.Equal(t, r.BufferTotalSize, len(body))
		r.Release()
	}
	assert.Equal(t, "OFFSET_OVERFLOW_BADLY", OffsetOverflowBadly.String())

	// Data far behind the commitlog end (beyond the page-cache share of
	// RAM) is served in smaller batches, and the result says so.
	for i := 10; i < 30; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 100), "", ""))
	}
	waitDispatched(t, s)
	s.memoryLimit = 100
	r, err = s.GetMessage("g", "T", 0, 0, 32, 0, nil)
	require.NoError(t, err)
	assert.Len(t, r.Messages, maxTransferCountInDisk)
	assert.True(t, r.SuggestPullingFromSlave)
	assert.True(t, r.FromDisk)
	r.Release()
	s.memoryLimit = 1 << 40
	r, err = s.GetMessage("g", "T", 0, 0, 32, 0, nil)
	require.NoError(t, err)
	assert.False(t, r.FromDisk, "everything within the page-cache share")
	r.Release()
}

func TestStoreTagFilter(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			s := MustOpen(t, testConfig(t.TempDir(), ft))
			tags := []string{"TagA", "TagB", "", "TagC"}
			for i := 0; i < 400; i++ {
				mustPut(t, s, newTestMessage("T", 1, body(i, 200), tags[i%4], ""))
			}
			waitDispatched(t, s)
			got := pullAll(t, s, "T", 1, NewTagFilter("TagA || TagC"))
			require.Len(t, got, 200)
			for _, m := range got {
				assert.Contains(t, []string{"TagA", "TagC"}, m.Tags())
			}
			assert.Len(t, pullAll(t, s, "T", 1, NewTagFilter("*")), 400)
			assert.Len(t, pullAll(t, s, "T", 1, NewTagFilter("")), 400)
			assert.Empty(t, pullAll(t, s, "T", 1, NewTagFilter("TagZ")))

			r, err := s.GetMessage("g", "T", 1, 0, 32, 0, NewTagFilter("TagZ"))
			require.NoError(t, err)
			assert.Equal(t, NoMatchedMessage, r.Status)
			assert.EqualValues(t, 200, r.NextBeginOffset, "one consume-queue file scanned")
			r.Release()
		})
	}
}

func TestStoreQueryByKeyAndLookup(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			s := MustOpen(t, testConfig(t.TempDir(), ft))
			begin := time.Now().UnixMilli() - 1000
			var offsets []int64
			for i := 0; i < 600; i++ {
				m := newTestMessage("T", int32(i%4), body(i, 2500), "", "order-"+strconv.Itoa(i%100)+" all")
				m.SetProperty(message.PropUniqKey, fmt.Sprintf("UNIQ%05d", i))
				offsets = append(offsets, mustPut(t, s, m).WroteOffset)
			}
			waitDispatched(t, s)
			end := time.Now().UnixMilli() + 1000

			q := s.QueryMessage("T", "order-7", 64, begin, end)
			require.Len(t, q.Messages, 6)
			for _, rec := range q.Messages {
				m, _, err := message.DecodeRecord(rec.Bytes)
				require.NoError(t, err)
				assert.Contains(t, m.Keys(), "order-7 ")
			}
			q.Release()
			q = s.QueryMessage("T", "UNIQ00434", 32, begin, end)
			require.Len(t, q.Messages, 1)
			assert.Equal(t, offsets[434], q.Messages[0].StartOffset)
			q.Release()
			q = s.QueryMessage("T", "all", 1000, begin, end)
			assert.Len(t, q.Messages, maxQueryMessages)
			q.Release()
			q = s.QueryMessage("Other", "order-7", 64, begin, end)
			assert.Empty(t, q.Messages)

			m, err := s.LookMessageByOffset(offsets[477])
			require.NoError(t, err)
			assert.Equal(t, body(477, 2500), m.Body)
			assert.Equal(t, offsets[477], m.CommitLogOffset)
			_, err = s.LookMessageByOffset(offsets[477] + 1)
			assert.ErrorIs(t, err, ErrMessageNotFound)
		})
	}
}

func TestStoreOffsetByTime(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	var stamps []int64
	for i := 0; i < 30; i++ {
		r := mustPut(t, s, newTestMessage("T", 0, body(i, 100), "", ""))
		stamps = append(stamps, r.StoreTimestamp)
		if i%10 == 9 {
			time.Sleep(5 * time.Millisecond) // distinct store times between groups
		}
	}
	waitDispatched(t, s)
	assert.EqualValues(t, 0, s.OffsetByTime("T", 0, 0))
	assert.EqualValues(t, 30, s.OffsetByTime("T", 0, stamps[29]+1))
	for _, i := range []int{0, 10, 20} {
		want := i
		for want > 0 && stamps[want-1] == stamps[i] {
			want--
		}
		assert.EqualValues(t, want, s.OffsetByTime("T", 0, stamps[i]), "first message stored at %d", stamps[i])
	}
	assert.Equal(t, stamps[0], s.EarliestStoreTime("T", 0))
	assert.Equal(t, stamps[12], s.MessageStoreTime("T", 0, 12))
	assert.EqualValues(t, -1, s.EarliestStoreTime("T", 9))
}

func TestStoreDeleteTopic(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s := MustOpen(t, cfg)
	for i := 0; i < 10; i++ {
		mustPut(t, s, newTestMessage("Gone", int32(i%2), body(i, 10), "", ""))
		mustPut(t, s, newTestMessage("Kept", 0, body(i, 10), "", ""))
	}
	waitDispatched(t, s)
	require.NoError(t, s.DeleteTopic("Gone"))
	assert.Equal(t, []string{"Kept"}, s.Topics())
	assert.EqualValues(t, 0, s.MaxOffsetInQueue("Gone", 0))
	_, err := os.Stat(filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "Gone", "0"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	r := mustPut(t, s, newTestMessage("Gone", 0, body(1, 10), "", ""))
	assert.EqualValues(t, 0, r.QueueOffset, "a re-created topic starts again")
	assert.EqualValues(t, 10, s.MaxOffsetInQueue("Kept", 0))
	waitDispatched(t, s)
	require.NoError(t, s.Shutdown(context.Background()))

	// Neither a clean nor a crashed restart resurrects the old messages.
	for _, clean := range []bool{true, false} {
		if !clean {
			require.NoError(t, os.WriteFile(filepath.Join(cfg.StorePathRootDir, abortFileName), nil, 0o644))
		}
		s2, err := Open(cfg, nil)
		require.NoError(t, err)
		assert.EqualValues(t, 1, s2.MaxOffsetInQueue("Gone", 0), "clean=%v", clean)
		assert.EqualValues(t, 0, s2.MaxOffsetInQueue("Gone", 1), "clean=%v", clean)
		msgs := pullAll(t, s2, "Gone", 0, nil)
		require.Equal(t, 1, len(msgs))
		assert.Equal(t, body(1, 10), msgs[0].Body)
		require.NoError(t, s2.Shutdown(context.Background()))
	}
	require.ErrorContains(t, s.DeleteTopic("../x"), "cannot name")
}

func TestStoreTransactionTypesNotQueued(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	var count int
	var mu sync.Mutex
	s.SetArrivingListener(func(string, int32, int64, int64, int64) { mu.Lock(); count++; mu.Unlock() })
	for i, flag := range []int32{message.TransactionNotType, message.TransactionPreparedType, message.TransactionRollbackType, message.TransactionCommitType} {
		m := newTestMessage("T", 0, body(i, 50), "", "k"+strconv.Itoa(i))
		m.SysFlag = flag
		mustPut(t, s, m)
	}
	waitDispatched(t, s)
	assert.EqualValues(t, 2, s.MaxOffsetInQueue("T", 0))
	mu.Lock()
	assert.Equal(t, 2, count)
	mu.Unlock()
	q := s.QueryMessage("T", "k1", 10, 0, time.Now().UnixMilli()+1000)
	assert.Len(t, q.Messages, 1, "prepared records are indexed")
	q.Release()
	q = s.QueryMessage("T", "k2", 10, 0, time.Now().UnixMilli()+1000)
	assert.Empty(t, q.Messages, "rollback records are not")
}

func TestStoreReopenCleanKeepsOffsets(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			// Registered first, so it runs after the store's shutdown.
			t.Cleanup(func() { goleak.VerifyNone(t) })
			dir := t.TempDir()
			cfg := testConfig(dir, ft)
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			for i := 0; i < 300; i++ {
				mustPut(t, s, newTestMessage("T", 0, body(i, 4000), "", ""))
			}
			_, err = Open(cfg, nil)
			require.ErrorIs(t, err, ErrStoreLocked, "a second store on the same directory")
			require.NoError(t, s.Shutdown(context.Background()))
			require.NoError(t, s.Shutdown(context.Background()), "twice is fine")

			s = MustOpen(t, cfg)
			assert.True(t, s.LastExitOK())
			assert.EqualValues(t, 300, s.MaxOffsetInQueue("T", 0))
			r := mustPut(t, s, newTestMessage("T", 0, body(300, 1000), "", ""))
			assert.EqualValues(t, 300, r.QueueOffset, "the offset table continues")
			waitDispatched(t, s)
			msgs := pullAll(t, s, "T", 0, nil)
			require.Equal(t, 301, len(msgs))
			assert.Equal(t, body(300, 1000), msgs[300].Body)
		})
	}
}

func TestStoreHoldsFileAgainstDeletion(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	now := time.Now()
	env := newTestEnv(now, 0.1)
	s := MustOpen(t, cfg, env.options()...)
	for i := 0; i < 1500; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 1000), "", ""))
	}
	waitDispatched(t, s)
	waitFullFilesFlushed(t, s)
	r, err := s.GetMessage("g", "T", 0, 0, 4, 0, nil)
	require.NoError(t, err)
	require.Equal(t, Found, r.Status)
	held := r.AppendBody(nil)

	env.set(now.Add(cfg.FileReservedTime + time.Hour))
	s.ExecuteDeleteFilesManually()
	done := make(chan struct{})
	go func() { s.RunCleanRound(); close(done) }()
	// The held record stays readable while deletion waits for it.
	first := s.CommitLog().Files().FirstMappedFile()
	require.Eventually(t, func() bool { return !first.available.Load() }, 5*time.Second, time.Millisecond)
	assert.Equal(t, held, r.AppendBody(nil))
	r.Release()
	<-done
	assert.Positive(t, s.CommitLogMinOffset())
	r, err = s.GetMessage("g", "T", 0, 0, 4, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, OffsetTooSmall, r.Status)
	assert.Equal(t, s.MinOffsetInQueue("T", 0), r.NextBeginOffset)
	r.Release()
}

// BenchmarkStoreGetMessage32 reads 32 messages of 1 KiB per call.
func BenchmarkStoreGetMessage32(b *testing.B) {
	cfg := testConfig(b.TempDir(), AsyncFlush)
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MappedFileSizeConsumeQ = 300000 * CQStoreUnitSize
	s := MustOpen(b, cfg)
	const n = 4096
	for i := 0; i < n; i++ {
		mustPut(b, s, newTestMessage("T", 0, body(i, 1024), "TagA", ""))
	}
	waitDispatched(b, s)
	filter := NewTagFilter("TagA")
	b.ReportAllocs()
	b.ResetTimer()
	var total int
	for i := 0; i < b.N; i++ {
		off := int64(i*32) % (n - 32)
		r, err := s.GetMessage("g", "T", 0, off, 32, 0, filter)
		if err != nil || r.Status != Found || len(r.Messages) != 32 {
			b.Fatalf("%v %v %d", err, r.Status, len(r.Messages))
		}
		total += r.BufferTotalSize
		r.Release()
	}
	b.SetBytes(int64(total / max(b.N, 1)))
}

// BenchmarkStorePutAndDispatch measures 1 KiB puts through the store facade
// until every consume-queue and index entry is built.
func BenchmarkStorePutAndDispatch(b *testing.B) {
	benchStorePutAndDispatch(b, testConfig(b.TempDir(), AsyncFlush), nil)
}

// BenchmarkStorePutAndDispatchPropCRC is BenchmarkStorePutAndDispatch with
// enabledAppendPropCRC.
func BenchmarkStorePutAndDispatchPropCRC(b *testing.B) {
	cfg := testConfig(b.TempDir(), AsyncFlush)
	cfg.EnabledAppendPropCRC = true
	benchStorePutAndDispatch(b, cfg, nil)
}

// benchStorePutAndDispatch is BenchmarkStorePutAndDispatch over a store
// opened with cfg (its file sizes set here); a non-nil setup prepares the
// store and the message before the timer starts.
func benchStorePutAndDispatch(b *testing.B, cfg *Config, setup func(*Store, *message.MessageExt)) {
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MappedFileSizeConsumeQ = 300000 * CQStoreUnitSize
	cfg.MaxHashSlotNum = 1 << 16
	cfg.MaxIndexNum = 1 << 18
	s := MustOpen(b, cfg)
	m := newTestMessage("T", 0, body(0, 1024), "TagA", "k1")
	if setup != nil {
		setup(s, m)
	}
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.QueueID = int32(i % 4)
		if r := s.PutMessage(context.Background(), m); r.Status != PutOK {
			b.Fatal(r.Err)
		}
	}
	for s.DispatchBehindBytes() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
}
