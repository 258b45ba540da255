package message

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleMessage(born, store string) *MessageExt {
	return &MessageExt{
		Message: Message{
			Topic: "TopicTest",
			Flag:  7,
			Properties: map[string]string{
				PropTags:    "TagA",
				PropKeys:    "k1 k2",
				PropUniqKey: "7F00000100002A9F0000000000000001",
				"custom":    "värde with spaces",
			},
			Body: []byte("hello world body"),
		},
		QueueID:                   3,
		QueueOffset:               12345,
		SysFlag:                   TransactionCommitType,
		BornTimestamp:             1700000000123,
		BornHost:                  netip.MustParseAddrPort(born),
		StoreTimestamp:            1700000000456,
		StoreHost:                 netip.MustParseAddrPort(store),
		CommitLogOffset:           1 << 33,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 999,
	}
}

// javaHost formats a host the way the official Go client does ("ip:port", no brackets).
func javaHost(ap netip.AddrPort) string {
	return fmt.Sprintf("%s:%d", net.IP(ap.Addr().AsSlice()).String(), ap.Port())
}

func assertSameAsOfficial(t *testing.T, want *MessageExt, wantBody []byte, got *primitive.MessageExt, size int) {
	t.Helper()
	assert.Equal(t, want.Topic, got.Topic)
	assert.Equal(t, wantBody, got.Body)
	assert.Equal(t, want.Flag, got.Flag)
	assert.Equal(t, want.Properties, got.GetProperties())
	assert.Equal(t, int(want.QueueID), got.Queue.QueueId)
	assert.Equal(t, int32(size), got.StoreSize)
	assert.Equal(t, want.QueueOffset, got.QueueOffset)
	assert.Equal(t, want.BornTimestamp, got.BornTimestamp)
	assert.Equal(t, javaHost(want.BornHost), got.BornHost)
	assert.Equal(t, want.StoreTimestamp, got.StoreTimestamp)
	assert.Equal(t, javaHost(want.StoreHost), got.StoreHost)
	assert.Equal(t, want.CommitLogOffset, got.CommitLogOffset)
	assert.Equal(t, BodyCRC(want.Body), got.BodyCRC)
	assert.Equal(t, want.ReconsumeTimes, got.ReconsumeTimes)
	assert.Equal(t, want.PreparedTransactionOffset, got.PreparedTransactionOffset)
	assert.Equal(t, want.OffsetMsgID(), got.OffsetMsgId)
	assert.Equal(t, want.MsgID(), got.MsgId)
}

func TestRecordDecodedByOfficialClient(t *testing.T) {
	cases := []struct {
		name        string
		born, store string
		wantFlags   int32
	}{
		{"ipv4", "10.1.2.3:51234", "192.168.0.9:10911", 0},
		{"ipv6 born", "[2001:db8::1]:40000", "192.168.0.9:10911", FlagBornHostV6},
		{"ipv6 store", "10.1.2.3:51234", "[fe80::1234:5678]:10911", FlagStoreHostV6},
		{"ipv6 both", "[::1]:1", "[2001:db8:1:2:3:4:5:6]:65535", FlagBornHostV6 | FlagStoreHostV6},
		{"v4-mapped written as v4", "[::ffff:10.0.0.1]:9", "127.0.0.1:10911", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleMessage(tc.born, tc.store)
			rec, err := EncodeRecord(nil, m)
			require.NoError(t, err)
			require.Equal(t, RecordLength(tc.wantFlags, len(m.Body), len(m.Topic), PropertiesSize(m.Properties)), len(rec))

			got := primitive.DecodeMessage(rec)
			require.Len(t, got, 1)
			assert.Equal(t, m.SysFlag|tc.wantFlags, got[0].SysFlag)
			m.BornHost = netip.AddrPortFrom(m.BornHost.Addr().Unmap(), m.BornHost.Port())
			assertSameAsOfficial(t, m, m.Body, got[0], len(rec))

			ours, n, err := DecodeRecord(rec)
			require.NoError(t, err)
			assert.Equal(t, len(rec), n)
			assert.Equal(t, m.Message, ours.Message)
			assert.Equal(t, m.SysFlag|tc.wantFlags, ours.SysFlag)
			assert.Equal(t, m.BornHost, ours.BornHost)
			assert.Equal(t, m.StoreHost, ours.StoreHost)
			assert.Equal(t, m.QueueOffset, ours.QueueOffset)
			assert.Equal(t, m.CommitLogOffset, ours.CommitLogOffset)
			assert.Equal(t, m.PreparedTransactionOffset, ours.PreparedTransactionOffset)
			assert.Equal(t, m.ReconsumeTimes, ours.ReconsumeTimes)
			assert.Equal(t, m.StoreTimestamp, ours.StoreTimestamp)
			assert.Equal(t, BodyCRC(m.Body), ours.BodyCRC)
			assert.Equal(t, int32(len(rec)), ours.StoreSize)

			r, err := ParseRecord(rec)
			require.NoError(t, err)
			assert.NoError(t, r.VerifyCRC())
			assert.Equal(t, m.StoreTimestamp, int64(binary.BigEndian.Uint64(rec[StoreTimestampPos(r.SysFlag()):])))
			tags, ok := r.Property(PropTags)
			assert.True(t, ok)
			assert.Equal(t, "TagA", string(tags))
		})
	}
}

