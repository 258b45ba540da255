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
// The bytes of the master's lost ranges go through AppendReplicaLost.
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
			if lr, ok := mcl.LostRangeAfter(at); ok && lr.From < at+int64(len(piece)) {
				if lr.From > at {
					piece = piece[:lr.From-at] // up to the range
				} else {
					piece = piece[:min(int64(len(piece)), lr.To-at)]
					require.Empty(t, pending, "a lost range starts after whole records")
					n, err := slave.AppendReplicaLost(at, piece)
					require.NoError(t, err)
					require.Equal(t, len(piece), n)
					b, at = b[len(piece):], at+int64(len(piece))
					continue
				}
			}
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

// assertSameBytes checks both commitlogs hold the same written bytes, filler
// after blank markers included (never written on either side).
func assertSameBytes(t *testing.T, master, slave *Store) {
	t.Helper()
	mcl, scl := master.CommitLog(), slave.CommitLog()
	require.Equal(t, mcl.MaxOffset(), scl.MaxOffset())
	for off := scl.MinOffset(); off < scl.MaxOffset(); off = mcl.RollNextFile(off) {
		mr, ok := mcl.GetData(off)
		require.True(t, ok)
		sr, ok := scl.GetData(off)
		require.True(t, ok)
		require.True(t, bytes.Equal(mr.Bytes, sr.Bytes), "bytes of the file at %d", off)
		mr.Release()
		sr.Release()
	}
}

// A master's lost ranges reach a slave as they are: AppendReplicaLost writes
// the damaged bytes verbatim, so the files stay identical, and records the
// range, so the slave serves exactly the master's intact messages at their
// queue offsets; its own recovery, clean or after a crash, finds the same
// range in the same bytes.
func TestAppendReplicaLostKeepsMasterDamage(t *testing.T) {
	const fileSize = 1 << 20
	lastOfFile := func(sent []sentMsg, file int64) int {
		k := -1
		for i, m := range sent {
			if m.phy/fileSize == file {
				k = i
			}
		}
		return k
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange)
	}{
		{"a record", func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			p, pos := commitLogFile(cfg, sent[700].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			return []int{700}, LostRange{sent[700].phy, sent[701].phy}
		}},
		{"a file's last record and its blank marker", func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			k := lastOfFile(sent, 2)
			p, pos := commitLogFile(cfg, sent[k].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			xorFile(t, p, pos+int64(sent[k].size), 8, 0xFF)
			return []int{k}, LostRange{sent[k].phy, 3 * fileSize}
		}},
		{"across a file boundary", func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			// The blank marker closing file 2 and the first record of file 3.
			k := lastOfFile(sent, 2)
			p, pos := commitLogFile(cfg, sent[k].phy+int64(sent[k].size))
			xorFile(t, p, pos, 8, 0xFF)
			require.EqualValues(t, 3*fileSize, sent[k+1].phy)
			p, pos = commitLogFile(cfg, sent[k+1].phy)
			xorFile(t, p, pos, 8, 0xFF)
			return []int{k + 1}, LostRange{sent[k].phy + int64(sent[k].size), sent[k+2].phy}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(i)))
			cfg, sent := damageStore(t, false)
			lostIdx, lr := tc.damage(t, cfg, sent)
			lost := map[int]bool{}
			for _, i := range lostIdx {
				lost[i] = true
			}
			master := MustOpen(t, cfg)
			require.Equal(t, []LostRange{lr}, master.CommitLog().LostRanges())

			scfg := testConfig(t.TempDir(), AsyncFlush)
			slave := MustOpen(t, scfg)
			replicate(t, master, slave, 0, rng)
			assertSameBytes(t, master, slave)
			assert.Equal(t, []LostRange{lr}, slave.CommitLog().LostRanges(), "recorded whole, though it came in pieces")
			waitDispatched(t, slave)
			assertServed(t, slave, sent, lost)

			require.NoError(t, slave.Shutdown(context.Background()))
			slave = MustOpen(t, scfg)
			assert.Equal(t, []LostRange{lr}, slave.CommitLog().LostRanges(), "found again by a clean restart's recovery")
			assertServed(t, slave, sent, lost)
			crash(t, slave)
			slave = MustOpen(t, scfg)
			assert.Equal(t, []LostRange{lr}, slave.CommitLog().LostRanges(), "found again after a crash")
			assertServed(t, slave, sent, lost)
			assertSameBytes(t, master, slave)
		})
	}
}

// AppendReplicaLost takes bytes only where the commitlog ends, within one
// file, and nothing of a refused call is kept.
func TestAppendReplicaLostRefuses(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	fs := int64(s.CommitLog().FileSize())
	junk := bytes.Repeat([]byte{0xAB}, 100)
	_, err := s.AppendReplicaLost(10, junk)
	assert.ErrorIs(t, err, ErrReplicaOffset, "an empty commitlog starts at a file boundary")
	n, err := s.AppendReplicaLost(fs, junk)
	require.NoError(t, err)
	assert.Equal(t, len(junk), n)
	assert.Equal(t, fs+100, s.CommitLog().MaxOffset())
	_, err = s.AppendReplicaLost(fs+50, junk)
	assert.ErrorIs(t, err, ErrReplicaOffset)
	_, err = s.AppendReplicaLost(fs+100, make([]byte, fs))
	assert.ErrorIs(t, err, ErrReplicaData, "across the end of the file")
	n, err = s.AppendReplicaLost(fs+100, junk)
	require.NoError(t, err)
	assert.Equal(t, len(junk), n)
	assert.Equal(t, []LostRange{{fs, fs + 200}}, s.CommitLog().LostRanges())
	assert.Equal(t, fs+200, s.CommitLog().MaxOffset())
	waitDispatched(t, s)
	require.NoError(t, s.Shutdown(context.Background()))
	_, err = s.AppendReplicaLost(fs+200, junk)
	assert.ErrorIs(t, err, ErrShutdown)
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
