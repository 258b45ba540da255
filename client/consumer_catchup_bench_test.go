package client

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
)

// BenchmarkE2ECatchUp measures what mqbench's catch-up case runs: a pull
// consumer polling 20,000 stored 1 KiB messages from the first offset, with
// our broker in process on loopback. One op is one Poll (32 messages); the
// profile of it, focused on this package and message, is the consumer's
// share.
func BenchmarkE2ECatchUp(b *testing.B) {
	const stored, batch = 20000, 64
	ns := MustStartNameServer(b).Addr()
	br := MustStartBroker(b, "broker-a", ns, func(c *conf.BrokerConfig) {
		c.MappedFileSizeCommitLog = 64 << 20
		c.MappedFileSizeConsumeQueue = 300000 * 20
	})
	a, err := NewAdmin(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(b, err)
	defer a.Close()
	ctx := context.Background()
	require.NoError(b, a.CreateTopic(ctx, TopicConfig{Topic: "CatchUp", ReadQueueNums: 4, WriteQueueNums: 4, BrokerAddr: br.Addr()}))
	require.Eventually(b, func() bool { _, err := a.TopicRoute(ctx, "CatchUp"); return err == nil }, 10*time.Second, 10*time.Millisecond)
	p, err := NewProducer(WithNameServer(ns), WithLogger(testLogger()))
	require.NoError(b, err)
	require.NoError(b, p.Start())
	body := bytes.Repeat([]byte("x"), 1024)
	msgs := make([]*Message, batch)
	for i := range msgs {
		msgs[i] = NewMessage("CatchUp", body)
	}
	for sent := 0; sent < stored; sent += batch {
		_, err := p.SendSync(ctx, msgs...)
		require.NoError(b, err)
	}
	_ = p.Shutdown()

	var (
		pc         *PullConsumer
		round      int
		got, total int
	)
	b.Cleanup(func() {
		if pc != nil {
			_ = pc.Shutdown()
		}
	})
	poll := func() []*MessageExt {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		polled, err := pc.Poll(pctx)
		require.NoError(b, err)
		return polled
	}
	b.SetBytes(int64(len(body)) * 32)
	b.ReportAllocs()
	for b.Loop() {
		if pc == nil || got >= stored {
			// A fresh group for each pass over the stored messages; its
			// start-up (rebalance, first pull) is not timed.
			b.StopTimer()
			if pc != nil {
				_ = pc.Shutdown()
			}
			pc, err = NewPullConsumer(WithNameServer(ns), WithLogger(testLogger()),
				WithGroupName(fmt.Sprintf("catchup%d", round)), WithConsumeFromWhere(ConsumeFromFirstOffset),
				WithPullBatchSize(32))
			require.NoError(b, err)
			require.NoError(b, pc.Subscribe("CatchUp", MessageSelector{}))
			require.NoError(b, pc.Start())
			round++
			got = len(poll())
			total += got
			b.StartTimer()
		}
		n := len(poll())
		got += n
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
}
