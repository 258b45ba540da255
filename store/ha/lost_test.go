package ha

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

// putRecords stores n messages as putN does and returns where each record
// starts and ends.
func putRecords(t testing.TB, st *store.Store, from, n, size int) (starts, ends []int64) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r := st.PutMessage(context.Background(), msg("TopicHA", int32(i%3), i, size+(i*131)%size))
		require.Equal(t, store.PutOK, r.Status, "%v", r.Err)
		starts = append(starts, r.WroteOffset)
		ends = append(ends, r.WroteOffset+int64(r.WroteBytes))
	}
	return starts, ends
}

// xorCommitLog flips n bytes of the commitlog in dir at offset, as a bad
// disk would; the store must be shut down.
func xorCommitLog(t testing.TB, dir string, offset int64, n int) {
	t.Helper()
	fs := int64(storeConfig(dir).MappedFileSizeCommitLog)
	f, err := os.OpenFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", offset-offset%fs)), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, offset%fs)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0xFF
	}
	_, err = f.WriteAt(b, offset%fs)
	require.NoError(t, err)
}

// A master whose recovery found a lost range (damaged records it skips)
// replicates past it: a slave of this package is told of the range, copies
// its bytes as they are and records it, so both commitlogs stay identical,
// both skip the same records, the slave's own recovery finds the same range
// and SYNC_MASTER sends after it are acknowledged.
func TestLostRangeOnMasterIsReplicated(t *testing.T) {
	cases := []struct {
		name     string
		compress bool
		// damage damages the master's commitlog in dir, beyond what the
		// slave copied (the first 200 records), and returns the lost range
		// its recovery finds.
		damage func(t *testing.T, dir string, starts, ends []int64) store.LostRange
	}{
		{"a record's magic code", false, func(t *testing.T, dir string, starts, ends []int64) store.LostRange {
			xorCommitLog(t, dir, starts[300]+4, 4)
			return store.LostRange{From: starts[300], To: starts[301]}
		}},
		{"a record's magic code, compressed frames", true, func(t *testing.T, dir string, starts, ends []int64) store.LostRange {
			xorCommitLog(t, dir, starts[300]+4, 4)
			return store.LostRange{From: starts[300], To: starts[301]}
		}},
		{"a blank marker and the next file's first record", false, func(t *testing.T, dir string, starts, ends []int64) store.LostRange {
			fs := int64(storeConfig(dir).MappedFileSizeCommitLog)
			j := 0
			for starts[j] != fs {
				j++
			}
			require.Greater(t, j, 200, "the damage is beyond what the slave holds")
			xorCommitLog(t, dir, ends[j-1], 8) // the marker closing file 0
			xorCommitLog(t, dir, starts[j], 8)
			return store.LostRange{From: ends[j-1], To: starts[j+1]}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := haConfig()
			cfg.Compress = tc.compress
			mdir, sdir := t.TempDir(), t.TempDir()
			ms, ss := openStore(t, mdir), openStore(t, sdir)
			m := startMaster(t, ms, cfg, nil)
			sl := startSlave(t, ss, cfg, nil, m.Addr().String())
			starts, ends := putRecords(t, ms, 0, 200, 2000)
			waitOffset(t, ss, ends[199])
			require.NoError(t, sl.Shutdown(context.Background()))
			require.NoError(t, ss.Shutdown(context.Background()))
			more, moreEnds := putRecords(t, ms, 200, 400, 2000) // into the next file
			starts, ends = append(starts, more...), append(ends, moreEnds...)
			end := ends[len(ends)-1]
			require.NoError(t, m.Shutdown(context.Background()))
			require.NoError(t, ms.Shutdown(context.Background()))
			lr := tc.damage(t, mdir, starts, ends)

			ms = openStore(t, mdir)
			require.Equal(t, []store.LostRange{lr}, ms.CommitLog().LostRanges(), "the master's recovery found the damage")
			require.Equal(t, end, ms.CommitLog().MaxOffset())
			mlog, mhook := testLog()
			m = startMaster(t, ms, cfg, mlog)
			ss = openStore(t, sdir)
			slog, shook := testLog()
			sl = startSlave(t, ss, cfg, slog, m.Addr().String())
			waitOffset(t, ss, end)
			assert.True(t, logged(mhook, "HA push reaches a lost commitlog range"))
			assert.True(t, logged(shook, "copying the bytes as they are"))
			assertSameCommitLog(t, ms, ss)
			assert.Equal(t, []store.LostRange{lr}, ss.CommitLog().LostRanges())
			assertSameQueues(t, ms, ss)
			assert.Equal(t, SlaveFollowing, sl.Status().State)

			// SYNC_MASTER sends after the range are acknowledged by the slave.
			ms.SetReplicaWaiter(m.WaitReplicated)
			r := ms.PutMessage(context.Background(), msg("TopicHA", 0, 9999, 500))
			assert.Equal(t, store.PutOK, r.Status, "%v", r.Err)
			end = r.WroteOffset + int64(r.WroteBytes)
			waitOffset(t, ss, end)
			ms.SetReplicaWaiter(nil)

			// The slave's own recovery finds the same range in its copy.
			require.NoError(t, sl.Shutdown(context.Background()))
			require.NoError(t, ss.Shutdown(context.Background()))
			ss = openStore(t, sdir)
			assert.Equal(t, []store.LostRange{lr}, ss.CommitLog().LostRanges())
			assertSameCommitLog(t, ms, ss)
			assertSameQueues(t, ms, ss)
		})
	}
}

