package client

import "testing"

// FuzzDecodeResetOffsetBody: a broker's reset body must never panic the
// client, whatever its bytes.
func FuzzDecodeResetOffsetBody(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:100}}`))
	f.Add([]byte(`{"offsetTable":[[{"topic":"T","brokerName":"b","queueId":0},100]]}`))
	f.Add([]byte(`{"offsetTable":{{`))
	f.Add([]byte(`{"offsetTable" : { {"topic":"T"} : 1 , }`))
	f.Fuzz(func(t *testing.T, b []byte) {
		table, err := decodeResetOffsetBody(b)
		if err == nil && table == nil {
			t.Fatal("nil table without error")
		}
	})
}

// FuzzParseProperties: configuration text from a server never panics.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("a=b\nc = d=e\n#x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseProperties(b)
	})
}
