package controller

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// FuzzFSMApply: no log entry, however malformed, panics the state
// machine, and the state stays readable afterwards.
func FuzzFSMApply(f *testing.F) {
	f.Add([]byte(`{"type":"register","register":{"clusterName":"c","brokerName":"b","brokerId":1,"brokerAddress":"127.0.0.1:1"}}`),
		[]byte(`{"type":"elect","elect":{"brokerName":"b","expectMasterEpoch":0,"newMaster":1}}`))
	f.Add([]byte(`{"type":"alterSyncStateSet","alter":{"brokerName":"b","masterBrokerId":1,"masterEpoch":1,"expectSyncStateSetEpoch":1,"newSyncStateSet":null}}`),
		[]byte(`{"type":"controllerAddr","controllerAddr":{"id":"n0","addr":"x"}}`))
	f.Add([]byte(`null`), []byte(`{"type":"register"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m := newFSM(quietLog())
		for i, d := range [][]byte{a, b, a} {
			m.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: d})
		}
		m.groups()
		snap, err := m.Snapshot()
		require.NoError(t, err)
		require.NoError(t, newFSM(quietLog()).Restore(io.NopCloser(bytes.NewReader(snap.(fsmSnapshot)))))
	})
}

// TestFSMRestoreToleratesNullMembers: a snapshot whose groups, replica
// tables or replicas are JSON null (a damaged or hand-edited file) is
// restored without them instead of panicking the controller at its first
// read or registration.
func TestFSMRestoreToleratesNullMembers(t *testing.T) {
	m := newFSM(quietLog())
	snap := `{"groups":{"a":null,"b":{"clusterName":"c","brokerName":"b","replicas":null},` +
		`"c":{"clusterName":"c","brokerName":"c","replicas":{"1":null,"2":{"brokerId":2,"brokerAddress":"127.0.0.1:2"}}}},"controllers":null}`
	require.NoError(t, m.Restore(io.NopCloser(bytes.NewReader([]byte(snap)))))
	assert.NotPanics(t, func() { m.groups() })
	assert.Nil(t, m.group("a"))
	res := m.Apply(&raft.Log{Type: raft.LogCommand, Data: (&event{Type: evRegister, Register: &registerEvent{ClusterName: "c", BrokerName: "b",
		Replica: Replica{ID: 1, Addr: "127.0.0.1:1"}}}).encode()}).(applyResult)
	require.NoError(t, res.err)
	g := m.group("c")
	require.NotNil(t, g)
	assert.Equal(t, []int64{2}, g.ids())
}
