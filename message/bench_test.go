package message

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

func benchMessage() *MessageExt {
	m := sampleMessage("10.0.0.1:50000", "10.0.0.2:10911")
	m.Body = bytes.Repeat([]byte("x"), 1024)
	return m
}

func BenchmarkEncodeRecord(b *testing.B) {
	m := benchMessage()
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = EncodeRecord(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRecord(b *testing.B) {
	rec, _ := EncodeRecord(nil, benchMessage())
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseRecord(rec)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := r.Property(PropTags); !ok {
			b.Fatal("no tags")
		}
	}
}

func BenchmarkVerifyCRC(b *testing.B) {
	rec, _ := EncodeRecord(nil, benchMessage())
	r, _ := ParseRecord(rec)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.VerifyCRC(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRecordNoCopy(b *testing.B) {
	rec, _ := EncodeRecord(nil, benchMessage())
	var m MessageExt
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecordInto(&m, rec, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRecord(b *testing.B) {
	rec, _ := EncodeRecord(nil, benchMessage())
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeBatchRecords(b *testing.B) {
	msgs := make([]*Message, 32)
	for i := range msgs {
		msgs[i] = &Message{Body: bytes.Repeat([]byte("y"), 1024), Properties: map[string]string{PropTags: "t"}}
	}
	body, _ := AppendBatch(nil, msgs)
	batch := &MessageExtBatch{MessageExt: MessageExt{
		Message:   Message{Topic: "T", Body: body, Properties: map[string]string{PropCluster: "c"}},
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
	}}
	buf := make([]byte, 0, 64<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, _, err = EncodeBatchRecords(buf[:0], batch, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUniqIDNext(b *testing.B) {
	g := NewUniqIDGenerator(netip.MustParseAddr("10.0.0.1"))
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 64)
		for pb.Next() {
			buf = g.AppendNext(buf[:0])
		}
	})
	_ = buf
}

func BenchmarkTagsHashCode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = TagsHashCode("order-created-tag")
	}
}

func BenchmarkEncodeRecordWithCRC(b *testing.B) {
	m := benchMessage()
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = EncodeRecordWithCRC(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutPropCRC is the work enabledAppendPropCRC adds under the
// commitlog's writer lock, for a 1 KiB and a 4 MiB body.
func BenchmarkPutPropCRC(b *testing.B) {
	for _, size := range []int{1 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			m := benchMessage()
			m.Body = bytes.Repeat([]byte("x"), size)
			rec, err := EncodeRecordWithCRC(nil, m)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				PutPropCRC(rec)
			}
		})
	}
}
