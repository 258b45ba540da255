package store

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIndexKeyHash(t *testing.T) {
	// Values of Java's String.hashCode, made non-negative as RocketMQ does.
	tests := []struct {
		key  string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"TopicTest#key1", absJava(javaHash("TopicTest#key1"))},
		{"polygenelubricants", 0}, // hash is MinInt32: abs stays negative, so 0
		{"中文#键", absJava(javaHash("中文#键"))},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, indexKeyHash(tt.key), tt.key)
	}
	assert.EqualValues(t, -2147483648, int32(message.TagsHashCode("polygenelubricants")), "a known MinInt32 hash")
}

// javaHash is an independent String.hashCode over UTF-16 units.
func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func absJava(h int32) int32 {
	if h < 0 {
		h = -h
	}
	if h < 0 {
		return 0
	}
	return h
}

func TestIndexBuildQueryRoll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	clock := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.Local)
	now := func() time.Time { return clock }
	const slots, entries = 7, 10
	s := NewIndexService(dir, slots, entries, nil, now)
	_, err := s.Load(true, 0)
	require.NoError(t, err)
	var fullEnds []int64
	s.SetFullFlushedHook(func(ts int64) { fullEnds = append(fullEnds, ts) })

	base := clock.UnixMilli()
	// 20 messages; each has a uniq key and two keys, so 3 entries each: 9
	// entries fit per file (entry 0 unused) and the index rolls.
	for i := 0; i < 20; i++ {
		keys := "k" + string(rune('a'+i%5)) + " shared"
		require.NoError(t, s.BuildIndex("T", keys, "U"+string(rune('A'+i)), 0, int64(1000*(i+1)), base+int64(i)*1000))
	}
	assert.Greater(t, s.Len(), 5)
	assert.NotEmpty(t, fullEnds)
	assert.EqualValues(t, 20000, s.EndPhyOffset())
	entriesOnDisk, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, "20261129100000123", entriesOnDisk[0].Name())
	assert.Equal(t, "20261129100000124", entriesOnDisk[1].Name(), "same ms: names still sort in order")

	all := func(key string, maxNum int) []int64 {
		return s.Query("T", key, maxNum, 0, base+100000).PhyOffsets
	}
	assert.Equal(t, []int64{5000}, all("UE", 32))
	assert.Equal(t, []int64{20000, 15000, 10000, 5000}, all("ke", 32), "newest first across files")
	assert.Len(t, all("shared", 32), 20)
	assert.Len(t, all("shared", 3), 3)
	assert.Empty(t, all("nothing", 32))
	assert.Empty(t, s.Query("Other", "ke", 32, 0, base+100000).PhyOffsets, "topic is part of the key")

	// Time range: messages 5..9 stored at base+5s..base+9s.
	got := s.Query("T", "shared", 32, base+5000, base+9000).PhyOffsets
	assert.ElementsMatch(t, []int64{6000, 7000, 8000, 9000, 10000}, got)

	// Re-dispatch of old messages does not duplicate entries.
	require.NoError(t, s.BuildIndex("T", "ke", "", 0, 5000, base+4000))
	assert.Equal(t, []int64{20000, 15000, 10000, 5000}, all("ke", 32))
	// Rollback records are not indexed.
	require.NoError(t, s.BuildIndex("T", "rb", "", message.TransactionRollbackType, 30000, base+30000))
	assert.Empty(t, all("rb", 32))

	// Header bytes of the first file: begin/end phy offset, count.
	require.NoError(t, s.Flush())
	b, err := os.ReadFile(filepath.Join(dir, entriesOnDisk[0].Name()))
	require.NoError(t, err)
	require.Len(t, b, indexFileSize(slots, entries))
	assert.EqualValues(t, base, binary.BigEndian.Uint64(b[0:]))
	assert.EqualValues(t, 1000, binary.BigEndian.Uint64(b[16:]))
	assert.EqualValues(t, 3000, binary.BigEndian.Uint64(b[24:]))
	assert.EqualValues(t, 9, binary.BigEndian.Uint32(b[32:]))
	assert.EqualValues(t, 10, binary.BigEndian.Uint32(b[36:]))

	// Reload: same answers. An abnormal exit drops files newer than the checkpoint.
	require.NoError(t, s.Close())
	s = NewIndexService(dir, slots, entries, nil, now)
	_, err = s.Load(true, 0)
	require.NoError(t, err)
	assert.Equal(t, []int64{20000, 15000, 10000, 5000}, all("ke", 32))
	n := s.Len()
	require.NoError(t, s.Close())
	s = NewIndexService(dir, slots, entries, nil, now)
	rebuildFrom, err := s.Load(false, base+10000)
	require.NoError(t, err)
	assert.Less(t, s.Len(), n)
	assert.Equal(t, s.EndPhyOffset(), rebuildFrom, "rebuild from the end of the last kept file")
	assert.LessOrEqual(t, s.EndPhyOffset(), int64(11000))

	// Retention: files ending below the min offset go, never the last.
	deleted := s.DeleteExpired(1e9, time.Second)
	assert.Positive(t, deleted)
	assert.Equal(t, 1, s.Len())
	require.NoError(t, s.Destroy())
}

// FuzzIndexFileQuery feeds arbitrary bytes as an index file: loading,
// querying and adding keys must never read or write outside the file.
func FuzzIndexFileQuery(f *testing.F) {
	const slots, entries = 5, 8
	size := indexFileSize(slots, entries)
	seed := make([]byte, size)
	binary.BigEndian.PutUint32(seed[36:], 3)
	binary.BigEndian.PutUint32(seed[indexHeaderSize+4*(int(indexKeyHash("T#k"))%slots):], 2)
	f.Add(seed, "k")
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF}, "x")
	dir := f.TempDir()
	n := 0
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		n++
		mf, err := createMappedFile(filepath.Join(dir, strconv.Itoa(n)), 0, size, size, false)
		require.NoError(t, err)
		defer mf.Destroy(time.Second)
		copy(mf.Buffer(), data)
		ix := &indexFile{mf: mf, slotNum: slots, indexNum: entries}
		ix.loadHeader()
		if !ix.validHeader() {
			return // Load deletes such a file
		}
		ix.selectPhyOffsets(nil, "T#"+key, 100, math.MinInt64, math.MaxInt64)
		for i := 0; i < entries; i++ {
			_, err := ix.putKey("T#"+key, int64(i), int64(i))
			require.NoError(t, err)
		}
		ix.selectPhyOffsets(nil, "T#"+key, 100, math.MinInt64, math.MaxInt64)
	})
}
