package client

import (
	"testing"

	"github.com/gorocketmq/gorocketmq/message"
)

// BenchmarkPollCommitCycle is BenchmarkPollCycle the way PullConsumer runs
// it: each round commits the last poll (ackConsuming), polls 32 and buffers
// the next pulled 32. The messages are recycled once acknowledged, so what
// is measured is the queue's own work per message.
func BenchmarkPollCommitCycle(b *testing.B) {
	const cached, batch = 1000, 32
	pq := newProcessQueue(MessageQueue{Topic: "T"}, 0)
	body := make([]byte, 1024)
	// A ring of messages: cached ones, one batch being consumed, and the
	// batch about to be put.
	ring := make([]MessageExt, cached+4*batch)
	next := int64(0)
	mk := func() []*MessageExt {
		out := make([]*MessageExt, batch)
		for i := range out {
			m := &ring[next%int64(len(ring))]
			*m = MessageExt{QueueOffset: next, Message: message.Message{Body: body}}
			out[i] = m
			next++
		}
		return out
	}
	for next < cached {
		pq.put(mk())
	}
	want := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		pq.ackConsuming()
		got := pq.takeOrdered(batch)
		if len(got) != batch || got[0].QueueOffset != want {
			b.Fatalf("took %d, want %d from %d", len(got), batch, want)
		}
		want += batch
		pq.put(mk())
	}
}
