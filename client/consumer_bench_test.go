package client

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// BenchmarkPollCycle measures a pull consumer's queue bookkeeping in a
// catch-up: 1,000 messages cached, each round polls 32 (lowest offsets
// first), commits them and buffers the next pulled 32.
func BenchmarkPollCycle(b *testing.B) {
	const cached, batch = 1000, 32
	pq := newProcessQueue(MessageQueue{Topic: "T"}, 0)
	body := bytes.Repeat([]byte("x"), 1024)
	mk := func(from int64) []*MessageExt {
		out := make([]*MessageExt, batch)
		for i := range out {
			out[i] = &MessageExt{QueueOffset: from + int64(i), Message: message.Message{Body: body}}
		}
		return out
	}
	next := int64(0)
	for next < cached {
		pq.put(mk(next))
		next += batch
	}
	b.ReportAllocs()
	for b.Loop() {
		got := pq.takeOrdered(batch)
		if len(got) != batch {
			b.Fatalf("took %d", len(got))
		}
		if off := pq.remove(got); off != got[len(got)-1].QueueOffset+1 {
			b.Fatalf("commit offset %d after %d", off, got[len(got)-1].QueueOffset)
		}
		pq.put(mk(next))
		next += batch
	}
}

// BenchmarkDecodePull measures turning a 32-record pull body (1 KiB bodies,
// a tag and a key each) into the messages a consumer returns.
func BenchmarkDecodePull(b *testing.B) {
	o, err := buildOptions("cg", []Option{WithNameServer("127.0.0.1:1"), WithLogger(testLogger())})
	require.NoError(b, err)
	cb := newConsumerBase(newCore(o, "bench"), protocol.ConsumeActively)
	b.Cleanup(cb.c.shutdown)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var body []byte
	for i := 0; i < 32; i++ {
		m := &MessageExt{
			Message: message.Message{Topic: "T", Body: bytes.Repeat([]byte("x"), 1024), Properties: map[string]string{
				message.PropTags: "a", message.PropKeys: "k1", message.PropUniqKey: "7F0000010001000000000000000" + string(rune('A'+i%26)),
			}},
			QueueOffset: int64(i), BornHost: host, StoreHost: host, CommitLogOffset: int64(i) * 1200,
		}
		body, err = message.EncodeRecord(body, m)
		require.NoError(b, err)
	}
	sd := &protocol.SubscriptionData{Topic: "T", SubString: "a || b", ExpressionType: protocol.ExpressionTag}
	sd.TagsSet = []string{"a", "b"}
	sd.CodeSet = []int32{int32(message.TagsHashCode("a")), int32(message.TagsHashCode("b"))}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := cb.decode(nil, body, sd)
		if err != nil || len(msgs) != 32 {
			b.Fatal(len(msgs), err)
		}
	}
}

// TestProcessQueueOrderModel checks the offset order kept by processQueue
// against a plain model under random puts (in and out of order), acks of
// arbitrary messages (push consumers), ordered takes and give-backs.
func TestProcessQueueOrderModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pq := newProcessQueue(MessageQueue{Topic: "T"}, 0)
	cachedM := map[int64]bool{} // in msgs
	takenM := map[int64]bool{}  // in consuming
	var taken []*MessageExt
	maxOff := int64(-1)
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 4: // put a run, sometimes below what is cached
			from := maxOff + 1 - int64(rng.IntN(5))
			if from < 0 {
				from = 0
			}
			msgs := ext(from, from+1, from+2)
			pq.put(msgs)
			for _, m := range msgs {
				if !takenM[m.QueueOffset] {
					cachedM[m.QueueOffset] = true
				}
				maxOff = max(maxOff, m.QueueOffset)
			}
		case op < 6: // ack an arbitrary cached message (push consumer)
			for off := range cachedM {
				pq.remove(ext(off))
				delete(cachedM, off)
				break
			}
		case op < 8: // ordered take
			got := pq.takeOrdered(4)
			var want []int64
			for off := range cachedM {
				want = append(want, off)
			}
			sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
			if len(want) > 4 {
				want = want[:4]
			}
			require.Len(t, got, len(want), "step %d", step)
			for i, m := range got {
				require.Equal(t, want[i], m.QueueOffset, "step %d", step)
				delete(cachedM, m.QueueOffset)
				takenM[m.QueueOffset] = true
			}
			taken = append(taken, got...)
		case op < 9 && len(taken) > 0: // give back
			pq.giveBack(taken)
			for _, m := range taken {
				delete(takenM, m.QueueOffset)
				cachedM[m.QueueOffset] = true
			}
			taken = nil
		default: // ack what was taken, check the commit offset
			off := pq.remove(taken)
			for _, m := range taken {
				delete(takenM, m.QueueOffset)
			}
			taken = nil
			want := maxOff + 1
			for o := range cachedM {
				want = min(want, o)
			}
			for o := range takenM {
				want = min(want, o)
			}
			require.Equal(t, want, off, "step %d", step)
		}
		n, _ := pq.cached()
		require.Equal(t, len(cachedM)+len(takenM), n, "step %d", step)
		require.LessOrEqual(t, len(pq.order), 2*len(pq.msgs)+1024+3, "order compacted")
	}
}
