package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestShutdownReleasesEverything starts one of each client object against
// the fake cluster, uses it, shuts it down, and checks that no goroutine it
// started is left (the servers' goroutines existed before and are ignored).
func TestShutdownReleasesEverything(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 2)
	ignore := goleak.IgnoreCurrent()
	ctx := testCtx(t)
	opts := fastOptions(ns.Addr())

	p, err := NewProducer(opts...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	done := make(chan struct{})
	require.NoError(t, p.SendAsync(ctx, func(context.Context, *SendResult, error) { close(done) }, NewMessage("T", []byte("x"))))
	<-done

	var col collector
	pc, err := NewPushConsumer(append(opts, WithGroupName("cg"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("T", MessageSelector{}, col.handler))
	require.NoError(t, pc.Start())
	oc, err := NewPushConsumer(append(opts, WithGroupName("og"), WithConsumerOrder(true), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.NoError(t, err)
	require.NoError(t, oc.Subscribe("T", MessageSelector{}, col.handler))
	require.NoError(t, oc.Start())
	pull, err := NewPullConsumer(append(opts, WithGroupName("pg"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.NoError(t, err)
	require.NoError(t, pull.Subscribe("T", MessageSelector{}))
	require.NoError(t, pull.Start())
	tp, err := NewTransactionProducer(&txListener{exec: map[string]LocalTransactionState{"x": CommitMessageState}}, append(opts, WithGroupName("txg"))...)
	require.NoError(t, err)
	require.NoError(t, tp.Start())
	_, err = tp.SendMessageInTransaction(ctx, NewMessage("T", []byte("x")))
	require.NoError(t, err)
	a, err := NewAdmin(opts...)
	require.NoError(t, err)
	_, err = a.TopicList(ctx)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return col.count() == 4 }, 10*time.Second, 10*time.Millisecond)
	_, err = pull.Poll(ctx)
	require.NoError(t, err)

	require.NoError(t, p.Shutdown())
	require.NoError(t, pc.Shutdown())
	require.NoError(t, oc.Shutdown())
	require.NoError(t, pull.Shutdown())
	require.NoError(t, tp.Shutdown())
	require.NoError(t, a.Close())
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"))
}
