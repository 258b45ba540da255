package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResetOffsetBodyFastjsonForm(t *testing.T) {
	body := &ResetOffsetBody{OffsetTable: map[MessageQueue]int64{
		{Topic: "T", BrokerName: "b", QueueID: 1}: 7,
		{Topic: "T", BrokerName: "b", QueueID: 0}: 100,
	}}
	b, err := body.Encode()
	require.NoError(t, err)
	assert.Equal(t, `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:100,{"brokerName":"b","queueId":1,"topic":"T"}:7}}`, string(b))
	back, err := DecodeResetOffsetBody(b)
	require.NoError(t, err)
	assert.Equal(t, body.OffsetTable, back.OffsetTable)

	_, err = DecodeResetOffsetBody([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"x"}}`))
	assert.ErrorIs(t, err, ErrBadBody)
}
