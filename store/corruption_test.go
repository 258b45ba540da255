package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crash stops s the way kill -9 would look to the next Open: the loops stop,
// the abort file stays and nothing is written on purpose; the mappings are
// dropped (the page cache keeps what was written, as after a process crash).
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.shutdownOnce.Do(func() {
		s.shutdown.Store(true)
		close(s.stop)
		s.wg.Wait()
		close(s.reput.stop)
		s.reput.wg.Wait()
		s.cqMu.Lock()
		for _, cq := range s.cqs {
			_ = cq.Close()
		}
		s.cqMu.Unlock()
		if s.index != nil {
			_ = s.index.Close()
		}
		_ = s.commitLog.Shutdown()
		_ = s.checkpoint.Close()
		require.NoError(t, s.lock.Unlock())
	})
	_, err := os.Stat(filepath.Join(s.cfg.StorePathRootDir, abortFileName))
	require.NoError(t, err, "the abort file stays after a crash")
}

type putRecord struct {
	queueID     int32
	queueOffset int64
	body        []byte
}

// putMixed writes n messages over topics A and B and two queues each,
// remembering where each went.
func putMixed(t *testing.T, s *Store, from, n int) []putRecord {
	var out []putRecord
	for i := from; i < from+n; i++ {
		topic := "TopicA"
		if i%3 == 0 {
			topic = "TopicB"
		}
		m := newTestMessage(topic, int32(i%2), body(i, 4000), "", "key"+topic)
		r := mustPut(t, s, m)
		out = append(out, putRecord{queueID: m.QueueID, queueOffset: r.QueueOffset, body: m.Body})
		_ = topic
	}
	return out
}

// checkQueues asserts every queue holds exactly the expected messages at
// exactly their original offsets.
func checkQueues(t *testing.T, s *Store, from, n int, recs []putRecord) {
	t.Helper()
	want := map[string][][]byte{}
	for k, r := range recs {
		i := from + k
		topic := "TopicA"
		if i%3 == 0 {
			topic = "TopicB"
		}
		key := topic + "/" + string(rune('0'+r.queueID))
		require.EqualValues(t, len(want[key]), r.queueOffset, "offsets were contiguous at put time")
		want[key] = append(want[key], r.body)
	}
	for key, bodies := range want {
		topic, q := key[:strings.IndexByte(key, '/')], int32(key[len(key)-1]-'0')
		assert.EqualValues(t, len(bodies), s.MaxOffsetInQueue(topic, q), key)
		got := pullAll(t, s, topic, q, nil)
		require.Equal(t, len(bodies), len(got), key)
		for j := range got {
			assert.EqualValues(t, j, got[j].QueueOffset, key)
			assert.Equal(t, bodies[j], got[j].Body, "%s offset %d", key, j)
		}
	}
	_ = n
}

func TestCorruptionDeletedConsumeQueueDirs(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			recs := putMixed(t, s, 0, 600) // 2.4 MB: three commitlog files
			require.NoError(t, s.Shutdown(context.Background()))

			// The newest messages' queue dir goes: rebuilt from the others' end.
			require.NoError(t, os.RemoveAll(filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "TopicA", "1")))
			s, err = Open(cfg, nil)
			require.NoError(t, err)
			checkQueues(t, s, 0, 600, recs)
			require.NoError(t, s.Shutdown(context.Background()))

			// The whole consumequeue dir goes: every queue is rebuilt.
			require.NoError(t, os.RemoveAll(filepath.Join(cfg.StorePathRootDir, consumeQueueDirName)))
			s = MustOpen(t, cfg)
			checkQueues(t, s, 0, 600, recs)
			recs = append(recs, putMixed(t, s, 600, 30)...)
			waitDispatched(t, s)
			checkQueues(t, s, 0, 630, recs)
			q := s.QueryMessage("TopicB", "keyTopicB", 64, 0, 1<<62)
			assert.Len(t, q.Messages, 64, "index intact")
			q.Release()
		})
	}
}

func TestCorruptionBogusConsumeQueueEntries(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			recs := putMixed(t, s, 0, 300)
			clMax := s.CommitLogMaxOffset()
			require.NoError(t, s.Shutdown(context.Background()))

			// Append three entries pointing past the commitlog end to TopicA/0.
			dir := filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "TopicA", "0")
			cq := NewConsumeQueue(filepath.Join(cfg.StorePathRootDir, consumeQueueDirName), "TopicA", 0, cfg.MappedFileSizeConsumeQ, nil)
			require.NoError(t, cq.Load())
			require.NoError(t, cq.Recover())
			good := cq.MaxOffsetInQueue()
			for i := int64(0); i < 3; i++ {
				require.NoError(t, cq.Put(CQEntry{CommitLogOffset: clMax + 1000*i, Size: 700, TagsCode: 0}, good+i))
			}
			require.NoError(t, cq.FlushAll())
			require.NoError(t, cq.Close())

			logger, hook := test.NewNullLogger()
			logger.SetLevel(logrus.DebugLevel)
			s, err = Open(cfg, logger)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			assert.Equal(t, good, s.MaxOffsetInQueue("TopicA", 0), "bogus entries dropped")
			checkQueues(t, s, 0, 300, recs)
			var found bool
			for _, e := range hook.AllEntries() {
				if strings.Contains(e.Message, "beyond the commitlog end") {
					found = true
					assert.Contains(t, e.Data["file"], dir)
					assert.Contains(t, e.Data, "offset")
				}
			}
			assert.True(t, found, "a log line names the file, offset and reason")

			// New messages continue at the right offsets.
			r := mustPut(t, s, newTestMessage("TopicA", 0, body(1, 10), "", ""))
			assert.Equal(t, good, r.QueueOffset)
		})
	}
}

