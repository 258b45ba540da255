package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crc32Bitwise is CRC-32/IEEE (reflected, polynomial 0xEDB88320) bit by
// bit: the tests' own reference, independent of hash/crc32.
func crc32Bitwise(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

// javaDigits is how MessageDecoder.createCrc32 spells v: the ten decimal
// digits, least significant first (the zero-padded number reversed).
func javaDigits(v uint32) string {
	s := []byte(fmt.Sprintf("%010d", v))
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return string(s)
}

// javaRecord lays a v1 record out field by field as RocketMQ 5's
// MessageExtEncoder writes it with IPv4 hosts and the final header values
// that doAppend patches in; props are the properties bytes as stored. With
// crc, the __CRC32# entry is appended and filled as doAppend fills it.
func javaRecord(t *testing.T, props string, crc bool) []byte {
	t.Helper()
	body := []byte("hello body")
	topic := "TopicCRC"
	if crc {
		props += "__CRC32#\x01" + strings.Repeat("?", 10) + "\x02"
	}
	var b bytes.Buffer
	w := func(v any) { require.NoError(t, binary.Write(&b, binary.BigEndian, v)) }
	w(int32(0))                               // TOTALSIZE, below
	w(uint32(0xDAA320A7))                     // MAGICCODE v1
	w(int32(crc32Bitwise(body) & 0x7FFFFFFF)) // BODYCRC
	w(int32(2))                               // QUEUEID
	w(int32(5))                               // FLAG
	w(int64(77))                              // QUEUEOFFSET (patched)
	w(int64(4096))                            // PHYSICALOFFSET (patched)
	w(int32(0))                               // SYSFLAG
	w(int64(1700000000000))                   // BORNTIMESTAMP
	b.Write([]byte{10, 0, 0, 7})              // BORNHOST ip
	w(int32(50000))                           //          port
	w(int64(1700000000999))                   // STORETIMESTAMP (patched)
	b.Write([]byte{127, 0, 0, 1})             // STOREHOST ip
	w(int32(10911))                           //           port
	w(int32(1))                               // RECONSUMETIMES
	w(int64(0))                               // PREPARED TRANSACTION OFFSET
	w(int32(len(body)))
	b.Write(body)
	b.WriteByte(byte(len(topic)))
	b.WriteString(topic)
	w(int16(len(props)))
	b.WriteString(props)
	rec := b.Bytes()
	binary.BigEndian.PutUint32(rec, uint32(len(rec)))
	if crc {
		v := crc32Bitwise(rec[:len(rec)-20]) & 0x7FFFFFFF
		copy(rec[len(rec)-11:], javaDigits(v))
	}
	return rec
}

// crcTestMessage is the message javaRecord lays out, as a broker has it
// before the commitlog's lock: offsets and store time not yet known.
func crcTestMessage(props string) *MessageExt {
	return &MessageExt{
		Message:          Message{Topic: "TopicCRC", Flag: 5, Body: []byte("hello body")},
		QueueID:          2,
		BornTimestamp:    1700000000000,
		BornHost:         netip.MustParseAddrPort("10.0.0.7:50000"),
		StoreHost:        netip.MustParseAddrPort("127.0.0.1:10911"),
		ReconsumeTimes:   1,
		PropertiesString: props,
	}
}

// patchLikeCommitLog writes the header fields the commitlog patches under
// its lock, the values javaRecord holds.
func patchLikeCommitLog(rec []byte) {
	binary.BigEndian.PutUint64(rec[PosQueueOffset:], 77)
	binary.BigEndian.PutUint64(rec[PosPhysicalOffset:], 4096)
	binary.BigEndian.PutUint64(rec[StoreTimestampPos(0):], 1700000000999)
}

// The standard CRC-32 check value: crc32("123456789") = 0xCBF43926, masked
// 0x4BF43926 = 1274296614, written least significant digit first.
func TestPutPropCRCCheckValue(t *testing.T) {
	rec := append([]byte("123456789"), crcReserve...)
	PutPropCRC(rec)
	assert.Equal(t, "123456789__CRC32#\x014166924721\x02", string(rec))
	assert.Equal(t, uint32(1274296614), PropCRC(rec))

	// A CRC with fewer than ten digits is padded with '0' after its most
	// significant digit. Find an input whose CRC has at most six.
	var small []byte
	for i := range 1 << 24 {
		b := binary.BigEndian.AppendUint32(nil, uint32(i))
		if crc32Bitwise(b)&0x7FFFFFFF < 1e6 {
			small = append(b, crcReserve...)
			break
		}
	}
	require.NotNil(t, small, "no input with a small CRC found")
	PutPropCRC(small)
	v := crc32Bitwise(small[:4]) & 0x7FFFFFFF
	assert.Equal(t, javaDigits(v), string(small[len(small)-11:len(small)-1]))
	assert.True(t, strings.HasSuffix(string(small), "0000\x02"), "padding zeros end the digits: %q", small[4:])
}

// The golden test: what EncodeRecordWithCRC and PutPropCRC write is, byte
// for byte, the record RocketMQ 5 writes with enabledAppendPropCRC, laid
// out and checksummed here independently.
func TestEncodeRecordWithCRCGolden(t *testing.T) {
	cases := []struct {
		name, given, stored string
	}{
		// A 0x02 goes between properties not ending in one and the entry.
		{"no trailing separator", "UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02CLUSTER\x01DefaultCluster",
			"UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02CLUSTER\x01DefaultCluster\x02"},
		// Java's messageProperties2String ends with 0x02: nothing added.
		{"trailing separator", "TAGS\x01TagA\x02KEYS\x01k1\x02", "TAGS\x01TagA\x02KEYS\x01k1\x02"},
		// Empty properties: the entry alone.
		{"no properties", "", ""},
		// A stale __CRC32# (a message re-put or forwarded) is dropped
		// wherever it is; the record carries only its own.
		{"stale entry last", "TAGS\x01a\x02__CRC32#\x011234567890\x02", "TAGS\x01a\x02"},
		{"stale entry first", "__CRC32#\x011234567890\x02TAGS\x01a", "TAGS\x01a\x02"},
		{"stale entries around", "__CRC32#\x01x\x02TAGS\x01a\x02__CRC32#\x01y\x02KEYS\x01b\x02__CRC32#\x01z", "TAGS\x01a\x02KEYS\x01b\x02"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := EncodeRecordWithCRC([]byte("keep"), crcTestMessage(tc.given))
			require.NoError(t, err)
			require.Equal(t, "keep", string(rec[:4]))
			rec = rec[4:]
			patchLikeCommitLog(rec)
			PutPropCRC(rec)
			want := javaRecord(t, tc.stored, true)
			require.Equal(t, want, rec)

			r, err := ParseRecord(rec)
			require.NoError(t, err)
			assert.True(t, r.HasPropCRC())
			assert.NoError(t, r.VerifyPropCRC())
			assert.NoError(t, r.VerifyCRC())
			assert.Equal(t, 1, strings.Count(string(r.Properties()), PropCRC32), "one __CRC32# entry")
		})
	}
}

