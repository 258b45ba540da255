package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// fillCommitLog writes n same-size messages (so positions repeat exactly) and
// shuts down cleanly, returning the put results.
func fillCommitLog(t *testing.T, cfg *Config, n int) []PutResult {
	t.Helper()
	cl, err := NewCommitLog(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, cl.Load())
	require.NoError(t, cl.Recover(true, nil))
	cl.Start()
	var out []PutResult
	for i := range n {
		r := cl.PutMessage(context.Background(), clMsg("Rec", 0, clBody(i, 3000), map[string]string{"i": "v"}))
		require.Equal(t, PutOK, r.Status)
		out = append(out, r)
	}
	require.NoError(t, cl.Shutdown())
	return out
}

// commitLogFile returns the path of the commitlog file holding offset.
func commitLogFile(cfg *Config, offset int64) (string, int64) {
	fs := int64(cfg.MappedFileSizeCommitLog)
	return filepath.Join(cfg.StorePathRootDir, "commitlog", fileName(offset-offset%fs)), offset % fs
}

// patchFile overwrites bytes at a position of a commitlog file, as a crash or
// a bad disk would.
func patchFile(t *testing.T, path string, pos int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func reopen(t *testing.T, cfg *Config, normal bool) (*CommitLog, *test.Hook) {
	t.Helper()
	l, h := logHook()
	return mustOpenCommitLog(t, cfg, l, normal, nil), h
}

// assertRecoveryLog checks the one line that names file, offset and reason.
func assertRecoveryLog(t *testing.T, h *test.Hook, file string, offset int64, reason string) {
	t.Helper()
	for _, e := range h.AllEntries() {
		if e.Data["file"] == file && e.Data["offset"] == offset {
			assert.Contains(t, e.Data["reason"], reason)
			assert.Equal(t, logrus.WarnLevel, e.Level)
			return
		}
	}
	t.Fatalf("no recovery log line for %s at %d; have %v", file, offset, h.AllEntries())
}

func TestRecoverCleanShutdownKeepsEverything(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	puts := fillCommitLog(t, cfg, 800) // ~2.3 MiB: 3 files
	last := puts[len(puts)-1]
	cl, h := reopen(t, cfg, true)
	assert.Equal(t, last.WroteOffset+int64(last.WroteBytes), cl.MaxOffset())
	assert.Equal(t, cl.MaxOffset(), cl.FlushedWhere())
	assert.Len(t, walkCommitLog(t, cl), len(puts))
	assert.Equal(t, last.StoreTimestamp, cl.LastStoreTimestamp())
	found := false
	for _, e := range h.AllEntries() {
		if e.Message == "commitlog recovered" {
			found = true
			assert.Equal(t, logrus.InfoLevel, e.Level)
		}
		assert.NotEqual(t, logrus.WarnLevel, e.Level, "a clean restart warns about nothing: %s", e.Message)
	}
	assert.True(t, found)

	// Appending continues right after the last record.
	cl.SetQueueOffset("Rec", 0, int64(len(puts)))
	r := cl.PutMessage(context.Background(), clMsg("Rec", 0, []byte("next"), nil))
	require.Equal(t, PutOK, r.Status)
	assert.Equal(t, last.WroteOffset+int64(last.WroteBytes), r.WroteOffset)
	assert.EqualValues(t, len(puts), r.QueueOffset)
}

func TestRecoverCorruption(t *testing.T) {
	const n = 600
	cases := []struct {
		name string
		// damage returns the index of the first record that must be lost and
		// the reason expected in the log.
		damage func(t *testing.T, cfg *Config, puts []PutResult) (int, string)
	}{
		{"truncated last record", func(t *testing.T, cfg *Config, puts []PutResult) (int, string) {
			r := puts[n-1]
			path, pos := commitLogFile(cfg, r.WroteOffset)
			patchFile(t, path, pos+int64(r.WroteBytes)/2, make([]byte, int(r.WroteBytes)/2))
			return n - 1, "record"
		}},
		{"zeroed tail", func(t *testing.T, cfg *Config, puts []PutResult) (int, string) {
			r := puts[n-3]
			path, pos := commitLogFile(cfg, r.WroteOffset)
			patchFile(t, path, pos, make([]byte, 3*int(r.WroteBytes)))
			return n - 3, endOfData
		}},
		// Damage to the last record is a torn tail: nothing follows it.
		// (Damage followed by intact records: TestRecoverSkipsDamagedRecords.)
		{"flipped body byte in the last record", func(t *testing.T, cfg *Config, puts []PutResult) (int, string) {
			k := n - 1
			r := puts[k]
			path, pos := commitLogFile(cfg, r.WroteOffset)
			b := make([]byte, 1)
			f, err := os.Open(path)
			require.NoError(t, err)
			_, err = f.ReadAt(b, pos+200)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			patchFile(t, path, pos+200, []byte{b[0] ^ 0x5A})
			return k, "crc"
		}},
		{"torn size field of the last record", func(t *testing.T, cfg *Config, puts []PutResult) (int, string) {
			r := puts[n-1]
			path, pos := commitLogFile(cfg, r.WroteOffset)
			patchFile(t, path, pos, binary.BigEndian.AppendUint32(nil, 0x7FFF0000))
			return n - 1, "record"
		}},
	}
	for _, ft := range clFlushModes {
		for _, tc := range cases {
			t.Run(ft.String()+"/"+tc.name, func(t *testing.T) {
				cfg := clTestConfig(t, ft)
				puts := fillCommitLog(t, cfg, n)
				lost, reason := tc.damage(t, cfg, puts)
				cut := puts[lost].WroteOffset

				cl, h := reopen(t, cfg, false) // abort file present: abnormal recovery
				assert.Equal(t, cut, cl.MaxOffset(), "recovery ends at the last good record")
				assert.Equal(t, cut, cl.FlushedWhere())
				path, _ := commitLogFile(cfg, cut)
				if reason != endOfData {
					assertRecoveryLog(t, h, path, cut, reason)
				}
				recs := walkCommitLog(t, cl)
				require.Len(t, recs, lost)
				for i, d := range recs {
					assert.Equal(t, puts[i].WroteOffset, d.CommitLogOffset)
					assert.EqualValues(t, i, d.ConsumeQueueOffset)
				}

				// The dirty tail is zeroed: a new record of the same size written at
				// the cut must not bring back the old records behind it.
				cl.SetQueueOffset("Rec", 0, int64(lost))
				r := cl.PutMessage(context.Background(), clMsg("Rec", 0, clBody(9999, 3000), map[string]string{"i": "v"}))
				require.Equal(t, PutOK, r.Status)
				require.Equal(t, cut, r.WroteOffset)
				require.NoError(t, cl.Shutdown())

				cl2, _ := reopen(t, cfg, false)
				assert.Equal(t, cut+int64(r.WroteBytes), cl2.MaxOffset(), "no resurrected records")
				assert.Len(t, walkCommitLog(t, cl2), lost+1)
			})
		}
	}
}

func TestRecoverWithoutShutdownAndGarbageTail(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	cl, err := NewCommitLog(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, cl.Load())
	require.NoError(t, cl.Recover(true, nil))
	var puts []PutResult
	for i := range 500 {
		r := cl.PutMessage(context.Background(), clMsg("Crash", 0, clBody(i, 2500), nil))
		require.Equal(t, PutOK, r.Status)
		puts = append(puts, r)
	}
	// A torn write of a next record: a plausible header, then nothing.
	end := cl.MaxOffset()
	mf := cl.Files().LastMappedFile()
	pos := int(end - mf.FileFromOffset())
	binary.BigEndian.PutUint32(mf.Buffer()[pos:], 2600)
	binary.BigEndian.PutUint32(mf.Buffer()[pos+4:], uint32(0xDAA320A7))
	copy(mf.Buffer()[pos+8:], "garbage garbage")
	// No Shutdown, no flush loop: the process "dies" here. The mapping is
	// shared, so a second open sees what the page cache holds.
	t.Cleanup(func() { _ = cl.Shutdown() })

	cl2, h := reopen(t, cfg, false)
	assert.Equal(t, end, cl2.MaxOffset())
	assert.Len(t, walkCommitLog(t, cl2), len(puts))
	path, _ := commitLogFile(cfg, end)
	assertRecoveryLog(t, h, path, end, "record")
	rest := cl2.Files().LastMappedFile().Buffer()[pos:]
	assert.Equal(t, make([]byte, 64), rest[:64], "garbage zeroed")
}

func TestRecoverAbnormalStartsFromCheckpointFile(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	puts := fillCommitLog(t, cfg, 1000) // 3 files
	cp, err := OpenCheckpoint(filepath.Join(cfg.StorePathRootDir, "checkpoint"), CheckpointOptions{})
	require.NoError(t, err)
	defer cp.Close()
	fs := int64(cfg.MappedFileSizeCommitLog)
	// Everything stored before the second file's first record is known flushed.
	var secondFirst PutResult
	for _, p := range puts {
		if p.WroteOffset == fs {
			secondFirst = p
		}
	}
	require.Equal(t, fs, secondFirst.WroteOffset)
	cp.SetPhysicMsgTimestamp(secondFirst.StoreTimestamp + 3000)
	cp.SetLogicsMsgTimestamp(secondFirst.StoreTimestamp + 3000)

	cl, err := NewCommitLog(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, cl.Load())
	require.NoError(t, cl.Recover(false, cp))
	defer cl.Shutdown()
	assert.GreaterOrEqual(t, cl.RecoverStartOffset(), fs, "walk starts at a file the checkpoint covers")
	last := puts[len(puts)-1]
	assert.Equal(t, last.WroteOffset+int64(last.WroteBytes), cl.MaxOffset())

	require.NoError(t, cl.Recover(false, nil))
	assert.Zero(t, cl.RecoverStartOffset(), "without a checkpoint the walk starts at the first file")
}

func TestRecoverEmptyAndWrongSizedFile(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	cl, _ := reopen(t, cfg, false)
	assert.Zero(t, cl.MaxOffset())
	require.NoError(t, cl.Shutdown())

	dir := filepath.Join(cfg.StorePathRootDir, "commitlog")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bad := filepath.Join(dir, fileName(0))
	require.NoError(t, os.WriteFile(bad, make([]byte, 1000), 0o644))
	cl2, err := NewCommitLog(cfg, nil)
	require.NoError(t, err)
	err = cl2.Load()
	assert.ErrorIs(t, err, ErrFileSize)
	assert.ErrorContains(t, err, bad)
}

func TestCheckRecordErrorsAreTyped(t *testing.T) {
	m := clMsg("T", 0, []byte("body"), map[string]string{message.PropTags: "A", message.PropUniqKey: "U"})
	m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	rec, err := message.EncodeRecord(nil, m)
	require.NoError(t, err)
	d, err := CheckRecord(rec, true)
	require.NoError(t, err)
	assert.Equal(t, message.TagsHashCode("A"), d.TagsCode)
	assert.Equal(t, "U", d.UniqKey)
	assert.EqualValues(t, len(rec), d.MsgSize)

	r, _ := message.ParseRecord(rec)
	body := r.Body()
	body[0] ^= 1
	_, err = CheckRecord(rec, true)
	assert.ErrorIs(t, err, ErrCorruptRecord)
	assert.ErrorIs(t, err, message.ErrBodyCRC)
	_, err = CheckRecord(rec, false)
	assert.NoError(t, err, "reput does not check the CRC")
	_, err = CheckRecord(make([]byte, 100), false)
	assert.ErrorIs(t, err, ErrCorruptRecord)
	assert.ErrorIs(t, err, message.ErrBadMagic)
	d, err = CheckRecord([]byte{0, 0, 0, 100, 0xCB, 0xD4, 0x31, 0x94}, true)
	require.NoError(t, err)
	assert.True(t, d.BlankRecord)
	assert.Zero(t, d.MsgSize)
}

// A process killed during a put stops its write at some byte. Whatever part
// of the write reached the file, recovery keeps the whole record or none of
// it: a record cut inside its properties passes the body CRC, and would be
// served without its UNIQ_KEY.
func TestRecoverAfterAWriteStoppedAtAnyByte(t *testing.T) {
	for name, ft := range map[string]FlushDiskType{"ASYNC_FLUSH": AsyncFlush, "SYNC_FLUSH": SyncFlush} {
		t.Run(name, func(t *testing.T) {
			cfg := clTestConfig(t, ft)
			cl := mustOpenCommitLog(t, cfg, nil, true, nil)
			require.Equal(t, PutOK, cl.PutMessage(context.Background(),
				clMsg("Cut", 0, []byte("kept"), map[string]string{message.PropUniqKey: "U0"})).Status)
			type piece struct {
				pos int
				b   []byte
			}
			var writes []piece // in the order they were made
			put := cl.put
			cl.put = func(mf *MappedFile, b []byte, pos int) error {
				writes = append(writes, piece{pos, bytes.Clone(b)})
				return put(mf, b, pos)
			}
			last := cl.PutMessage(context.Background(), clMsg("Cut", 0, []byte("cut short"),
				map[string]string{message.PropUniqKey: "U1", message.PropKeys: "k1"}))
			require.Equal(t, PutOK, last.Status)
			require.NoError(t, cl.Shutdown())

			total := 0
			for _, w := range writes {
				total += len(w.b)
			}
			require.EqualValues(t, last.WroteBytes, total)
			path, pos := commitLogFile(cfg, last.WroteOffset)
			for k := 0; k <= total; k++ {
				// The file as a kill after k bytes of the write leaves it
				// (each piece copied from its start).
				patchFile(t, path, pos, make([]byte, total))
				for left, i := k, 0; left > 0; i++ {
					n := min(left, len(writes[i].b))
					patchFile(t, path, int64(writes[i].pos), writes[i].b[:n])
					left -= n
				}
				re := mustOpenCommitLog(t, cfg, nil, false, nil)
				want := last.WroteOffset
				if k == total {
					want += int64(last.WroteBytes)
				}
				assert.Equal(t, want, re.MaxOffset(), "the write stopped after %d of %d bytes", k, total)
				require.NoError(t, re.Shutdown())
			}
		})
	}
}

// xorFile flips bytes of a file: each of n bytes at pos is XORed with mask.
func xorFile(t *testing.T, path string, pos int64, n int, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, pos)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= mask
	}
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
}