// A RocketMQ slave (no hello) gets a lost range's bytes as plain frames, as
// a RocketMQ master would send them; a slave that sent a hello gets the
// announcement first, at the range's start.
func TestWireLostRangeAnnouncedToHelloSlavesOnly(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	starts, ends := putRecords(t, st, 0, 50, 1000)
	end := ends[len(ends)-1]
	require.NoError(t, st.Shutdown(context.Background()))
	xorCommitLog(t, dir, starts[20]+4, 4)
	st = openStore(t, dir)
	lr := store.LostRange{From: starts[20], To: starts[21]}
	require.Equal(t, []store.LostRange{lr}, st.CommitLog().LostRanges())
	m := startMaster(t, st, haConfig(), nil)
	want := masterBytes(t, st, 0, int(end))

	t.Run("RocketMQ slave", func(t *testing.T) {
		s := dialRaw(t, m.Addr().String())
		s.report(0)
		var got []byte
		for int64(len(got)) < end {
			off, body := s.frame()
			require.Equal(t, int64(len(got)), off, "plain frames, one after the other")
			got = append(got, body...)
		}
		assert.Equal(t, want, got, "the damaged bytes as they are")
	})
	t.Run("hello", func(t *testing.T) {
		s := dialRaw(t, m.Addr().String())
		s.write((&hello{}).encode(nil))
		off, _ := s.frame()
		require.Equal(t, answerOffset, off)
		var got []byte
		for int64(len(got)) < lr.From {
			off, body := s.frame()
			require.Equal(t, int64(len(got)), off)
			got = append(got, body...)
		}
		require.Equal(t, lr.From, int64(len(got)), "frames end at the range")
		ann := s.readFull(headerSize + lostSize)
		wantAnn := []byte{0xFF, 'H', 'A', 'L', 0, 0, 0, 0, 0, 0, 0, 16}
		wantAnn = binary.BigEndian.AppendUint64(wantAnn, uint64(lr.From))
		wantAnn = binary.BigEndian.AppendUint64(wantAnn, uint64(lr.To))
		assert.Equal(t, wantAnn, ann)
		off, body := s.frame()
		assert.Equal(t, lr.From, off)
		assert.Equal(t, want[lr.From:lr.To], body, "one frame: the range's bytes")
		got = append(got, body...)
		for int64(len(got)) < end {
			off, body := s.frame()
			require.Equal(t, int64(len(got)), off)
			got = append(got, body...)
		}
		assert.Equal(t, want, got)
	})
	bits := lostOffsetBits
	assert.Equal(t, lostOffset, int64(bits))
}

