package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testCQFileSize = 10 * CQStoreUnitSize // 10 entries per file

// putN appends n entries for messages of 100 bytes at phy offsets 100*i.
func putN(t *testing.T, cq *ConsumeQueue, from, n int64) {
	t.Helper()
	for i := from; i < from+n; i++ {
		require.NoError(t, cq.Put(CQEntry{CommitLogOffset: 100 * i, Size: 100, TagsCode: i % 3}, i))
	}
}

func TestConsumeQueuePutReadRecover(t *testing.T) {
	root := t.TempDir()
	cq := NewConsumeQueue(root, "TopicA", 3, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	require.NoError(t, cq.Recover())
	assert.EqualValues(t, 0, cq.MaxOffsetInQueue())

	putN(t, cq, 0, 25)
	assert.EqualValues(t, 25, cq.MaxOffsetInQueue())
	assert.EqualValues(t, 0, cq.MinOffsetInQueue())
	assert.EqualValues(t, 2500, cq.MaxPhysicOffset())
	assert.Equal(t, 3, cq.Files().Len())
	_, err := os.Stat(filepath.Join(root, "TopicA", "3", "00000000000000000200"))
	require.NoError(t, err, "files named by the byte offset of their first entry")

	// Re-dispatching the same messages is a no-op.
	putN(t, cq, 20, 5)
	assert.EqualValues(t, 25, cq.MaxOffsetInQueue())

	e, ok := cq.Entry(13)
	require.True(t, ok)
	assert.Equal(t, CQEntry{CommitLogOffset: 1300, Size: 100, TagsCode: 1}, e)
	r, ok := cq.EntriesFrom(12)
	require.True(t, ok)
	assert.Len(t, r.Bytes, 8*CQStoreUnitSize, "to the end of the file")
	r.Release()
	_, ok = cq.Entry(25)
	assert.False(t, ok)
	require.NoError(t, cq.FlushAll())
	require.NoError(t, cq.Close())

	cq = NewConsumeQueue(root, "TopicA", 3, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	require.NoError(t, cq.Recover())
	assert.EqualValues(t, 25, cq.MaxOffsetInQueue())
	assert.EqualValues(t, 2500, cq.MaxPhysicOffset())
	putN(t, cq, 25, 1)
	e, ok = cq.Entry(25)
	require.True(t, ok)
	assert.EqualValues(t, 2500, e.CommitLogOffset)
	require.NoError(t, cq.Destroy())
}

func TestConsumeQueuePreBlank(t *testing.T) {
	cq := NewConsumeQueue(t.TempDir(), "T", 0, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	require.NoError(t, cq.Recover())
	putN(t, cq, 15, 3)
	assert.EqualValues(t, 15, cq.MinOffsetInQueue())
	assert.EqualValues(t, 18, cq.MaxOffsetInQueue())
	assert.EqualValues(t, 10*CQStoreUnitSize, cq.Files().MinOffset(), "first file starts at the file holding offset 15")
	_, ok := cq.Entry(14)
	assert.False(t, ok, "below min offset")

	// After a reload the blanks are valid entries (as in RocketMQ) and the
	// min offset is corrected from the commitlog min offset.
	require.NoError(t, cq.Close())
	cq2 := NewConsumeQueue(filepath.Dir(filepath.Dir(cq.Files().Dir())), "T", 0, testCQFileSize, nil)
	require.NoError(t, cq2.Load())
	require.NoError(t, cq2.Recover())
	assert.EqualValues(t, 18, cq2.MaxOffsetInQueue())
	assert.EqualValues(t, 1700+100, cq2.MaxPhysicOffset())
	cq2.CorrectMinOffset(0)
	assert.EqualValues(t, 15, cq2.MinOffsetInQueue())
	require.NoError(t, cq2.Close())
}

func TestConsumeQueueTruncateDirty(t *testing.T) {
	cq := NewConsumeQueue(t.TempDir(), "T", 1, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	putN(t, cq, 0, 25)
	// Commitlog valid end at 1450: message 14 (1400..1500) is incomplete.
	require.NoError(t, cq.TruncateDirty(1450))
	assert.EqualValues(t, 14, cq.MaxOffsetInQueue())
	assert.EqualValues(t, 1400, cq.MaxPhysicOffset())
	assert.Equal(t, 2, cq.Files().Len(), "the third file pointed entirely past the end")
	// Truncating at a file boundary deletes the now empty file.
	require.NoError(t, cq.TruncateDirty(1000))
	assert.EqualValues(t, 10, cq.MaxOffsetInQueue())
	assert.Equal(t, 1, cq.Files().Len())
	require.NoError(t, cq.TruncateDirty(0))
	assert.EqualValues(t, 0, cq.MaxOffsetInQueue())
	assert.EqualValues(t, -1, cq.MaxPhysicOffset())
	putN(t, cq, 0, 2)
	assert.EqualValues(t, 2, cq.MaxOffsetInQueue())
	require.NoError(t, cq.Close())
}

func TestConsumeQueueRecoverStopsAtInvalid(t *testing.T) {
	root := t.TempDir()
	cq := NewConsumeQueue(root, "T", 0, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	putN(t, cq, 0, 14)
	// Corrupt entry 12: size 0 makes it invalid; entry 13 is cut with it.
	mf := cq.Files().LastMappedFile()
	putCQEntry(mf.Buffer()[2*CQStoreUnitSize:], CQEntry{CommitLogOffset: 1200, Size: 0})
	require.NoError(t, cq.Close())

	cq = NewConsumeQueue(root, "T", 0, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	require.NoError(t, cq.Recover())
	assert.EqualValues(t, 12, cq.MaxOffsetInQueue())
	assert.EqualValues(t, 1200, cq.MaxPhysicOffset())
	require.NoError(t, cq.Close())
}

// Entries cut by a truncation must not come back: recovery scans a file to
// its first invalid entry, so old entries left behind a newer one would be
// taken for live, pointing at whatever the commitlog now holds there.
func TestConsumeQueueCutEntriesStayCut(t *testing.T) {
	const fileSize = 600 * CQStoreUnitSize // three pages and a bit
	reopen := func(t *testing.T, root string) *ConsumeQueue {
		t.Helper()
		cq := NewConsumeQueue(root, "T", 0, fileSize, nil)
		require.NoError(t, cq.Load())
		require.NoError(t, cq.Recover())
		return cq
	}
	cuts := map[string]func(t *testing.T, root string) *ConsumeQueue{
		"by TruncateDirty": func(t *testing.T, root string) *ConsumeQueue {
			cq := reopen(t, root)
			require.NoError(t, cq.TruncateDirty(300*100+50)) // the commitlog ends inside message 300
			return cq
		},
		"by Recover": func(t *testing.T, root string) *ConsumeQueue {
			cq := reopen(t, root)
			mf := cq.Files().LastMappedFile()
			putCQEntry(mf.Buffer()[300*CQStoreUnitSize:], CQEntry{CommitLogOffset: 300 * 100, TagsCode: 7}) // torn: no size
			require.NoError(t, cq.Close())
			return reopen(t, root)
		},
	}
	for name, cut := range cuts {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			cq := reopen(t, root)
			putN(t, cq, 0, 500)
			require.NoError(t, cq.Close())

			cq = cut(t, root)
			require.EqualValues(t, 300, cq.MaxOffsetInQueue())
			require.NoError(t, cq.Put(CQEntry{CommitLogOffset: 300 * 100, Size: 100, TagsCode: 9}, 300))
			require.NoError(t, cq.Close())

			cq = reopen(t, root)
			defer func() { require.NoError(t, cq.Close()) }()
			assert.EqualValues(t, 301, cq.MaxOffsetInQueue(), "entries 301-499 were cut and must stay cut")
			e, ok := cq.Entry(300)
			require.True(t, ok)
			assert.EqualValues(t, 9, e.TagsCode)
		})
	}
}

func TestConsumeQueueDeleteExpiredAndOffsetByTime(t *testing.T) {
	cq := NewConsumeQueue(t.TempDir(), "T", 0, testCQFileSize, nil)
	require.NoError(t, cq.Load())
	putN(t, cq, 0, 35)
	// store time of message i is 1000 + 10*i; messages below phy 1250 are gone.
	storeTime := func(phy int64, _ int32) int64 {
		if phy < 1250 {
			return -1
		}
		return 1000 + 10*(phy/100)
	}
	assert.EqualValues(t, 0, cq.OffsetByTime(0, func(phy int64, _ int32) int64 { return 1000 + 10*(phy/100) }))
	n := cq.DeleteExpired(1250, time.Second)
	assert.Equal(t, 1, n, "only the first file's last entry (900) is below 1250")
	assert.EqualValues(t, 13, cq.MinOffsetInQueue())
	assert.EqualValues(t, 13, cq.OffsetByTime(0, storeTime))
	assert.EqualValues(t, 20, cq.OffsetByTime(1200, storeTime))
	assert.EqualValues(t, 21, cq.OffsetByTime(1205, storeTime))
	assert.EqualValues(t, 34, cq.OffsetByTime(1340, storeTime))
	assert.EqualValues(t, 35, cq.OffsetByTime(99999, storeTime))
	n = cq.DeleteExpired(1e9, time.Second)
	assert.Equal(t, 2, n, "never the newest file")
	assert.EqualValues(t, 35, cq.MinOffsetInQueue())
	require.NoError(t, cq.Close())
}
