package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

var clFlushModes = []FlushDiskType{AsyncFlush, SyncFlush}

// clTestConfig is a small commitlog: 1 MiB files so boundaries are crossed.
func clTestConfig(t testing.TB, ft FlushDiskType) *Config {
	cfg := DefaultConfig(t.TempDir())
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MaxMessageSize = 256 << 10
	cfg.FlushDiskType = ft
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.SyncFlushTimeout = 5 * time.Second
	return cfg
}

// mustOpenCommitLog opens (load, recover, start) a commitlog; before runs
// ahead of Start, for hooks. It shuts down at cleanup.
func mustOpenCommitLog(t testing.TB, cfg *Config, log logrus.FieldLogger, normal bool, before func(*CommitLog)) *CommitLog {
	t.Helper()
	cl, err := NewCommitLog(cfg, log)
	require.NoError(t, err)
	require.NoError(t, cl.Load())
	require.NoError(t, cl.Recover(normal, nil))
	if before != nil {
		before(cl)
	}
	cl.Start()
	t.Cleanup(func() { _ = cl.Shutdown() })
	return cl
}

func clMsg(topic string, queueID int32, body []byte, props map[string]string) *message.MessageExt {
	return &message.MessageExt{
		Message:       message.Message{Topic: topic, Body: body, Properties: props},
		QueueID:       queueID,
		BornTimestamp: time.Now().UnixMilli(),
		BornHost:      netip.MustParseAddrPort("10.0.0.7:50000"),
	}
}

