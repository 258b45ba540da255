package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A heartbeat exactly as the official Go push consumer sends it (protocol.md
// §3.7 capture): codeSet entries are strings and subVersion is in ns.
const goHeartbeat = `{"clientID":"192.0.2.2@20836","producerDataSet":[],"consumerDataSet":[{"groupName":"cg",
 "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
 "subscriptionDataSet":[
   {"classFilterMode":false,"topic":"%RETRY%cg","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1795943871505332465,"expressionType":"TAG"},
   {"classFilterMode":false,"topic":"TopicTest","subString":"tagA || tagB","tagsSet":["tagA","tagB"],"codeSet":["3552231","3552232"],"subVersion":1795943871505281618,"expressionType":"TAG"}],
 "unitMode":false}]}`

func TestDecodeGoHeartbeat(t *testing.T) {
	hb, err := DecodeHeartbeatData([]byte(goHeartbeat))
	require.NoError(t, err)
	assert.Equal(t, "192.0.2.2@20836", hb.ClientID)
	require.Len(t, hb.ConsumerDataSet, 1)
	cd := hb.ConsumerDataSet[0]
	assert.Equal(t, ConsumePassively, cd.ConsumeType)
	assert.Equal(t, Clustering, cd.MessageModel)
	assert.Equal(t, ConsumeFromLastOffset, cd.ConsumeFromWhere)
	require.Len(t, cd.SubscriptionDataSet, 2)
	sub := cd.SubscriptionDataSet[1]
	assert.Equal(t, []string{"tagA", "tagB"}, sub.TagsSet)
	assert.Equal(t, CodeSet{3552231, 3552232}, sub.CodeSet)
	assert.Equal(t, int64(1795943871505281618), sub.SubVersion)
}

func TestCodeSetJavaNumbersAndBadInput(t *testing.T) {
	var sd SubscriptionData
	require.NoError(t, json.Unmarshal([]byte(`{"topic":"T","codeSet":[1,-2],"tagsSet":["a"]}`), &sd))
	assert.Equal(t, CodeSet{1, -2}, sd.CodeSet)
	out, err := json.Marshal(sd.CodeSet)
	require.NoError(t, err)
	assert.JSONEq(t, `[1,-2]`, string(out))

	_, err = DecodeHeartbeatData([]byte(`{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["x"]}]}]}`))
	assert.ErrorIs(t, err, ErrBadBody)
	_, err = DecodeHeartbeatData([]byte(`not json`))
	assert.ErrorIs(t, err, ErrBadBody)
}

func TestSubscriptionGroupWrapperShape(t *testing.T) {
	w := SubscriptionGroupWrapper{
		SubscriptionGroupTable: map[string]*SubscriptionGroupConfig{"g": NewSubscriptionGroupConfig("g")},
		DataVersion:            DataVersion{Timestamp: 1, Counter: 2},
	}
	b, err := json.Marshal(&w)
	require.NoError(t, err)
	assert.JSONEq(t, `{"subscriptionGroupTable":{"g":{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,
		"consumeBroadcastEnable":true,"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,
		"notifyConsumerIdsChangedEnable":true}},"dataVersion":{"timestamp":1,"counter":2}}`, string(b))
}

func TestLockBatchBodies(t *testing.T) {
	body, err := DecodeLockBatchRequestBody([]byte(`{"consumerGroup":"cg","clientId":"192.0.2.2@20876","mqSet":[{"topic":"TopicTest","brokerName":"broker-a","queueId":0}]}`))
	require.NoError(t, err)
	assert.Equal(t, []MessageQueue{{Topic: "TopicTest", BrokerName: "broker-a", QueueID: 0}}, body.MQSet)
	b, err := json.Marshal(LockBatchResponseBody{LockOKMQSet: body.MQSet})
	require.NoError(t, err)
	assert.JSONEq(t, `{"lockOKMQSet":[{"topic":"TopicTest","brokerName":"broker-a","queueId":0}]}`, string(b))
}

func TestSendHeaderV2RoundTrip(t *testing.T) {
	// The official client's SEND_BATCH_MESSAGE header (protocol.md §3.3 capture).
	ext := map[string]string{"h": "0", "j": "0", "m": "true", "a": "pg", "c": "TBW102", "d": "4", "f": "0", "i": "",
		"k": "false", "l": "0", "n": "broker-a", "b": "TopicTest", "e": "0", "g": "1795943861745"}
	var v2 SendMessageRequestHeaderV2
	require.NoError(t, DecodeHeader(ext, &v2))
	v1 := v2.ToV1()
	assert.Equal(t, "pg", v1.ProducerGroup)
	assert.Equal(t, "TopicTest", v1.Topic)
	assert.True(t, v1.Batch)
	assert.Equal(t, int64(1795943861745), v1.BornTimestamp)
	var back SendMessageRequestHeaderV2
	back.FromV1(v1)
	assert.Equal(t, v2, back)
	assert.Equal(t, ext, EncodeHeader(&back, nil))
}
