package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// replicate copies master's commitlog from offset from into slave the way
// an HA slave does: in pieces of random size that cut records anywhere,
// keeping an unconsumed tail and dropping the filler after blank markers.
func replicate(t *testing.T, master, slave *Store, from int64, rng *rand.Rand) {
	t.Helper()
	mcl := master.CommitLog()
	var pending []byte
	at, skipTo := from, int64(0) // at: stream offset of the next byte
	for at < mcl.MaxOffset() {
		res, ok := mcl.GetData(at)
		require.True(t, ok, "master data at %d", at)
		b := res.Bytes
		for len(b) > 0 {
			piece := b[:min(len(b), 1+rng.IntN(9000))]
			b = b[len(piece):]
			data := append(pending, piece...)
			start := at - int64(len(pending))
			at += int64(len(piece))
			if start < skipTo {
				k := min(int64(len(data)), skipTo-start)
				data, start = data[k:], start+k
				if len(data) == 0 {
					continue
				}
			}
			n, err := slave.AppendReplica(start, data)
			require.NoError(t, err)
			if end := slave.CommitLog().MaxOffset(); end > start+int64(n) {
				skipTo = end
			}
			pending = append([]byte(nil), data[n:]...)
		}
		res.Release()
	}
	require.Empty(t, pending)
}

func putVaried(t *testing.T, s *Store, n int, rng *rand.Rand) {
	t.Helper()
	for i := range n {
		m := newTestMessage("TopicR", int32(i%3), body(i, 100+rng.IntN(20000)), "tag"+string(rune('a'+i%2)), "k"+string(rune('a'+i%5)))
		mustPut(t, s, m)
	}
}

// assertSameCommitLog checks both commitlogs hold the same records at the
// same offsets, and the same bytes from the slave's first offset.
func assertSameCommitLog(t *testing.T, master, slave *Store) {
	t.Helper()
	mcl, scl := master.CommitLog(), slave.CommitLog()
	require.Equal(t, mcl.MaxOffset(), scl.MaxOffset())
	for off := scl.MinOffset(); off < scl.MaxOffset(); {
		mr, ok := mcl.GetData(off)
		require.True(t, ok)
		sr, ok := scl.GetData(off)
		require.True(t, ok)
		require.Equal(t, len(mr.Bytes), len(sr.Bytes), "written length at %d", off)
		// Compare up to a blank marker: the filler after it is not copied.
		n := len(mr.Bytes)
		for pos := 0; pos+8 <= n; {
			if int32(binary.BigEndian.Uint32(mr.Bytes[pos+4:])) == message.BlankMagicCode {
				n = pos + 8
				break
			}
			pos += int(binary.BigEndian.Uint32(mr.Bytes[pos:]))
		}
		require.True(t, bytes.Equal(mr.Bytes[:n], sr.Bytes[:n]), "bytes from %d", off)
		mr.Release()
		sr.Release()
		off = mcl.RollNextFile(off)
	}
}

func TestAppendReplicaCopiesAcrossFilesAndDispatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	slave := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	putVaried(t, master, 300, rng) // ~3 MiB: several 1 MiB files
	require.Greater(t, master.CommitLog().Files().Len(), 2)
	replicate(t, master, slave, 0, rng)
	assertSameCommitLog(t, master, slave)
	waitDispatched(t, slave)
	for q := range int32(3) {
		want := pullAll(t, master, "TopicR", q, nil)
		got := pullAll(t, slave, "TopicR", q, nil)
		require.Equal(t, len(want), len(got))
		for i := range want {
			assert.Equal(t, want[i].Body, got[i].Body)
			assert.Equal(t, want[i].QueueOffset, got[i].QueueOffset)
			assert.Equal(t, want[i].CommitLogOffset, got[i].CommitLogOffset)
		}
	}
	r := slave.QueryMessage("TopicR", "kc", 100, 0, time.Now().Add(time.Hour).UnixMilli())
	assert.NotEmpty(t, r.Messages, "the slave's index is built")
	r.Release()

	// Promoted without a restart, the slave goes on at each queue's next
	// offset: replication kept its table of next offsets.
	for q := range int32(3) {
		assert.Equal(t, master.CommitLog().QueueOffset("TopicR", q), slave.CommitLog().QueueOffset("TopicR", q), "queue %d", q)
		m := mustPut(t, slave, newTestMessage("TopicR", q, body(1, 10), "", ""))
		assert.Equal(t, master.MaxOffsetInQueue("TopicR", q), m.QueueOffset, "queue %d", q)
	}
}

