package client

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
