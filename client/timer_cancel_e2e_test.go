package client

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2ETimerCancel: a scheduled message cancelled with CancelScheduled
// before its time is never delivered; one sent with it is; cancelling an
// unknown id is accepted and harmless. The kept message is due after the
// cancelled one (one broker, one wheel): once it arrived, the cancelled one
// was decided.
func TestE2ETimerCancel(t *testing.T) {
	ns, _, admin := e2eCluster(t, "E2ETimerCancel")
	p := MustStartProducer(t, WithNameServer(ns))
	ctx := testCtx(t)
	due := time.Now().Add(2500 * time.Millisecond) // room for the sends on a slow machine
	gone, err := p.SendSync(ctx, NewMessage("E2ETimerCancel", []byte("cancelled")).WithDeliveryTime(due))
	require.NoError(t, err)
	_, err = p.SendSync(ctx, NewMessage("E2ETimerCancel", []byte("kept")).WithDeliveryTime(due.Add(200*time.Millisecond)))
	require.NoError(t, err)
	require.NoError(t, p.CancelScheduled(ctx, gone.Queue, gone.MsgID, due))
	require.NoError(t, p.CancelScheduled(ctx, gone.Queue, "0A0000000000000000000000DEADBEEF", due), "unknown id: harmless")
	assert.ErrorIs(t, p.CancelScheduled(ctx, gone.Queue, "", due), ErrBadOption)

	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2ETimerCancel", MessageSelector{}, col.handler))
	}, append(fastOptions(ns), WithGroupName("e2e-timer-cancel"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool { return col.count() >= 1 }, 15*time.Second, 20*time.Millisecond)
	stats, err := admin.TopicStats(ctx, "E2ETimerCancel")
	require.NoError(t, err)
	var stored int64
	for _, o := range stats {
		stored += o.MaxOffset - o.MinOffset
	}
	assert.Equal(t, int64(1), stored, "only the kept message reached the topic")
	got := col.bodies()
	sort.Strings(got)
	assert.Equal(t, []string{"kept"}, got, "the cancelled message and the markers never delivered")
}
