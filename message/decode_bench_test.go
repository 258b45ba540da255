package message

import (
	"bytes"
	"testing"
)

// pullBody returns n encoded records back to back, as a pull response body.
func pullBody(tb testing.TB, n int) []byte {
	tb.Helper()
	var body []byte
	for i := range n {
		m := benchMessage()
		m.QueueOffset = int64(i)
		var err error
		if body, err = EncodeRecord(body, m); err != nil {
			tb.Fatal(err)
		}
	}
	return body
}

// BenchmarkDecodeRecords32 decodes a 32-record pull body, what a consumer
// does per PULL_MESSAGE response.
func BenchmarkDecodeRecords32(b *testing.B) {
	body := pullBody(b, 32)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := DecodeRecords(body)
		if err != nil || len(msgs) != 32 {
			b.Fatal(len(msgs), err)
		}
	}
}

func TestDecodeRecordsMatchesDecodeRecord(t *testing.T) {
	body := pullBody(t, 5)
	msgs, err := DecodeRecords(body)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("got %d messages, %v", len(msgs), err)
	}
	rest := body
	for i, got := range msgs {
		want, n, err := DecodeRecord(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
		if got.Topic != want.Topic || !bytes.Equal(got.Body, want.Body) || got.QueueOffset != want.QueueOffset ||
			got.StoreSize != want.StoreSize || len(got.Properties) != len(want.Properties) {
			t.Fatalf("message %d: got %+v want %+v", i, got, want)
		}
	}
	// Bodies are copies with their own capacity: appending to one must not
	// change its neighbour, nor the input.
	before := bytes.Clone(body)
	msgs[0].Body = append(msgs[0].Body, 'X', 'Y')
	if !bytes.Equal(msgs[1].Body, benchMessage().Body) {
		t.Fatal("append to one body overwrote the next")
	}
	if !bytes.Equal(body, before) {
		t.Fatal("decoded bodies alias the input")
	}
}
