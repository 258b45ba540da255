package broker

import (
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// t5SendAt sends a timer message due at due with UNIQ_KEY uniq (plus extra
// properties) and requires success.
func t5SendAt(t *testing.T, b *Broker, topic, body, uniq string, due time.Time, extra map[string]string) {
	t.Helper()
	props := map[string]string{message.PropUniqKey: uniq, message.PropTimerDeliverMS: strconv.FormatInt(due.UnixMilli(), 10)}
	for k, v := range extra {
		props[k] = v
	}
	resp := t5Send(t, baClient(t), b, topic, 0, body, props)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
}

// t5Bodies returns the sorted bodies stored in topic/0.
func t5Bodies(t *testing.T, b *Broker, topic string) []string {
	t.Helper()
	var out []string
	for _, m := range t5Read(t, b, topic, 0) {
		out = append(out, string(m.Body))
	}
	sort.Strings(out)
	return out
}

// TestTimerCancel: a marker (TIMER_DEL_UNIQKEY, due at the message's time)
// stops the message's delivery, in RocketMQ 5.2's "topic+uniqKey" form and
// in 5.0's bare uniq key; a marker one slot-width off still cancels; the
// marker itself never reaches the topic; others are delivered, and the
// cancel set drains. The markers go first, so however slowly the sends run
// each is read into the wheel before its message (the timer topic is read
// in order): nothing depends on the machine's speed.
func TestTimerCancel(t *testing.T) {
	baVerifyNoLeaks(t)
	b, _ := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "timerCancel", 1)
	due := time.Now().Add(800 * time.Millisecond)
	t5SendAt(t, b, "timerCancel", "marker-1", "M1", due, map[string]string{message.PropTimerDelUniqKey: "timerCancel+U1"})
	t5SendAt(t, b, "timerCancel", "marker-2", "M2", due, map[string]string{message.PropTimerDelUniqKey: "U3"})
	t5SendAt(t, b, "timerCancel", "marker-3", "M3", due, map[string]string{message.PropTimerDelUniqKey: "timerCancel+U4"})
	// A marker naming U2 of another topic cancels nothing here.
	t5SendAt(t, b, "timerCancel", "marker-4", "M4", due, map[string]string{message.PropTimerDelUniqKey: "otherTopic+U2"})
	t5SendAt(t, b, "timerCancel", "cancelled-new-form", "U1", due, nil)
	t5SendAt(t, b, "timerCancel", "kept", "U2", due, nil)
	t5SendAt(t, b, "timerCancel", "cancelled-old-form", "U3", due, nil)
	t5SendAt(t, b, "timerCancel", "cancelled-near", "U4", due.Add(500*time.Millisecond), nil)
	t5SendAt(t, b, "timerCancel", "sentinel", "U5", due.Add(time.Second), nil)

	t5WaitArrival(t, b, "timerCancel", 0, 2, 10*time.Second)
	require.Eventually(t, func() bool { return b.timer.Pending() == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"kept", "sentinel"}, t5Bodies(t, b, "timerCancel"))
	require.Eventually(t, func() bool { return b.timer.nCancels.Load() == 0 }, 10*time.Second, 5*time.Millisecond,
		"cancels end with their markers' time")
}

// TestTimerCancelHarmless: a marker for a message already delivered, for no
// message, or with a time already past changes nothing, is never delivered
// and leaves nothing behind.
func TestTimerCancelHarmless(t *testing.T) {
	baVerifyNoLeaks(t)
	b, _ := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "timerHarmless", 1)
	fired := time.Now().Add(100 * time.Millisecond)
	t5SendAt(t, b, "timerHarmless", "fired", "F1", fired, nil)
	t5WaitArrival(t, b, "timerHarmless", 0, 1, 10*time.Second)
	t5SendAt(t, b, "timerHarmless", "marker-fired", "M1", fired, map[string]string{message.PropTimerDelUniqKey: "timerHarmless+F1"})
	t5SendAt(t, b, "timerHarmless", "marker-unknown", "M2", time.Now().Add(200*time.Millisecond),
		map[string]string{message.PropTimerDelUniqKey: "timerHarmless+NOSUCHKEY"})
	t5SendAt(t, b, "timerHarmless", "after", "A1", time.Now().Add(300*time.Millisecond), nil)
	t5WaitArrival(t, b, "timerHarmless", 0, 2, 10*time.Second)
	require.Eventually(t, func() bool { return b.timer.Pending() == 0 && b.timer.nCancels.Load() == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"after", "fired"}, t5Bodies(t, b, "timerHarmless"), "markers never delivered")
}

// TestTimerCancelSurvivesRestart: a cancel read into the wheel before a
// shutdown still cancels after the restart (rebuilt from the timerlog).
func TestTimerCancelSurvivesRestart(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	b, _ := t5Start(t, cfg)
	bcCreateTopic(t, b, "timerCancelRestart", 1)
	// The marker first (see TestTimerCancel); the message is due well after
	// the restart or at once, cancelled either way.
	due := time.Now().Add(1500 * time.Millisecond)
	t5SendAt(t, b, "timerCancelRestart", "marker", "M1", due, map[string]string{message.PropTimerDelUniqKey: "timerCancelRestart+U1"})
	t5SendAt(t, b, "timerCancelRestart", "cancelled", "U1", due, nil)
	t5SendAt(t, b, "timerCancelRestart", "sentinel", "U2", due.Add(500*time.Millisecond), nil)
	require.Eventually(t, func() bool { return b.timer.nCancels.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	mustShutdownBroker(t, b)

	b2 := MustStartBroker(t, cfg)
	assert.Equal(t, int64(1), b2.timer.nCancels.Load(), "rebuilt from the markers pending in the timerlog")
	t5WaitArrival(t, b2, "timerCancelRestart", 0, 1, 10*time.Second)
	require.Eventually(t, func() bool { return b2.timer.Pending() == 0 && b2.timer.nCancels.Load() == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"sentinel"}, t5Bodies(t, b2, "timerCancelRestart"))
}

// TestTimerCancelBounded: with maxTimerCancels cancels waiting, a new marker
// is refused at send with the reason; other timer messages still pass.
func TestTimerCancelBounded(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "timerBounded", 1)
	b.timer.nCancels.Store(maxTimerCancels) // as if that many were waiting
	due := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	resp := t5Send(t, cl, b, "timerBounded", 0, "marker", map[string]string{message.PropTimerDeliverMS: due, message.PropTimerDelUniqKey: "timerBounded+X"})
	assert.Equal(t, int32(remoting.MessageIllegal), resp.Code)
	assert.Contains(t, resp.Remark, "too many timer cancels waiting")
	resp = t5Send(t, cl, b, "timerBounded", 0, "plain", map[string]string{message.PropTimerDeliverMS: due})
	assert.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
}
