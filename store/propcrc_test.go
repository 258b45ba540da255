package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// crcBitwise is CRC-32/IEEE bit by bit, masked as RocketMQ masks it: the
// tests' own reference for the __CRC32# digits.
func crcBitwise(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
	}
	return ^c & 0x7FFFFFFF
}

// wantCRCEntry is the __CRC32# entry RocketMQ 5 ends rec with: the CRC of
// everything before it, least significant digit first.
func wantCRCEntry(rec []byte) string {
	d := []byte(fmt.Sprintf("%010d", crcBitwise(rec[:len(rec)-message.CRC32ReservedLength])))
	for i, j := 0, len(d)-1; i < j; i, j = i+1, j-1 {
		d[i], d[j] = d[j], d[i]
	}
	return message.PropCRC32 + "\x01" + string(d) + "\x02"
}

// storedRecord returns the record a pull serves at a queue offset.
func storedRecord(t *testing.T, s *Store, topic string, q int32, qoff int64) []byte {
	t.Helper()
	r, err := s.GetMessage("g", topic, q, qoff, 1, 0, nil)
	require.NoError(t, err)
	defer r.Release()
	require.Equal(t, Found, r.Status, "queue %d offset %d", q, qoff)
	require.Len(t, r.Messages, 1)
	return bytes.Clone(r.Messages[0].Bytes)
}

// With enabledAppendPropCRC every record the store writes, single or in a
// batch, ends with the entry RocketMQ 5 writes, computed over the final
// header (queue offset, physical offset, store time as the put answered);
// the pull serves it as stored, and the official client reads it.
func TestPropCRCStoredAsRocketMQ5(t *testing.T) {
	cfg := testConfig(t.TempDir(), SyncFlush)
	cfg.EnabledAppendPropCRC = true
	s := MustOpen(t, cfg)
	const topic = "CRC"

	plain := newTestMessage(topic, 0, body(1, 100), "", "")
	plain.Properties = nil
	plain.PropertiesString = "UNIQ_KEY\x01U1\x02WAIT\x01true\x02CLUSTER\x01C" // a broker's plain send
	stale := newTestMessage(topic, 0, body(2, 100), "TagA", "k2")
	stale.SetProperty(message.PropCRC32, "1234567890") // re-put from a store that had the option
	subs := []*message.Message{
		{Body: []byte("b1"), Properties: map[string]string{message.PropUniqKey: "B1"}},
		{Body: []byte("b2")},
		{Body: []byte("b3"), Properties: map[string]string{message.PropUniqKey: "B3", message.PropCRC32: "0000000001"}},
	}
	batchBody, err := message.AppendBatch(nil, subs)
	require.NoError(t, err)
	batch := &message.MessageExtBatch{MessageExt: *newTestMessage(topic, 1, batchBody, "", "")}
	batch.SetProperty(message.PropCluster, "C")

	type put struct {
		q    int32
		qoff int64
		res  PutResult
	}
	var puts []put
	for _, m := range []*message.MessageExt{plain, stale} {
		r := mustPut(t, s, m)
		puts = append(puts, put{0, r.QueueOffset, r})
	}
	br := s.PutMessages(context.Background(), batch)
	require.Equal(t, PutOK, br.Status, "%v", br.Err)
	require.Equal(t, len(subs), br.MsgNum)
	waitDispatched(t, s)

	check := func(rec []byte, qoff, phy, storeTs int64) {
		t.Helper()
		require.True(t, bytes.HasSuffix(rec, []byte(wantCRCEntry(rec))), "record at %d ends %q", phy, rec[len(rec)-20:])
		r, err := message.ParseRecord(rec)
		require.NoError(t, err)
		assert.Equal(t, qoff, r.QueueOffset())
		assert.Equal(t, phy, r.PhysicalOffset())
		assert.Equal(t, storeTs, r.StoreTimestamp())
		assert.NoError(t, r.VerifyPropCRC())
		assert.Equal(t, 1, strings.Count(string(r.Properties()), message.PropCRC32), "one entry: %q", r.Properties())
		got := primitive.DecodeMessage(rec)
		require.Len(t, got, 1)
		assert.Len(t, got[0].GetProperty(message.PropCRC32), 10)
	}
	for _, p := range puts {
		rec := storedRecord(t, s, topic, p.q, p.qoff)
		check(rec, p.qoff, p.res.WroteOffset, p.res.StoreTimestamp)
	}
	rec := storedRecord(t, s, topic, 0, 0)
	assert.True(t, bytes.HasPrefix(rec[len(rec)-20-len("CLUSTER\x01C\x02"):], []byte("CLUSTER\x01C\x02__CRC32#\x01")),
		"a separator between the properties and the entry")
	phy := br.WroteOffset
	for i := range subs {
		rec := storedRecord(t, s, topic, 1, br.QueueOffset+int64(i))
		check(rec, br.QueueOffset+int64(i), phy, br.StoreTimestamp)
		phy += int64(len(rec))
	}
	assert.Equal(t, br.WroteOffset+int64(br.WroteBytes), phy)

	// A clean restart checks every record (checkCRCOnRecover) and keeps them.
	require.NoError(t, s.Shutdown(context.Background()))
	s2 := MustOpen(t, cfg)
	assert.Equal(t, phy, s2.CommitLog().MaxOffset())
	assert.Empty(t, s2.CommitLog().LostRanges())
}

