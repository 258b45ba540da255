package broker

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// FuzzBatchWithUniqKeys checks that any accepted batch comes back with the
// same members, each carrying a UNIQ_KEY, and that nothing panics.
func FuzzBatchWithUniqKeys(f *testing.F) {
	good, err := message.AppendBatch(nil, []*message.Message{
		{Body: []byte("a"), Properties: map[string]string{message.PropTags: "t"}},
		{Body: []byte("bb"), Properties: map[string]string{message.PropUniqKey: "K"}},
		{Body: nil},
	})
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	b := &Broker{uniqIDs: message.NewUniqIDGenerator(testBrokerIP)}
	f.Fuzz(func(t *testing.T, body []byte) {
		in := bytes.Clone(body)
		out, err := b.batchWithUniqKeys(body)
		require.Equal(t, in, body, "the request body is not modified")
		if err != nil {
			return
		}
		var before, after []message.BatchItem
		require.NoError(t, message.WalkBatch(body, func(it message.BatchItem) error { before = append(before, it); return nil }))
		require.NoError(t, message.WalkBatch(out, func(it message.BatchItem) error { after = append(after, it); return nil }))
		require.Len(t, after, len(before))
		for i := range after {
			require.Equal(t, before[i].Body, after[i].Body)
			require.Equal(t, before[i].Flag, after[i].Flag)
			_, ok := message.PropertyValue(after[i].Properties, message.PropUniqKey)
			require.True(t, ok, "member %d has no UNIQ_KEY", i)
			for k, v := range message.UnmarshalProperties(before[i].Properties) {
				require.Equal(t, v, message.UnmarshalProperties(after[i].Properties)[k], k)
			}
		}
	})
}

// FuzzProcessSend feeds arbitrary headers and bodies to the send processor
// (called directly, without the server's panic recovery): it must answer
// every request and never panic.
func FuzzProcessSend(f *testing.F) {
	cfg := testBrokerConfig(f)
	cfg.AutoCreateTopicEnable = false // no topics.json fsync per input
	br, err := New(cfg, baLogger())
	require.NoError(f, err)
	require.NoError(f, br.Start())
	f.Cleanup(func() { _ = br.Shutdown(context.Background()) })
	require.NoError(f, br.Topics().Update(&protocol.TopicConfig{TopicName: "F", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: protocol.MultiTag}))
	f.Add(uint8(0), "F", "0", "0", "TAGS\x01a", []byte("body"))
	f.Add(uint8(1), "F", "-1", "4", "", []byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(2), "%RETRY%g", "x", "8", "DELAY\x013", []byte{})
	f.Add(uint8(0x81), "F", "1", "0", "UNIQ_KEY\x01u\x02TAGS\x01a\x02", []byte("raw"))
	codes := []remoting.RequestCode{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage}
	conn := &remoting.Conn{}
	f.Fuzz(func(t *testing.T, which uint8, topic, queueID, sysFlag, props string, body []byte) {
		code := codes[int(which)%len(codes)]
		h := sendHeaderFor(topic, 0, nil)
		h.Properties = props
		var ext map[string]string
		if code == remoting.SendMessage {
			ext = protocol.EncodeHeader(h, nil)
			ext["queueId"], ext["sysFlag"] = queueID, sysFlag
		} else {
			var v2 protocol.SendMessageRequestHeaderV2
			v2.FromV1(*h)
			ext = protocol.EncodeHeader(&v2, nil)
			ext["e"], ext["f"] = queueID, sysFlag
		}
		req := remoting.NewRequest(code, ext, body)
		if which&0x80 != 0 { // the fields as a binary header brings them
			for k, v := range ext {
				req.RawExt = remoting.AppendField(req.RawExt, k, v)
			}
			req.ExtFields = nil
		}
		resp, err := br.processSend(conn, req)
		require.NoError(t, err)
		require.NotNil(t, resp)
		if resp.ResponseCode() == remoting.Success {
			_, perr := strconv.Atoi(resp.FieldMap()["queueId"])
			require.NoError(t, perr)
			require.NotEmpty(t, resp.FieldMap()["msgId"])
		}
	})
}
