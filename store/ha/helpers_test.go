package ha

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait of these tests: long enough for a slow machine.
const waitFor = 20 * time.Second

// storeConfig is a small store: 1 MiB commitlog files make file boundaries
// cheap to reach.
func storeConfig(dir string) *store.Config {
	cfg := store.DefaultConfig(dir)
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MappedFileSizeConsumeQ = 200 * store.CQStoreUnitSize
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.FlushIntervalConsumeQ = 20 * time.Millisecond
	cfg.MaxHashSlotNum = 512
	cfg.MaxIndexNum = 2048
	cfg.CleanResourceInterval = time.Hour
	cfg.MaxMessageSize = 256 << 10
	return cfg
}

// openStore opens a store in dir, shut down at the end of the test unless
// the test does it first.
func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(storeConfig(dir), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// haConfig has short intervals so heartbeats and retries happen within a
// test; the housekeeping interval stays long so a slow machine never drops
// a connection by accident.
func haConfig() Config {
	cfg := DefaultConfig()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.HousekeepingInterval = 10 * time.Second
	cfg.ReconnectMin = 20 * time.Millisecond
	cfg.ReconnectMax = 200 * time.Millisecond
	cfg.SlaveTimeout = 5 * time.Second
	return cfg
}

func testLog() (*logrus.Logger, *test.Hook) {
	l, hook := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return l, hook
}

// startMaster serves st on a loopback port until the end of the test.
func startMaster(t testing.TB, st *store.Store, cfg Config, log logrus.FieldLogger) *Master {
	t.Helper()
	m, err := NewMaster(st, cfg, log)
	require.NoError(t, err)
	require.NoError(t, m.Start("127.0.0.1:0"))
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// startSlave follows addr into st until the end of the test.
func startSlave(t testing.TB, st *store.Store, cfg Config, log logrus.FieldLogger, addr string) *Slave {
	t.Helper()
	sl, err := NewSlave(st, cfg, log)
	require.NoError(t, err)
	sl.Start()
	sl.SetMasterAddress(addr)
	t.Cleanup(func() { _ = sl.Shutdown(context.Background()) })
	return sl
}

var bornHost = netip.MustParseAddrPort("10.0.0.7:50000")

// msg builds message i of size bytes: its body says which it is.
func msg(topic string, queueID int32, i, size int) *message.MessageExt {
	m := &message.MessageExt{QueueID: queueID, BornHost: bornHost, BornTimestamp: time.Now().UnixMilli()}
	m.Topic = topic
	b := make([]byte, size)
	copy(b, fmt.Sprintf("message-%07d|", i))
	for j := 16; j < size; j++ {
		b[j] = byte('a' + (i+j)%26)
	}
	m.Body = b
	m.SetProperty(message.PropKeys, fmt.Sprintf("key-%d", i%10))
	m.SetProperty(message.PropTags, "tag")
	return m
}

// putN stores n messages of sizes varying around size over three queues and
// returns the end of the last one.
func putN(t testing.TB, st *store.Store, from, n, size int) int64 {
	t.Helper()
	var end int64
	for i := from; i < from+n; i++ {
		r := st.PutMessage(context.Background(), msg("TopicHA", int32(i%3), i, size+(i*131)%size))
		require.Equal(t, store.PutOK, r.Status, "%v", r.Err)
		end = r.WroteOffset + int64(r.WroteBytes)
	}
	return end
}

// waitOffset waits until st's commitlog ends at want.
func waitOffset(t testing.TB, st *store.Store, want int64) {
	t.Helper()
	require.Eventually(t, func() bool { return st.CommitLog().MaxOffset() == want }, waitFor, time.Millisecond,
		"commitlog at %d, want %d", st.CommitLog().MaxOffset(), want)
}

// assertSameCommitLog checks the slave holds the master's bytes, from the
// slave's first offset to the end, at the same offsets (the filler after a
// blank marker aside: it is never read).
func assertSameCommitLog(t testing.TB, master, slave *store.Store) {
	t.Helper()
	mcl, scl := master.CommitLog(), slave.CommitLog()
	require.Equal(t, mcl.MaxOffset(), scl.MaxOffset())
	for off := scl.MinOffset(); off < scl.MaxOffset(); off = mcl.RollNextFile(off) {
		mr, ok := mcl.GetData(off)
		require.True(t, ok, "master data at %d", off)
		sr, ok := scl.GetData(off)
		require.True(t, ok, "slave data at %d", off)
		require.Equal(t, len(mr.Bytes), len(sr.Bytes), "written length of the file at %d", off)
		n := recordsEnd(mr.Bytes)
		require.True(t, bytes.Equal(mr.Bytes[:n], sr.Bytes[:n]), "bytes of the file at %d", off)
		mr.Release()
		sr.Release()
	}
}

// recordsEnd returns where b's records end: after its blank marker, or len(b).
func recordsEnd(b []byte) int {
	for pos := 0; pos+8 <= len(b); {
		if int32(binary.BigEndian.Uint32(b[pos+4:])) == message.BlankMagicCode {
			return pos + 8
		}
		size := int(binary.BigEndian.Uint32(b[pos:]))
		if size <= 0 {
			break
		}
		pos += size
	}
	return len(b)
}

// pullAll reads a queue from its min offset to its end.
func pullAll(t testing.TB, st *store.Store, topic string, queueID int32) []*message.MessageExt {
	t.Helper()
	var out []*message.MessageExt
	offset := st.MinOffsetInQueue(topic, queueID)
	for range 100000 {
		r, err := st.GetMessage("g", topic, queueID, offset, 32, 0, nil)
		require.NoError(t, err)
		status, next := r.Status, r.NextBeginOffset
		for _, rec := range r.Messages {
			m, _, err := message.DecodeRecord(rec.Bytes)
			require.NoError(t, err)
			out = append(out, m)
		}
		r.Release()
		switch status {
		case store.Found, store.NoMatchedMessage:
			offset = next
		case store.OffsetOverflowOne, store.NoMessageInQueue:
			return out
		default:
			t.Fatalf("unexpected status %v at offset %d", status, offset)
		}
	}
	t.Fatal("pull did not finish")
	return nil
}

// assertSameQueues checks the slave's consume queues serve the master's
// messages at the same queue offsets (the slave may start later).
func assertSameQueues(t testing.TB, master, slave *store.Store) {
	t.Helper()
	require.Eventually(t, func() bool { return slave.DispatchBehindBytes() == 0 }, waitFor, time.Millisecond)
	for q := range int32(3) {
		want := pullAll(t, master, "TopicHA", q)
		got := pullAll(t, slave, "TopicHA", q)
		require.NotEmpty(t, got, "queue %d", q)
		require.LessOrEqual(t, len(got), len(want))
		tail := want[len(want)-len(got):]
		for i := range got {
			assert.Equal(t, tail[i].QueueOffset, got[i].QueueOffset)
			assert.Equal(t, tail[i].CommitLogOffset, got[i].CommitLogOffset)
			assert.Equal(t, tail[i].Body, got[i].Body)
		}
	}
}

// logged reports whether an entry of hook contains s.
func logged(hook *test.Hook, s string) bool {
	for _, e := range hook.AllEntries() {
		if bytes.Contains([]byte(e.Message), []byte(s)) {
			return true
		}
		for _, v := range e.Data {
			if bytes.Contains(fmt.Append(nil, v), []byte(s)) {
				return true
			}
		}
	}
	return false
}
