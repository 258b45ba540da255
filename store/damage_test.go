package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// The damage tests write damageTopic over damageQueues queues: message i
// goes to queue i%4, tagged TagB when i%3 == 0 and TagA otherwise, with the
// unique key k<i>.
const (
	damageTopic  = "T"
	damageQueues = 4
)

type sentMsg struct {
	queueID int32
	qoff    int64
	phy     int64
	size    int32
	body    []byte
	tags    string
	key     string
}

func putDamageSet(t *testing.T, s *Store, from, n, size int) []sentMsg {
	t.Helper()
	out := make([]sentMsg, 0, n)
	for i := from; i < from+n; i++ {
		tags := "TagA"
		if i%3 == 0 {
			tags = "TagB"
		}
		key := fmt.Sprintf("k%05d", i)
		m := newTestMessage(damageTopic, int32(i%damageQueues), body(i, size), tags, key)
		r := mustPut(t, s, m)
		out = append(out, sentMsg{m.QueueID, r.QueueOffset, r.WroteOffset, r.WroteBytes, m.Body, tags, key})
	}
	return out
}

// damageStore writes 1600 messages of about 3.1 KB (five 1 MiB commitlog
// files; 400 entries a queue, in two 200-entry consume-queue files) and
// stops the store cleanly, or as a crash.
func damageStore(t *testing.T, crashed bool) (*Config, []sentMsg) {
	t.Helper()
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	sent := putDamageSet(t, s, 0, 1600, 3000)
	waitDispatched(t, s)
	if crashed {
		crash(t, s)
	} else {
		require.NoError(t, s.Shutdown(context.Background()))
	}
	require.EqualValues(t, 4, sent[len(sent)-1].phy/int64(cfg.MappedFileSizeCommitLog), "five commitlog files")
	return cfg, sent
}

