package store

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpClock is a fixed store clock for the checkpoint tests: 2023-11-14,
// after every time they write, and not today's date.
func cpClock() time.Time { return time.UnixMilli(1700000000000 + 20000) }

func TestCheckpointFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint")
	cp, err := OpenCheckpoint(path, CheckpointOptions{Now: cpClock, Fresh: true})
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.EqualValues(t, 4096, st.Size())
	cp.SetPhysicMsgTimestamp(1700000010000)
	cp.SetLogicsMsgTimestamp(1700000005000)
	cp.SetIndexMsgTimestamp(1700000001000)
	assert.EqualValues(t, 1700000002000, cp.MinTimestamp())
	assert.EqualValues(t, 1700000001000, cp.MinTimestampIndex())
	require.NoError(t, cp.Close())
	require.NoError(t, cp.Close())

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, 1700000010000, binary.BigEndian.Uint64(raw[0:]), "big-endian long at 0")
	assert.EqualValues(t, 1700000005000, binary.BigEndian.Uint64(raw[8:]))
	assert.EqualValues(t, 1700000001000, binary.BigEndian.Uint64(raw[16:]))

	log, hook := test.NewNullLogger()
	cp, err = OpenCheckpoint(path, CheckpointOptions{Log: log, Now: cpClock})
	require.NoError(t, err)
	assert.EqualValues(t, 1700000010000, cp.PhysicMsgTimestamp())
	assert.EqualValues(t, 1700000005000, cp.LogicsMsgTimestamp())
	assert.EqualValues(t, 1700000001000, cp.IndexMsgTimestamp())
	require.NoError(t, cp.Close())
	assert.Empty(t, hook.AllEntries(), "a good file is no news")

	cp.SetPhysicMsgTimestamp(1000)
	assert.Zero(t, cp.MinTimestamp(), "never below zero")
}

// writeCheckpointTimes writes a checkpoint page holding the three times.
func writeCheckpointTimes(t *testing.T, path string, physic, logics, index int64) {
	t.Helper()
	page := make([]byte, checkpointFileSize)
	binary.BigEndian.PutUint64(page[0:], uint64(physic))
	binary.BigEndian.PutUint64(page[8:], uint64(logics))
	binary.BigEndian.PutUint64(page[16:], uint64(index))
	require.NoError(t, os.WriteFile(path, page, 0o644))
}

// checkpointDamage lists the checkpoint files OpenCheckpoint cannot trust,
// each with the words its warning must use.
var checkpointDamage = []struct {
	name   string
	reason string
	do     func(t *testing.T, path string, nowMs int64)
}{
	{"missing", "missing", func(t *testing.T, path string, _ int64) {
		require.NoError(t, os.Remove(path))
	}},
	{"empty", "empty", func(t *testing.T, path string, _ int64) {
		require.NoError(t, os.Truncate(path, 0))
	}},
	{"10 bytes", "10 bytes", func(t *testing.T, path string, _ int64) {
		require.NoError(t, os.Truncate(path, 10))
	}},
	{"half a page", "2048 bytes", func(t *testing.T, path string, _ int64) {
		require.NoError(t, os.Truncate(path, 2048))
	}},
	{"garbage bytes", "physicMsgTimestamp", func(t *testing.T, path string, _ int64) {
		require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("garbage!"), checkpointFileSize/8), 0o644))
	}},
	{"negative time", "logicsMsgTimestamp -5", func(t *testing.T, path string, nowMs int64) {
		writeCheckpointTimes(t, path, nowMs, -5, nowMs)
	}},
	{"time two days ahead", "indexMsgTimestamp", func(t *testing.T, path string, nowMs int64) {
		writeCheckpointTimes(t, path, nowMs, nowMs, nowMs+2*24*3600*1000)
	}},
}

