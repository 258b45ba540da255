package remoting

import (
	"maps"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary bytes after the length prefix. Decoding must
// fail cleanly or produce a command that re-encodes and decodes to the same
// header fields; it must never panic.
func FuzzDecodeFrame(f *testing.F) {
	for _, st := range []SerializeType{JSONSerialize, RocketMQSerialize} {
		frame, err := EncodeFrame(sendRequestForBench(st))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame[4:])
		f.Add(frame[4 : len(frame)/2]) // a partial frame
	}
	f.Add(frameFromHeader(JSONSerialize, []byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}`), nil))
	f.Add(frameFromHeader(JSONSerialize, []byte(`{"code":34,"language":"GO","version":317,"opaque":2,"flag":0,"remark":"","extFields":{}}`),
		[]byte(`{"clientID":"192.0.2.2@20836","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[]}`)))
	f.Add([]byte{1, 0, 0, 21})
	f.Fuzz(func(t *testing.T, frame []byte) {
		cmd, err := DecodeFrame(frame)
		raw, rawErr := decodeFrame(frame, true, func(*Command) bool { return true })
		if (err == nil) != (rawErr == nil) {
			t.Fatalf("decoding into RawExt disagrees: %v vs %v", err, rawErr)
		}
		if err != nil {
			return
		}
		// Fields kept in RawExt read, and encode, as the map does.
		if m := raw.FieldMap(); len(m) != len(cmd.ExtFields) || (len(m) > 0 && !maps.Equal(m, cmd.ExtFields)) {
			t.Fatalf("RawExt fields %v, ExtFields %v", m, cmd.ExtFields)
		}
		if raw.Code <= 0x7FFF && raw.Code >= -0x8000 && raw.Version <= 0x7FFF && raw.Version >= -0x8000 {
			if enc, err := EncodeFrame(raw); err == nil {
				back, err := DecodeFrame(enc[4:])
				if err != nil || !maps.Equal(back.ExtFields, cmd.FieldMap()) {
					t.Fatalf("RawExt re-encoded to %v (%v), want %v", back, err, cmd.ExtFields)
				}
			}
		}
		if cmd.Code > 0x7FFF || cmd.Code < -0x8000 || cmd.Version > 0x7FFF || cmd.Version < -0x8000 {
			cmd.SerializeType = JSONSerialize
		}
		again, err := EncodeFrame(cmd)
		if err != nil {
			return // e.g. a body that now exceeds the frame limit
		}
		back, err := DecodeFrame(again[4:])
		if err != nil {
			t.Fatalf("re-decode of our own encoding failed: %v", err)
		}
		if back.Code != cmd.Code || back.Opaque != cmd.Opaque || back.Flag != cmd.Flag || len(back.ExtFields) != len(cmd.ExtFields) {
			t.Fatalf("round trip changed the header: %v -> %v", cmd, back)
		}
	})
}

// FuzzJSONHeaderPaths checks that the fast JSON header parser, whenever it
// accepts an input, agrees with encoding/json on every field.
func FuzzJSONHeaderPaths(f *testing.F) {
	f.Add([]byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}`))
	f.Add([]byte(`{"code":0,"extFields":{"a":"\u0001\u0002\"\\\/\n","b":"\ud83d\ude00"},"flag":1,"language":"JAVA","opaque":-5,"remark":null,"serializeTypeCurrentRPC":"JSON","version":409}`))
	f.Add([]byte(`{"code":-0,"language":3}`))
	f.Add([]byte(` { "code" : 1 , "extFields" : { } } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := parseJSONHeaderFast(b)
		if !ok {
			return
		}
		std, err := decodeJSONHeaderStd(b)
		if err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects: %q: %v", b, err)
		}
		if fast.Code != std.Code || fast.Version != std.Version || fast.Opaque != std.Opaque ||
			fast.Flag != std.Flag || fast.Remark != std.Remark || fast.Language != std.Language {
			t.Fatalf("paths disagree on %q:\nfast %v\nstd  %v", b, fast, std)
		}
		if len(fast.ExtFields) != len(std.ExtFields) {
			t.Fatalf("paths disagree on extFields of %q: %v vs %v", b, fast.ExtFields, std.ExtFields)
		}
		for k, v := range fast.ExtFields {
			if std.ExtFields[k] != v {
				t.Fatalf("paths disagree on extFields[%q] of %q: %q vs %q", k, b, v, std.ExtFields[k])
			}
		}
	})
}