// assertServed checks that every intact message is served at its original
// queue offset, that a lost one never is, that each queue keeps its max
// offset, and that a tag subscriber sees exactly the intact messages of its
// tag.
func assertServed(t *testing.T, s *Store, sent []sentMsg, lost map[int]bool) {
	t.Helper()
	maxOff := map[int32]int64{}
	for _, m := range sent {
		maxOff[m.queueID] = max(maxOff[m.queueID], m.qoff+1)
	}
	for q, n := range maxOff {
		assert.Equal(t, n, s.MaxOffsetInQueue(damageTopic, q), "queue %d keeps its max offset", q)
	}
	var bad []string
	for i, m := range sent {
		r, err := s.GetMessage("g", damageTopic, m.queueID, m.qoff, 1, 0, nil)
		require.NoError(t, err)
		var got *message.MessageExt
		if len(r.Messages) > 0 {
			got, _, err = message.DecodeRecord(r.Messages[0].Bytes)
			require.NoError(t, err)
		}
		status := r.Status
		r.Release()
		switch {
		case lost[i]:
			if got != nil && (got.QueueOffset <= m.qoff || bytes.Equal(got.Body, m.body)) {
				bad = append(bad, fmt.Sprintf("lost message %d served at queue %d offset %d", i, m.queueID, m.qoff))
			}
		case status != Found || got == nil:
			bad = append(bad, fmt.Sprintf("message %d (queue %d offset %d): %v", i, m.queueID, m.qoff, status))
		case got.QueueOffset != m.qoff || got.CommitLogOffset != m.phy || !bytes.Equal(got.Body, m.body):
			bad = append(bad, fmt.Sprintf("message %d (queue %d offset %d): got queue offset %d at %d", i, m.queueID, m.qoff, got.QueueOffset, got.CommitLogOffset))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d messages wrong, first: %s", len(bad), len(sent), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	for q := range maxOff {
		var want, got []string
		for i, m := range sent {
			if m.queueID == q && m.tags == "TagA" && !lost[i] {
				want = append(want, m.key)
			}
		}
		for _, m := range pullAll(t, s, damageTopic, q, NewTagFilter("TagA")) {
			got = append(got, m.Keys())
		}
		if !slices.Equal(want, got) {
			i := 0
			for i < min(len(want), len(got)) && want[i] == got[i] {
				i++
			}
			t.Errorf("a TagA subscriber of queue %d sees %d messages, want %d; first difference at %d: got %v, want %v",
				q, len(got), len(want), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
		}
	}
}

// openLogged opens the store with a log hook, shutting it down at cleanup.
func openLogged(t *testing.T, cfg *Config) (*Store, *test.Hook) {
	t.Helper()
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	s, err := Open(cfg, logger)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s, hook
}

func logged(h *test.Hook, substr string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range h.AllEntries() {
		if strings.Contains(e.Message, substr) {
			out = append(out, e)
		}
	}
	return out
}

// cqFile returns the consume-queue file of topic T holding entry idx of
// queue q, and the entry's position in it.
func cqFile(cfg *Config, q int32, idx int64) (string, int64) {
	off := idx * CQStoreUnitSize
	fs := int64(cfg.MappedFileSizeConsumeQ)
	return filepath.Join(cfg.StorePathRootDir, consumeQueueDirName, damageTopic, fmt.Sprint(q), fileName(off-off%fs)), off % fs
}

// indexOf returns the position in sent of the message at queue q offset qoff.
func indexOf(sent []sentMsg, q int32, qoff int64) int {
	return slices.IndexFunc(sent, func(m sentMsg) bool { return m.queueID == q && m.qoff == qoff })
}

// Damaged consume-queue entries are rebuilt from the commitlog: every
// message stays consumable at its original offset (issue 18, finding 3).
func TestDamageConsumeQueueEntries(t *testing.T) {
	writeEntry := func(t *testing.T, cfg *Config, q int32, idx int64, e CQEntry) {
		path, pos := cqFile(cfg, q, idx)
		b := make([]byte, CQStoreUnitSize)
		putCQEntry(b, e)
		patchFile(t, path, pos, b)
	}
	cases := []struct {
		name    string
		crashed bool
		damage  func(t *testing.T, cfg *Config, sent []sentMsg)
	}{
		{"16 bytes flipped from a size field", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			// Finding 3, scaled down: byte 10 of the entry is in its size.
			path, pos := cqFile(cfg, 0, 100)
			xorFile(t, path, pos+10, 16, 0x01)
		}},
		{"16 bytes flipped from a size field, after a crash", true, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 0, 100)
			xorFile(t, path, pos+10, 16, 0x01)
		}},
		{"16 bytes inverted from a size field", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 0, 100)
			xorFile(t, path, pos+10, 16, 0xFF)
		}},
		{"commitlog offset moved into its record", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 1, 250)
			xorFile(t, path, pos+7, 1, 0x10)
		}},
		{"flipped tags code", false, func(t *testing.T, cfg *Config, sent []sentMsg) {
			require.Equal(t, "TagA", sent[indexOf(sent, 0, 100)].tags)
			path, pos := cqFile(cfg, 0, 100)
			xorFile(t, path, pos+19, 1, 0x01)
		}},
		{"entry pointing at another queue's record", false, func(t *testing.T, cfg *Config, sent []sentMsg) {
			other := sent[indexOf(sent, 0, 100)+1]
			require.EqualValues(t, 1, other.queueID)
			writeEntry(t, cfg, 0, 100, CQEntry{CommitLogOffset: other.phy, Size: other.size, TagsCode: message.TagsHashCode(other.tags)})
		}},
		{"two entries swapped", false, func(t *testing.T, cfg *Config, sent []sentMsg) {
			a, b := sent[indexOf(sent, 2, 300)], sent[indexOf(sent, 2, 301)]
			writeEntry(t, cfg, 2, 300, CQEntry{CommitLogOffset: b.phy, Size: b.size, TagsCode: message.TagsHashCode(b.tags)})
			writeEntry(t, cfg, 2, 301, CQEntry{CommitLogOffset: a.phy, Size: a.size, TagsCode: message.TagsHashCode(a.tags)})
		}},
		{"first entry of a queue", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 3, 0)
			xorFile(t, path, pos+8, 4, 0x01)
		}},
		{"last entry of a queue", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 3, 399)
			xorFile(t, path, pos+16, 4, 0x01)
		}},
		{"damage in two queues", false, func(t *testing.T, cfg *Config, _ []sentMsg) {
			path, pos := cqFile(cfg, 0, 100)
			xorFile(t, path, pos+10, 16, 0x01)
			path, pos = cqFile(cfg, 2, 350)
			xorFile(t, path, pos, 20, 0x01)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, sent := damageStore(t, tc.crashed)
			tc.damage(t, cfg, sent)

			s, h := openLogged(t, cfg)
			assertServed(t, s, sent, nil)
			cut := logged(h, "truncating consume queue")
			if assert.NotEmpty(t, cut, "the cut is logged") {
				assert.Contains(t, cut[0].Data, "queueOffset")
				assert.Contains(t, cut[0].Data, "reason")
			}
			next := putDamageSet(t, s, 1600, 1, 100)[0]
			assert.EqualValues(t, 400, next.qoff, "the next put gets the next offset")
			sent = append(sent, next)
			waitDispatched(t, s)
			require.NoError(t, s.Shutdown(context.Background()))

			// Rebuilt for good: the next reopen finds nothing to repair.
			s, h = openLogged(t, cfg)
			assertServed(t, s, sent, nil)
			assert.Empty(t, logged(h, "truncating consume queue"))
		})
	}
}