func TestCorruptionReopenWithoutCleanShutdown(t *testing.T) {
	for _, ft := range flushTypes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), ft)
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			recs := putMixed(t, s, 0, 600)
			waitDispatched(t, s)
			end := s.CommitLogMaxOffset() % int64(cfg.MappedFileSizeCommitLog)
			crash(t, s)

			// Lose what a power cut could lose: the newest consume-queue
			// entries of one queue and the index files; and leave half a
			// record of garbage after the commitlog's end.
			cqDir := filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, "TopicB", "1")
			files, err := os.ReadDir(cqDir)
			require.NoError(t, err)
			last := filepath.Join(cqDir, files[len(files)-1].Name())
			require.NoError(t, os.Truncate(last, 0))
			require.NoError(t, os.Truncate(last, int64(cfg.MappedFileSizeConsumeQ)))
			require.NoError(t, os.RemoveAll(filepath.Join(cfg.StorePathRootDir, indexDirName)))
			clFiles, err := os.ReadDir(filepath.Join(cfg.StorePathRootDir, "commitlog"))
			require.NoError(t, err)
			lastCL := filepath.Join(cfg.StorePathRootDir, "commitlog", clFiles[len(clFiles)-1].Name())
			f, err := os.OpenFile(lastCL, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte{0, 0, 2, 0, 0xDA, 0xA3, 0x20, 0xA7, 1, 2, 3}, end)
			require.NoError(t, err)
			require.NoError(t, f.Close())

			logger, hook := test.NewNullLogger()
			logger.SetLevel(logrus.DebugLevel)
			s, err = Open(cfg, logger)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			assert.False(t, s.LastExitOK())
			checkQueues(t, s, 0, 600, recs)
			var named bool
			for _, e := range hook.AllEntries() {
				if e.Data["file"] != nil && e.Data["offset"] != nil && e.Data["reason"] != nil {
					named = true
				}
			}
			assert.True(t, named, "recovery logs file, offset and reason")
			q := s.QueryMessage("TopicB", "keyTopicB", 64, 0, 1<<62)
			assert.Len(t, q.Messages, 64, "index rebuilt")
			q.Release()

			// Writes continue with the original offset sequence.
			recs = append(recs, putMixed(t, s, 600, 30)...)
			waitDispatched(t, s)
			checkQueues(t, s, 0, 630, recs)
		})
	}
}

func TestCorruptionMisplacedConsumeQueueEntryNotServed(t *testing.T) {
	logger, hook := test.NewNullLogger()
	s, err := Open(testConfig(t.TempDir(), AsyncFlush), logger)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	for i := 0; i < 10; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 300), "", ""))
	}
	waitDispatched(t, s)
	// Point entry 5 three bytes into record 4: same size, wrong place.
	cq := s.consumeQueue("T", 0)
	e4, ok := cq.Entry(4)
	require.True(t, ok)
	mf := cq.Files().FirstMappedFile()
	putCQEntry(mf.Buffer()[5*CQStoreUnitSize:], CQEntry{CommitLogOffset: e4.CommitLogOffset + 3, Size: e4.Size})

	msgs := pullAll(t, s, "T", 0, nil)
	require.Equal(t, 9, len(msgs))
	for _, m := range msgs {
		assert.NotEqual(t, int64(5), m.QueueOffset)
	}
	require.NotNil(t, hook.LastEntry())
	assert.Contains(t, hook.LastEntry().Message, "does not point at a record")
	assert.EqualValues(t, 5, hook.LastEntry().Data["offset"])
}

func TestCorruptionIndexHeaderRebuilt(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		mustPut(t, s, newTestMessage("T", 0, body(i, 100), "", "key"+string(rune('a'+i%10))))
	}
	require.NoError(t, s.Shutdown(context.Background()))

	// indexCount far beyond the file: following it would read outside.
	dir := filepath.Join(cfg.StorePathRootDir, indexDirName)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	f, err := os.OpenFile(filepath.Join(dir, files[0].Name()), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0x7F, 0xFF, 0xFF, 0xFF}, 36)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	logger, hook := test.NewNullLogger()
	s, err = Open(cfg, logger)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	q := s.QueryMessage("T", "keyc", 64, 0, 1<<62)
	assert.Len(t, q.Messages, 10, "rebuilt from the commitlog")
	q.Release()
	var logged bool
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "corrupt header") {
			logged = true
			assert.Contains(t, e.Data["file"], files[0].Name())
		}
	}
	assert.True(t, logged)
}