// With the option off (the default) records carry no entry: their
// properties are what they were before the option existed.
func TestPropCRCOffWritesNoEntry(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	s := MustOpen(t, cfg)
	m := newTestMessage("NoCRC", 0, body(1, 100), "", "")
	m.PropertiesString = "TAGS\x01TagA\x02KEYS\x01k1"
	r := mustPut(t, s, m)
	waitDispatched(t, s)
	rec := storedRecord(t, s, "NoCRC", 0, r.QueueOffset)
	assert.Equal(t, message.RecordLength(0, len(m.Body), len(m.Topic), len(m.PropertiesString)), len(rec))
	assert.NotContains(t, string(rec), message.PropCRC32)
	want, err := message.EncodeRecord(nil, m) // m now holds the offsets and store time
	require.NoError(t, err)
	assert.Equal(t, want, rec)
}

// crcStore writes n messages of about 3 KB with the option set as on and
// stops the store cleanly or as a crash; after a crash it can also zero
// the checkpoint (lost), so recovery treats every record as possibly
// unflushed.
func crcStore(t *testing.T, on, crashed, lostCheckpoint bool, n int) (*Config, []sentMsg) {
	t.Helper()
	cfg := testConfig(t.TempDir(), AsyncFlush)
	cfg.EnabledAppendPropCRC = on
	s, err := Open(cfg, nil)
	require.NoError(t, err)
	sent := putDamageSet(t, s, 0, n, 3000)
	waitDispatched(t, s)
	stopStore(t, s, crashed, lostCheckpoint)
	return cfg, sent
}

func stopStore(t *testing.T, s *Store, crashed, lostCheckpoint bool) {
	t.Helper()
	if !crashed {
		require.NoError(t, s.Shutdown(context.Background()))
		return
	}
	crash(t, s)
	if lostCheckpoint {
		path := filepath.Join(s.cfg.StorePathRootDir, "checkpoint")
		require.NoError(t, os.WriteFile(path, make([]byte, checkpointFileSize), 0o644))
	}
}

// garbleKey overwrites the KEYS value of m's record with other printable
// bytes: damage that still parses, and that checkTorn (zeros) cannot see.
func garbleKey(t *testing.T, cfg *Config, m sentMsg) {
	t.Helper()
	path, pos := commitLogFile(cfg, m.phy)
	rec := make([]byte, m.size)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.ReadAt(rec, pos)
	require.NoError(t, err)
	i := bytes.Index(rec, []byte("KEYS\x01"+m.key)) + len("KEYS\x01")
	require.Positive(t, i, "key of the record at %d", m.phy)
	copy(rec[i:], "#%!?")
	_, err = f.WriteAt(rec[i:i+4], pos+int64(i))
	require.NoError(t, err)
	r, err := message.ParseRecord(rec)
	require.NoError(t, err)
	require.NoError(t, r.VerifyCRC(), "the body CRC does not see it")
}

