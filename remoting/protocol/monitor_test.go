package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumerRunningInfoRoundTrip(t *testing.T) {
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}
	ri := ConsumerRunningInfo{
		Properties:      map[string]string{"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
		SubscriptionSet: []SubscriptionData{{Topic: "T", SubString: "*"}},
		MQTable:         map[MessageQueue]ProcessQueueInfo{mq: {CommitOffset: 3, CachedMsgCount: 2}},
		StatusTable:     map[string]ConsumeStatus{"T": {PullTPS: 1.5}},
		Jstack:          `goroutine 1 "x" {`, // quotes and braces inside a string
	}
	b, err := ri.Encode()
	require.NoError(t, err)
	got, err := DecodeConsumerRunningInfo(b)
	require.NoError(t, err)
	assert.Equal(t, ri.Properties, got.Properties)
	assert.Equal(t, "T", got.SubscriptionSet[0].Topic)
	assert.Equal(t, int64(3), got.MQTable[mq].CommitOffset)
	assert.Equal(t, 1.5, got.StatusTable["T"].PullTPS)
	assert.Equal(t, ri.Jstack, got.Jstack)
}

// TestDecodeRunningInfoOfOtherClients reads what Java (fastjson, "droped",
// numeric properties) and the official Go client ("dropped", a space
// before jstack) write.
func TestDecodeRunningInfoOfOtherClients(t *testing.T) {
	java := `{"jstack":"","mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"commitOffset":7,"droped":true}},` +
		`"properties":{"PROP_THREADPOOL_CORE_SIZE":20,"PROP_CONSUMEORDERLY":"false"},"statusTable":{"T":{"consumeOKTPS":2.0}},` +
		`"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}]}`
	ri, err := DecodeConsumerRunningInfo([]byte(java))
	require.NoError(t, err)
	q := ri.MQTable[MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}]
	assert.True(t, q.Droped)
	assert.Equal(t, int64(7), q.CommitOffset)
	assert.Equal(t, "20", ri.Properties["PROP_THREADPOOL_CORE_SIZE"])
	assert.Equal(t, 2.0, ri.StatusTable["T"].ConsumeOKTPS)

	goClient := `{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{},"subscriptionSet":[],` +
		`"mqTable":{{"topic":"T","brokerName":"b","queueId":2}:{"commitOffset":1,"dropped":true}}, "jstack":"" }`
	ri, err = DecodeConsumerRunningInfo([]byte(goClient))
	require.NoError(t, err)
	assert.True(t, ri.MQTable[MessageQueue{Topic: "T", BrokerName: "b", QueueID: 2}].Droped)

	_, err = DecodeConsumerRunningInfo([]byte(`{"mqTable":{"not-a-queue":1}}`))
	assert.ErrorIs(t, err, ErrBadBody)
}

func TestGetConsumerStatusBodyRoundTrip(t *testing.T) {
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}
	b := GetConsumerStatusBody{MessageQueueTable: map[MessageQueue]int64{mq: 5},
		ConsumerTable: map[string]map[MessageQueue]int64{"10.0.0.1@1": {mq: 9}, "10.0.0.2@1": {}}}
	enc, err := b.Encode()
	require.NoError(t, err)
	got, err := DecodeGetConsumerStatusBody(enc)
	require.NoError(t, err)
	assert.Equal(t, b.MessageQueueTable, got.MessageQueueTable)
	assert.Equal(t, b.ConsumerTable, got.ConsumerTable)
	// A client's answer carries only messageQueueTable (the Go client's form).
	got, err = DecodeGetConsumerStatusBody([]byte(`{"messageQueueTable":{{"topic":"T","brokerName":"b","queueId":0}:3}}`))
	require.NoError(t, err)
	assert.Equal(t, int64(3), got.MessageQueueTable[mq])
}

func TestConsumeStatsListRoundTrip(t *testing.T) {
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}
	l := ConsumeStatsList{BrokerAddr: "127.0.0.1:10911", TotalDiff: 4, ConsumeStatsList: []map[string][]ConsumeStats{
		{"g1": {{ConsumeTps: 1.5, OffsetTable: map[MessageQueue]OffsetWrapper{mq: {BrokerOffset: 9, ConsumerOffset: 5}}}}},
		{"g2": nil},
	}}
	enc, err := l.Encode()
	require.NoError(t, err)
	got, err := DecodeConsumeStatsList(enc)
	require.NoError(t, err)
	assert.Equal(t, l.BrokerAddr, got.BrokerAddr)
	assert.Equal(t, l.TotalDiff, got.TotalDiff)
	require.Len(t, got.ConsumeStatsList, 2)
	assert.Equal(t, OffsetWrapper{BrokerOffset: 9, ConsumerOffset: 5}, got.ConsumeStatsList[0]["g1"][0].OffsetTable[mq])
	assert.Equal(t, 1.5, got.ConsumeStatsList[0]["g1"][0].ConsumeTps)
}

func TestCMResultBothForms(t *testing.T) {
	var r ConsumeMessageDirectlyResult
	require.NoError(t, json.Unmarshal([]byte(`{"consumeResult":"CR_LATER","spentTimeMills":3}`), &r))
	assert.Equal(t, CRLater, r.ConsumeResult)
	require.NoError(t, json.Unmarshal([]byte(`{"consumeResult":4}`), &r), "the official Go client writes ordinals")
	assert.Equal(t, CRThrowException, r.ConsumeResult)
	assert.Error(t, json.Unmarshal([]byte(`{"consumeResult":"CR_NOPE"}`), &r))
	b, err := json.Marshal(ConsumeMessageDirectlyResult{ConsumeResult: CRSuccess})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"consumeResult":"CR_SUCCESS"`, "Java's spelling")
}

// FuzzDecodeMonitorBodies feeds the monitor decoders arbitrary bytes: they
// may fail but must not panic or hang.
func FuzzDecodeMonitorBodies(f *testing.F) {
	f.Add([]byte(`{"consumerTable":{"c":{{"brokerName":"b","queueId":0,"topic":"T"}:1}},"messageQueueTable":{}}`))
	f.Add([]byte(`{"brokerAddr":"a","consumeStatsList":[{"g":[{"consumeTps":0.0,"offsetTable":{}}]}],"totalDiff":0}`))
	f.Add([]byte(`{"jstack":"","mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{}},"properties":{}}`))
	f.Add([]byte(`{"a":[`))
	f.Fuzz(func(_ *testing.T, b []byte) {
		_, _ = DecodeGetConsumerStatusBody(b)
		_, _ = DecodeConsumeStatsList(b)
		_, _ = DecodeConsumerRunningInfo(b)
	})
}