// With the option off the properties are stored as they come: the record
// is the one RocketMQ writes without it. The one exception is a __CRC32#
// entry of the reserved shape ending them, which recovery would take for
// the store's own once the option is on.
func TestEncodeRecordWithoutCRCUnchanged(t *testing.T) {
	for _, props := range []string{
		"UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02CLUSTER\x01DefaultCluster",
		"TAGS\x01TagA\x02KEYS\x01k1\x02",
		"",
		"TAGS\x01a\x02__CRC32#\x011234567890\x02X\x01y", // a stale entry not last stays
		"__CRC32#\x01123\x02",                           // not the reserved shape
	} {
		rec, err := EncodeRecord(nil, crcTestMessage(props))
		require.NoError(t, err)
		patchLikeCommitLog(rec)
		assert.Equal(t, javaRecord(t, props, false), rec, "%q", props)
	}
	rec, err := EncodeRecord(nil, crcTestMessage("TAGS\x01a\x02__CRC32#\x011234567890\x02"))
	require.NoError(t, err)
	patchLikeCommitLog(rec)
	assert.Equal(t, javaRecord(t, "TAGS\x01a\x02", false), rec, "a stale entry ending the properties is dropped")
	r, err := ParseRecord(rec)
	require.NoError(t, err)
	assert.False(t, r.HasPropCRC())
	assert.ErrorIs(t, r.VerifyPropCRC(), ErrNoPropCRC)

	m := sampleMessage("10.1.2.3:51234", "192.168.0.9:10911")
	viaMap, err := EncodeRecord(nil, m)
	require.NoError(t, err)
	assert.Equal(t, RecordLength(0, len(m.Body), len(m.Topic), PropertiesSize(m.Properties)), len(viaMap))
	assert.NotContains(t, string(viaMap), PropCRC32)
}