func TestCompressedRecordDecodedByOfficialClient(t *testing.T) {
	plain := bytes.Repeat([]byte("compress me please "), 50)
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	_, err := zw.Write(plain)
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	m := sampleMessage("10.0.0.1:1", "10.0.0.2:10911")
	m.Body = zb.Bytes()
	m.SysFlag = FlagCompressed | CompressionZlib
	rec, err := EncodeRecord(nil, m)
	require.NoError(t, err)

	got := primitive.DecodeMessage(rec)
	require.Len(t, got, 1)
	assertSameAsOfficial(t, m, plain, got[0], len(rec))
	assert.Equal(t, m.SysFlag, got[0].SysFlag)

	ours, _, err := DecodeRecord(rec)
	require.NoError(t, err)
	assert.Equal(t, zb.Bytes(), ours.Body, "decode keeps the stored bytes")
	un, err := UncompressBody(ours.SysFlag, ours.Body)
	require.NoError(t, err)
	assert.Equal(t, plain, un)

	_, err = UncompressBody(FlagCompressed|CompressionLZ4, ours.Body)
	assert.ErrorIs(t, err, ErrUnsupportedCompression)
}

func TestRunOfRecordsDecodedByOfficialClient(t *testing.T) {
	var run []byte
	var want []*MessageExt
	for i := range 5 {
		m := sampleMessage("10.0.0.1:1", "[2001:db8::2]:10911")
		m.QueueOffset = int64(i)
		m.CommitLogOffset = int64(len(run))
		m.Body = bytes.Repeat([]byte{byte('a' + i)}, i*10)
		if i == 2 {
			m.Properties = nil // no properties, MsgId falls back to the offset id
		}
		var err error
		run, err = EncodeRecord(run, m)
		require.NoError(t, err)
		want = append(want, m)
	}
	got := primitive.DecodeMessage(run)
	require.Len(t, got, len(want))
	ours, err := DecodeRecords(run)
	require.NoError(t, err)
	require.Len(t, ours, len(want))
	for i := range want {
		if want[i].Properties == nil {
			want[i].Properties = map[string]string{}
		}
		assertSameAsOfficial(t, want[i], want[i].Body, got[i], int(ours[i].StoreSize))
		assert.Equal(t, want[i].Body, ours[i].Body)
		assert.Equal(t, want[i].Properties, ours[i].Properties)
	}
	assert.Equal(t, want[2].OffsetMsgID(), got[2].MsgId)
}

func TestEncodeRecordLimits(t *testing.T) {
	m := sampleMessage("10.0.0.1:1", "10.0.0.2:2")
	m.Topic = string(bytes.Repeat([]byte("t"), 128))
	dst := []byte("prefix")
	out, err := EncodeRecord(dst, m)
	assert.ErrorIs(t, err, ErrTopicTooLong)
	assert.Equal(t, "prefix", string(out))

	m.Topic = string(bytes.Repeat([]byte("t"), 127))
	_, err = EncodeRecord(nil, m)
	assert.NoError(t, err)

	m.Properties = map[string]string{"big": string(bytes.Repeat([]byte("v"), MaxPropertiesLength-4))}
	_, err = EncodeRecord(nil, m)
	assert.NoError(t, err, "exactly 32767 bytes of properties fit")
	m.Properties["big"] += "v"
	out, err = EncodeRecord(dst, m)
	assert.ErrorIs(t, err, ErrPropertiesTooLong)
	assert.Equal(t, "prefix", string(out))
}

