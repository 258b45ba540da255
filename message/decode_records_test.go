package message

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawRecord encodes m with props written as given, not from m.Properties,
// so a test can store properties strings AppendProperties never writes.
func rawRecord(tb testing.TB, dst []byte, m *MessageExt, props string) []byte {
	tb.Helper()
	start := len(dst)
	sysFlag := hostFlags(m.SysFlag, m.BornHost, m.StoreHost)
	dst, err := appendRecordHead(dst, m, sysFlag, m.Flag, m.Body, m.PreparedTransactionOffset)
	require.NoError(tb, err)
	propsStart := len(dst)
	dst = append(dst, props...)
	dst, err = finishRecord(dst, start, propsStart)
	require.NoError(tb, err)
	return dst
}

// variedRun returns a pull-like run of records covering the properties
// shapes UnmarshalProperties has rules for, several topics, v6 hosts, empty
// bodies, and records a producer batch was stored as.
func variedRun(tb testing.TB) []byte {
	tb.Helper()
	props := []string{
		"",
		"TAGS\x01a",
		"TAGS\x01a\x02KEYS\x01k1 k2",
		"TAGS\x01a\x02KEYS\x01k\x02", // the Go client's trailing separator
		"A\x01\x02B\x01b",
		"\x01v\x02B\x01b",
		"novalue\x02B\x01b",
		"\x02\x02\x01\x02B\x01b\x02\x02",
		"A\x01x\x01y",
		"A\x011\x02A\x012",
		"K\x01värde",
		"\x02",
		"\x01",
		"only-garbage",
	}
	// More entries than one map group holds, so the map is sized up front.
	var many []string
	for i := range 40 {
		many = append(many, strings.Repeat("k", i%7+1)+string(rune('a'+i%26))+"\x01"+strings.Repeat("v", i))
	}
	props = append(props, strings.Join(many, "\x02"))

	var run []byte
	for i, p := range props {
		m := sampleMessage("10.0.0.1:50000", "10.0.0.2:10911")
		m.QueueOffset = int64(i)
		m.Body = bytes.Repeat([]byte{byte('a' + i)}, i*3) // i == 0: empty body
		switch i % 3 {
		case 1:
			m.Topic = "Other"
		case 2:
			m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1")
			m.StoreHost = netip.MustParseAddrPort("[2001:db8::2]:10911")
		}
		run = rawRecord(tb, run, m, p)
	}
	batchBody, err := AppendBatch(nil, []*Message{
		{Topic: "B", Body: []byte("one"), Properties: map[string]string{PropTags: "x", PropKeys: "k"}},
		{Topic: "B", Body: []byte("two")},
		{Topic: "B", Body: nil, Properties: map[string]string{PropUniqKey: "u"}},
	})
	require.NoError(tb, err)
	batch := &MessageExtBatch{MessageExt: MessageExt{
		Message:   Message{Topic: "B", Body: batchBody, Properties: map[string]string{PropCluster: "c"}},
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
	}}
	run, n, err := EncodeBatchRecords(run, batch, 0)
	require.NoError(tb, err)
	require.Equal(tb, 3, n)
	return run
}

// oldDecode decodes a run one record at a time through DecodeRecord and
// UnmarshalProperties: the behaviour DecodeRecords must keep.
func oldDecode(b []byte) ([]*MessageExt, error) {
	var out []*MessageExt
	for len(b) > 0 {
		m, n, err := DecodeRecord(b)
		if err != nil {
			return out, err
		}
		out = append(out, m)
		b = b[n:]
	}
	return out, nil
}

func TestDecodeRecordsMatchesOldDecoder(t *testing.T) {
	run := variedRun(t)
	want, err := oldDecode(run)
	require.NoError(t, err)
	for name, decode := range map[string]func([]byte) ([]*MessageExt, error){
		"copied": DecodeRecords, "aliased": DecodeRecordsAliased,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decode(bytes.Clone(run))
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range want {
				assert.Equal(t, want[i], got[i], "record %d", i)
				assert.NotNil(t, got[i].Properties, "record %d", i)
			}
		})
	}
}

func TestDecodeRecordsBadTailMatchesOldDecoder(t *testing.T) {
	run := variedRun(t)
	for _, tail := range [][]byte{
		{0, 0, 0},                            // shorter than a length
		{0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94}, // blank end-of-file marker
		{0, 0, 0, 200, 1, 2, 3, 4},           // bad magic
	} {
		b := append(bytes.Clone(run), tail...)
		want, wantErr := oldDecode(b)
		require.Error(t, wantErr)
		for _, decode := range []func([]byte) ([]*MessageExt, error){DecodeRecords, DecodeRecordsAliased} {
			got, err := decode(b)
			assert.Equal(t, wantErr, err)
			assert.Equal(t, want, got)
		}
	}
	got, err := DecodeRecords([]byte{0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94})
	assert.ErrorIs(t, err, ErrBlankRecord)
	assert.Nil(t, got)
}

func TestDecodeRecordsAliasedSharesBodies(t *testing.T) {
	input := pullBody(t, 3)
	before := bytes.Clone(input)
	msgs, err := DecodeRecordsAliased(input)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	run := input
	for i, m := range msgs {
		r, err := ParseRecord(run)
		require.NoError(t, err)
		run = run[r.Size():]
		assert.Same(t, &r.Body()[0], &m.Body[0], "message %d body is not a view of the input", i)
	}
	// Capacity stops at the body: an append must not write into the input.
	msgs[0].Body = append(msgs[0].Body, 'X', 'Y')
	assert.Equal(t, before, input, "append to an aliased body wrote into the input")
	got, err := DecodeRecords(before)
	require.NoError(t, err)
	assert.Equal(t, got[1].Body, msgs[1].Body)
	assert.Equal(t, got[1].Properties, msgs[1].Properties)
}

// FuzzDecodeRecordsMatchesOldDecoder holds the batched decoder to the
// record-at-a-time one on arbitrary input, including runs that go bad
// part way.
func FuzzDecodeRecordsMatchesOldDecoder(f *testing.F) {
	run := variedRun(f)
	f.Add(run)
	f.Add(run[:len(run)-5])
	f.Add(pullBody(f, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := oldDecode(b)
		for _, decode := range []func([]byte) ([]*MessageExt, error){DecodeRecords, DecodeRecordsAliased} {
			got, err := decode(b)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("error %v, record at a time %v", err, wantErr)
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages, record at a time %d", len(got), len(want))
			}
			for i := range want {
				assert.Equal(t, want[i], got[i], "record %d", i)
			}
		}
	})
}