// A damaged commitlog record costs that record only: the records after it
// stay consumable at their offsets, the damaged one is never served, and
// the lost range is logged with the queue offsets it held (issue 18,
// finding 4).
func TestDamageCommitLogRecord(t *testing.T) {
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
	path := func(cfg *Config, off int64) (string, int64) { return commitLogFile(cfg, off) }
	cases := []struct {
		name    string
		crashed bool
		// damage returns the messages lost and the commitlog range lost.
		damage func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange)
	}{
		{"flipped body byte", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			p, pos := path(cfg, sent[700].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			return []int{700}, LostRange{sent[700].phy, sent[701].phy}
		}},
		{"flipped body byte, after a crash", true, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			p, pos := path(cfg, sent[700].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			return []int{700}, LostRange{sent[700].phy, sent[701].phy}
		}},
		{"16 bytes flipped in a header", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			p, pos := path(cfg, sent[700].phy)
			xorFile(t, p, pos, 16, 0x01)
			return []int{700}, LostRange{sent[700].phy, sent[701].phy}
		}},
		{"two adjacent records", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			p, pos := path(cfg, sent[700].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			p, pos = path(cfg, sent[701].phy)
			xorFile(t, p, pos, 8, 0x01)
			return []int{700, 701}, LostRange{sent[700].phy, sent[702].phy}
		}},
		{"flipped blank end-of-file marker", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			k := lastOfFile(sent, 2)
			end := sent[k].phy + int64(sent[k].size)
			p, pos := path(cfg, end)
			xorFile(t, p, pos, 8, 0x01)
			return nil, LostRange{end, 3 * fileSize}
		}},
		{"last record of a file and its blank marker", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			k := lastOfFile(sent, 2)
			p, pos := path(cfg, sent[k].phy)
			xorFile(t, p, pos+300, 1, 0x01)
			xorFile(t, p, pos+int64(sent[k].size), 8, 0xFF)
			return []int{k}, LostRange{sent[k].phy, 3 * fileSize}
		}},
		{"zeroed header in the last file", false, func(t *testing.T, cfg *Config, sent []sentMsg) ([]int, LostRange) {
			require.EqualValues(t, 4, sent[1500].phy/fileSize)
			p, pos := path(cfg, sent[1500].phy)
			patchFile(t, p, pos, make([]byte, 16))
			return []int{1500}, LostRange{sent[1500].phy, sent[1501].phy}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, sent := damageStore(t, tc.crashed)
			lostIdx, lr := tc.damage(t, cfg, sent)
			lost := map[int]bool{}
			for _, i := range lostIdx {
				lost[i] = true
			}

			s, h := openLogged(t, cfg)
			assertServed(t, s, sent, lost)
			assert.Equal(t, []LostRange{lr}, s.CommitLog().LostRanges())
			ranges := logged(h, "damaged records lost")
			if assert.Len(t, ranges, 1, "one line names the lost range") {
				assert.Equal(t, lr.From, ranges[0].Data["from"])
				assert.Equal(t, lr.To, ranges[0].Data["to"])
				assert.Equal(t, logrus.ErrorLevel, ranges[0].Level)
			}
			blanked := logged(h, "messages lost with a damaged commitlog range")
			for _, i := range lostIdx {
				found := false
				for _, e := range blanked {
					found = found || e.Data["queueId"] == sent[i].queueID &&
						e.Data["fromQueueOffset"].(int64) <= sent[i].qoff && sent[i].qoff <= e.Data["toQueueOffset"].(int64)
				}
				assert.True(t, found, "the log names queue %d offset %d", sent[i].queueID, sent[i].qoff)
				_, err := s.LookMessageByOffset(sent[i].phy)
				assert.ErrorIs(t, err, ErrMessageNotFound, "a lost record is not looked up by offset")
				q := s.QueryMessage(damageTopic, sent[i].key, 64, 0, math.MaxInt64)
				assert.Empty(t, q.Messages, "a lost record is not found by key")
				q.Release()
			}
			q := s.QueryMessage(damageTopic, sent[1599].key, 64, 0, math.MaxInt64)
			assert.Len(t, q.Messages, 1, "records after the damage are found by key")
			q.Release()

			// The next put of each queue gets its next offset.
			sent = append(sent, putDamageSet(t, s, 1600, 8, 100)...)
			for i, m := range sent[1600:] {
				assert.EqualValues(t, 400+i/damageQueues, m.qoff)
			}
			waitDispatched(t, s)
			require.NoError(t, s.Shutdown(context.Background()))

			// Reopened, clean or after a crash, it is the same.
			s, h = openLogged(t, cfg)
			assert.Equal(t, []LostRange{lr}, s.CommitLog().LostRanges())
			assert.Len(t, logged(h, "damaged records lost"), 1)
			assertServed(t, s, sent, lost)
			crash(t, s)
			s, _ = openLogged(t, cfg)
			assert.Equal(t, []LostRange{lr}, s.CommitLog().LostRanges())
			assertServed(t, s, sent, lost)
		})
	}
}

