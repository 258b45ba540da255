package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// BenchmarkSendProcessor measures the broker's send path for a 1 KiB
// message without the network: header parse, checks, properties, append;
// with the header as a JSON request brings it (ExtFields, long keys) and as
// our SDK's binary V2 header does (RawExt).
func BenchmarkSendProcessor(b *testing.B) { benchSendProcessor(b, false) }

// BenchmarkSendProcessorPropCRC is BenchmarkSendProcessor with
// enabledAppendPropCRC.
func BenchmarkSendProcessorPropCRC(b *testing.B) { benchSendProcessor(b, true) }

func benchSendProcessor(b *testing.B, propCRC bool) {
	cfg := testBrokerConfig(b)
	cfg.EnabledAppendPropCRC = propCRC
	cfg.MappedFileSizeCommitLog = 64 << 20
	br, err := New(cfg, baLogger())
	require.NoError(b, err)
	require.NoError(b, br.Start())
	defer func() { _ = br.Shutdown(context.Background()) }()
	props := map[string]string{message.PropUniqKey: "C0A8000100002A9F0000000000000001", message.PropTags: "tagA", message.PropKeys: "k1"}
	raw := sendReqV2(remoting.SendMessageV2, "BenchTopic", 0, make([]byte, 1024), props)
	for k, v := range raw.ExtFields {
		raw.RawExt = remoting.AppendField(raw.RawExt, k, v)
	}
	raw.ExtFields = nil
	for _, bc := range []struct {
		name string
		req  *remoting.Command
	}{
		{"JSONv1", sendReq("BenchTopic", 0, make([]byte, 1024), props)},
		{"RawV2", raw},
	} {
		b.Run(bc.name, func(b *testing.B) {
			conn := &remoting.Conn{}
			resp, err := br.processSend(conn, bc.req)
			require.NoError(b, err)
			require.Equal(b, remoting.Success, resp.ResponseCode(), resp.Remark)
			b.SetBytes(1024)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := br.processSend(conn, bc.req)
				if err != nil || resp.ResponseCode() != remoting.Success {
					b.Fatal(err, resp.Remark)
				}
			}
		})
	}
}

// BenchmarkSendBatchUniqKeys measures adding ids to a 16-message batch.
func BenchmarkSendBatchUniqKeys(b *testing.B) {
	br := &Broker{uniqIDs: message.NewUniqIDGenerator(testBrokerIP)}
	msgs := make([]*message.Message, 16)
	for i := range msgs {
		msgs[i] = &message.Message{Body: make([]byte, 256), Properties: map[string]string{message.PropTags: "t"}}
	}
	body, err := message.AppendBatch(nil, msgs)
	require.NoError(b, err)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := br.batchWithUniqKeys(body); err != nil {
			b.Fatal(err)
		}
	}
}