func TestParseRecordErrors(t *testing.T) {
	m := sampleMessage("10.0.0.1:1", "10.0.0.2:2")
	rec, err := EncodeRecord(nil, m)
	require.NoError(t, err)

	blank := binary.BigEndian.AppendUint32(nil, 4096)
	blank = binary.BigEndian.AppendUint32(blank, 0xCBD43194)

	flipped := bytes.Clone(rec)
	r, err := ParseRecord(flipped)
	require.NoError(t, err)
	flipped[r.bodyPos] ^= 0xFF

	badSize := bytes.Clone(rec)
	binary.BigEndian.PutUint32(badSize, uint32(len(rec)-1))
	badBody := bytes.Clone(rec)
	binary.BigEndian.PutUint32(badBody[r.bodyPos-4:], 1<<30)
	badProps := bytes.Clone(rec)
	binary.BigEndian.PutUint16(badProps[r.propsPos-2:], 0xFFFF)

	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortRecord},
		{"truncated", rec[:len(rec)-1], ErrShortRecord},
		{"blank", blank, ErrBlankRecord},
		{"zeroes", make([]byte, 200), ErrBadMagic},
		{"size too small", append(binary.BigEndian.AppendUint32(nil, 20), rec[4:]...), ErrCorruptRecord},
		{"size disagrees with fields", badSize, ErrCorruptRecord},
		{"body length overruns", badBody, ErrCorruptRecord},
		{"negative properties length", badProps, ErrCorruptRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecord(tc.b)
			assert.ErrorIs(t, err, tc.want)
			_, _, err = DecodeRecord(tc.b)
			assert.ErrorIs(t, err, tc.want)
		})
	}

	r, err = ParseRecord(flipped)
	require.NoError(t, err, "structure is intact")
	assert.ErrorIs(t, r.VerifyCRC(), ErrBodyCRC)
}

func TestDecodeRecordIntoAliasesBody(t *testing.T) {
	m := sampleMessage("10.0.0.1:1", "10.0.0.2:2")
	rec, err := EncodeRecord(nil, m)
	require.NoError(t, err)
	var got MessageExt
	n, err := DecodeRecordInto(&got, rec, false)
	require.NoError(t, err)
	assert.Equal(t, len(rec), n)
	r, _ := ParseRecord(rec)
	rec[r.bodyPos] = 'X'
	assert.Equal(t, byte('X'), got.Body[0], "no-copy decode shares the buffer")
}

func TestTransactionAndCompressionBits(t *testing.T) {
	f := FlagCompressed | TransactionPreparedType | FlagBornHostV6 | CompressionZstd
	assert.Equal(t, TransactionPreparedType, TransactionType(f))
	assert.Equal(t, CompressionZstd, CompressionType(f))
	g := ResetTransactionType(f, TransactionCommitType)
	assert.Equal(t, TransactionCommitType, TransactionType(g))
	assert.Equal(t, f&^TransactionRollbackType, g&^TransactionRollbackType)
	assert.Equal(t, int(primitive.GetTransactionValue(int(f))), int(TransactionType(f)))
}

// TestEncodeRecordFromPropertiesString checks a message whose properties
// come encoded (Properties nil) is stored with that string, reads back as
// the map would, and answers Property from it.
func TestEncodeRecordFromPropertiesString(t *testing.T) {
	props := map[string]string{PropUniqKey: "U", PropTags: "t", PropWaitStoreMsgOK: "false"}
	viaMap := &MessageExt{Message: Message{Topic: "T", Body: []byte("b"), Properties: props}}
	viaString := &MessageExt{Message: Message{Topic: "T", Body: []byte("b")}, PropertiesString: string(MarshalProperties(props)) + "\x02"}
	for _, m := range []*MessageExt{viaMap, viaString} {
		rec, err := EncodeRecord(nil, m)
		require.NoError(t, err)
		r, err := ParseRecord(rec)
		require.NoError(t, err)
		assert.Equal(t, props, UnmarshalProperties(r.Properties()))
		assert.Equal(t, "false", m.Property(PropWaitStoreMsgOK))
		assert.Empty(t, m.Property(PropKeys))
	}
	rec, err := EncodeRecord(nil, viaString)
	require.NoError(t, err)
	r, _ := ParseRecord(rec)
	assert.Equal(t, viaString.PropertiesString, string(r.Properties()), "stored as it came")
	assert.Equal(t, "2", (&MessageExt{PropertiesString: "K\x011\x02K\x012"}).Property("K"), "the last one, as in a map")

	// Every accessor reads the string; a setter keeps what it held.
	m := &MessageExt{PropertiesString: "UNIQ_KEY\x01U1\x02TAGS\x01a\x02KEYS\x01k1 k2\x02DELAY\x013\x02CLUSTER\x01C"}
	assert.Equal(t, "a", m.Tags())
	assert.Equal(t, "k1 k2", m.Keys())
	assert.Equal(t, "U1", m.UniqKey())
	assert.Equal(t, "U1", m.MsgID())
	assert.Equal(t, 3, m.DelayTimeLevel())
	m.SetProperty("X", "1")
	m.RemoveProperty(PropKeys)
	assert.Equal(t, map[string]string{PropUniqKey: "U1", PropTags: "a", PropDelayTimeLevel: "3", PropCluster: "C", "X": "1"}, m.Properties)
	assert.Empty(t, m.PropertiesString)
	rec, err = EncodeRecord(nil, m)
	require.NoError(t, err)
	r, _ = ParseRecord(rec)
	assert.Equal(t, m.Properties, UnmarshalProperties(r.Properties()))

	long := &MessageExt{Message: Message{Topic: "T"}, PropertiesString: "K\x01" + strings.Repeat("v", MaxPropertiesLength)}
	_, err = EncodeRecord(nil, long)
	assert.ErrorIs(t, err, ErrPropertiesTooLong)
}

