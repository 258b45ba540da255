package message

import (
	"bytes"
	"maps"
	"net/netip"
	"testing"
)

func FuzzDecodeRecord(f *testing.F) {
	m := sampleMessage("10.0.0.1:1", "[2001:db8::2]:10911")
	rec, _ := EncodeRecord(nil, m)
	f.Add(rec)
	f.Add(rec[:len(rec)/2]) // partial frame
	f.Add(rec[:8])
	m.SysFlag |= FlagCompressed
	m.Properties = nil
	rec2, _ := EncodeRecord(nil, m)
	f.Add(rec2)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		props, ok := RecordProperties(b)
		if ok != (err == nil) || ok && !bytes.Equal(props, r.Properties()) {
			t.Fatalf("RecordProperties = %q, %v; ParseRecord: %v", props, ok, err)
		}
		if err != nil {
			return
		}
		_ = r.VerifyCRC()
		_ = r.VerifyPropCRC()
		_, _ = r.Property(PropTags)
		got, n, err := DecodeRecord(b)
		if err != nil || n != r.Size() {
			t.Fatalf("parse ok but decode failed: %v (n=%d size=%d)", err, n, r.Size())
		}
		_ = got.OffsetMsgID()
		_, _ = UncompressBody(got.SysFlag, got.Body)
		// Re-encoding a decoded record must give a record of the same shape.
		if len(got.Topic) <= MaxTopicLength && r.Magic() == MagicCodeV1 {
			again, err := EncodeRecord(nil, got)
			if err == nil {
				if _, err := ParseRecord(again); err != nil {
					t.Fatalf("re-encoded record does not parse: %v", err)
				}
			}
			// With the whole-record CRC: it verifies, and the properties
			// are the same but for exactly one __CRC32#, the record's own.
			withCRC, err := EncodeRecordWithCRC(nil, got)
			if err == nil {
				PutPropCRC(withCRC)
				r2, err := ParseRecord(withCRC)
				if err != nil {
					t.Fatalf("record with crc does not parse: %v", err)
				}
				if err := r2.VerifyPropCRC(); err != nil {
					t.Fatalf("fresh crc fails: %v", err)
				}
				props := UnmarshalProperties(r2.Properties())
				if d := props[PropCRC32]; len(d) != crcDigits {
					t.Fatalf("crc property %q", d)
				}
				delete(props, PropCRC32)
				want := maps.Clone(got.Properties)
				delete(want, PropCRC32)
				if !maps.Equal(props, want) {
					t.Fatalf("properties changed: %q, want %q", props, want)
				}
			}
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	body, _ := AppendBatch(nil, []*Message{
		{Flag: 1, Body: []byte("a"), Properties: map[string]string{"TAGS": "x"}},
		{Body: nil},
	})
	f.Add(body)
	f.Add(body[:len(body)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := UnmarshalBatch("t", b)
		if err != nil {
			return
		}
		batch := &MessageExtBatch{MessageExt: MessageExt{
			Message:   Message{Topic: "t", Body: b, Properties: map[string]string{"CLUSTER": "c"}},
			StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
		}}
		recs, n, err := EncodeBatchRecords(nil, batch, 0)
		if err != nil {
			return // e.g. merged properties over 32767 bytes
		}
		if n != len(msgs) {
			t.Fatalf("%d records for %d messages", n, len(msgs))
		}
		if _, err := DecodeRecords(recs); err != nil {
			t.Fatalf("records from a valid batch do not decode: %v", err)
		}
		recs, n, err = EncodeBatchRecordsWithCRC(nil, batch, 0)
		if err != nil {
			return // the entry can take the properties over 32767 bytes
		}
		for off := 0; off < len(recs); {
			r, err := ParseRecord(recs[off:])
			if err != nil {
				t.Fatalf("record with crc does not parse: %v", err)
			}
			PutPropCRC(r.Bytes())
			if err := r.VerifyPropCRC(); err != nil {
				t.Fatalf("fresh crc fails: %v", err)
			}
			off += r.Size()
		}
		if got, err := DecodeRecords(recs); err != nil || len(got) != n {
			t.Fatalf("%d records with crc decode to %d: %v", n, len(got), err)
		}
	})
}

func FuzzUnmarshalProperties(f *testing.F) {
	f.Add([]byte("TAGS\x01a\x02KEYS\x01k1 k2"))
	f.Add([]byte("\x01\x02\x01"))
	f.Add([]byte("A\x01x\x01y\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := UnmarshalProperties(b)
		for k, v := range m {
			got, ok := PropertyValue(b, k)
			if !ok || string(got) != v {
				t.Fatalf("PropertyValue(%q) = %q,%v; map has %q", k, got, ok, v)
			}
		}
		// What we encode decodes to the same map when names and values are clean.
		back := UnmarshalProperties(MarshalProperties(m))
		for k, v := range m {
			if !containsSep(k) && !containsSep(v) && back[k] != v {
				t.Fatalf("round trip lost %q=%q", k, v)
			}
		}
	})
}

func containsSep(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == NameValueSeparator || s[i] == PropertySeparator {
			return true
		}
	}
	return false
}
