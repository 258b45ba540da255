package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A master's body as a Java broker writes it (fastjson, no fields of ours)
// and a slave's as ours writes it both decode; MaxDiff picks the slowest
// slave.
func TestHARuntimeInfoShape(t *testing.T) {
	master := `{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,"transferredByteInSecond":0},` +
		`"haConnectionInfo":[{"addr":"10.0.0.2:40001","diff":100,"inSync":true,"slaveAckOffset":900,"transferFromWhere":900,"transferredByteInSecond":2048},` +
		`{"addr":"10.0.0.3:40002","diff":700,"inSync":false,"slaveAckOffset":300,"transferFromWhere":300,"transferredByteInSecond":0}],` +
		`"inSyncSlaveNums":1,"master":true,"masterCommitLogMaxOffset":1000}`
	h, err := DecodeHARuntimeInfo([]byte(master))
	require.NoError(t, err)
	assert.True(t, h.Master)
	assert.Equal(t, int64(1000), h.MasterCommitLogMaxOffset)
	assert.Equal(t, 1, h.InSyncSlaveNums)
	require.Len(t, h.HAConnectionInfo, 2)
	assert.Equal(t, HAConnectionRuntimeInfo{Addr: "10.0.0.2:40001", SlaveAckOffset: 900, Diff: 100, InSync: true,
		TransferredByteInSecond: 2048, TransferFromWhere: 900}, h.HAConnectionInfo[0])
	diff, ok := h.MaxDiff()
	assert.True(t, ok)
	assert.Equal(t, int64(700), diff)

	slave := `{"master":false,"masterCommitLogMaxOffset":5000,"inSyncSlaveNums":0,"haConnectionInfo":null,` +
		`"haClientRuntimeInfo":{"masterAddr":"10.0.0.1:10912","transferredByteInSecond":0,"maxOffset":4000,"lastReadTimestamp":1700000000000,` +
		`"lastWriteTimestamp":0,"masterFlushOffset":0,"isActivated":true,"state":"following"}}`
	h, err = DecodeHARuntimeInfo([]byte(slave))
	require.NoError(t, err)
	assert.False(t, h.Master)
	assert.Equal(t, "10.0.0.1:10912", h.HAClientRuntimeInfo.MasterAddr)
	assert.Equal(t, int64(4000), h.HAClientRuntimeInfo.MaxOffset)
	assert.Equal(t, "following", h.HAClientRuntimeInfo.State)
	assert.True(t, h.HAClientRuntimeInfo.IsActivated)
	_, ok = h.MaxDiff()
	assert.False(t, ok, "no slaves, no lag")

	_, err = DecodeHARuntimeInfo([]byte(`{"master":"yes"}`))
	assert.ErrorIs(t, err, ErrBadBody)
}