// A zero byte in the properties is refused: recovery takes zeros there for
// a torn write (store.checkTorn).
func TestEncodeRecordRefusesNULInProperties(t *testing.T) {
	m := &MessageExt{Message: Message{Topic: "T", Body: []byte("b")}}
	m.PropertiesString = "KEYS\x01a\x00b\x02"
	dst, err := EncodeRecord([]byte("keep"), m)
	require.ErrorIs(t, err, ErrPropertiesNUL)
	assert.Equal(t, []byte("keep"), dst, "nothing appended")
	m.PropertiesString = ""
	m.Properties = map[string]string{"KEYS": "a\x00b"}
	_, err = EncodeRecord(nil, m)
	require.ErrorIs(t, err, ErrPropertiesNUL)
}

func TestRecordProperties(t *testing.T) {
	m := sampleMessage("10.0.0.1:1", "[2001:db8::2]:10911")
	v1, err := EncodeRecord(nil, m)
	require.NoError(t, err)
	r, err := ParseRecord(v1)
	require.NoError(t, err)
	// The same record as RocketMQ 5 writes it with MagicCodeV2: a 2-byte
	// topic length.
	topicAt := len(v1) - len(r.Properties()) - 2 - len(r.Topic()) - 1
	v2 := append([]byte(nil), v1[:topicAt]...)
	v2 = binary.BigEndian.AppendUint16(v2, uint16(len(r.Topic())))
	v2 = append(v2, v1[topicAt+1:]...)
	binary.BigEndian.PutUint32(v2, uint32(len(v2)))
	binary.BigEndian.PutUint32(v2[4:], 0xDAA320AB) // MagicCodeV2
	for _, rec := range [][]byte{v1, v2} {
		props, ok := RecordProperties(append(rec[:len(rec):len(rec)], 1, 2, 3)) // bytes beyond the record are not read
		require.True(t, ok)
		assert.Equal(t, r.Properties(), props)
		assert.Zero(t, testing.AllocsPerRun(10, func() { RecordProperties(rec) }))
		for _, bad := range [][]byte{rec[:len(rec)-1], rec[:20], nil} {
			_, ok := RecordProperties(bad)
			assert.False(t, ok)
		}
	}
}

// A body that inflates past the bound (MaxUncompressedBody; 1 MiB here) is
// refused after reading at most one byte more than the bound, not inflated
// whole.
func TestUncompressBodyBounded(t *testing.T) {
	const limit = 1 << 20
	deflate := func(n int) []byte {
		var zb bytes.Buffer
		zw := zlib.NewWriter(&zb)
		_, err := zw.Write(make([]byte, n))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return zb.Bytes()
	}
	flag := FlagCompressed | CompressionZlib
	got, err := uncompressBody(flag, deflate(limit), limit)
	require.NoError(t, err, "exactly the bound")
	assert.Len(t, got, limit)

	bomb := deflate(MaxUncompressedBody + 1)
	require.Less(t, len(bomb), 128<<10, "zlib inflates zeros about a thousand times")
	_, err = uncompressBody(flag, bomb, limit)
	assert.ErrorIs(t, err, ErrBodyTooLarge)
	_, err = UncompressBody(flag, bomb)
	assert.ErrorIs(t, err, ErrBodyTooLarge, "UncompressBody's bound is MaxUncompressedBody")
	_, err = uncompressBody(flag, deflate(limit+1), limit)
	assert.ErrorIs(t, err, ErrBodyTooLarge)
}