// Damage in a commitlog file recovery does not walk is met by dispatch when
// it rebuilds consume queues: it skips the damaged record, not the rest of
// the file, and the gap it leaves in the queue is the one lost message.
func TestDamageCommitLogMetByDispatch(t *testing.T) {
	cfg, sent := damageStore(t, false)
	require.Zero(t, sent[100].phy/int64(cfg.MappedFileSizeCommitLog), "in the first file: not walked")
	p, pos := commitLogFile(cfg, sent[100].phy)
	xorFile(t, p, pos+4, 4, 0x01) // the magic code
	require.NoError(t, os.RemoveAll(filepath.Join(cfg.StorePathRootDir, consumeQueueDirName)))

	s, h := openLogged(t, cfg)
	assertServed(t, s, sent, map[int]bool{100: true})
	skipped := logged(h, "dispatch: damaged commitlog records skipped")
	if assert.Len(t, skipped, 1) {
		assert.Equal(t, sent[100].phy, skipped[0].Data["from"])
		assert.Equal(t, sent[101].phy, skipped[0].Data["to"])
	}
	assert.Equal(t, []LostRange{{sent[100].phy, sent[101].phy}}, s.CommitLog().LostRanges())
	_, err := s.LookMessageByOffset(sent[100].phy)
	assert.Error(t, err)
}

