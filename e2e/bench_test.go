package e2e

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// BenchmarkOfficialClientSyncSend measures 1 KiB SendSync calls of the
// official Go client from 8 goroutines sharing one producer, against the
// in-process nameserver and broker (default flush settings: ASYNC_FLUSH).
// Reports msgs/s and the p99 latency of one send.
//
//	go test ./e2e -run '^$' -bench OfficialClientSyncSend -benchtime 20000x
func BenchmarkOfficialClientSyncSend(b *testing.B) {
	const workers = 8
	c := MustStartCluster(b)
	topic := uniq("BenchTopic")
	c.StartDriver(b).CreateTopic(b, c, topic, 8)
	p := c.NewInProcessProducer(b)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	// Warm-up: route lookup and connection.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	_, err := p.SendSync(ctx, primitive.NewMessage(topic, body))
	cancel()
	require.NoError(b, err)

	var next atomic.Int64
	var failed atomic.Int64
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]time.Duration, 0, b.N/workers+1)
			for next.Add(1) <= int64(b.N) {
				m := primitive.NewMessage(topic, body)
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				r, err := p.SendSync(ctx, m)
				cancel()
				own = append(own, time.Since(t0))
				if err != nil || r.Status != primitive.SendOK {
					failed.Add(1)
				}
			}
			lats[w] = own
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	require.Zero(b, failed.Load(), "sends failed")

	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	p99 := all[(len(all)*99)/100]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}
