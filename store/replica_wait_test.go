package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// fakeReplica answers every wait with one result and counts the waits.
type fakeReplica struct {
	result ReplicaResult
	waits  atomic.Int32
	last   atomic.Int64
}

func (f *fakeReplica) wait(next int64, done func(ReplicaResult)) {
	f.waits.Add(1)
	f.last.Store(next)
	done(f.result)
}

var errFakeSlave = errors.New("fake slave")

// Under a replica waiter (SYNC_MASTER) a put that waits for durability
// waits for a slave too, under either flush type, with the slave's outcome
// as its status; WAIT=false waits for nothing, and without a waiter nothing
// changes.
func TestReplicaWaiterJoinsDurability(t *testing.T) {
	for _, ft := range flushTypes {
		for _, tc := range []struct {
			name   string
			result ReplicaResult
		}{
			{"acked", ReplicaResult{Status: PutOK}},
			{"timeout", ReplicaResult{Status: FlushSlaveTimeout, Err: errFakeSlave}},
			{"no slave", ReplicaResult{Status: SlaveNotAvailable, Err: errFakeSlave}},
		} {
			t.Run(ft.String()+"/"+tc.name, func(t *testing.T) {
				s := MustOpen(t, testConfig(t.TempDir(), ft))
				f := &fakeReplica{result: tc.result}
				s.SetReplicaWaiter(f.wait)

				res, mustWait := s.AppendMessage(newTestMessage("T", 0, body(1, 100), "", ""))
				require.True(t, mustWait, "a put waits for the slave")
				var c collect
				c.wg.Add(1)
				s.OnDurable(res, c.done)
				got := c.wait(t)[0]
				assert.Equal(t, tc.result.Status, got.Status)
				assert.Equal(t, tc.result.Err, got.Err)
				assert.Equal(t, res.WroteOffset+int64(res.WroteBytes), f.last.Load(), "the slave must hold the record's end")

				// The blocking put waits the same way.
				r := s.PutMessage(context.Background(), newTestMessage("T", 0, body(2, 100), "", ""))
				assert.Equal(t, tc.result.Status, r.Status)
				assert.EqualValues(t, 2, f.waits.Load())

				// WAIT=false asks for nothing.
				m := newTestMessage("T", 0, body(3, 100), "", "")
				m.SetProperty(message.PropWaitStoreMsgOK, "false")
				_, mustWait = s.AppendMessage(m)
				assert.False(t, mustWait)

				s.SetReplicaWaiter(nil)
				_, mustWait = s.AppendMessage(newTestMessage("T", 0, body(4, 100), "", ""))
				assert.Equal(t, ft == SyncFlush, mustWait, "without a waiter only SYNC_FLUSH waits")
			})
		}
	}
}

// A put that saw a replica waiter at its append, whose waiter was removed
// before its wait (a role change, a shutdown), waits for nothing more
// under ASYNC_FLUSH: the blocking wait agrees with OnDurable, instead of
// waiting SyncFlushTimeout for a group commit that never runs.
func TestReplicaWaiterRemovedBeforeWait(t *testing.T) {
	cfg := testConfig(t.TempDir(), AsyncFlush)
	cfg.SyncFlushTimeout = time.Minute
	s := MustOpen(t, cfg)
	s.SetReplicaWaiter(func(int64, func(ReplicaResult)) {})
	res, mustWait := s.AppendMessage(newTestMessage("T", 0, body(1, 100), "", ""))
	require.True(t, mustWait)
	s.SetReplicaWaiter(nil)
	assert.Equal(t, PutOK, s.commitLog.waitFlushed(context.Background(), res).Status)
	var c collect
	c.wg.Add(1)
	s.OnDurable(res, c.done)
	assert.Equal(t, PutOK, c.wait(t)[0].Status)
}

// Stored-but-not-replicated outcomes count as stored: a caller retrying on
// !OK would store a second copy.
func TestPutResultOKCountsAppended(t *testing.T) {
	for st, want := range map[PutStatus]bool{
		PutOK: true, FlushDiskTimeout: true, FlushSlaveTimeout: true, SlaveNotAvailable: true,
		ServiceNotAvailable: false, MessageIllegal: false, CreateMappedFileFailed: false, UnknownError: false,
	} {
		assert.Equal(t, want, PutResult{Status: st}.OK(), st.String())
	}
}
