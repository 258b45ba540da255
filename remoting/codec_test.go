package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frameFromHeader builds a frame (without its length prefix) by hand, the way
// a peer would put it on the wire.
func frameFromHeader(st SerializeType, header, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(st)<<24|uint32(len(header)))
	f = append(f, header...)
	return append(f, body...)
}

func TestCodecRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		cmd  Command
	}{
		{"empty request", Command{Code: 105, Language: LangGo, Version: 317, Opaque: 1}},
		{"request with fields and body", Command{
			Code: int32(SendMessage), Language: LangJava, Version: 409, Opaque: 42,
			ExtFields: map[string]string{"topic": "TopicTest", "queueId": "3", "properties": "UNIQ_KEY\x01AB\x02TAGS\x01t\x02"},
			Body:      []byte("hello"),
		}},
		{"response with remark", Command{Code: int32(TopicNotExist), Opaque: -7, Flag: flagResponse, Remark: "No topic route info in name server for the topic: \"x\"\n\ttab"}},
		{"oneway", Command{Code: int32(UpdateConsumerOffset), Opaque: 9, Flag: flagOneway, ExtFields: map[string]string{}}},
		{"unicode and controls", Command{Code: 10, Opaque: 1, Remark: "héllo ☃ \x00\x1f", ExtFields: map[string]string{"k\"ey": "v\\al"}}},
		{"negative code", Command{Code: -1, Opaque: 1}},
	}
	for _, tc := range cases {
		for _, st := range []SerializeType{JSONSerialize, RocketMQSerialize} {
			t.Run(tc.name+"/"+st.String(), func(t *testing.T) {
				in := tc.cmd
				in.SerializeType = st
				frame, err := EncodeFrame(&in)
				require.NoError(t, err)
				n, err := FrameLength(frame)
				require.NoError(t, err)
				require.Equal(t, len(frame)-4, n, "length field counts everything after itself")
				assert.Equal(t, byte(st), frame[4], "serialize type is the header word's high byte")

				out, err := DecodeFrame(frame[4:])
				require.NoError(t, err)
				assert.Equal(t, in.Code, out.Code)
				assert.Equal(t, in.Language, out.Language)
				assert.Equal(t, in.Version, out.Version)
				assert.Equal(t, in.Opaque, out.Opaque)
				assert.Equal(t, in.Flag, out.Flag)
				assert.Equal(t, in.Remark, out.Remark)
				assert.Equal(t, st, out.SerializeType)
				if len(in.ExtFields) == 0 {
					assert.Empty(t, out.ExtFields)
				} else {
					assert.Equal(t, in.ExtFields, out.ExtFields)
				}
				assert.Equal(t, in.Body, out.Body)
			})
		}
	}
}

