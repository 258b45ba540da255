package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumeStatsRoundTrip(t *testing.T) {
	cs := &ConsumeStats{ConsumeTps: 0, OffsetTable: map[MessageQueue]OffsetWrapper{
		{Topic: "T", BrokerName: "b", QueueID: 1}: {BrokerOffset: 9, ConsumerOffset: 4, LastTimestamp: 1700000000000},
		{Topic: "T", BrokerName: "b", QueueID: 0}: {BrokerOffset: 5, ConsumerOffset: 5},
	}}
	got, err := cs.Encode()
	require.NoError(t, err)
	assert.Equal(t, `{"consumeTps":0.0,"offsetTable":{`+
		`{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":5,"lastTimestamp":0},`+
		`{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":1700000000000}}}`, string(got))
	back, err := DecodeConsumeStats(got)
	require.NoError(t, err)
	assert.Equal(t, cs, back)
}

func TestDecodeConsumeStats(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		tps     float64
		wantErr bool
	}{
		{"empty table", `{"consumeTps":1.5,"offsetTable":{}}`, 0, 1.5, false},
		{"spaces and brace in name", `{ "consumeTps": 2.0, "offsetTable": { {"brokerName":"b}","queueId":3,"topic":"T"} : {"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0} } }`, 1, 2, false},
		{"no table", `{"consumeTps":0.0}`, 0, 0, false},
		{"table not object", `{"offsetTable":[]}`, 0, 0, true},
		{"unterminated", `{"offsetTable":{{"brokerName":"b"`, 0, 0, true},
		{"missing colon", `{"offsetTable":{{"topic":"T"}{"brokerOffset":1}}}`, 0, 0, true},
		{"bad tps", `{"consumeTps":x,"offsetTable":{}}`, 0, 0, true},
		{"unknown key fields are ignored", `{"offsetTable":{{"a":{}}:{}}}`, 1, 0, false},
		{"bad value", `{"offsetTable":{{"topic":"T"}:{"brokerOffset":"x"}}}`, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := DecodeConsumeStats([]byte(tc.in))
			if tc.wantErr {
				require.ErrorIs(t, err, ErrBadBody)
				return
			}
			require.NoError(t, err)
			assert.Len(t, cs.OffsetTable, tc.want)
			assert.InDelta(t, tc.tps, cs.ConsumeTps, 1e-9)
		})
	}
}

func TestGroupTopics(t *testing.T) {
	assert.Equal(t, "%RETRY%cg", RetryTopic("cg"))
	assert.Equal(t, "%DLQ%cg", DLQTopic("cg"))
}

// FuzzDecodeConsumeStats: any input decodes or fails with ErrBadBody, never
// panics; what decodes encodes and decodes to the same table.
func FuzzDecodeConsumeStats(f *testing.F) {
	f.Add([]byte(`{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":5,"lastTimestamp":0}}}`))
	f.Add([]byte(`{"offsetTable":{}}`))
	f.Add([]byte(`{"offsetTable":{{"a":{}}:{}}}`))
	f.Add([]byte(`{"consumeTps":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := DecodeConsumeStats(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadBody)
			return
		}
		out, err := cs.Encode()
		if err != nil {
			return // names json cannot encode (invalid UTF-8 is replaced, not an error)
		}
		back, err := DecodeConsumeStats(out)
		require.NoError(t, err)
		assert.Len(t, back.OffsetTable, len(cs.OffsetTable))
	})
}