// Any change to the bytes the entry covers, or to its digits, fails the
// check; a change that takes the entry's shape leaves a record without one.
func TestVerifyPropCRCDetectsDamage(t *testing.T) {
	rec, err := EncodeRecordWithCRC(nil, crcTestMessage("UNIQ_KEY\x01U1\x02CLUSTER\x01C"))
	require.NoError(t, err)
	patchLikeCommitLog(rec)
	PutPropCRC(rec)
	r, err := ParseRecord(rec)
	require.NoError(t, err)
	require.NoError(t, r.VerifyPropCRC())
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if r.VerifyPropCRC() != nil || !r.HasPropCRC() {
			t.Fatal("a good record fails")
		}
	}), "the check does not allocate")

	for pos := range len(rec) {
		for _, mask := range []byte{0x01, 0x80, 0xFF} {
			bad := bytes.Clone(rec)
			bad[pos] ^= mask
			r, err := ParseRecord(bad)
			if err != nil {
				continue // sizes or magic: ParseRecord's business
			}
			switch err := r.VerifyPropCRC(); {
			case pos >= len(rec)-CRC32ReservedLength && pos < len(rec)-11, pos == len(rec)-1:
				assert.ErrorIs(t, err, ErrNoPropCRC, "byte %d of %d", pos, len(rec))
			default:
				assert.ErrorIs(t, err, ErrPropCRC, "byte %d of %d ^ %#x goes unnoticed", pos, len(rec), mask)
			}
		}
	}
	// Properties garbled into other printable bytes (not zeros: those
	// checkTorn already finds) keep the record parsing: only the CRC sees it.
	bad := bytes.Clone(rec)
	i := bytes.Index(bad, []byte("U1"))
	copy(bad[i:], "V7")
	r, err = ParseRecord(bad)
	require.NoError(t, err)
	assert.NoError(t, r.VerifyCRC(), "the body CRC does not cover the properties")
	assert.ErrorIs(t, r.VerifyPropCRC(), ErrPropCRC)
}

// The official Go client reads a record with the entry: __CRC32# is one
// more property to it.
func TestPropCRCRecordDecodedByOfficialClient(t *testing.T) {
	m := sampleMessage("10.1.2.3:51234", "[fe80::1234:5678]:10911")
	rec, err := EncodeRecordWithCRC(nil, m)
	require.NoError(t, err)
	PutPropCRC(rec)
	r, err := ParseRecord(rec)
	require.NoError(t, err)
	require.NoError(t, r.VerifyPropCRC())
	digits, ok := r.Property(PropCRC32)
	require.True(t, ok)

	got := primitive.DecodeMessage(rec)
	require.Len(t, got, 1)
	want := maps.Clone(m.Properties)
	want[PropCRC32] = string(digits)
	assert.Equal(t, want, got[0].GetProperties())
	assert.Equal(t, m.Body, got[0].Body)
	assert.Equal(t, m.Topic, got[0].Topic)
	assert.Equal(t, int32(len(rec)), got[0].StoreSize)
	assert.Equal(t, m.CommitLogOffset, got[0].CommitLogOffset)

	ours, n, err := DecodeRecord(rec)
	require.NoError(t, err)
	assert.Equal(t, len(rec), n)
	assert.Equal(t, want, ours.Properties)
}