// A slave that copied records before its master's disk damaged them holds
// them intact; when the window before its offset overlaps the master's lost
// range, that is not divergence: it follows on.
func TestLostRangeIntactOnSlaveIsNotDivergence(t *testing.T) {
	mdir := t.TempDir()
	ms, ss := openStore(t, mdir), openStore(t, t.TempDir())
	m := startMaster(t, ms, haConfig(), nil)
	sl := startSlave(t, ss, haConfig(), nil, m.Addr().String())
	putN(t, ms, 0, 100, 2000)
	starts, ends := putRecords(t, ms, 100, 3, 300) // small: the window covers two
	end := ends[2]
	waitOffset(t, ss, end)
	require.Less(t, end-starts[1], int64(windowMax))
	require.NoError(t, m.Shutdown(context.Background()))
	require.NoError(t, ms.Shutdown(context.Background()))
	xorCommitLog(t, mdir, starts[1]+4, 4) // the last record but one

	ms = openStore(t, mdir)
	require.Equal(t, []store.LostRange{{From: starts[1], To: starts[2]}}, ms.CommitLog().LostRanges())
	mlog, mhook := testLog()
	m = startMaster(t, ms, haConfig(), mlog)
	sl.SetMasterAddress(m.Addr().String())
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 1 }, waitFor, time.Millisecond)
	assert.True(t, logged(mhook, "overlaps a lost commitlog range"))
	assert.False(t, sl.Status().Diverged)
	end = putN(t, ms, 200, 20, 1000)
	waitOffset(t, ss, end)
	assert.Equal(t, SlaveFollowing, sl.Status().State)
	assert.Empty(t, ss.CommitLog().LostRanges(), "the slave's copy is intact")
}

// A slave whose own disk damaged records just before its end (a lost range
// its recovery found) leaves them out of its window: its damaged copy
// cannot match the master's, and that is not divergence either.
func TestLostRangeOnSlaveIsNotDivergence(t *testing.T) {
	ms, sdir := openStore(t, t.TempDir()), t.TempDir()
	ss := openStore(t, sdir)
	m := startMaster(t, ms, haConfig(), nil)
	sl := startSlave(t, ss, haConfig(), nil, m.Addr().String())
	putN(t, ms, 0, 100, 2000)
	starts, ends := putRecords(t, ms, 100, 3, 300)
	waitOffset(t, ss, ends[2])
	require.NoError(t, sl.Shutdown(context.Background()))
	require.NoError(t, ss.Shutdown(context.Background()))
	xorCommitLog(t, sdir, starts[1]+4, 4)

	ss = openStore(t, sdir)
	require.Equal(t, []store.LostRange{{From: starts[1], To: starts[2]}}, ss.CommitLog().LostRanges())
	sl = startSlave(t, ss, haConfig(), nil, m.Addr().String())
	end := putN(t, ms, 200, 20, 1000)
	waitOffset(t, ss, end)
	assert.Equal(t, SlaveFollowing, sl.Status().State)
	assert.False(t, sl.Status().Diverged)
}