// servedKeys returns the KEYS of the message at a queue offset, "" when
// none is served there.
func servedKeys(t *testing.T, s *Store, m sentMsg) string {
	t.Helper()
	r, err := s.GetMessage("g", damageTopic, m.queueID, m.qoff, 1, 0, nil)
	require.NoError(t, err)
	defer r.Release()
	if len(r.Messages) == 0 {
		return ""
	}
	got, _, err := message.DecodeRecord(r.Messages[0].Bytes)
	require.NoError(t, err)
	if got.QueueOffset != m.qoff {
		return ""
	}
	return got.Keys()
}

// Properties garbled into other bytes (a device garbling a write, not a
// lost sector) go unnoticed without the option: nothing in the format
// covers them, and the record is served with them. With the option the
// record's __CRC32# no longer matches: recovery takes it for damage, after
// a crash and, with checkCRCOnRecover, after a clean stop too.
func TestRecoveryRejectsGarbledPropertiesWithPropCRC(t *testing.T) {
	for _, tc := range []struct {
		on, crashed bool
	}{{true, true}, {true, false}, {false, true}} {
		t.Run(fmt.Sprintf("propCRC=%v/crashed=%v", tc.on, tc.crashed), func(t *testing.T) {
			cfg, sent := crcStore(t, tc.on, tc.crashed, false, 400)
			last := sent[len(sent)-1]
			garbleKey(t, cfg, last)
			s, hook := openLogged(t, cfg)
			if !tc.on {
				assert.Equal(t, last.phy+int64(last.size), s.CommitLog().MaxOffset())
				assert.Equal(t, "#%!?"+last.key[4:], servedKeys(t, s, last), "served garbled: the limit of the format without the option")
				return
			}
			assert.Equal(t, last.phy, s.CommitLog().MaxOffset(), "the log ends before the garbled record")
			lines := logged(hook, "truncates the log")
			require.NotEmpty(t, lines, "the cut is logged")
			assert.Contains(t, lines[0].Data["reason"], "crc mismatch")
			assertServed(t, s, sent[:len(sent)-1], nil)
		})
	}
}

// In the middle of the log a garbled record is damage like a bad body CRC:
// it alone is lost, the records after it are kept.
func TestRecoveryPropCRCMismatchMidLog(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			cfg, sent := crcStore(t, true, crashed, crashed, 400)
			const bad = 300 // in the last file, which recovery walks either way
			garbleKey(t, cfg, sent[bad])
			s, hook := openLogged(t, cfg)
			lr := LostRange{From: sent[bad].phy, To: sent[bad].phy + int64(sent[bad].size)}
			assert.Equal(t, []LostRange{lr}, s.CommitLog().LostRanges())
			line := lostLogLine(hook, lr)
			require.NotNil(t, line, "the lost range is logged")
			assert.Contains(t, line.Data["reason"], "crc mismatch")
			assertServed(t, s, sent, map[int]bool{bad: true})
			assert.Empty(t, servedKeys(t, s, sent[bad]))
		})
	}
}