// Each record of a batch gets its own entry, last, after a separator.
func TestEncodeBatchRecordsWithCRC(t *testing.T) {
	subs := []*Message{
		{Flag: 1, Body: []byte("one"), Properties: map[string]string{PropUniqKey: "U1", PropTags: "a"}},
		{Body: []byte("two")},
		{Body: []byte("three"), Properties: map[string]string{PropUniqKey: "U3", PropCRC32: "4166924721"}},
	}
	body, err := AppendBatch(nil, subs)
	require.NoError(t, err)
	for _, batchProps := range []map[string]string{{PropCluster: "DefaultCluster"}, nil} {
		b := &MessageExtBatch{MessageExt: MessageExt{
			Message:        Message{Topic: "BatchTopic", Body: body, Properties: batchProps},
			QueueID:        1,
			BornTimestamp:  1700000000000,
			BornHost:       netip.MustParseAddrPort("10.0.0.7:5555"),
			StoreTimestamp: 1700000000001,
			StoreHost:      netip.MustParseAddrPort("127.0.0.1:10911"),
		}}
		plain, n, err := EncodeBatchRecords(nil, b, 0)
		require.NoError(t, err)
		require.Equal(t, len(subs), n)
		recs, n, err := EncodeBatchRecordsWithCRC(nil, b, 0)
		require.NoError(t, err)
		require.Equal(t, len(subs), n)

		plainMsgs, err := DecodeRecords(plain)
		require.NoError(t, err)
		for i, off := 0, 0; off < len(recs); i++ {
			size := int(binary.BigEndian.Uint32(recs[off:]))
			rec := recs[off : off+size]
			binary.BigEndian.PutUint64(rec[PosPhysicalOffset:], uint64(8192+off))
			PutPropCRC(rec)
			r, err := ParseRecord(rec)
			require.NoError(t, err)
			require.NoError(t, r.VerifyPropCRC(), "record %d", i)
			props := string(r.Properties())
			assert.Equal(t, 1, strings.Count(props, PropCRC32), "record %d: one entry: %q", i, props)
			if len(props) > CRC32ReservedLength {
				assert.Equal(t, byte(PropertySeparator), props[len(props)-CRC32ReservedLength-1], "record %d: %q", i, props)
			}
			want := maps.Clone(plainMsgs[i].Properties)
			delete(want, PropCRC32) // sub-message 3's stale one
			digits, _ := r.Property(PropCRC32)
			want[PropCRC32] = string(digits)
			assert.Equal(t, want, UnmarshalProperties(r.Properties()), "record %d", i)
			off += size
		}
		got := primitive.DecodeMessage(recs)
		require.Len(t, got, len(subs))
		for i, m := range subs {
			assert.Equal(t, m.Body, got[i].Body)
			assert.Len(t, got[i].GetProperty(PropCRC32), 10)
		}
	}
}

func TestPropCRCSizeLimit(t *testing.T) {
	// The entry counts against the 32767-byte properties limit, as
	// RocketMQ 5 counts it (PROPERTIES_SIZE_EXCEEDED).
	m := crcTestMessage("K\x01" + strings.Repeat("v", MaxPropertiesLength-2-CRC32ReservedLength))
	_, err := EncodeRecord(nil, m)
	require.NoError(t, err)
	_, err = EncodeRecordWithCRC(nil, m)
	assert.ErrorIs(t, err, ErrPropertiesTooLong, "one byte over with the separator")
	m.PropertiesString = m.PropertiesString[:len(m.PropertiesString)-1]
	_, err = EncodeRecordWithCRC(nil, m)
	assert.NoError(t, err)
}
