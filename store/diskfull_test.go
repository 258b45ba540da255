package store

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/testfs"
)

// These tests fill a real file system (a small tmpfs) instead of faking the
// usage figure: a write through a mapping into a hole that the file system
// cannot back kills the process with SIGBUS, which no fake shows. The usage
// probe is pinned low where a test is about what happens between two space
// checks, when only the allocations can tell that the disk is full.

// lowUsage keeps the clean loop's ratio check from refusing writes, so the
// allocation paths are what meet the full disk.
func lowUsage() Option { return WithDiskUsage(func(string) (float64, error) { return 0.1, nil }) }

// ackedPut is a message the store accepted, and where.
type ackedPut struct {
	topic   string
	queueID int32
	offset  int64
	body    []byte
}

// putUntilRefused puts messages of size bytes until the store refuses one,
// at most max; it returns what was accepted and the refusal.
func putUntilRefused(t *testing.T, s *Store, topic string, from, max, size int) ([]ackedPut, PutResult) {
	t.Helper()
	var acked []ackedPut
	for i := from; i < from+max; i++ {
		m := newTestMessage(topic, int32(i%2), body(i, size), "", "")
		r := s.PutMessage(context.Background(), m)
		if !r.OK() {
			return acked, r
		}
		acked = append(acked, ackedPut{topic, m.QueueID, r.QueueOffset, m.Body})
	}
	t.Fatalf("%d puts and the disk never filled", max)
	return nil, PutResult{}
}

// requireReadable checks every acknowledged message is served at its queue
// offset with its body.
func requireReadable(t *testing.T, s *Store, acked []ackedPut) {
	t.Helper()
	byQueue := map[queueKey]map[int64][]byte{}
	for _, a := range acked {
		k := queueKey{a.topic, a.queueID}
		if byQueue[k] == nil {
			byQueue[k] = map[int64][]byte{}
			for _, m := range pullAll(t, s, a.topic, a.queueID, nil) {
				byQueue[k][m.QueueOffset] = m.Body
			}
		}
		got, ok := byQueue[k][a.offset]
		require.True(t, ok, "acknowledged message %s-%d@%d is not served", a.topic, a.queueID, a.offset)
		require.Equal(t, a.body, got, "message %s-%d@%d", a.topic, a.queueID, a.offset)
	}
}

// A commitlog file that cannot be created on a full disk refuses the put
// with SERVICE_NOT_AVAILABLE and ErrDiskFull (not CREATE_MAPEDFILE_FAILED),
// reads go on, and writes resume at the next offset once space is freed.
func TestDiskFullCommitLogFileRefusesPut(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			root := testfs.MustMountTmpfs(t, 12<<20)
			cfg := testConfig(filepath.Join(root, "store"), ft)
			cfg.MappedFileSizeConsumeQ = 20000 * CQStoreUnitSize // room for the whole test: only the commitlog rolls
			s := MustOpen(t, cfg, lowUsage())
			for i := range 10 { // the files exist before the disk fills
				mustPut(t, s, newTestMessage("T", int32(i%2), body(i, 1000), "", ""))
			}
			ballast := testfs.Fill(t, root, 0)

			acked, refused := putUntilRefused(t, s, "T", 10, 5000, 1000)
			assert.Equal(t, ServiceNotAvailable, refused.Status, "%v", refused.Err)
			require.ErrorIs(t, refused.Err, ErrDiskFull)
			again := s.PutMessage(context.Background(), newTestMessage("T", 0, body(1, 1000), "", ""))
			assert.Equal(t, ServiceNotAvailable, again.Status, "still full: still refused")

			waitDispatched(t, s)
			requireReadable(t, s, acked)
			assert.EqualValues(t, 10+len(acked), s.MaxOffsetInQueue("T", 0)+s.MaxOffsetInQueue("T", 1), "nothing but the acknowledged")

			require.NoError(t, os.Remove(ballast))
			next := s.MaxOffsetInQueue("T", 0)
			r := mustPut(t, s, newTestMessage("T", 0, body(99999, 1000), "", ""))
			assert.Equal(t, next, r.QueueOffset, "writes resume at the next offset")
			waitDispatched(t, s)
			requireReadable(t, s, append(acked, ackedPut{"T", 0, r.QueueOffset, body(99999, 1000)}))
		})
	}
}

// A consume queue that cannot get a file on a full disk stalls dispatch
// instead of skipping the message: writes are refused while it waits, the
// message is served once space is freed, at its offset.
func TestDiskFullDispatchWaitsForSpace(t *testing.T) {
	root := testfs.MustMountTmpfs(t, 12<<20)
	cfg := testConfig(filepath.Join(root, "store"), AsyncFlush)
	s := MustOpen(t, cfg, lowUsage())
	var acked []ackedPut
	for i := range 10 {
		r := mustPut(t, s, newTestMessage("A", int32(i%2), body(i, 1000), "", ""))
		acked = append(acked, ackedPut{"A", int32(i % 2), r.QueueOffset, body(i, 1000)})
	}
	waitDispatched(t, s)
	ballast := testfs.Fill(t, root, 0)

	// The commitlog file has room, but topic B's consume queue needs a file.
	r := mustPut(t, s, newTestMessage("B", 0, body(100, 1000), "", ""))
	require.Eventually(t, s.DiskFull, 10*time.Second, time.Millisecond, "dispatch waiting for space refuses writes")
	refused := s.PutMessage(context.Background(), newTestMessage("A", 0, body(101, 1000), "", ""))
	assert.Equal(t, ServiceNotAvailable, refused.Status)
	require.ErrorIs(t, refused.Err, ErrDiskFull)
	requireReadable(t, s, acked) // reads go on
	assert.Positive(t, s.DispatchBehindBytes(), "B's message waits for space, it is not skipped")

	require.NoError(t, os.Remove(ballast))
	waitDispatched(t, s)
	require.Eventually(t, func() bool { return !s.DiskFull() }, 10*time.Second, time.Millisecond)
	requireReadable(t, s, append(acked, ackedPut{"B", 0, r.QueueOffset, body(100, 1000)}))
	mustPut(t, s, newTestMessage("A", 0, body(102, 1000), "", ""))
}