// Damage can take the __CRC32# entry itself (here its name): the record
// then looks as if written without the option. In the unflushed tail after
// a crash, a record without the entry between records with it is damage.
func TestRecoveryMissingPropCRCInUnflushedTail(t *testing.T) {
	breakEntry := func(t *testing.T, cfg *Config, m sentMsg) {
		path, pos := commitLogFile(cfg, m.phy)
		patchFile(t, path, pos+int64(m.size)-int64(message.CRC32ReservedLength), []byte("__CRC33#"))
	}
	t.Run("last record", func(t *testing.T) {
		cfg, sent := crcStore(t, true, true, true, 400)
		last := sent[len(sent)-1]
		breakEntry(t, cfg, last)
		s, hook := openLogged(t, cfg)
		assert.Equal(t, last.phy, s.CommitLog().MaxOffset())
		lines := logged(hook, "truncates the log")
		require.NotEmpty(t, lines)
		assert.Contains(t, lines[0].Data["reason"], "no __CRC32#")
		assertServed(t, s, sent[:len(sent)-1], nil)
	})
	t.Run("between records", func(t *testing.T) {
		cfg, sent := crcStore(t, true, true, true, 400)
		const bad = 200
		breakEntry(t, cfg, sent[bad])
		s, _ := openLogged(t, cfg)
		assert.Equal(t, []LostRange{{From: sent[bad].phy, To: sent[bad+1].phy}}, s.CommitLog().LostRanges())
		assertServed(t, s, sent, map[int]bool{bad: true})
	})
	t.Run("clean stop", func(t *testing.T) {
		// Nothing was in flight: the record is served as the disk holds it.
		cfg, sent := crcStore(t, true, false, false, 400)
		breakEntry(t, cfg, sent[200])
		s, _ := openLogged(t, cfg)
		assert.Empty(t, s.CommitLog().LostRanges())
		assertServed(t, s, sent, nil)
	})
}

// A store whose option changed at a clean restart holds a run of records
// without the entry next to a run with it. Neither is damage, even when a
// lost checkpoint makes recovery treat every record as possibly unflushed.
func TestRecoveryPropCRCAcrossOptionChange(t *testing.T) {
	for _, firstOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("first run propCRC=%v", firstOn), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), AsyncFlush)
			cfg.EnabledAppendPropCRC = firstOn
			s, err := Open(cfg, nil)
			require.NoError(t, err)
			sent := putDamageSet(t, s, 0, 150, 3000)
			require.NoError(t, s.Shutdown(context.Background()))

			cfg.EnabledAppendPropCRC = !firstOn
			s, err = Open(cfg, nil)
			require.NoError(t, err)
			sent = append(sent, putDamageSet(t, s, 150, 150, 3000)...)
			waitDispatched(t, s)
			stopStore(t, s, true, true)

			// Recovered with the option on, even after a run without it.
			cfg.EnabledAppendPropCRC = true
			s, _ = openLogged(t, cfg)
			assert.Empty(t, s.CommitLog().LostRanges())
			assert.Equal(t, sent[len(sent)-1].phy+int64(sent[len(sent)-1].size), s.CommitLog().MaxOffset())
			assertServed(t, s, sent, nil)
		})
	}
}

// The per-record check of the recovery walk allocates nothing.
func TestCheckRecordCRCAllocatesNothing(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	cfg.EnabledAppendPropCRC = true
	cl := mustOpenCommitLog(t, cfg, nil, true, nil)
	res := cl.PutMessage(context.Background(), clMsg("T", 0, clBody(1, 500), map[string]string{"TAGS": "a"}))
	require.Equal(t, PutOK, res.Status)
	sel, ok := cl.GetMessage(res.WroteOffset, res.WroteBytes)
	require.True(t, ok)
	defer sel.Release()
	r, err := message.ParseRecord(sel.Bytes)
	require.NoError(t, err)
	require.True(t, r.HasPropCRC())
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if err := cl.checkRecordCRC(&r, true, true, true, nil, 0); err != nil {
			t.Fatal(err)
		}
	}))
	noCRC, err := message.EncodeRecord(nil, clMsg("T", 0, clBody(1, 500), nil))
	require.NoError(t, err)
	r2, err := message.ParseRecord(noCRC)
	require.NoError(t, err)
	require.Zero(t, r2.PhysicalOffset())
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		// Between records with the entry, followed by one without it.
		if err := cl.checkRecordCRC(&r2, true, true, true, noCRC, 0); err != nil {
			t.Fatal(err)
		}
	}))
}