// A new slave starts at the master's newest file: its commitlog begins
// there, and recovery, dispatch, reads and retention work from it.
func TestAppendReplicaNewSlaveStartsAtMasterFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	putVaried(t, master, 300, rng)
	mcl := master.CommitLog()
	fs := int64(mcl.FileSize())
	start := mcl.MaxOffset() - mcl.MaxOffset()%fs
	require.Greater(t, start, int64(0))

	dir := t.TempDir()
	cfg := testConfig(dir, AsyncFlush)
	slave, err := Open(cfg, nil)
	require.NoError(t, err)
	// A misaligned start is refused; nothing is created.
	_, err = slave.AppendReplica(start+100, []byte{1})
	require.ErrorIs(t, err, ErrReplicaOffset)
	replicate(t, master, slave, start, rng)
	assertSameCommitLog(t, master, slave)
	putVaried(t, master, 150, rng) // into the next files
	replicate(t, master, slave, slave.CommitLog().MaxOffset(), rng)
	assertSameCommitLog(t, master, slave)
	waitDispatched(t, slave)
	check := func(s *Store) {
		for q := range int32(3) {
			want := pullAll(t, master, "TopicR", q, nil)
			got := pullAll(t, s, "TopicR", q, nil)
			require.NotEmpty(t, got)
			// The slave has the master's tail of each queue, at the same
			// queue offsets.
			tail := want[len(want)-len(got):]
			for i := range got {
				assert.Equal(t, tail[i].QueueOffset, got[i].QueueOffset)
				assert.Equal(t, tail[i].Body, got[i].Body)
			}
			assert.Equal(t, got[0].QueueOffset, s.MinOffsetInQueue("TopicR", q))
		}
	}
	check(slave)
	assert.Equal(t, start, slave.CommitLog().MinOffset())

	// Clean restart, then a crash: recovery keeps the commitlog's start.
	require.NoError(t, slave.Shutdown(context.Background()))
	slave = MustOpen(t, cfg)
	assert.Equal(t, start, slave.CommitLog().MinOffset())
	assert.Equal(t, mcl.MaxOffset(), slave.CommitLog().MaxOffset())
	check(slave)
	crash(t, slave)
	env := newTestEnv(time.Now(), 0.1)
	slave = MustOpen(t, cfg, env.options()...)
	assert.Equal(t, mcl.MaxOffset(), slave.CommitLog().MaxOffset())
	check(slave)

	// Retention deletes the slave's older files as a master's.
	waitFullFilesFlushed(t, slave)
	before := slave.CommitLog().Files().Len()
	env.set(time.Now().Add(100 * time.Hour))
	slave.ExecuteDeleteFilesManually()
	slave.RunCleanRound()
	assert.Equal(t, 1, slave.CommitLog().Files().Len(), "had %d files", before)
	assert.Greater(t, slave.CommitLog().MinOffset(), start)
}

// An empty file a slave created before it learned the master's offset is
// dropped.
func TestAppendReplicaEmptyFileReplaced(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	putVaried(t, master, 200, rng)
	fs := int64(master.CommitLog().FileSize())
	start := master.CommitLog().MaxOffset() - master.CommitLog().MaxOffset()%fs
	slave := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	_, err := slave.CommitLog().Files().LastMappedFileOrCreate(0)
	require.NoError(t, err)
	replicate(t, master, slave, start, rng)
	assert.Equal(t, start, slave.CommitLog().MinOffset())
	assert.Equal(t, 1, slave.CommitLog().Files().Len())
}

