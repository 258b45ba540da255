package client

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// A pulled message whose body does not uncompress is delivered as stored,
// flag set, beside the others of its pull: failing the pull would retry
// the same offset for ever.
func TestDecodeDeliversABodyThatDoesNotUncompress(t *testing.T) {
	o, err := buildOptions("cg", []Option{WithNameServer("127.0.0.1:1"), WithLogger(testLogger())})
	require.NoError(t, err)
	cb := newConsumerBase(newCore(o, "decode"), protocol.ConsumeActively)
	t.Cleanup(cb.c.shutdown)

	plain := bytes.Repeat([]byte("compress me "), 100)
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	_, err = zw.Write(plain)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	bodies := [][]byte{zb.Bytes(), []byte("not a zlib stream"), zb.Bytes()}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var pull []byte
	for i, b := range bodies {
		m := &MessageExt{Message: message.Message{Topic: "T", Body: b}, QueueOffset: int64(i),
			BornHost: host, StoreHost: host, SysFlag: message.FlagCompressed | message.CompressionZlib}
		pull, err = message.EncodeRecord(pull, m)
		require.NoError(t, err)
	}
	msgs, err := cb.decode(nil, pull, &protocol.SubscriptionData{Topic: "T", SubString: "*"})
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for _, i := range []int{0, 2} {
		assert.Equal(t, plain, msgs[i].Body)
		assert.Zero(t, msgs[i].SysFlag&message.FlagCompressed)
	}
	assert.Equal(t, []byte("not a zlib stream"), msgs[1].Body)
	assert.NotZero(t, msgs[1].SysFlag&message.FlagCompressed, "the flag says the body is still compressed")
}

// TestPulledBodiesOutliveLaterPulls holds decode's aliasing to its premise:
// a pulled message's body is a view of that pull's response, so a response
// buffer reused by a later pull would show up here as changed bodies. The
// messages of many small pulls are kept and checked only at the end.
func TestPulledBodiesOutliveLaterPulls(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	const n = 40
	sendN(t, p, "T", n, func(i int, m *Message) { m.WithTag(fmt.Sprintf("t%d", i)) })

	pc := MustStartPullConsumer(t, func(pc *PullConsumer) { require.NoError(t, pc.Subscribe("T", MessageSelector{})) },
		append(fastOptions(ns.Addr()), WithGroupName("pg-alias"), WithConsumeFromWhere(ConsumeFromFirstOffset), WithPullBatchSize(3))...)
	msgs := pollN(t, pc, n)
	for i, m := range msgs {
		assert.Equal(t, int64(i), m.QueueOffset)
		assert.Equal(t, fmt.Sprintf("m%03d", i), string(m.Body), "message %d", i)
		assert.Equal(t, fmt.Sprintf("t%d", i), m.Tags(), "message %d", i)
		assert.Equal(t, len(m.Body), cap(m.Body), "message %d: an append could reach the next record", i)
	}
}