func clBody(i, size int) []byte {
	b := bytes.Repeat([]byte{byte('a' + i%26)}, size)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// walkCommitLog reads every record from MinOffset following blank markers,
// checking each blank's TOTALSIZE is the rest of its file, and stepping
// over lost ranges.
func walkCommitLog(t *testing.T, cl *CommitLog) []DispatchRequest {
	t.Helper()
	var out []DispatchRequest
	fileSize := int64(cl.Files().FileSize())
	for off := cl.MinOffset(); off < cl.MaxOffset(); {
		if lr, ok := cl.lostRangeAt(off); ok {
			off = lr.To
			continue
		}
		res, ok := cl.GetData(off)
		require.True(t, ok, "data at %d", off)
		b := res.Bytes
		for len(b) > 0 {
			if _, ok := cl.lostRangeAt(off); ok {
				break
			}
			d, err := cl.CheckRecord(b, true)
			require.NoError(t, err, "record at %d", off)
			if d.BlankRecord {
				assert.EqualValues(t, fileSize-off%fileSize, binary.BigEndian.Uint32(b), "blank TOTALSIZE at %d", off)
				off = cl.RollNextFile(off)
				break
			}
			require.Equal(t, off, d.CommitLogOffset)
			out = append(out, d)
			off += int64(d.MsgSize)
			b = b[d.MsgSize:]
		}
		res.Release()
	}
	return out
}

func TestCommitLogRoundTripAcrossFiles(t *testing.T) {
	for _, ft := range clFlushModes {
		t.Run(ft.String(), func(t *testing.T) {
			cl := mustOpenCommitLog(t, clTestConfig(t, ft), nil, true, nil)
			const n = 2500
			type put struct {
				res PutResult
				msg *message.MessageExt
			}
			puts := make([]put, 0, n)
			for i := range n {
				q := int32(i % 3)
				m := clMsg("RoundTrip", q, clBody(i, 200+(i*37)%1800), map[string]string{
					message.PropTags: fmt.Sprintf("tag%d", i%4), message.PropKeys: fmt.Sprintf("k%d x", i),
				})
				r := cl.PutMessage(context.Background(), m)
				require.Equal(t, PutOK, r.Status, "put %d: %v", i, r.Err)
				puts = append(puts, put{r, m})
			}
			require.Greater(t, cl.Files().Len(), 2, "file boundaries crossed")

			next := map[int32]int64{}
			var last int64 = -1
			for i, p := range puts {
				q := p.msg.QueueID
				assert.Equal(t, next[q], p.res.QueueOffset, "put %d", i)
				next[q]++
				assert.Greater(t, p.res.WroteOffset, last)
				last = p.res.WroteOffset
				host, off, err := message.ParseOffsetMsgID(p.res.MsgID)
				require.NoError(t, err)
				assert.Equal(t, p.res.WroteOffset, off)
				assert.Equal(t, netip.MustParseAddrPort(cl.cfg.StoreHost), host)

				sel, ok := cl.GetMessage(p.res.WroteOffset, p.res.WroteBytes)
				require.True(t, ok)
				got, size, err := message.DecodeRecord(sel.Bytes)
				sel.Release()
				require.NoError(t, err)
				assert.EqualValues(t, p.res.WroteBytes, size)
				assert.Equal(t, p.msg.Body, got.Body)
				assert.Equal(t, p.msg.Properties, got.Properties)
				assert.Equal(t, p.res.QueueOffset, got.QueueOffset)
				assert.Equal(t, p.res.WroteOffset, got.CommitLogOffset)
				assert.Equal(t, p.res.StoreTimestamp, got.StoreTimestamp)
				assert.Equal(t, p.msg.BornHost, got.BornHost)
				// A record never spans files.
				fs := int64(cl.Files().FileSize())
				assert.Equal(t, p.res.WroteOffset/fs, (p.res.WroteOffset+int64(p.res.WroteBytes)-1)/fs)
			}
			for q, v := range next {
				assert.Equal(t, v, cl.QueueOffset("RoundTrip", q))
			}

			recs := walkCommitLog(t, cl)
			require.Len(t, recs, n)
			for i, d := range recs {
				assert.Equal(t, puts[i].res.WroteOffset, d.CommitLogOffset)
				assert.Equal(t, message.TagsHashCode(fmt.Sprintf("tag%d", i%4)), d.TagsCode)
				assert.Equal(t, fmt.Sprintf("k%d x", i), d.Keys)
			}
			if ft == SyncFlush {
				assert.GreaterOrEqual(t, cl.FlushedWhere(), puts[n-1].res.WroteOffset+int64(puts[n-1].res.WroteBytes))
			} else {
				require.Eventually(t, func() bool {
					_ = cl.flush.flushAndMark(0)
					return cl.FlushedWhere() == cl.MaxOffset()
				}, 5*time.Second, 10*time.Millisecond)
			}
		})
	}
}

func TestCommitLogBatchLandsInOneFile(t *testing.T) {
	for _, ft := range clFlushModes {
		t.Run(ft.String(), func(t *testing.T) {
			cl := mustOpenCommitLog(t, clTestConfig(t, ft), nil, true, nil)
			// Fill the first file to within ~20 KiB of its end.
			fileSize := int64(cl.Files().FileSize())
			for i := 0; cl.MaxOffset() < fileSize-20<<10; i++ {
				r := cl.PutMessage(context.Background(), clMsg("Batch", 0, clBody(i, 1000), nil))
				require.Equal(t, PutOK, r.Status)
			}
			before := cl.QueueOffset("Batch", 0)
			var msgs []*message.Message
			for i := range 40 {
				msgs = append(msgs, &message.Message{Body: clBody(i, 1000), Properties: map[string]string{message.PropTags: "b"}})
			}
			body, err := message.AppendBatch(nil, msgs)
			require.NoError(t, err)
			batch := &message.MessageExtBatch{MessageExt: *clMsg("Batch", 0, body, map[string]string{"CLUSTER": "c"})}
			r := cl.PutMessages(context.Background(), batch)
			require.Equal(t, PutOK, r.Status, "%v", r.Err)
			assert.Equal(t, 40, r.MsgNum)
			assert.Equal(t, before, r.QueueOffset)
			assert.Equal(t, fileSize, r.WroteOffset, "the whole batch moved to the next file")
			assert.Len(t, strings.Split(r.MsgID, ","), 40)
			assert.Equal(t, before+40, cl.QueueOffset("Batch", 0))

			sel, ok := cl.GetMessage(r.WroteOffset, r.WroteBytes)
			require.True(t, ok)
			got, err := message.DecodeRecords(sel.Bytes)
			sel.Release()
			require.NoError(t, err)
			require.Len(t, got, 40)
			for i, m := range got {
				assert.Equal(t, before+int64(i), m.QueueOffset)
				assert.Equal(t, msgs[i].Body, m.Body)
				assert.Equal(t, map[string]string{message.PropTags: "b", "CLUSTER": "c"}, m.Properties)
				assert.Equal(t, r.StoreTimestamp, m.StoreTimestamp)
				assert.Equal(t, fileSize/fileSize, m.CommitLogOffset/fileSize)
			}
			assert.Len(t, walkCommitLog(t, cl), int(before)+40)
		})
	}
}

func TestCommitLogLimits(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	cl := mustOpenCommitLog(t, cfg, nil, true, nil)
	ctx := context.Background()

	r := cl.PutMessage(ctx, clMsg("T", 0, make([]byte, cfg.MaxMessageSize+1), nil))
	assert.Equal(t, MessageIllegal, r.Status)
	assert.ErrorIs(t, r.Err, ErrMessageTooLarge)
	assert.Contains(t, r.Err.Error(), "maxMessageSize")

	r = cl.PutMessage(ctx, clMsg("T", 0, make([]byte, cfg.MaxMessageSize), nil))
	assert.Equal(t, PutOK, r.Status, "exactly the limit is fine")

	r = cl.PutMessage(ctx, clMsg(strings.Repeat("t", 128), 0, []byte("x"), nil))
	assert.Equal(t, MessageIllegal, r.Status)
	assert.ErrorIs(t, r.Err, ErrTopicTooLong)
	r = cl.PutMessage(ctx, clMsg(strings.Repeat("t", 127), 0, []byte("x"), nil))
	assert.Equal(t, PutOK, r.Status)

	r = cl.PutMessage(ctx, clMsg("T", 0, []byte("x"), map[string]string{"k": strings.Repeat("v", 32767)}))
	assert.Equal(t, PropertiesSizeExceeded, r.Status)
	assert.ErrorIs(t, r.Err, ErrPropertiesTooLarge)

	// A record bigger than a commitlog file can never be stored.
	cfg2 := clTestConfig(t, AsyncFlush)
	cfg2.MaxMessageSize = 4 << 20
	cl2 := mustOpenCommitLog(t, cfg2, nil, true, nil)
	r = cl2.PutMessage(ctx, clMsg("T", 0, make([]byte, 2<<20), nil))
	assert.Equal(t, MessageIllegal, r.Status)
	assert.ErrorIs(t, r.Err, ErrMessageTooLarge)

	// Batches: no transactions, no delay, body within the limit.
	body, err := message.AppendBatch(nil, []*message.Message{{Body: []byte("a")}})
	require.NoError(t, err)
	b := &message.MessageExtBatch{MessageExt: *clMsg("T", 0, body, nil)}
	b.SysFlag = message.TransactionPreparedType
	assert.ErrorIs(t, cl.PutMessages(ctx, b).Err, ErrIllegalBatch)
	b.SysFlag = 0
	b.Properties = map[string]string{message.PropDelayTimeLevel: "3"}
	assert.ErrorIs(t, cl.PutMessages(ctx, b).Err, ErrIllegalBatch)
	b.Properties = nil
	b.Body = append(body, 1, 2, 3)
	r = cl.PutMessages(ctx, b)
	assert.Equal(t, MessageIllegal, r.Status)
	big, err := message.AppendBatch(nil, []*message.Message{{Body: make([]byte, cfg.MaxMessageSize)}})
	require.NoError(t, err)
	b.Body = big
	r = cl.PutMessages(ctx, b)
	assert.Equal(t, MessageIllegal, r.Status)
	assert.ErrorIs(t, r.Err, ErrMessageTooLarge)
	assert.Equal(t, "MESSAGE_ILLEGAL", r.Status.String())
}

func TestCommitLogTransactionTypesDoNotAdvanceQueue(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	ctx := context.Background()
	put := func(tran int32) PutResult {
		m := clMsg("Tx", 1, []byte("x"), nil)
		m.SysFlag = tran
		m.QueueOffset = 77 // ignored: the commitlog assigns it
		r := cl.PutMessage(ctx, m)
		require.Equal(t, PutOK, r.Status)
		return r
	}
	assert.EqualValues(t, 0, put(message.TransactionNotType).QueueOffset)
	assert.EqualValues(t, 0, put(message.TransactionPreparedType).QueueOffset)
	assert.EqualValues(t, 0, put(message.TransactionRollbackType).QueueOffset)
	assert.EqualValues(t, 1, put(message.TransactionCommitType).QueueOffset)
	assert.EqualValues(t, 2, cl.QueueOffset("Tx", 1))
	recs := walkCommitLog(t, cl)
	require.Len(t, recs, 4)
	assert.EqualValues(t, []int64{0, 0, 0, 1}, []int64{recs[0].ConsumeQueueOffset, recs[1].ConsumeQueueOffset, recs[2].ConsumeQueueOffset, recs[3].ConsumeQueueOffset})

	cl.SetQueueOffsets(map[string]int64{"Tx-1": 40, "with-dash-2": 5, "bad": 1})
	assert.EqualValues(t, 40, cl.QueueOffset("Tx", 1))
	assert.EqualValues(t, 5, cl.QueueOffset("with-dash", 2))
	cl.RemoveQueue("Tx", 1)
	assert.EqualValues(t, 0, cl.QueueOffset("Tx", 1))
}

func TestCommitLogAppendHookAndWaitFalse(t *testing.T) {
	var calls int
	var mu sync.Mutex
	cl := mustOpenCommitLog(t, clTestConfig(t, SyncFlush), nil, true, func(cl *CommitLog) {
		cl.SetAppendHook(func() { mu.Lock(); calls++; mu.Unlock() })
		// A flush that never succeeds: only WAIT=false puts can return PUT_OK.
		cl.flush.flushFn = func(int) (int64, error) { return cl.mfq.FlushedWhere(), nil }
	})
	cl.cfg.SyncFlushTimeout = 50 * time.Millisecond
	r := cl.PutMessage(context.Background(), clMsg("T", 0, []byte("x"), map[string]string{message.PropWaitStoreMsgOK: "false"}))
	assert.Equal(t, PutOK, r.Status)
	r = cl.PutMessage(context.Background(), clMsg("T", 0, []byte("x"), nil))
	assert.Equal(t, FlushDiskTimeout, r.Status)
	assert.True(t, r.OK(), "FLUSH_DISK_TIMEOUT is still stored")
	mu.Lock()
	assert.Equal(t, 2, calls)
	mu.Unlock()
}

func TestCommitLogShutdownRefusesPuts(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	r := cl.PutMessage(context.Background(), clMsg("T", 0, []byte("x"), nil))
	require.Equal(t, PutOK, r.Status)
	require.NoError(t, cl.Shutdown())
	require.NoError(t, cl.Shutdown(), "twice is fine")
	r = cl.PutMessage(context.Background(), clMsg("T", 0, []byte("x"), nil))
	assert.Equal(t, ServiceNotAvailable, r.Status)
	assert.ErrorIs(t, r.Err, ErrCommitLogClosed)
}

func TestCommitLogDeleteExpiredFiles(t *testing.T) {
	cl := mustOpenCommitLog(t, clTestConfig(t, AsyncFlush), nil, true, nil)
	for i := 0; cl.Files().Len() < 4; i++ {
		require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("T", 0, clBody(i, 8000), nil)).Status)
	}
	// A reader holds the first file while it is deleted: its slice stays valid.
	held, ok := cl.GetData(0)
	require.True(t, ok)
	assert.Zero(t, cl.DeleteExpiredFiles(time.Now(), time.Hour, 0, 10*time.Millisecond, false), "nothing is an hour old")
	n := cl.DeleteExpiredFiles(time.Now().Add(2*time.Hour), time.Hour, time.Millisecond, 10*time.Millisecond, false)
	assert.Equal(t, 3, n, "never the last file")
	assert.Equal(t, 1, cl.Files().Len())
	assert.Equal(t, int64(3*cl.Files().FileSize()), cl.MinOffset())
	_, err := message.ParseRecord(held.Bytes)
	assert.NoError(t, err, "held bytes still readable")
	held.Release()
	_, ok = cl.GetMessage(0, 100)
	assert.False(t, ok)
	assert.NotEmpty(t, walkCommitLog(t, cl), "the kept file still reads from the new min offset")
}