func TestOpenCheckpointUntrusted(t *testing.T) {
	nowMs := cpClock().UnixMilli()
	for _, d := range checkpointDamage {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint")
			writeCheckpointTimes(t, path, nowMs, nowMs, nowMs)
			d.do(t, path, nowMs)
			log, hook := test.NewNullLogger()
			cp, err := OpenCheckpoint(path, CheckpointOptions{Log: log, Now: cpClock})
			require.NoError(t, err, "a damaged checkpoint never stops the store")
			defer cp.Close()
			assert.Zero(t, cp.PhysicMsgTimestamp(), "no time is trusted")
			assert.Zero(t, cp.LogicsMsgTimestamp())
			assert.Zero(t, cp.IndexMsgTimestamp())
			require.Len(t, hook.AllEntries(), 1)
			e := hook.LastEntry()
			assert.Equal(t, logrus.WarnLevel, e.Level)
			assert.Equal(t, path, e.Data["file"])
			assert.Contains(t, e.Data["reason"], d.reason)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, make([]byte, checkpointFileSize), raw, "rewritten as a zero page")
		})
	}

	t.Run("missing in a fresh store", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "checkpoint")
		log, hook := test.NewNullLogger()
		cp, err := OpenCheckpoint(path, CheckpointOptions{Log: log, Now: cpClock, Fresh: true})
		require.NoError(t, err)
		require.NoError(t, cp.Close())
		assert.Empty(t, hook.AllEntries(), "nothing to warn about")
	})
	t.Run("times up to a day ahead are kept", func(t *testing.T) {
		// A clock set back a little after the last flush.
		path := filepath.Join(t.TempDir(), "checkpoint")
		ahead := nowMs + 23*3600*1000
		writeCheckpointTimes(t, path, ahead, 0, ahead)
		cp, err := OpenCheckpoint(path, CheckpointOptions{Now: cpClock})
		require.NoError(t, err)
		defer cp.Close()
		assert.Equal(t, ahead, cp.PhysicMsgTimestamp())
		assert.Zero(t, cp.LogicsMsgTimestamp())
		assert.Equal(t, ahead, cp.IndexMsgTimestamp())
	})
}

// TestStoreUntrustedCheckpointAfterCrash: whatever is wrong with the
// checkpoint, a store that crashed opens, warns, walks the whole commitlog
// and rebuilds every index file. To tell a full walk from a partial one the
// test also loses what a crash may lose when no checkpoint time vouches
// for it: one queue's consume-queue files and the index files' hash slots.
func TestStoreUntrustedCheckpointAfterCrash(t *testing.T) {
	for _, d := range checkpointDamage {
		t.Run(d.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), AsyncFlush)
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			recs := putMixed(t, s, 0, 600) // 2.4 MB: three commitlog files
			waitDispatched(t, s)
			nowMs := s.now().UnixMilli()
			crash(t, s)

			cpPath := filepath.Join(cfg.StorePathRootDir, checkpointFileName)
			d.do(t, cpPath, nowMs)
			cqDir := filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "TopicA", "1")
			cqFiles, err := os.ReadDir(cqDir)
			require.NoError(t, err)
			require.NotEmpty(t, cqFiles)
			for _, f := range cqFiles {
				p := filepath.Join(cqDir, f.Name())
				require.NoError(t, os.Truncate(p, 0))
				require.NoError(t, os.Truncate(p, int64(cfg.MappedFileSizeConsumeQ)))
			}
			idxDir := filepath.Join(cfg.StorePathRootDir, indexDirName)
			idxFiles, err := os.ReadDir(idxDir)
			require.NoError(t, err)
			require.NotEmpty(t, idxFiles)
			for _, f := range idxFiles {
				fh, err := os.OpenFile(filepath.Join(idxDir, f.Name()), os.O_RDWR, 0)
				require.NoError(t, err)
				_, err = fh.WriteAt(make([]byte, cfg.MaxHashSlotNum*indexSlotSize), indexHeaderSize)
				require.NoError(t, err)
				require.NoError(t, fh.Close())
			}

			logger, hook := test.NewNullLogger()
			s, err = Open(cfg, logger)
			require.NoError(t, err, "a damaged checkpoint never stops the store")
			t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
			var warned bool
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel && e.Data["file"] == cpPath {
					warned = true
					assert.Contains(t, e.Data["reason"], d.reason)
				}
			}
			assert.True(t, warned, "a warning names the checkpoint and what was wrong")
			checkQueues(t, s, 0, 600, recs)
			// The newest entries and the oldest ones (first index file).
			for _, topic := range []string{"TopicA", "TopicB"} {
				q := s.QueryMessage(topic, "key"+topic, 64, 0, 1<<62)
				assert.Equal(t, 64, len(q.Messages), "index of %s rebuilt", topic)
				q.Release()
				first := pullAll(t, s, topic, 0, nil)[0].StoreTimestamp
				q = s.QueryMessage(topic, "key"+topic, 64, 0, first)
				assert.Positive(t, len(q.Messages), "oldest index entries of %s rebuilt", topic)
				q.Release()
			}
			raw, err := os.ReadFile(cpPath)
			require.NoError(t, err)
			assert.Len(t, raw, checkpointFileSize, "a valid page again")
		})
	}
}