// Byte flips in index files never crash a query or a restart, and a query
// returns only records that are what the index says: a record starting at
// the offset, carrying the key.
func TestDamageIndexFiles(t *testing.T) {
	const keys = 7
	setup := func(t *testing.T) (*Config, []sentMsg, []string) {
		cfg := testConfig(t.TempDir(), AsyncFlush)
		cfg.MaxHashSlotNum = 16
		cfg.MaxIndexNum = 100
		s, err := Open(cfg, nil)
		require.NoError(t, err)
		var sent []sentMsg
		for i := range 300 {
			m := newTestMessage(damageTopic, 0, body(i, 200), "", fmt.Sprintf("key%d", i%keys))
			r := mustPut(t, s, m)
			sent = append(sent, sentMsg{0, r.QueueOffset, r.WroteOffset, r.WroteBytes, m.Body, "", m.Keys()})
		}
		// A message whose body holds a whole record of key0: an index entry
		// pointing into it must not be taken for that record.
		inner := newTestMessage(damageTopic, 0, []byte("inner"), "", "key0")
		inner.StoreHost = testBornHost
		rec, err := message.EncodeRecord(nil, inner)
		require.NoError(t, err)
		carrier := newTestMessage(damageTopic, 0, append([]byte("carrier:"), rec...), "", "carrier")
		r := mustPut(t, s, carrier)
		sent = append(sent, sentMsg{0, r.QueueOffset, r.WroteOffset, r.WroteBytes, carrier.Body, "", "carrier"})
		require.NoError(t, s.Shutdown(context.Background()))
		dir := filepath.Join(cfg.StorePathRootDir, indexDirName)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var files []string
		for _, e := range entries {
			files = append(files, filepath.Join(dir, e.Name()))
		}
		require.GreaterOrEqual(t, len(files), 3, "full index files and a newest one")
		return cfg, sent, files
	}
	slots, entriesAt := indexHeaderSize, indexHeaderSize+16*indexSlotSize
	cases := []struct {
		name   string
		damage func(t *testing.T, cfg *Config, sent []sentMsg, files []string)
	}{
		{"slots pointing past the last entry of a full file", func(t *testing.T, _ *Config, _ []sentMsg, files []string) {
			b := make([]byte, 16*indexSlotSize)
			for i := 0; i < len(b); i += indexSlotSize {
				binary.BigEndian.PutUint32(b[i:], 100) // indexCount of a full file
			}
			patchFile(t, files[0], int64(slots), b)
		}},
		{"prevIndex pointing forward", func(t *testing.T, _ *Config, _ []sentMsg, files []string) {
			for e := 1; e < 100; e++ {
				patchFile(t, files[1], int64(entriesAt+e*indexEntrySize+16), binary.BigEndian.AppendUint32(nil, uint32(min(e+1, 99))))
			}
		}},
		{"an entry pointing into a record's body", func(t *testing.T, cfg *Config, sent []sentMsg, files []string) {
			carrier := sent[len(sent)-1]
			p, pos := commitLogFile(cfg, carrier.phy)
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			at := bytes.Index(data[pos:pos+int64(carrier.size)], []byte("carrier:"))
			require.Positive(t, at)
			fake := carrier.phy + int64(at) + int64(len("carrier:"))
			// Every key0 entry now points at the inner record.
			patched := 0
			for _, f := range files {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				n := int(binary.BigEndian.Uint32(b[36:]))
				for e := 1; e < n; e++ {
					if int32(binary.BigEndian.Uint32(b[entriesAt+e*indexEntrySize:])) == indexKeyHash(damageTopic+"#key0") {
						patchFile(t, f, int64(entriesAt+e*indexEntrySize+4), binary.BigEndian.AppendUint64(nil, uint64(fake)))
						patched++
					}
				}
			}
			require.Positive(t, patched)
		}},
		{"random flips everywhere", func(t *testing.T, _ *Config, _ []sentMsg, files []string) {
			rnd := rand.New(rand.NewPCG(18, 4))
			for _, f := range files {
				st, err := os.Stat(f)
				require.NoError(t, err)
				for range 200 {
					xorFile(t, f, rnd.Int64N(st.Size()-16), 16, byte(1+rnd.IntN(255)))
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, sent, files := setup(t)
			tc.damage(t, cfg, sent, files)
			for range 2 { // and again after a restart
				s, _ := openLogged(t, cfg)
				for k := range keys {
					key := fmt.Sprintf("key%d", k)
					q := s.QueryMessage(damageTopic, key, 64, 0, math.MaxInt64)
					for _, rec := range q.Messages {
						m, _, err := message.DecodeRecord(rec.Bytes)
						require.NoError(t, err)
						assert.Equal(t, rec.StartOffset, m.CommitLogOffset, "a record starting at the offset")
						assert.Equal(t, key, m.Keys())
						i := slices.IndexFunc(sent, func(x sentMsg) bool { return x.phy == m.CommitLogOffset })
						if assert.GreaterOrEqual(t, i, 0, "one of the messages put") {
							assert.Equal(t, sent[i].body, m.Body)
						}
					}
					q.Release()
				}
				require.NoError(t, s.Shutdown(context.Background()))
			}
		})
	}
}

// The consume-queue check accepts every kind of entry dispatch writes: a
// clean reopen and a crash reopen cut nothing.
func TestDamageCheckAcceptsEveryEntryKind(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	want := map[string]int{}
	put := func(m *message.MessageExt) {
		mustPut(t, s, m)
		want[fmt.Sprintf("%s/%d", m.Topic, m.QueueID)]++
	}
	for i := range 50 {
		put(newTestMessage("Plain", 0, body(i, 500), "", ""))
		put(newTestMessage("Tagged", 1, body(i, 500), "TagA", "k1 k2"))
		put(newTestMessage("Tagged", 2, body(i, 500), "标签-ünïcode-😀", ""))
		put(newTestMessage("Tagged", 3, body(i, 500), strings.Repeat("long-tag-", 10), ""))
		for _, topic := range []string{scheduleTopic, timerTopic} {
			m := newTestMessage(topic, 2, body(i, 300), "TagX", "")
			m.SetProperty(message.PropTimerOutMS, fmt.Sprint(1_900_000_000_000+i))
			put(m)
		}
		m := newTestMessage("Tx", 0, body(i, 300), "", "")
		m.SysFlag = message.TransactionPreparedType
		mustPut(t, s, m) // no queue entry
		m = newTestMessage("Tx", 0, body(i, 300), "", "")
		m.SysFlag = message.TransactionCommitType
		put(m)
	}
	var msgs []*message.Message
	for i := range 20 {
		msgs = append(msgs, &message.Message{Body: body(i, 100), Properties: map[string]string{message.PropTags: "b"}})
	}
	batch, err := message.AppendBatch(nil, msgs)
	require.NoError(t, err)
	r := s.PutMessages(context.Background(), &message.MessageExtBatch{MessageExt: *newTestMessage("Batch", 0, batch, "", "")})
	require.Equal(t, PutOK, r.Status, "%v", r.Err)
	want["Batch/0"] += 20
	// A deleted and re-created topic.
	put(newTestMessage("Gone", 0, body(1, 100), "", ""))
	waitDispatched(t, s)
	require.NoError(t, s.DeleteTopic("Gone"))
	delete(want, "Gone/0")
	put(newTestMessage("Gone", 0, body(2, 100), "", ""))
	waitDispatched(t, s)
	require.NoError(t, s.Shutdown(context.Background()))

	for _, crashed := range []bool{false, true} {
		s, h := openLogged(t, cfg)
		assert.Empty(t, logged(h, "truncating consume queue"), "crashed before: %v", crashed)
		assert.Empty(t, logged(h, "dispatching again to rebuild"))
		for k, n := range want {
			topic, q, _ := strings.Cut(k, "/")
			assert.Len(t, pullAll(t, s, topic, int32(q[0]-'0'), nil), n, k)
		}
		if crashed {
			require.NoError(t, s.Shutdown(context.Background()))
		} else {
			waitDispatched(t, s)
			crash(t, s)
		}
	}
}

// Blank entries in the middle of a queue (messages lost to damage) point at
// nothing: retention and lookups by time look past them.
func TestDamageBlankEntriesInTheMiddle(t *testing.T) {
	cq := NewConsumeQueue(t.TempDir(), "T", 0, 10*CQStoreUnitSize, nil)
	require.NoError(t, cq.Load())
	require.NoError(t, cq.Recover())
	for i := range 25 {
		require.NoError(t, cq.Put(CQEntry{CommitLogOffset: int64(1000 + i*100), Size: 100}, int64(i)))
	}
	// Entry 9, the last of the first file, and entry 12 were lost.
	first, last, n, err := cq.BlankLost(LostRange{1900, 2000})
	require.NoError(t, err)
	assert.Equal(t, []int64{9, 9, 1}, []int64{first, last, int64(n)})
	r, ok := cq.EntriesFrom(12)
	require.True(t, ok)
	putCQEntry(r.MappedFile().Buffer()[2*CQStoreUnitSize:], CQEntry{Size: blankEntrySize})
	r.Release()
	for _, idx := range []int64{9, 12} {
		e, ok := cq.Entry(idx)
		require.True(t, ok)
		assert.True(t, e.Blank(), "entry %d", idx)
	}

	storeTime := func(off int64, _ int32) int64 { return off } // time grows with the offset
	assert.EqualValues(t, 2, cq.OffsetByTime(1150, storeTime), "a blank in the middle does not split the order")
	assert.EqualValues(t, 9, cq.OffsetByTime(1950, storeTime), "a blank takes the time of the next message")
	assert.EqualValues(t, 25, cq.OffsetByTime(9999, storeTime))

	// Entry 8's message (at 1800) is still stored: the first file stays.
	assert.Zero(t, cq.DeleteExpired(1750, time.Second))
	assert.EqualValues(t, 8, cq.MinOffsetInQueue())
	assert.Equal(t, 1, cq.DeleteExpired(1850, time.Second))
	assert.EqualValues(t, 10, cq.MinOffsetInQueue())
}

// A flipped endPhyOffset in the newest index file would make indexing skip
// every later message: the file is dropped and rebuilt instead.
func TestDamageIndexEndOffset(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	for i := range 50 {
		mustPut(t, s, newTestMessage(damageTopic, 0, body(i, 200), "", "before"))
	}
	require.NoError(t, s.Shutdown(context.Background()))
	dir := filepath.Join(cfg.StorePathRootDir, indexDirName)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	xorFile(t, filepath.Join(dir, files[len(files)-1].Name()), 24, 1, 0x01) // endPhyOffset's high byte

	s, h := openLogged(t, cfg)
	assert.NotEmpty(t, logged(h, "ends beyond the commitlog"))
	for i := range 10 {
		mustPut(t, s, newTestMessage(damageTopic, 0, body(i, 200), "", "after"))
	}
	waitDispatched(t, s)
	for key, n := range map[string]int{"before": 50, "after": 10} {
		q := s.QueryMessage(damageTopic, key, 64, 0, math.MaxInt64)
		assert.Len(t, q.Messages, n, key)
		q.Release()
	}
}

// A queue longer than the three files recovery scans: damage at the first
// scanned entry is rebuilt from the end of the last entry before the scan,
// and entries whose messages retention deleted are not cut.
func TestDamageConsumeQueueScanStartAndExpiredEntries(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	var sent []sentMsg
	for i := range 1000 {
		m := newTestMessage(damageTopic, 0, body(i, 2000), "TagA", "")
		r := mustPut(t, s, m)
		sent = append(sent, sentMsg{0, r.QueueOffset, r.WroteOffset, r.WroteBytes, m.Body, "TagA", ""})
	}
	require.NoError(t, s.Shutdown(context.Background()))
	// Five consume-queue files: recovery scans entries 400-999.
	path, pos := cqFile(cfg, 0, 400)
	xorFile(t, path, pos+8, 4, 0x01)

	s, h := openLogged(t, cfg)
	cut := logged(h, "truncating consume queue")
	if assert.Len(t, cut, 1) {
		assert.EqualValues(t, 400, cut[0].Data["queueOffset"])
		assert.Equal(t, sent[399].phy+int64(sent[399].size), cut[0].Data["rebuildFrom"])
	}
	assertServed(t, s, sent, nil)
	require.NoError(t, s.Shutdown(context.Background()))

	// The first commitlog file goes, as retention would delete it, while
	// entries 400-498 of its messages are still in the scanned files.
	first := slices.IndexFunc(sent, func(m sentMsg) bool { return m.phy >= 1<<20 })
	require.Greater(t, first, 400)
	require.NoError(t, os.Remove(filepath.Join(cfg.StorePathRootDir, "commitlog", fileName(0))))
	s, h = openLogged(t, cfg)
	assert.Empty(t, logged(h, "truncating consume queue"), "entries of deleted messages are not damage")
	assert.EqualValues(t, first, s.MinOffsetInQueue(damageTopic, 0))
	assertServed(t, s, sent[first:], nil)
}
