package controller

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func register(s *state, name string, id int64) applyResult {
	return s.apply(&event{Type: evRegister, Register: &registerEvent{ClusterName: "c", BrokerName: name,
		Replica: Replica{ID: id, Addr: "127.0.0.1:1" + string(rune('0'+id)), HeartbeatTimeoutMs: 3000}}})
}

func TestStateElectAndAlterAreFenced(t *testing.T) {
	s := newState()
	for id := int64(1); id <= 3; id++ {
		require.NoError(t, register(s, "b", id).err)
	}
	g := s.Groups["b"]
	assert.Equal(t, protocol.NoMaster, g.MasterID)
	assert.Equal(t, int32(0), g.MasterEpoch)

	res := s.apply(&event{Type: evElect, Elect: &electEvent{BrokerName: "b", ExpectMasterEpoch: 0, NewMaster: 1}})
	require.NoError(t, res.err)
	assert.Equal(t, int64(1), res.group.MasterID)
	assert.Equal(t, int32(1), res.group.MasterEpoch)
	assert.Equal(t, []int64{1}, res.group.SyncStateSet)
	assert.Equal(t, int32(1), res.group.SyncStateSetEpoch)

	// A second election decided on the old epoch is refused.
	res = s.apply(&event{Type: evElect, Elect: &electEvent{BrokerName: "b", ExpectMasterEpoch: 0, NewMaster: 2}})
	require.ErrorIs(t, res.err, ErrFencedMasterEpoch)
	assert.Equal(t, int64(1), s.Groups["b"].MasterID)

	alter := func(master int64, epoch, ssEpoch int32, set ...int64) error {
		return s.apply(&event{Type: evAlterSyncState, Alter: &alterEvent{BrokerName: "b", MasterID: master, MasterEpoch: epoch,
			ExpectSyncStateSetEpoch: ssEpoch, NewSet: set}}).err
	}
	require.NoError(t, alter(1, 1, 1, 3, 1, 2))
	assert.Equal(t, []int64{1, 2, 3}, s.Groups["b"].SyncStateSet)
	assert.Equal(t, int32(2), s.Groups["b"].SyncStateSetEpoch)
	assert.ErrorIs(t, alter(1, 1, 1, 1, 2), ErrFencedSyncStateSetEpoch, "based on an old set")
	assert.ErrorIs(t, alter(2, 1, 2, 1, 2), ErrFencedMasterEpoch, "not the master")
	assert.ErrorIs(t, alter(1, 0, 2, 1, 2), ErrFencedMasterEpoch, "old master epoch")
	assert.ErrorIs(t, alter(1, 1, 2, 2, 3), ErrInvalidReplicas, "set without the master")
	assert.ErrorIs(t, alter(1, 1, 2, 1, 9), ErrInvalidReplicas, "unknown replica")
	assert.Equal(t, []int64{1, 2, 3}, s.Groups["b"].SyncStateSet, "refusals change nothing")

	// The master dies with nobody to take over: no master, set kept.
	res = s.apply(&event{Type: evElect, Elect: &electEvent{BrokerName: "b", ExpectMasterEpoch: 1, NewMaster: protocol.NoMaster}})
	require.NoError(t, res.err)
	assert.Equal(t, protocol.NoMaster, res.group.MasterID)
	assert.Equal(t, int32(2), res.group.MasterEpoch)
	assert.Equal(t, []int64{1, 2, 3}, res.group.SyncStateSet)
	assert.ErrorIs(t, alter(1, 1, 2, 1), ErrFencedMasterEpoch, "a deposed master cannot shrink the set")

	require.ErrorIs(t, s.apply(&event{Type: evElect, Elect: &electEvent{BrokerName: "x"}}).err, ErrUnknownGroup)
	require.ErrorIs(t, s.apply(&event{Type: evRegister, Register: &registerEvent{ClusterName: "other", BrokerName: "b", Replica: Replica{ID: 4}}}).err, ErrClusterMismatch)
	require.Error(t, s.apply(&event{Type: "fromTheFuture"}).err)
}

func TestStateSnapshotRoundTrip(t *testing.T) {
	f := newFSM(nil)
	for id := int64(1); id <= 2; id++ {
		require.NoError(t, register(f.st, "b", id).err)
	}
	require.NoError(t, f.st.apply(&event{Type: evElect, Elect: &electEvent{BrokerName: "b", NewMaster: 2}}).err)
	snap, err := f.Snapshot()
	require.NoError(t, err)
	g := newFSM(nil)
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snap.(fsmSnapshot)))))
	assert.Equal(t, f.group("b"), g.group("b"))
}

func TestChooseMaster(t *testing.T) {
	g := &Group{BrokerName: "b", Replicas: map[int64]*Replica{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}},
		MasterID: 1, MasterEpoch: 3, SyncStateSet: []int64{1, 2}}
	cand := func(id int64, epoch int32, off int64) candidate {
		return candidate{id: id, epoch: epoch, maxOffset: off}
	}
	tests := []struct {
		name       string
		live       []candidate
		unclean    bool
		designated int64
		want       int64
	}{
		{"in-sync slave takes over", []candidate{cand(2, 3, 100), cand(3, 3, 500)}, false, 0, 2},
		{"out-of-sync never, even with more data", []candidate{cand(3, 3, 500)}, false, 0, protocol.NoMaster},
		{"unclean allows it", []candidate{cand(3, 3, 500)}, true, 0, 3},
		{"unclean only when no in-sync one lives", []candidate{cand(2, 3, 100), cand(3, 3, 500)}, true, 0, 2},
		{"newest epoch, then most data", []candidate{cand(1, 2, 900), cand(2, 3, 100)}, false, 0, 2},
		{"most data among equals", []candidate{cand(1, 3, 900), cand(2, 3, 100)}, false, 0, 1},
		{"designated in sync", []candidate{cand(1, 3, 900), cand(2, 3, 100)}, false, 2, 2},
		{"designated out of sync refused", []candidate{cand(1, 3, 900), cand(3, 3, 100)}, false, 3, protocol.NoMaster},
		{"designated dead refused", []candidate{cand(1, 3, 900)}, false, 2, protocol.NoMaster},
		{"nobody alive", nil, true, 0, protocol.NoMaster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := map[int64]candidate{}
			for _, c := range tc.live {
				live[c.id] = c
			}
			assert.Equal(t, tc.want, chooseMaster(g, live, tc.unclean, tc.designated))
		})
	}
	// A group that never had a master takes any live replica.
	fresh := &Group{BrokerName: "b", Replicas: map[int64]*Replica{1: {ID: 1}, 2: {ID: 2}}, SyncStateSet: []int64{}}
	assert.Equal(t, int64(2), chooseMaster(fresh, map[int64]candidate{2: cand(2, 0, 0)}, false, 0))
}

func TestParsePeers(t *testing.T) {
	p, err := ParsePeers("n0-127.0.0.1:9878; n1-127.0.0.1:9879;")
	require.NoError(t, err)
	assert.Equal(t, []Peer{{"n0", "127.0.0.1:9878"}, {"n1", "127.0.0.1:9879"}}, p)
	assert.Equal(t, "n0-127.0.0.1:9878;n1-127.0.0.1:9879", FormatPeers(p))
	for _, bad := range []string{"", "n0", "n0-host:1", "-127.0.0.1:1", "n0-127.0.0.1:1;n0-127.0.0.1:2"} {
		_, err := ParsePeers(bad)
		assert.ErrorIs(t, err, ErrBadConfig, bad)
	}
}
