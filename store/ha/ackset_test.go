package ha

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

// A hello carries the replica id after windowCRC (and after windowEnd when
// both are sent), and still ends with the offset a RocketMQ master takes.
func TestHelloWithReplicaID(t *testing.T) {
	h := hello{flags: helloCompress, windowLen: 12, windowCRC: 34, replicaID: 7, windowEnd: 1 << 33, offset: 1 << 33}
	b := h.encode(nil)
	require.Len(t, b, helloSize+8)
	assert.Equal(t, uint64(1<<33), binary.BigEndian.Uint64(b[len(b)-8:]))
	flags := binary.BigEndian.Uint32(b[4:])
	assert.Equal(t, helloCompress|helloReplicaID, flags)
	require.Equal(t, len(b)-8, helloRest(flags))
	want := h
	want.flags = flags
	assert.Equal(t, want, decodeHello(b[:8], b[8:]))

	// With a window ending at a file boundary too: both, in that order.
	h.windowEnd = 1<<33 - 100
	b = h.encode(nil)
	require.Len(t, b, helloMaxSize)
	flags = binary.BigEndian.Uint32(b[4:])
	assert.Equal(t, helloCompress|helloReplicaID|helloWindowEnd, flags)
	require.Equal(t, len(b)-8, helloRest(flags))
	assert.Equal(t, uint64(1<<33), binary.BigEndian.Uint64(b[len(b)-8:]))
	want = h
	want.flags = flags
	assert.Equal(t, want, decodeHello(b[:8], b[8:]))

	// Without an id and with the window at the offset: 24 bytes.
	h.replicaID, h.windowEnd = 0, h.offset
	assert.Len(t, h.encode(nil), helloSize)
}

// slaveWithID follows m into a new store as replica id.
func slaveWithID(t *testing.T, m *Master, id int64) (*Slave, *store.Store) {
	st := openStore(t, t.TempDir())
	cfg := haConfig()
	cfg.ReplicaID = id
	sl := startSlave(t, st, cfg, nil, m.Addr().String())
	require.Eventually(t, func() bool {
		for _, c := range m.Status().Slaves {
			if c.ReplicaID == id {
				return true
			}
		}
		return false
	}, waitFor, time.Millisecond, "replica %d connected", id)
	return sl, st
}

// TestAckSetWaitsForEveryReplica: with an ack set, a send is released once
// every replica of the set has it; a replica of the set that is not
// connected makes sends SLAVE_NOT_AVAILABLE at once; an empty set releases
// at once; nil returns to any-one-slave.
func TestAckSetWaitsForEveryReplica(t *testing.T) {
	mst := openStore(t, t.TempDir())
	cfg := haConfig()
	cfg.SlaveTimeout = 300 * time.Millisecond
	m := startMaster(t, mst, cfg, nil)
	_, st2 := slaveWithID(t, m, 2)
	sl3, _ := slaveWithID(t, m, 3)

	m.SetAckSet([]int64{2, 3})
	r := newResults()
	end := putN(t, mst, 0, 5, 1000)
	m.WaitReplicated(end, r.done(end))
	r.wait(t, 1)
	_, res := r.snapshot()
	assert.Equal(t, store.PutOK, res[end].Status)
	waitOffset(t, st2, end)
	st := m.Status()
	for _, c := range st.Slaves {
		assert.Equal(t, end, c.AckOffset)
		assert.WithinDuration(t, time.Now(), c.LastCaughtUp, waitFor, "replica %d caught up", c.ReplicaID)
	}

	// Replica 3 leaves: sends cannot be held by every replica of the set.
	require.NoError(t, sl3.Shutdown(context.Background()))
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 1 }, waitFor, time.Millisecond)
	end = putN(t, mst, 5, 1, 1000)
	var got Result
	m.WaitReplicated(end, func(r Result) { got = r })
	assert.Equal(t, store.SlaveNotAvailable, got.Status)
	assert.ErrorIs(t, got.Err, ErrSlaveNotAvailable)
	assert.False(t, m.SlaveOK(end))

	// The master shrinks the set to replica 2: released by its ack alone.
	m.SetAckSet([]int64{2})
	r = newResults()
	m.WaitReplicated(end, r.done(end))
	r.wait(t, 1)
	_, res = r.snapshot()
	assert.Equal(t, store.PutOK, res[end].Status)

	// The master alone in sync: released at once.
	m.SetAckSet([]int64{})
	end = putN(t, mst, 6, 1, 1000)
	got = Result{}
	m.WaitReplicated(end, func(r Result) { got = r })
	assert.Equal(t, store.PutOK, got.Status)

	// A set naming a replica that is not connected: refused at once.
	m.SetAckSet([]int64{2, 9})
	end = putN(t, mst, 7, 1, 1000)
	got = Result{}
	m.WaitReplicated(end, func(r Result) { got = r })
	assert.Equal(t, store.SlaveNotAvailable, got.Status, "replica 9 never connected")

	// Replica 9 connects and never acknowledges past its hello: replica
	// 2's ack alone does not release a send, which times out.
	silent, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	drained := make(chan struct{})
	go func() { // drainLoop: takes the master's frames, acks nothing
		defer close(drained)
		_, _ = io.Copy(io.Discard, silent)
	}()
	defer func() { silent.Close(); <-drained }()
	h := hello{replicaID: 9, windowEnd: end, offset: end}
	_, err = silent.Write(h.encode(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return m.SlaveOK(end) }, waitFor, time.Millisecond, "replica 9 connected")
	end = putN(t, mst, 8, 1, 1000)
	r = newResults()
	m.WaitReplicated(end, r.done(end))
	waitOffset(t, st2, end)
	r.wait(t, 1)
	_, res = r.snapshot()
	assert.Equal(t, store.FlushSlaveTimeout, res[end].Status, "released without replica 9's ack")
	assert.ErrorIs(t, res[end].Err, ErrSlaveTimeout)

	m.SetAckSet(nil)
	r = newResults()
	m.WaitReplicated(end, r.done(end))
	r.wait(t, 1)
	_, res = r.snapshot()
	assert.Equal(t, store.PutOK, res[end].Status, "any one slave again")
}
