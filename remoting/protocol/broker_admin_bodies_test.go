package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTopicStatsTableRoundTrip(t *testing.T) {
	in := &TopicStatsTable{OffsetTable: map[MessageQueue]TopicOffset{
		{Topic: "T", BrokerName: "broker-a", QueueID: 1}: {MinOffset: 0, MaxOffset: 3, LastUpdateTimestamp: 1700000000000},
		{Topic: "T", BrokerName: "broker-a", QueueID: 0}: {},
		{Topic: `q"t`, BrokerName: "b{}", QueueID: 10}:   {MinOffset: 5, MaxOffset: 9},
	}}
	b, err := in.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `{"brokerName":"b{}","queueId":10,"topic":"q\"t"}:{"minOffset":5`)
	assert.Regexp(t, `^{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:`, string(b))
	out, err := DecodeTopicStatsTable(b)
	require.NoError(t, err)
	assert.Equal(t, in.OffsetTable, out.OffsetTable)
}

func TestDecodeTopicStatsTableJavaForm(t *testing.T) {
	// As fastjson writes it, with spaces and the fields in another order.
	java := `{"offsetTable":{ {"brokerName":"broker-a","queueId":0,"topic":"TopicTest"} : {"lastUpdateTimestamp":1,"maxOffset":2,"minOffset":0},{"topic":"TopicTest","queueId":1,"brokerName":"broker-a"}:{"minOffset":1,"maxOffset":1,"lastUpdateTimestamp":0}}}`
	out, err := DecodeTopicStatsTable([]byte(java))
	require.NoError(t, err)
	assert.Equal(t, TopicOffset{MaxOffset: 2, LastUpdateTimestamp: 1}, out.OffsetTable[MessageQueue{Topic: "TopicTest", BrokerName: "broker-a", QueueID: 0}])
	assert.Equal(t, TopicOffset{MinOffset: 1, MaxOffset: 1}, out.OffsetTable[MessageQueue{Topic: "TopicTest", BrokerName: "broker-a", QueueID: 1}])

	empty, err := DecodeTopicStatsTable([]byte(`{"offsetTable":{}}`))
	require.NoError(t, err)
	assert.Empty(t, empty.OffsetTable)
}

func TestDecodeTopicStatsTableBad(t *testing.T) {
	for _, bad := range []string{
		``, `{}`, `{"offsetTable":[]}`, `{"offsetTable":{"k":{}}}`, `{"offsetTable":{{"queueId":"x"}:{}}}`,
		`{"offsetTable":{{"queueId":1}}}`, `{"offsetTable":{{"queueId":1}:{"minOffset":"a"}}}`,
		`{"offsetTable":{{"queueId":1}:{}`, `{"offsetTable":{{"queueId":1}:{} {"queueId":2}:{}}}`, `{"offsetTable":{{"topic":"\`,
	} {
		_, err := DecodeTopicStatsTable([]byte(bad))
		assert.ErrorIs(t, err, ErrBadBody, bad)
	}
}

func FuzzDecodeTopicStatsTable(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"minOffset":0,"maxOffset":1,"lastUpdateTimestamp":2}}}`))
	f.Add([]byte(`{"offsetTable":{{"topic":"\"}"}:{}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := DecodeTopicStatsTable(b)
		if err != nil {
			return
		}
		again, err := out.Encode()
		require.NoError(t, err)
		back, err := DecodeTopicStatsTable(again)
		require.NoError(t, err)
		require.Equal(t, out.OffsetTable, back.OffsetTable)
	})
}