// The JSON header we write must be valid JSON that Go's encoding/json (what the
// official client uses) reads into its own RemotingCommand shape.
func TestJSONHeaderIsStandardJSON(t *testing.T) {
	cmd := &Command{Code: 0, Language: LangJava, Version: 409, Opaque: 5, Flag: 1,
		Remark: "a\x01b", ExtFields: map[string]string{"msgId": "C0A8", "props": "K\x01V\x02"}}
	frame, err := EncodeFrame(cmd)
	require.NoError(t, err)
	hlen := int(binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF)
	var official struct {
		Code      int16             `json:"code"`
		Version   int16             `json:"version"`
		Opaque    int32             `json:"opaque"`
		Flag      int               `json:"flag"`
		Remark    string            `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	}
	require.NoError(t, json.Unmarshal(frame[8:8+hlen], &official))
	assert.Equal(t, int32(5), official.Opaque)
	assert.Equal(t, 1, official.Flag)
	assert.Equal(t, "a\x01b", official.Remark)
	assert.Equal(t, "K\x01V\x02", official.ExtFields["props"])
}

// Headers as the official Go client and Java write them.
func TestDecodeForeignJSONHeaders(t *testing.T) {
	goHeader := `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}`
	cmd, err := DecodeFrame(frameFromHeader(JSONSerialize, []byte(goHeader), nil))
	require.NoError(t, err)
	assert.Equal(t, GetRouteInfoByTopic, cmd.RequestCode())
	assert.Equal(t, LangGo, cmd.Language)
	assert.Equal(t, int32(317), cmd.Version)
	assert.Equal(t, "TopicTest", cmd.ExtFields["topic"])
	assert.Nil(t, cmd.Body)

	javaHeader := `{"code":34,"extFields":null,"flag":0,"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":409}`
	cmd, err = DecodeFrame(frameFromHeader(JSONSerialize, []byte(javaHeader), []byte(`{"clientID":"x"}`)))
	require.NoError(t, err)
	assert.Equal(t, HeartBeat, cmd.RequestCode())
	assert.Equal(t, LangJava, cmd.Language)
	assert.Equal(t, []byte(`{"clientID":"x"}`), cmd.Body)

	numeric := `{"code":10,"language":0,"opaque":3,"flag":2,"extFields":{"queueId":3,"batch":false,"topic":"T","n":null}}`
	cmd, err = DecodeFrame(frameFromHeader(JSONSerialize, []byte(numeric), nil))
	require.NoError(t, err)
	assert.True(t, cmd.IsOneway())
	assert.Equal(t, map[string]string{"queueId": "3", "batch": "false", "topic": "T"}, cmd.ExtFields)
}

func TestDecodeRejectsMalformed(t *testing.T) {
	validBinary, err := EncodeFrame(&Command{Code: 1, SerializeType: RocketMQSerialize, ExtFields: map[string]string{"a": "b"}})
	require.NoError(t, err)
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"too short for header word", []byte{0, 0}, ErrFrameTooShort},
		{"header length beyond frame", frameFromHeader(JSONSerialize, nil, nil)[:4:4], nil},
		{"unknown serialize type", frameFromHeader(7, []byte("{}"), nil), ErrUnknownSerializeType},
		{"invalid json", frameFromHeader(JSONSerialize, []byte(`{"code":`), nil), ErrBadHeader},
		{"json array", frameFromHeader(JSONSerialize, []byte(`[1,2]`), nil), ErrBadHeader},
		{"binary too short", frameFromHeader(RocketMQSerialize, []byte{0, 1, 2}, nil), ErrBadHeader},
		{"binary truncated ext", frameFromHeader(RocketMQSerialize, validBinary[8:len(validBinary)-1], nil), ErrBadHeader},
	}
	// A header word claiming more bytes than the frame holds.
	lying := binary.BigEndian.AppendUint32(nil, 100)
	cases[1].frame = append(lying, '{', '}')
	cases[1].want = ErrBadHeaderLength
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFrame(tc.frame)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.want), "got %v", err)
		})
	}
}

func TestFrameLengthBounds(t *testing.T) {
	for _, tc := range []struct {
		n    uint32
		want error
	}{
		{MaxFrameSize - 3, ErrFrameTooLarge},
		{0xFFFFFFFF, ErrFrameTooShort}, // -1 as int32
		{3, ErrFrameTooShort},
		{4, nil},
		{MaxFrameSize - 4, nil},
	} {
		_, err := FrameLength(binary.BigEndian.AppendUint32(nil, tc.n))
		if tc.want == nil {
			assert.NoError(t, err, "length %d", tc.n)
		} else {
			assert.ErrorIs(t, err, tc.want, "length %d", tc.n)
		}
	}
}

func TestReadCommandDoesNotTrustLength(t *testing.T) {
	// A 2 GiB claim must fail before any allocation of that size.
	_, err := ReadCommand(bytes.NewReader([]byte{0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}))
	assert.ErrorIs(t, err, ErrFrameTooLarge)
}

func TestEncodeRejectsOversizedFrame(t *testing.T) {
	_, err := EncodeFrame(&Command{Body: make([]byte, MaxFrameSize)})
	assert.ErrorIs(t, err, ErrFrameTooLarge)
	_, err = EncodeFrame(&Command{Code: 70000, SerializeType: RocketMQSerialize})
	assert.ErrorIs(t, err, ErrBadHeader)
}

func BenchmarkEncodeJSON(b *testing.B) {
	cmd := sendRequestForBench(JSONSerialize)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd.Body)))
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], cmd); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSON(b *testing.B) { benchDecode(b, JSONSerialize) }

func BenchmarkDecodeRocketMQ(b *testing.B) { benchDecode(b, RocketMQSerialize) }

func benchDecode(b *testing.B, st SerializeType) {
	frame, err := EncodeFrame(sendRequestForBench(st))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := DecodeFrame(frame[4:]); err != nil {
			b.Fatal(err)
		}
	}
}

// sendRequestForBench is a SEND_MESSAGE as the official Go client sends it.
func sendRequestForBench(st SerializeType) *Command {
	return &Command{Code: int32(SendMessage), Language: LangGo, Version: 317, Opaque: 77, SerializeType: st,
		ExtFields: map[string]string{
			"producerGroup": "pg", "topic": "TopicTest", "queueId": "0", "sysFlag": "0",
			"bornTimestamp": "1795943861741", "flag": "0", "reconsumeTimes": "0", "unitMode": "false",
			"maxReconsumeTimes": "0", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false",
			"properties": "UNIQ_KEY\x01C0000202000000000000000000000001\x02TAGS\x01tagA\x02KEYS\x01k1\x02",
			"bname":      "broker-a",
		},
		Body: bytes.Repeat([]byte("x"), 1024),
	}
}

// BenchmarkDecodeJSONStd is the encoding/json reference path, to compare
// against BenchmarkDecodeJSON side by side.
func BenchmarkDecodeJSONStd(b *testing.B) {
	frame, err := EncodeFrame(sendRequestForBench(JSONSerialize))
	if err != nil {
		b.Fatal(err)
	}
	hlen := int(binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF)
	header := frame[8 : 8+hlen]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeJSONHeaderStd(header); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeOfficialClientFrames decodes frames the official Go client put
// on the wire (recorded by scripts/capture into the fuzz seed corpus).
func TestDecodeOfficialClientFrames(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecodeFrame/official-go-client-code-*")
	require.NoError(t, err)
	require.NotEmpty(t, files, "seed corpus missing: go run ./scripts/capture")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		lines := strings.SplitN(string(raw), "\n", 3)
		require.Len(t, lines, 3)
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		frame, err := strconv.Unquote(lit)
		require.NoError(t, err, f)
		cmd, err := DecodeFrame([]byte(frame))
		require.NoError(t, err, f)
		assert.Equal(t, LangGo, cmd.Language, f)
		assert.Equal(t, int32(317), cmd.Version, f)
		assert.False(t, cmd.IsResponse(), f)
		switch cmd.RequestCode() {
		case GetRouteInfoByTopic:
			assert.Equal(t, "TopicTest", cmd.ExtFields["topic"])
		case SendMessage:
			assert.Equal(t, "TopicTest", cmd.ExtFields["topic"])
			assert.Contains(t, cmd.ExtFields["properties"], "TAGS\x01tagA\x02")
			assert.Equal(t, []byte("hello"), cmd.Body)
		case SendBatchMessage:
			assert.Equal(t, "TopicTest", cmd.ExtFields["b"])
			assert.Equal(t, "true", cmd.ExtFields["m"])
		case HeartBeat:
			assert.Contains(t, string(cmd.Body), `"producerDataSet"`)
		}
	}
}

func BenchmarkDecodeResponseJSON(b *testing.B) { benchDecodeResponse(b, JSONSerialize) }

func BenchmarkDecodeResponseRocketMQ(b *testing.B) { benchDecodeResponse(b, RocketMQSerialize) }

// benchDecodeResponse decodes a send response as our broker writes it.
func benchDecodeResponse(b *testing.B, st SerializeType) {
	frame, err := EncodeFrame(&Command{Code: int32(Success), Language: LangGo, Opaque: 77, Flag: flagResponse, SerializeType: st,
		ExtFields: map[string]string{
			"msgId": "7F00000100002A9F0000000000001C00", "queueId": "3", "queueOffset": "123456",
			"transactionId": "C0000202000000000000000000000001", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
		}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeFrame(frame[4:]); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCheckFieldsCountsAndRejectsTruncation(t *testing.T) {
	cmd := sendRequestForBench(RocketMQSerialize)
	frame, err := EncodeFrame(cmd)
	require.NoError(t, err)
	hlen := int(binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF)
	header := frame[8 : 8+hlen]
	remarkLen := int(binary.BigEndian.Uint32(header[13:]))
	ext := header[13+4+remarkLen+4:]
	n, err := checkFields(ext)
	require.NoError(t, err)
	assert.Equal(t, len(cmd.ExtFields), n)
	for cut := 1; cut < len(ext); cut++ { // a block cut anywhere but between fields is an error
		n, err := checkFields(ext[:cut])
		whole := 0
		for range Fields(ext[:cut]) {
			whole++
		}
		assert.Equal(t, whole, n, "cut %d", cut)
		if err == nil {
			assert.Less(t, n, len(cmd.ExtFields))
		}
	}
	n, err = checkFields(nil)
	assert.Equal(t, 0, n)
	assert.NoError(t, err)
	_, err = checkFields(bytes.Repeat([]byte{0xFF}, 64))
	assert.ErrorIs(t, err, ErrBadHeader)
}

// TestReadCommandFromBufio reads frames through both of ReadCommand's paths
// (in place from a bufio.Reader's buffer, and copied when larger than it)
// and checks truncated input reports what io.ReadFull would.
func TestReadCommandFromBufio(t *testing.T) {
	small := &Command{Code: int32(Success), Opaque: 1, Flag: flagResponse, ExtFields: map[string]string{"queueId": "3"}}
	large := &Command{Code: int32(Success), Opaque: 2, Flag: flagResponse, Body: bytes.Repeat([]byte("r"), 10000)}
	var stream []byte
	for _, c := range []*Command{small, large, small} {
		var err error
		stream, err = AppendFrame(stream, c)
		require.NoError(t, err)
	}
	r := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10) // the large frame is read on its own
	for _, want := range []*Command{small, large, small} {
		got, err := ReadCommand(r)
		require.NoError(t, err)
		assert.Equal(t, want.Opaque, got.Opaque)
		assert.Equal(t, len(want.ExtFields), len(got.ExtFields))
		assert.Equal(t, want.ExtFields["queueId"], got.ExtFields["queueId"])
		assert.Equal(t, len(want.Body), len(got.Body))
	}
	_, err := ReadCommand(r)
	assert.ErrorIs(t, err, io.EOF)

	// A body read in place is the caller's: later reads do not change it.
	// (One byte per read makes bufio move the second frame over the first.)
	r = bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(append(mustFrame(t, &Command{Opaque: 3, Body: []byte("first")}),
		mustFrame(t, &Command{Opaque: 4, Body: []byte("XXXXX")})...))), 4096)
	first, err := ReadCommand(r)
	require.NoError(t, err)
	_, err = ReadCommand(r)
	require.NoError(t, err)
	assert.Equal(t, []byte("first"), first.Body)

	smallLen := len(mustFrame(t, small))
	for _, cut := range []int{2, 4, 10, smallLen - 1} {
		r := bufio.NewReaderSize(bytes.NewReader(stream[:cut]), 4096)
		_, err := ReadCommand(r)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", cut)
	}
}

func mustFrame(t *testing.T, c *Command) []byte {
	t.Helper()
	b, err := EncodeFrame(c)
	require.NoError(t, err)
	return b
}
