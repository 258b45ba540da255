package store

import (
	"context"
	"errors"
	"sync"
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

// recvWithin returns what ch delivers, failing the test if nothing comes
// within a generous bound.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing within 30s", what)
		var zero T
		return zero
	}
}

// Under SYNC_FLUSH with a replica waiter, OnDurable runs the flush wait and
// the replica wait at once; here the waiter answers from its own goroutine
// while the group commit answers the flush, in either order. The put is
// answered exactly once, only when both are done, with the slave's outcome,
// except that a failed flush wins over whatever the slave says.
func TestReplicaWaiterAnswersFromAnotherGoroutine(t *testing.T) {
	injected := errors.New("injected EIO")
	cases := []struct {
		name       string
		flushFails bool
		replica    ReplicaResult
		want       PutStatus
	}{
		{"acked", false, ReplicaResult{Status: PutOK}, PutOK},
		{"slave timeout", false, ReplicaResult{Status: FlushSlaveTimeout, Err: errFakeSlave}, FlushSlaveTimeout},
		{"flush fails, slave acked", true, ReplicaResult{Status: PutOK}, FlushDiskTimeout},
		{"flush fails, no slave", true, ReplicaResult{Status: SlaveNotAvailable, Err: errFakeSlave}, FlushDiskTimeout},
	}
	for _, tc := range cases {
		for _, replicaFirst := range []bool{true, false} {
			order := "/flush answers first"
			if replicaFirst {
				order = "/slave answers first"
			}
			t.Run(tc.name+order, func(t *testing.T) {
				// The group commit's flush waits for release, then succeeds
				// or fails.
				release := make(chan struct{})
				var once sync.Once
				flushGo := func() { once.Do(func() { close(release) }) }
				cfg := clTestConfig(t, SyncFlush)
				cfg.SyncFlushTimeout = time.Minute // the flush answers, not its timeout
				cl := mustOpenCommitLog(t, cfg, nil, true, func(cl *CommitLog) {
					real := cl.flush.flushFn
					cl.flush.flushFn = func(least int) (int64, error) {
						<-release
						if tc.flushFails {
							return cl.mfq.FlushedWhere(), injected
						}
						return real(least)
					}
				})
				t.Cleanup(flushGo) // runs before the commitlog's Shutdown cleanup

				slaveGo := make(chan struct{})
				slaveDone := make(chan struct{})
				var waitedFor atomic.Int64
				cl.SetReplicaWaiter(func(next int64, done func(ReplicaResult)) {
					waitedFor.Store(next)
					go func() { // the replication goroutine
						defer close(slaveDone)
						<-slaveGo
						done(tc.replica)
					}()
				})

				res, mustWait := cl.AppendMessage(clMsg("RW", 0, []byte("payload"), nil))
				require.Equal(t, PutOK, res.Status)
				require.True(t, mustWait)
				var answers atomic.Int32
				got := make(chan PutResult, 2)
				cl.OnDurable(res, func(r PutResult) {
					answers.Add(1)
					got <- r
				})
				end := res.WroteOffset + int64(res.WroteBytes)
				assert.Equal(t, end, waitedFor.Load(), "the slave must hold the record's end")
				// A flush waiter queued after the put's is answered after
				// it by the group commit: once it is, so is the put's.
				flushSide := make(chan struct{})
				cl.flush.waitFlushedAsync(end, func(error) { close(flushSide) })

				if replicaFirst {
					close(slaveGo)
					recvWithin(t, slaveDone, "the slave's answer")
					assert.Zero(t, answers.Load(), "answered before its flush")
					flushGo()
				} else {
					flushGo()
					recvWithin(t, flushSide, "the flush's answer")
					assert.Zero(t, answers.Load(), "answered before the slave")
					close(slaveGo)
				}
				r := recvWithin(t, got, "the put's answer")
				assert.Equal(t, tc.want, r.Status)
				if tc.flushFails {
					assert.ErrorIs(t, r.Err, injected)
				} else {
					assert.Equal(t, tc.replica.Err, r.Err)
				}
				assert.Equal(t, res.WroteOffset, r.WroteOffset, "the result still says where the record is stored")
				assert.True(t, r.OK(), "stored either way")

				// Both sides have answered: nothing answers again.
				recvWithin(t, slaveDone, "the slave's answer")
				recvWithin(t, flushSide, "the flush's answer")
				assert.EqualValues(t, 1, answers.Load())
				assert.Empty(t, got)
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