func TestCommitLogCheckpointPhysicTimestamp(t *testing.T) {
	for _, ft := range clFlushModes {
		t.Run(ft.String(), func(t *testing.T) {
			cfg := clTestConfig(t, ft)
			cfg.FlushCommitLogThorough = 50 * time.Millisecond // a 1-byte put is under the 4-page rule
			cp, err := OpenCheckpoint(cfg.StorePathRootDir+"/checkpoint", CheckpointOptions{})
			require.NoError(t, err)
			defer cp.Close()
			cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) { cl.SetCheckpoint(cp) })
			r := cl.PutMessage(context.Background(), clMsg("T", 0, []byte("x"), nil))
			require.Equal(t, PutOK, r.Status)
			require.Eventually(t, func() bool { return cp.PhysicMsgTimestamp() == r.StoreTimestamp },
				5*time.Second, 5*time.Millisecond)
		})
	}
}

// logHook returns a logger whose entries the test can read.
func logHook() (*logrus.Logger, *test.Hook) {
	l, h := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return l, h
}

func TestCommitLogPreallocatesNextFile(t *testing.T) {
	cfg := clTestConfig(t, AsyncFlush)
	dir := filepath.Join(cfg.StorePathRootDir, "commitlog")
	cl := mustOpenCommitLog(t, cfg, nil, true, nil)
	fs := int64(cfg.MappedFileSizeCommitLog)
	require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("A", 0, []byte("x"), nil)).Status)
	spare := filepath.Join(dir, fileName(fs))
	require.Eventually(t, func() bool { _, err := os.Stat(spare); return err == nil }, 5*time.Second, 5*time.Millisecond,
		"the next file is prepared ahead")
	assert.Equal(t, 1, cl.Files().Len(), "not part of the log yet")

	for i := 0; cl.Files().Len() < 2; i++ {
		require.Equal(t, PutOK, cl.PutMessage(context.Background(), clMsg("A", 0, clBody(i, 4000), nil)).Status)
	}
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, fileName(2*fs))); return err == nil },
		5*time.Second, 5*time.Millisecond)
	n := len(walkCommitLog(t, cl))

	// A crash with the spare on disk: recovery drops it quietly.
	l, h := logHook()
	cl2 := mustOpenCommitLog(t, cfg, l, false, nil)
	assert.Len(t, walkCommitLog(t, cl2), n)
	for _, e := range h.AllEntries() {
		assert.NotEqual(t, logrus.WarnLevel, e.Level, e.Message)
	}
	require.NoError(t, cl2.Shutdown())
	require.NoError(t, cl.Shutdown())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		off, ok := parseFileName(e.Name())
		require.True(t, ok, e.Name())
		assert.Less(t, off, 2*fs, "no spare left after shutdown: %s", e.Name())
	}
}