// Index files reserve their blocks as they fill; a reservation that fails
// stalls dispatch like a consume-queue file, and the keys are indexed once
// space is back (the write used to fault: SIGBUS in putKey).
func TestDiskFullIndexWaitsForSpace(t *testing.T) {
	root := testfs.MustMountTmpfs(t, 12<<20)
	cfg := testConfig(filepath.Join(root, "store"), AsyncFlush)
	cfg.MappedFileSizeConsumeQ = 20000 * CQStoreUnitSize
	cfg.MaxIndexNum = 400000 // an 8 MB index file: most of it is reserved as it fills
	s := MustOpen(t, cfg, lowUsage())
	shared := make([]string, 39)
	for i := range shared {
		shared[i] = "k" + strconv.Itoa(i)
	}
	var acked []ackedPut
	put := func(i int) PutResult {
		m := newTestMessage("T", 0, body(i, 100), "", strings.Join(shared, " ")+" u"+strconv.Itoa(i))
		r := s.PutMessage(context.Background(), m)
		if r.OK() {
			acked = append(acked, ackedPut{"T", 0, r.QueueOffset, m.Body})
		}
		return r
	}
	put(0)
	waitDispatched(t, s)
	ballast := testfs.Fill(t, root, 0)
	// 1 MiB of index entries is ~52,000 keys, ~1,300 messages of 40 keys;
	// the commitlog file has room for ~2,500 of them, the consume queue
	// for 20,000.
	for i := 1; i < 3000 && !s.DiskFull(); i++ {
		if r := put(i); !r.OK() {
			require.ErrorIs(t, r.Err, ErrDiskFull)
			break
		}
	}
	require.Eventually(t, s.DiskFull, 10*time.Second, time.Millisecond, "the index ran out of reserved blocks")
	require.NoError(t, os.Remove(ballast))
	waitDispatched(t, s)
	requireReadable(t, s, acked)
	for _, a := range acked { // every message is found by its own key
		i, err := strconv.Atoi(strings.TrimPrefix(strings.TrimRight(string(a.body[:20]), "|\x00"), "message-"))
		require.NoError(t, err)
		q := s.QueryMessage("T", "u"+strconv.Itoa(i), 8, 0, math.MaxInt64)
		require.Equal(t, 1, len(q.Messages), "key u%d", i)
		q.Release()
	}
}

// A store opened on a full disk opens (recovery and dispatch catch-up write
// nothing they cannot reserve), serves reads and refuses writes; what
// dispatch could not write before the restart is written once space is
// freed, index entries included.
func TestDiskFullReopenServesReads(t *testing.T) {
	for _, exit := range []string{"crash", "shutdown"} {
		t.Run(exit, func(t *testing.T) {
			root := testfs.MustMountTmpfs(t, 12<<20)
			cfg := testConfig(filepath.Join(root, "store"), SyncFlush)
			s, err := Open(cfg, nil, lowUsage())
			require.NoError(t, err)
			var acked []ackedPut
			for i := range 3000 {
				m := newTestMessage("A", int32(i%2), body(i, 1000), "", "k"+strconv.Itoa(i))
				r := mustPut(t, s, m)
				acked = append(acked, ackedPut{"A", m.QueueID, r.QueueOffset, m.Body})
			}
			waitDispatched(t, s)
			ballast := testfs.Fill(t, root, 0)
			// B's consume queue cannot get a file: dispatch waits.
			r := mustPut(t, s, newTestMessage("B", 0, body(3000, 1000), "", "kb"))
			require.Eventually(t, s.DiskFull, 10*time.Second, time.Millisecond)
			if exit == "crash" {
				crash(t, s)
			} else {
				require.NoError(t, s.Shutdown(context.Background()))
			}
			testfs.Fill(t, root, 0) // what the exit freed (the spare commitlog file)

			s = MustOpen(t, cfg) // the real usage probe: the tmpfs is full
			assert.True(t, s.DiskFull(), "opened on a full disk: read-only")
			refused := s.PutMessage(context.Background(), newTestMessage("A", 0, body(1, 10), "", ""))
			assert.Equal(t, ServiceNotAvailable, refused.Status)
			require.ErrorIs(t, refused.Err, ErrDiskFull)
			requireReadable(t, s, acked)
			assert.Positive(t, s.DispatchBehindBytes(), "B's message still waits for space")

			require.NoError(t, os.Remove(ballast))
			waitDispatched(t, s)
			requireReadable(t, s, append(acked, ackedPut{"B", 0, r.QueueOffset, body(3000, 1000)}))
			for _, key := range []string{"k0", "k2999"} {
				q := s.QueryMessage("A", key, 8, 0, math.MaxInt64)
				assert.Equal(t, 1, len(q.Messages), "key %s", key)
				q.Release()
			}
			q := s.QueryMessage("B", "kb", 8, 0, math.MaxInt64)
			assert.Equal(t, 1, len(q.Messages), "B's message is indexed once written")
			q.Release()
		})
	}
}
