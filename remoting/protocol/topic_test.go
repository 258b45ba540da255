package protocol

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPerm(t *testing.T) {
	tests := []struct {
		perm         int32
		str          string
		read, write  bool
		inheritedBit bool
	}{
		{6, "RW-", true, true, false},
		{4, "R--", true, false, false},
		{2, "-W-", false, true, false},
		{7, "RWX", true, true, true},
		{0, "---", false, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.str, PermString(tt.perm))
		assert.Equal(t, tt.read, IsReadable(tt.perm))
		assert.Equal(t, tt.write, IsWriteable(tt.perm))
		assert.Equal(t, tt.inheritedBit, IsInherited(tt.perm))
	}
}

func sampleRegisterBody() *RegisterBrokerBody {
	return &RegisterBrokerBody{
		TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]*TopicConfig{
				"TopicA": {TopicName: "TopicA", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: SingleTag},
				"TopicB": {TopicName: "TopicB", ReadQueueNums: 8, WriteQueueNums: 2, Perm: 4, TopicFilterType: MultiTag},
			},
			DataVersion: DataVersion{Timestamp: 1700000000000, Counter: 3},
		},
		FilterServerList: []string{},
	}
}

func TestRegisterBrokerBodyJSONShape(t *testing.T) {
	body := &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]*TopicConfig{"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: SingleTag, TopicSysFlag: 0, Order: false}},
		DataVersion:      DataVersion{Timestamp: 1, Counter: 2},
	}}
	b, err := body.Encode(false)
	require.NoError(t, err)
	assert.Equal(t, `{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},"dataVersion":{"timestamp":1,"counter":2}},"filterServerList":[]}`, string(b))

	// What a Java 4.9.8 broker sends (fastjson: sorted keys, extra fields ignored).
	java := `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,"timestamp":1699999999999},` +
		`"topicConfigTable":{"TBW102":{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}}}}`
	got, err := DecodeRegisterBrokerBody([]byte(java), false)
	require.NoError(t, err)
	assert.Equal(t, DataVersion{Timestamp: 1699999999999, Counter: 5}, got.TopicConfigSerializeWrapper.DataVersion)
	assert.Equal(t, int32(7), got.TopicConfigSerializeWrapper.TopicConfigTable["TBW102"].Perm)
}

func TestRegisterBrokerBodyRoundTrip(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		in := sampleRegisterBody()
		b, err := in.Encode(compressed)
		require.NoError(t, err)
		out, err := DecodeRegisterBrokerBody(b, compressed)
		require.NoError(t, err, "compressed=%v", compressed)
		assert.Equal(t, in, out, "compressed=%v", compressed)
	}
}

// javaCompressed builds a compressed body by hand, item by item, the way
// RegisterBrokerBody.encode(true) writes it, to check our decoder against the
// layout rather than against our own encoder.
func javaCompressed(t *testing.T, items ...any) []byte {
	var raw bytes.Buffer
	for _, it := range items {
		switch v := it.(type) {
		case string:
			require.NoError(t, binary.Write(&raw, binary.BigEndian, int32(len(v))))
			raw.WriteString(v)
		case int:
			require.NoError(t, binary.Write(&raw, binary.BigEndian, int32(v)))
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, err := zw.Write(raw.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return z.Bytes()
}

func TestRegisterBrokerBodyCompressedLayout(t *testing.T) {
	b := javaCompressed(t, `{"counter":9,"timestamp":42}`, 2, "TopicA 4 4 6 SINGLE_TAG", "TopicB 8 2 4 MULTI_TAG", `["1.2.3.4:5"]`)
	got, err := DecodeRegisterBrokerBody(b, true)
	require.NoError(t, err)
	assert.Equal(t, DataVersion{Timestamp: 42, Counter: 9}, got.TopicConfigSerializeWrapper.DataVersion)
	assert.Equal(t, &TopicConfig{TopicName: "TopicB", ReadQueueNums: 8, WriteQueueNums: 2, Perm: 4, TopicFilterType: MultiTag}, got.TopicConfigSerializeWrapper.TopicConfigTable["TopicB"])
	assert.Equal(t, []string{"1.2.3.4:5"}, got.FilterServerList)
}

func TestRegisterBrokerBodyBad(t *testing.T) {
	tests := []struct {
		name       string
		body       []byte
		compressed bool
	}{
		{"json garbage", []byte(`{"topicConfigSerializeWrapper":`), false},
		{"not zlib", []byte("plain text"), true},
		{"truncated", javaCompressed(t, `{"counter":1,"timestamp":1}`, 3, "A 1 1 6 SINGLE_TAG"), true},
		{"bad topic line", javaCompressed(t, `{"counter":1,"timestamp":1}`, 1, "A 1 x 6 SINGLE_TAG", `[]`), true},
		{"bad filter type", javaCompressed(t, `{"counter":1,"timestamp":1}`, 1, "A 1 1 6 NO_TAG", `[]`), true},
		{"huge item length", javaCompressed(t, 1<<30), true},
		{"negative count", javaCompressed(t, `{"counter":1,"timestamp":1}`, -1), true},
		{"lying count", javaCompressed(t, `{"counter":1,"timestamp":1}`, 1<<30), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRegisterBrokerBody(tt.body, tt.compressed)
			assert.ErrorIs(t, err, ErrBadBody)
		})
	}
}

func TestBodyCRC32(t *testing.T) {
	body := []byte(`{"filterServerList":[]}`)
	c := BodyCRC32(body)
	assert.GreaterOrEqual(t, c, int32(0), "Java masks the top bit")
	assert.Equal(t, int32(crc32.ChecksumIEEE(body)&0x7FFFFFFF), c)
}

func TestDataVersionNext(t *testing.T) {
	dv := DataVersion{Timestamp: 1, Counter: 7}
	n := dv.Next()
	assert.Equal(t, int64(8), n.Counter)
	assert.NotEqual(t, dv, n)
	b, err := n.Encode()
	require.NoError(t, err)
	back, err := DecodeDataVersion(b)
	require.NoError(t, err)
	assert.Equal(t, n, *back)
}

func BenchmarkRegisterBrokerBodyDecode(b *testing.B) {
	in := &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{TopicConfigTable: map[string]*TopicConfig{}}}
	for i := range 100 {
		tc := NewTopicConfig("Topic" + string(rune('A'+i%26)) + string(rune('a'+i/26)))
		in.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
	}
	for _, compressed := range []bool{false, true} {
		name := "json"
		if compressed {
			name = "zlib"
		}
		b.Run(name, func(b *testing.B) {
			enc, err := in.Encode(compressed)
			require.NoError(b, err)
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeRegisterBrokerBody(enc, compressed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDecodeRegisterBrokerBody feeds both body forms: a hostile broker must
// get an error, never a panic or an unbounded allocation.
func FuzzDecodeRegisterBrokerBody(f *testing.F) {
	for _, compressed := range []bool{false, true} {
		b, err := sampleRegisterBody().Encode(compressed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, compressed)
	}
	f.Add([]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":null}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		body, err := DecodeRegisterBrokerBody(data, compressed)
		if err != nil {
			return
		}
		// Whatever decoded re-encodes in the compressed form and decodes again.
		for _, tc := range body.TopicConfigSerializeWrapper.TopicConfigTable {
			if tc == nil || !tc.TopicFilterType.Valid() || strings.ContainsAny(tc.TopicName, " ") || tc.TopicName == "" {
				return // not representable in the space-separated form
			}
		}
		enc, err := body.Encode(true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeRegisterBrokerBody(enc, true); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
