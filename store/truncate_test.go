package store

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEpochFileRoundTripAndFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), epochFileName)
	f, err := OpenEpochFile(path)
	require.NoError(t, err)
	assert.Empty(t, f.Entries())
	assert.Equal(t, int32(0), f.LastEpoch())
	require.NoError(t, f.Append(EpochEntry{1, 0}))
	require.NoError(t, f.Append(EpochEntry{3, 1 << 20}))
	require.ErrorIs(t, f.Append(EpochEntry{2, 2 << 20}), ErrEpochOrder)
	// RocketMQ 5's CheckpointFile layout: count, CRC of the lines, lines.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	body := "1-0\n3-1048576\n"
	assert.Equal(t, "2\n"+itoa(int64(epochChecksum(body)))+"\n"+body, string(b))

	g, err := OpenEpochFile(path)
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{1, 0}, {3, 1 << 20}}, g.Entries())
	assert.Equal(t, int32(3), g.LastEpoch())

	// An epoch that wrote nothing is replaced by the next one at its start.
	require.NoError(t, g.Append(EpochEntry{5, 1 << 20}))
	assert.Equal(t, []EpochEntry{{1, 0}, {5, 1 << 20}}, g.Entries())
	require.NoError(t, g.TruncateFrom(1<<20))
	assert.Equal(t, []EpochEntry{{1, 0}}, g.Entries())
	require.NoError(t, g.Reset([]EpochEntry{{1, 0}, {4, 100}}))
	h, err := OpenEpochFile(path)
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{1, 0}, {4, 100}}, h.Entries())
	require.ErrorIs(t, g.Reset([]EpochEntry{{4, 0}, {1, 100}}), ErrEpochOrder)

	// Damage is an error, not an empty history.
	for _, bad := range []string{"2\n0\n1-0\n", "1\n12345\n1-0\n", "1\n0\n1:0\n", "x\n0\n", "2\n0\n3-0\n1-5\n"} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o644))
		_, err := OpenEpochFile(path)
		assert.ErrorIs(t, err, ErrEpochFile, "%q", bad)
	}
	require.NoError(t, os.WriteFile(path, []byte("1\n0\n7-42\n"), 0o644))
	h, err = OpenEpochFile(path)
	require.NoError(t, err, "checksum 0 is not checked")
	assert.Equal(t, []EpochEntry{{7, 42}}, h.Entries())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestConsistentPoint(t *testing.T) {
	e := func(pairs ...int64) []EpochEntry {
		var out []EpochEntry
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, EpochEntry{int32(pairs[i]), pairs[i+1]})
		}
		return out
	}
	tests := []struct {
		name      string
		local     []EpochEntry
		localMax  int64
		master    []EpochEntry
		masterMax int64
		want      int64
		ok        bool
	}{
		{"old master with an unreplicated tail", e(1, 0), 5000, e(1, 0, 2, 4000), 9000, 4000, true},
		{"slave behind its master", e(1, 0, 2, 4000), 4500, e(1, 0, 2, 4000), 9000, 4500, true},
		{"slave ahead of a new master", e(1, 0), 4200, e(1, 0, 3, 4000), 4000, 4000, true},
		{"same epoch, different start: earlier epoch decides", e(1, 0, 3, 700), 900, e(1, 0, 3, 800), 900, 700, true},
		{"several epochs back", e(1, 0, 2, 100, 3, 200), 300, e(1, 0, 2, 100, 5, 150), 400, 150, true},
		{"no common epoch", e(1, 0), 500, e(2, 0), 300, 0, false},
		{"empty local history", nil, 500, e(2, 0), 300, 500, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ConsistentPoint(tc.local, tc.localMax, tc.master, tc.masterMax)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

// TestStoreTruncateToCutsTailAndAllBuiltFromIt: a store is cut in the
// middle of an older file while running. The commitlog, consume queues and
// next queue offsets end there; replication appends at the cut and puts
// (once a master) continue each queue without a gap or a reused offset;
// a restart finds exactly that (the cut bytes were zeroed, not resurrected).
func TestStoreTruncateToCutsTailAndAllBuiltFromIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	cfg := testConfig(dir, AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	var results []PutResult
	for i := range 400 {
		results = append(results, mustPut(t, s, newTestMessage("TopicT", int32(i%3), body(i, 100+rng.IntN(20000)), "", "key"+itoa(int64(i)))))
	}
	require.Greater(t, s.CommitLog().Files().Len(), 3)
	waitDispatched(t, s)
	cut := results[150]
	offset := cut.WroteOffset
	keep := map[int32]int64{} // queue -> messages kept
	for i := range 150 {
		keep[int32(i%3)]++
	}

	require.ErrorIs(t, s.TruncateTo(offset), ErrTruncate, "a master's store is not cut")
	s.SetSlave(true)
	require.ErrorIs(t, s.TruncateTo(offset+1), ErrTruncate, "not a record boundary")
	require.NoError(t, s.TruncateTo(offset))
	assert.Equal(t, offset, s.CommitLog().MaxOffset())
	for q := range int32(3) {
		assert.Equal(t, keep[q], s.MaxOffsetInQueue("TopicT", q), "queue %d", q)
		assert.Equal(t, keep[q], s.CommitLog().QueueOffset("TopicT", q), "next offset of queue %d", q)
		assert.Len(t, pullAll(t, s, "TopicT", q, nil), int(keep[q]))
	}
	r := s.QueryMessage("TopicT", "key"+itoa(int64(200)), 10, 0, time.Now().Add(time.Hour).UnixMilli())
	assert.Empty(t, r.Messages, "no index entry leads to a cut message")
	r.Release()
	r = s.QueryMessage("TopicT", "key"+itoa(int64(20)), 10, 0, time.Now().Add(time.Hour).UnixMilli())
	assert.Len(t, r.Messages, 1, "the kept messages are still indexed")
	r.Release()
	require.NoError(t, s.TruncateTo(offset+1000), "beyond the end: nothing to do")

	// Promoted: puts continue every queue where the cut left it.
	s.SetSlave(false)
	for q := range int32(3) {
		m := mustPut(t, s, newTestMessage("TopicT", q, body(1000, 50), "", ""))
		assert.Equal(t, keep[q], m.QueueOffset, "queue %d", q)
		if q == 0 {
			assert.Equal(t, offset, m.WroteOffset, "the first put lands at the cut")
		}
	}
	end := s.CommitLog().MaxOffset()
	require.NoError(t, s.Shutdown(context.Background()))

	s, err = Open(cfg, nil)
	require.NoError(t, err)
	defer s.Shutdown(context.Background())
	assert.Equal(t, end, s.CommitLog().MaxOffset(), "recovery ends where the store did")
	for q := range int32(3) {
		assert.Equal(t, keep[q]+1, s.MaxOffsetInQueue("TopicT", q), "queue %d", q)
	}
}

// TestStoreTruncateThenReplicate: a slave that was cut follows another
// master from the cut, by replication, and ends identical to it.
func TestStoreTruncateThenReplicate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	master := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	old := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	putVaried(t, master, 120, rng)
	replicate(t, master, old, 0, rng)
	common := master.CommitLog().MaxOffset()
	// The old master wrote a tail nobody has; the new one wrote others.
	putVaried(t, old, 40, rng)
	putVaried(t, master, 60, rng)
	old.SetSlave(true)
	require.NoError(t, old.TruncateTo(common))
	replicate(t, master, old, common, rng)
	assertSameCommitLog(t, master, old)
	waitDispatched(t, old)
	for q := range int32(3) {
		want := pullAll(t, master, "TopicR", q, nil)
		got := pullAll(t, old, "TopicR", q, nil)
		require.Equal(t, len(want), len(got), "queue %d", q)
		for i := range want {
			assert.Equal(t, want[i].Body, got[i].Body)
			assert.Equal(t, want[i].QueueOffset, got[i].QueueOffset)
		}
	}
}

func TestStoreOpensEpochFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testConfig(dir, AsyncFlush), nil)
	require.NoError(t, err)
	require.NoError(t, s.Epochs().Append(EpochEntry{2, 0}))
	require.NoError(t, s.Shutdown(context.Background()))
	s, err = Open(testConfig(dir, AsyncFlush), nil)
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{2, 0}}, s.Epochs().Entries())
	require.NoError(t, s.Shutdown(context.Background()))
	// A damaged epoch file stops the store: its history decides what a
	// failover truncates, so it is never guessed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, epochFileName), []byte("garbage"), 0o644))
	_, err = Open(testConfig(dir, AsyncFlush), nil)
	require.ErrorIs(t, err, ErrEpochFile)
}
