package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sampleHeader struct {
	Topic     string `ext:"topic,required"`
	QueueID   int32  `ext:"queueId,required"`
	Offset    int64  `ext:"queueOffset"`
	Batch     bool   `ext:"batch"`
	Props     string `ext:"properties,omitempty"`
	Small     int16  `ext:"small"`
	untagged  int
	Untouched string
}

func TestHeaderRoundTrip(t *testing.T) {
	in := sampleHeader{Topic: "T", QueueID: 3, Offset: -1, Batch: true, Small: -2}
	ext := EncodeHeader(&in, nil)
	assert.Equal(t, map[string]string{"topic": "T", "queueId": "3", "queueOffset": "-1", "batch": "true", "small": "-2"}, ext)

	var out sampleHeader
	require.NoError(t, DecodeHeader(ext, &out))
	assert.Equal(t, in, out)
}

func TestDecodeHeaderErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name string
		ext  map[string]string
		want string
	}{
		{"missing required", map[string]string{"queueId": "1"}, "<topic>"},
		{"not a number", map[string]string{"topic": "T", "queueId": "x"}, "<queueId>"},
		{"overflow int32", map[string]string{"topic": "T", "queueId": "2147483648"}, "<queueId>"},
		{"overflow int16", map[string]string{"topic": "T", "queueId": "1", "small": "40000"}, "<small>"},
		{"empty required number", map[string]string{"topic": "T", "queueId": ""}, "<queueId>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h sampleHeader
			err := DecodeHeader(tc.ext, &h)
			require.ErrorIs(t, err, ErrBadHeader)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodeHeaderJavaBooleansAndBlanks(t *testing.T) {
	var h sampleHeader
	require.NoError(t, DecodeHeader(map[string]string{"topic": "T", "queueId": " 7 ", "batch": "TRUE", "queueOffset": ""}, &h))
	assert.True(t, h.Batch)
	assert.Equal(t, int32(7), h.QueueID)
	assert.Equal(t, int64(0), h.Offset, "an empty optional number stays zero")

	require.NoError(t, DecodeHeader(map[string]string{"topic": "T", "queueId": "1", "batch": "yes"}, &h))
	assert.False(t, h.Batch, "Boolean.parseBoolean treats anything but \"true\" as false")
}

func BenchmarkDecodeHeader(b *testing.B) {
	ext := map[string]string{"topic": "T", "queueId": "3", "queueOffset": "123456", "batch": "false", "properties": "p"}
	b.ReportAllocs()
	for b.Loop() {
		var h sampleHeader
		if err := DecodeHeader(ext, &h); err != nil {
			b.Fatal(err)
		}
	}
}
