package client

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

func benchProducer(b testing.TB) *Producer {
	o, err := buildOptions("pg", []Option{WithNameServer("127.0.0.1:1"), WithLogger(testLogger())})
	require.NoError(b, err)
	p := &Producer{c: newCore(o, "bench"), defSel: NewHashSelector(), faults: newFaultTracker(0), asyncSem: make(chan struct{}, 1)}
	b.Cleanup(p.c.shutdown)
	return p
}

func BenchmarkPrepareSingle(b *testing.B) {
	p := benchProducer(b)
	body := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		m := NewMessage("T", body).WithTag("a")
		out, err := p.prepare([]*Message{m}, 0)
		if err != nil {
			b.Fatal(err)
		}
		releaseRequest(p.request(out, MessageQueue{Topic: "T", BrokerName: "b"}))
	}
}

func BenchmarkPrepareCompressed(b *testing.B) {
	p := benchProducer(b)
	body := bytes.Repeat([]byte("compressible text "), 1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.prepare([]*Message{NewMessage("T", body)}, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPrepareBatch16(b *testing.B) {
	p := benchProducer(b)
	body := bytes.Repeat([]byte("x"), 256)
	b.SetBytes(int64(16 * len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs := make([]*Message, 16)
		for i := range msgs {
			msgs[i] = NewMessage("T", body)
		}
		if _, err := p.prepare(msgs, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{"a": "pg", "b": "TopicTest", "e": "3", "f": "0",
		"g": "1795943861745", "i": "UNIQ_KEY\x01C0A800010001\x02TAGS\x01a"}, bytes.Repeat([]byte("x"), 1024))
	cred := Credentials{AccessKey: "ak", SecretKey: "sk"}
	b.SetBytes(int64(len(req.Body)))
	b.ReportAllocs()
	for b.Loop() {
		Sign(cred, req)
	}
}

func BenchmarkAllocateAveragely(b *testing.B) {
	mqs := queues([]string{"a", "b", "c", "d"}, 16)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprint("10.0.0.1@", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		AllocateAveragely{}.Allocate("g", ids[3], mqs, ids)
	}
}

// BenchmarkSendSync measures a synchronous send over loopback to the fake
// broker: the SDK's per-message cost plus one round trip.
func BenchmarkSendSync(b *testing.B) {
	ns := MustStartNameServer(b).Addr()
	fb := MustStartFakeBroker(b, "broker-a", ns)
	fb.AddTopic("T", 4)
	p, err := NewProducer(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(b, err)
	require.NoError(b, p.Start())
	b.Cleanup(func() { _ = p.Shutdown() })
	body := bytes.Repeat([]byte("x"), 512)
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.SendSync(ctx, NewMessage("T", body)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkE2ESendSync measures a synchronous 512-byte send to our broker
// (async flush) over loopback.
func BenchmarkE2ESendSync(b *testing.B) {
	ns := MustStartNameServer(b).Addr()
	br := MustStartBroker(b, "broker-a", ns, nil)
	a, err := NewAdmin(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(b, err)
	defer a.Close()
	require.NoError(b, a.CreateTopic(context.Background(), TopicConfig{Topic: "Bench", ReadQueueNums: 4, WriteQueueNums: 4, BrokerAddr: br.Addr()}))
	require.Eventually(b, func() bool { _, err := a.TopicRoute(context.Background(), "Bench"); return err == nil }, 10*time.Second, 10*time.Millisecond)
	p, err := NewProducer(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(b, err)
	require.NoError(b, p.Start())
	b.Cleanup(func() { _ = p.Shutdown() })
	body := bytes.Repeat([]byte("x"), 512)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.SendSync(context.Background(), NewMessage("Bench", body)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendAsync measures pipelined asynchronous sends (up to 256 in
// flight) over loopback to the fake broker: the SDK's per-message cost with
// the round trips overlapped, as in mqbench's async mode.
func BenchmarkSendAsync(b *testing.B) {
	ns := MustStartNameServer(b).Addr()
	fb := MustStartFakeBroker(b, "broker-a", ns)
	fb.AddTopic("T", 4)
	p, err := NewProducer(WithNameServer(ns), WithLogger(testLogger()), WithMaxAsyncInFlight(256))
	require.NoError(b, err)
	require.NoError(b, p.Start())
	b.Cleanup(func() { _ = p.Shutdown() })
	body := bytes.Repeat([]byte("x"), 512)
	ctx := context.Background()
	_, err = p.SendSync(ctx, NewMessage("T", body)) // route and connection ready
	require.NoError(b, err)
	var wg sync.WaitGroup
	var failed atomic.Int64
	cb := func(_ context.Context, _ *SendResult, err error) {
		if err != nil {
			failed.Add(1)
		}
		wg.Done()
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		wg.Add(1)
		if err := p.SendAsync(ctx, cb, NewMessage("T", body)); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	require.Zero(b, failed.Load())
}