// A slave whose commitlog ends exactly at a file boundary (it just took the
// blank marker closing a file, or a crash recovery cut the first record of
// a new file) fingerprints the bytes up to that marker, since the filler
// after it is never copied: a master that lost its tail and wrote past the
// boundary, or another master with a larger log, is refused; its own master
// is followed.
func TestReplicationDivergedAtFileBoundary(t *testing.T) {
	orig := openStore(t, t.TempDir())
	starts, ends := putRecords(t, orig, 0, 600, 2000)
	origEnd := ends[len(ends)-1]
	fs := int64(orig.CommitLog().FileSize())
	k := 0 // the last record of file 0
	for starts[k+1] < fs {
		k++
	}
	require.Greater(t, origEnd, fs+10000)
	markerEnd := ends[k] + 8
	file0 := masterBytes(t, orig, 0, int(fs))

	atBoundary := func(t *testing.T) *store.Store {
		st := openStore(t, t.TempDir())
		n, err := st.AppendReplica(0, file0)
		require.NoError(t, err)
		require.Equal(t, len(file0), n)
		require.Equal(t, fs, st.CommitLog().MaxOffset())
		return st
	}
	checkHello := func(t *testing.T, st *store.Store) {
		f := newFakeMaster(t)
		startSlave(t, st, haConfig(), nil, f.ln.Addr().String())
		_, h := f.accept(t)
		require.Len(t, h, helloEndSize)
		be := binary.BigEndian
		assert.NotZero(t, be.Uint32(h[4:])&helloWindowEnd, "flags say the window ends elsewhere")
		assert.EqualValues(t, windowMax, be.Uint32(h[8:]), "windowLen")
		assert.Equal(t, crc32.Checksum(file0[markerEnd-windowMax:markerEnd], crcTable), be.Uint32(h[12:]), "windowCRC")
		assert.Equal(t, markerEnd, int64(be.Uint64(h[16:])), "windowEnd: the blank marker's end")
		assert.Equal(t, fs, int64(be.Uint64(h[24:])), "the offset is the last group")
	}
	t.Run("hello", func(t *testing.T) { checkHello(t, atBoundary(t)) })
	t.Run("hello after recovery cut a new file's first record", func(t *testing.T) {
		dir := t.TempDir()
		st := openStore(t, dir)
		n, err := st.AppendReplica(0, file0)
		require.NoError(t, err)
		require.Equal(t, len(file0), n)
		first := masterBytes(t, orig, fs, int(ends[k+1]-fs))
		n, err = st.AppendReplica(fs, first)
		require.NoError(t, err)
		require.Equal(t, len(first), n)
		require.NoError(t, st.Shutdown(context.Background()))
		xorCommitLog(t, dir, fs+4, 4)
		st = openStore(t, dir)
		require.Equal(t, fs, st.CommitLog().MaxOffset())
		checkHello(t, st)
	})

	refused := func(t *testing.T, master *store.Store) {
		log, hook := testLog()
		m := startMaster(t, master, haConfig(), log)
		st := atBoundary(t)
		sl := startSlave(t, st, haConfig(), nil, m.Addr().String())
		require.Eventually(t, func() bool { s := sl.Status(); return s.State == SlaveRefused && s.Diverged }, waitFor, time.Millisecond)
		assert.Contains(t, sl.Status().LastError, "differ")
		assert.True(t, logged(hook, "differs from this master's"))
		assert.Empty(t, m.Status().Slaves)
		assert.Equal(t, fs, st.CommitLog().MaxOffset(), "the slave keeps its data and takes nothing")
	}
	t.Run("master lost its tail and wrote past the boundary", func(t *testing.T) {
		lossy := openStore(t, t.TempDir())
		n, err := lossy.AppendReplica(0, file0[:ends[200]])
		require.NoError(t, err)
		require.EqualValues(t, ends[200], n)
		require.Less(t, ends[200], fs)
		putN(t, lossy, 5000, 400, 1500)
		require.Greater(t, lossy.CommitLog().MaxOffset(), fs)
		refused(t, lossy)
	})
	t.Run("another master with a larger log", func(t *testing.T) {
		other := openStore(t, t.TempDir())
		putN(t, other, 7000, 600, 1700)
		require.Greater(t, other.CommitLog().MaxOffset(), fs)
		refused(t, other)
	})
	t.Run("its own master", func(t *testing.T) {
		m := startMaster(t, orig, haConfig(), nil)
		st := atBoundary(t)
		sl := startSlave(t, st, haConfig(), nil, m.Addr().String())
		waitOffset(t, st, origEnd)
		assertSameCommitLog(t, orig, st)
		assert.Equal(t, SlaveFollowing, sl.Status().State)
	})
}