// lostLogLine returns the recovery log line naming lost range r.
func lostLogLine(h *test.Hook, r LostRange) *logrus.Entry {
	for _, e := range h.AllEntries() {
		if e.Data["from"] == r.From && e.Data["to"] == r.To && e.Data["reason"] != nil {
			return e
		}
	}
	return nil
}

// A damaged record followed by intact ones costs only itself: recovery
// finds where intact records go on, keeps them, and remembers and logs the
// damaged byte range. Every reopen finds the same range.
func TestRecoverSkipsDamagedRecords(t *testing.T) {
	const n = 600 // ~3.1 KB records: two 1 MiB files
	type damage struct {
		lost   []int // records that must be lost
		ranges []LostRange
		reason string
	}
	rng := func(puts []PutResult, from, to int) LostRange { // records [from, to)
		return LostRange{From: puts[from].WroteOffset, To: puts[to].WroteOffset}
	}
	lastOfFirstFile := func(cfg *Config, puts []PutResult) int {
		k := 0
		for k+1 < len(puts) && puts[k+1].WroteOffset < int64(cfg.MappedFileSizeCommitLog) {
			k++
		}
		return k
	}
	cases := []struct {
		name     string
		noCRC    bool // CheckCRCOnRecover off
		queueEnd bool // recover told a consume queue claims the whole log
		damage   func(t *testing.T, cfg *Config, puts []PutResult) damage
	}{
		{"flipped body byte", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[100].WroteOffset)
			xorFile(t, path, pos+200, 1, 0x5A)
			return damage{[]int{100}, []LostRange{rng(puts, 100, 101)}, "crc"}
		}},
		{"flipped size field", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[100].WroteOffset)
			xorFile(t, path, pos, 1, 0xFF)
			return damage{[]int{100}, []LostRange{rng(puts, 100, 101)}, "total size"}
		}},
		{"16 bytes flipped across two records", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[101].WroteOffset)
			xorFile(t, path, pos-8, 16, 0x01)
			return damage{[]int{100, 101}, []LostRange{rng(puts, 100, 102)}, "record"}
		}},
		{"flipped blank end-of-file marker", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			k := lastOfFirstFile(cfg, puts)
			end := puts[k].WroteOffset + int64(puts[k].WroteBytes)
			path, pos := commitLogFile(cfg, end)
			xorFile(t, path, pos, 8, 0x01)
			return damage{nil, []LostRange{{From: end, To: int64(cfg.MappedFileSizeCommitLog)}}, "magic"}
		}},
		{"last record of a file and its blank marker", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			k := lastOfFirstFile(cfg, puts)
			path, pos := commitLogFile(cfg, puts[k].WroteOffset)
			xorFile(t, path, pos+200, 1, 0x5A)
			xorFile(t, path, pos+int64(puts[k].WroteBytes), 8, 0x01)
			return damage{[]int{k}, []LostRange{{From: puts[k].WroteOffset, To: int64(cfg.MappedFileSizeCommitLog)}}, "crc"}
		}},
		{"zeroed header in the last file, a queue claiming the rest", false, true, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[500].WroteOffset)
			patchFile(t, path, pos, make([]byte, 16))
			return damage{[]int{500}, []LostRange{rng(puts, 500, 501)}, "zeros"}
		}},
		{"two damaged records", false, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[100].WroteOffset)
			xorFile(t, path, pos+200, 1, 0x5A)
			path, pos = commitLogFile(cfg, puts[450].WroteOffset)
			xorFile(t, path, pos+4, 4, 0x01)
			return damage{[]int{100, 450}, []LostRange{rng(puts, 100, 101), rng(puts, 450, 451)}, ""}
		}},
		{"salvage checks the CRC with CheckCRCOnRecover off", true, false, func(t *testing.T, cfg *Config, puts []PutResult) damage {
			path, pos := commitLogFile(cfg, puts[100].WroteOffset)
			xorFile(t, path, pos+4, 4, 0x01) // header of 100
			path, pos = commitLogFile(cfg, puts[101].WroteOffset)
			xorFile(t, path, pos+200, 1, 0x5A) // body of 101: not a place to resume at
			return damage{[]int{100, 101}, []LostRange{rng(puts, 100, 102)}, "magic"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clTestConfig(t, AsyncFlush)
			cfg.CheckCRCOnRecover = !tc.noCRC
			puts := fillCommitLog(t, cfg, n)
			require.EqualValues(t, 2, puts[n-1].WroteOffset/int64(cfg.MappedFileSizeCommitLog)+1, "two files")
			d := tc.damage(t, cfg, puts)
			end := puts[n-1].WroteOffset + int64(puts[n-1].WroteBytes)
			queueEnd := int64(-1)
			if tc.queueEnd {
				queueEnd = end
			}
			lost := map[int]bool{}
			for _, i := range d.lost {
				lost[i] = true
			}
			check := func(cl *CommitLog, extra int) {
				t.Helper()
				assert.Equal(t, d.ranges, cl.LostRanges())
				recs := walkCommitLog(t, cl)
				require.Len(t, recs, n-len(d.lost)+extra)
				j := 0
				for i := range n {
					if lost[i] {
						continue
					}
					assert.Equal(t, puts[i].WroteOffset, recs[j].CommitLogOffset, "record %d kept", i)
					assert.EqualValues(t, i, recs[j].ConsumeQueueOffset)
					j++
				}
			}
			open := func(normal bool) (*CommitLog, *test.Hook) {
				l, h := logHook()
				cl, err := NewCommitLog(cfg, l)
				require.NoError(t, err)
				require.NoError(t, cl.Load())
				require.NoError(t, cl.RecoverWithQueueEnd(normal, nil, queueEnd))
				cl.Start()
				t.Cleanup(func() { _ = cl.Shutdown() })
				return cl, h
			}

			cl, h := open(false)
			assert.Equal(t, end, cl.MaxOffset(), "the records after the damage are kept")
			check(cl, 0)
			for _, r := range d.ranges {
				e := lostLogLine(h, r)
				if assert.NotNil(t, e, "a log line names the lost range %v", r) {
					assert.Equal(t, logrus.ErrorLevel, e.Level)
					assert.Contains(t, e.Data["reason"], d.reason)
					assert.Contains(t, e.Message, "damaged records lost")
				}
			}
			// Appending goes on at the end; the damage stays where it was.
			cl.SetQueueOffset("Rec", 0, int64(n))
			r := cl.PutMessage(context.Background(), clMsg("Rec", 0, []byte("after"), nil))
			require.Equal(t, PutOK, r.Status)
			require.Equal(t, end, r.WroteOffset)
			require.NoError(t, cl.Shutdown())

			// Every later recovery, normal or not, finds the same.
			for _, normal := range []bool{true, false, true} {
				cl2, _ := open(normal)
				assert.Equal(t, end+int64(r.WroteBytes), cl2.MaxOffset())
				check(cl2, 1)
				require.NoError(t, cl2.Shutdown())
			}
		})
	}
}

// Zeros are the end of the log unless something says it goes on: without a
// consume queue claiming more, a zeroed record ends the log as a torn tail.
func TestRecoverZerosWithoutEvidenceAreTheEnd(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	puts := fillCommitLog(t, cfg, 600)
	path, pos := commitLogFile(cfg, puts[500].WroteOffset)
	patchFile(t, path, pos, make([]byte, 16))
	cl, _ := reopen(t, cfg, false)
	assert.Equal(t, puts[500].WroteOffset, cl.MaxOffset())
	assert.Empty(t, cl.LostRanges())
}