func TestAppendReplicaRefusesBadData(t *testing.T) {
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	for i := range 5 {
		mustPut(t, master, newTestMessage("T", 0, body(i, 500), "", ""))
	}
	res, ok := master.CommitLog().GetData(0)
	require.True(t, ok)
	good := append([]byte(nil), res.Bytes...)
	res.Release()
	recLen := int(binary.BigEndian.Uint32(good))

	cases := map[string]struct {
		offset int64
		mutate func(b []byte) []byte
		want   error
		took   int // bytes appended before the error
	}{
		"not at the end":     {offset: int64(recLen), mutate: func(b []byte) []byte { return b[recLen:] }, want: ErrReplicaOffset},
		"bad magic":          {mutate: func(b []byte) []byte { b[4] ^= 0xFF; return b }, want: ErrReplicaData},
		"second bad magic":   {mutate: func(b []byte) []byte { b[recLen+5] ^= 0xFF; return b }, want: ErrReplicaData, took: recLen},
		"physical offset":    {mutate: func(b []byte) []byte { b[message.PosPhysicalOffset+7]++; return b }, want: ErrReplicaData},
		"body crc":           {mutate: func(b []byte) []byte { b[recLen-20] ^= 1; return b }, want: ErrReplicaData},
		"size out of bounds": {mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b, 1<<30); return b[:100] }, want: ErrReplicaData},
		"size too small":     {mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b, 20); return b }, want: ErrReplicaData},
		"short blank": {mutate: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, 100)
			binary.BigEndian.PutUint32(b[4:], blankMagicWord)
			return b[:8]
		}, want: ErrReplicaData},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			slave := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
			if tc.offset > 0 {
				_, err := slave.AppendReplica(0, good[:recLen])
				require.NoError(t, err)
				tc.offset += int64(recLen) // a gap after the slave's end
			}
			data := tc.mutate(append([]byte(nil), good...))
			n, err := slave.AppendReplica(tc.offset, data)
			require.ErrorIs(t, err, tc.want)
			assert.Equal(t, tc.took, n)
			want := int64(tc.took)
			if tc.offset > 0 {
				want = int64(recLen)
			}
			assert.Equal(t, want, slave.CommitLog().MaxOffset(), "only whole valid records are kept")
		})
	}

	t.Run("partial record waits", func(t *testing.T) {
		slave := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
		n, err := slave.AppendReplica(0, good[:recLen+3])
		require.NoError(t, err)
		assert.Equal(t, recLen, n)
		n, err = slave.AppendReplica(int64(recLen), good[recLen:recLen+50])
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		n, err = slave.AppendReplica(int64(recLen), good[recLen:])
		require.NoError(t, err)
		assert.Equal(t, len(good)-recLen, n)
		assert.Equal(t, master.CommitLog().MaxOffset(), slave.CommitLog().MaxOffset())
	})
}

// The append listener runs after every put and replica append, and can be
// removed.
func TestAppendListener(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	var calls atomic.Int64
	s.SetAppendListener(func() { calls.Add(1) })
	mustPut(t, s, newTestMessage("T", 0, body(1, 10), "", ""))
	assert.Equal(t, int64(1), calls.Load())
	s.SetAppendListener(nil)
	mustPut(t, s, newTestMessage("T", 0, body(2, 10), "", ""))
	assert.Equal(t, int64(1), calls.Load())

	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	mustPut(t, master, newTestMessage("T", 0, body(1, 10), "", ""))
	res, ok := master.CommitLog().GetData(0)
	require.True(t, ok)
	defer res.Release()
	slave := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	slave.SetAppendListener(func() { calls.Add(1) })
	_, err := slave.AppendReplica(0, res.Bytes)
	require.NoError(t, err)
	assert.Equal(t, int64(2), calls.Load())
}

// A store refuses replica appends after shutdown.
func TestAppendReplicaAfterShutdown(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testConfig(dir, AsyncFlush), nil)
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(context.Background()))
	_, err = s.AppendReplica(0, make([]byte, 100))
	require.ErrorIs(t, err, ErrShutdown)
	_, err = os.Stat(filepath.Join(dir, "commitlog"))
	assert.True(t, os.IsNotExist(err))
}
