package message

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func officialBatch() []*primitive.Message {
	var msgs []*primitive.Message
	for i := range 4 {
		m := primitive.NewMessage("BatchTopic", bytes.Repeat([]byte{byte('0' + i)}, i*3))
		m.Flag = int32(i)
		if i != 1 {
			m.WithTag("tag" + string(rune('A'+i)))
			m.WithKeys([]string{"k1", "k2"})
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestUnmarshalOfficialBatch(t *testing.T) {
	msgs := officialBatch()
	body := producer.MarshalMessageBatch(msgs...)
	got, err := UnmarshalBatch("BatchTopic", body)
	require.NoError(t, err)
	require.Len(t, got, len(msgs))
	for i, m := range msgs {
		assert.Equal(t, m.Flag, got[i].Flag)
		assert.Equal(t, m.Body, got[i].Body)
		assert.Equal(t, m.GetProperties(), got[i].Properties)
		assert.Equal(t, "BatchTopic", got[i].Topic)
	}
}

func TestAppendBatchReadableByOfficialLayout(t *testing.T) {
	msgs := officialBatch()
	var ours []*Message
	for _, m := range msgs {
		ours = append(ours, &Message{Topic: m.Topic, Flag: m.Flag, Body: m.Body, Properties: m.GetProperties()})
	}
	body, err := AppendBatch(nil, ours)
	require.NoError(t, err)
	// Same length as the official encoding (property order may differ; the Go
	// client ends properties with a separator, Java and we do not).
	official := producer.MarshalMessageBatch(msgs...)
	trailing := 0
	for _, m := range msgs {
		if len(m.GetProperties()) > 0 {
			trailing++
		}
	}
	assert.Equal(t, len(official)-trailing, len(body))
	back, err := UnmarshalBatch("BatchTopic", body)
	require.NoError(t, err)
	assert.Equal(t, ours, back)
}

func TestEncodeBatchRecordsDecodedByOfficialClient(t *testing.T) {
	msgs := officialBatch()
	b := &MessageExtBatch{MessageExt: MessageExt{
		Message: Message{
			Topic:      "BatchTopic",
			Body:       producer.MarshalMessageBatch(msgs...),
			Properties: map[string]string{PropCluster: "DefaultCluster"},
		},
		QueueID:        1,
		BornTimestamp:  1700000000000,
		BornHost:       netip.MustParseAddrPort("[2001:db8::7]:5555"),
		StoreTimestamp: 1700000000001,
		StoreHost:      netip.MustParseAddrPort("127.0.0.1:10911"),
	}}
	recs, n, err := EncodeBatchRecords([]byte("x"), b, 0)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
	recs = recs[1:]
	got := primitive.DecodeMessage(recs)
	require.Len(t, got, len(msgs))
	for i, m := range msgs {
		want := m.GetProperties()
		want[PropCluster] = "DefaultCluster"
		assert.Equal(t, want, got[i].GetProperties())
		assert.Equal(t, m.Body, got[i].Body)
		assert.Equal(t, m.Flag, got[i].Flag)
		assert.Equal(t, "BatchTopic", got[i].Topic)
		assert.Equal(t, 1, got[i].Queue.QueueId)
		assert.Equal(t, FlagBornHostV6, got[i].SysFlag)
		assert.Equal(t, "2001:db8::7:5555", got[i].BornHost)
		assert.Equal(t, BodyCRC(m.Body), got[i].BodyCRC)
	}
	ours, err := DecodeRecords(recs)
	require.NoError(t, err)
	assert.Len(t, ours, len(msgs))

	_, _, err = EncodeBatchRecords(nil, b, 100)
	assert.ErrorIs(t, err, ErrRecordTooLarge)
}

func TestWalkBatchErrors(t *testing.T) {
	good, err := AppendBatch(nil, []*Message{{Body: []byte("abc"), Properties: map[string]string{"a": "b"}}})
	require.NoError(t, err)
	badBody := bytes.Clone(good)
	binary.BigEndian.PutUint32(badBody[16:], 1000)
	badSize := bytes.Clone(good)
	binary.BigEndian.PutUint32(badSize, uint32(len(good)+1))
	badProps := bytes.Clone(good)
	binary.BigEndian.PutUint16(badProps[23:], 0x8000)
	cases := map[string][]byte{
		"trailing bytes":    append(bytes.Clone(good), 1, 2, 3),
		"body overruns":     badBody,
		"size overruns":     badSize,
		"negative props":    badProps,
		"size too small":    {0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"size not the sum":  append(binary.BigEndian.AppendUint32(nil, uint32(len(good)+2)), append(good[4:], 0, 0)...),
		"truncated sub-rec": good[:len(good)-1],
	}
	for name, body := range cases {
		_, err := UnmarshalBatch("t", body)
		assert.ErrorIs(t, err, ErrBadBatch, name)
	}
	_, _, err = EncodeBatchRecords(nil, &MessageExtBatch{MessageExt: MessageExt{Message: Message{Topic: "t"}}}, 0)
	assert.ErrorIs(t, err, ErrBadBatch, "empty batch")
}
