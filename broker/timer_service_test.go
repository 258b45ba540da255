package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestTimerMessageDeliveredAtItsTime(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "timerT", 2)
	cases := []struct {
		name  string
		key   string
		delay time.Duration
		// unit is the unit of a relative property; 0 marks an absolute
		// delivery time (unix ms), set to delay from now.
		unit time.Duration
	}{
		{"delay ms", message.PropTimerDelayMS, 300 * time.Millisecond, time.Millisecond},
		{"deliver ms", message.PropTimerDeliverMS, 400 * time.Millisecond, 0},
		{"start deliver time", PropStartDeliverTime, 350 * time.Millisecond, 0},
		{"delay sec", message.PropTimerDelaySec, time.Second, time.Second},
	}
	dues := map[string]int64{} // body -> the tags code (delivery time)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A relative delay counts from the broker's receipt, somewhere
			// between before and after (however long the send takes); an
			// absolute time is the time itself.
			before := time.Now()
			lo := before.Add(tc.delay).UnixMilli()
			value := strconv.FormatInt(lo, 10)
			if tc.unit != 0 {
				value = strconv.FormatInt(int64(tc.delay/tc.unit), 10)
			}
			resp := t5Send(t, cl, b, "timerT", 1, tc.name, map[string]string{tc.key: value})
			after := time.Now()
			require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
			hi := lo
			if tc.unit != 0 {
				hi = after.Add(tc.delay).UnixMilli()
			}
			code := t5TagsCode(t, b, TimerTopic, 0, int64(i))
			assert.GreaterOrEqual(t, code, lo, "tags code is the delivery time")
			assert.LessOrEqual(t, code, hi, "tags code is the delivery time")
			dues[tc.name] = code
			arrived := t5WaitArrival(t, b, "timerT", 1, int64(i+1), 5*time.Second)
			// The broker's wall clock (ms) against this monotonic one: 5 ms
			// covers the truncation to ms.
			assert.GreaterOrEqual(t, arrived.Sub(before), tc.delay-5*time.Millisecond, "delivered too early")
		})
	}
	msgs := t5Read(t, b, "timerT", 1)
	require.Len(t, msgs, len(cases))
	for _, m := range msgs {
		out := m.Property(message.PropTimerOutMS)
		assert.NotEmpty(t, out, "TIMER_OUT_MS stays, as in RocketMQ 5")
		assert.Equal(t, strconv.FormatInt(dues[string(m.Body)], 10), out, "%s: TIMER_OUT_MS is the tags code", m.Body)
		t5CheckOnTime(t, string(m.Body), dues[string(m.Body)], m.StoreTimestamp)
		for _, k := range append(timerProps[:], message.PropRealTopic, message.PropRealQueueID) {
			assert.NotContains(t, m.Properties, k)
		}
		assert.Equal(t, "tagA", m.Tags())
	}
}

func TestTimerBadInput(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.TimerMaxDelaySec = 10
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "timerBad", 1)

	for _, props := range []map[string]string{
		{message.PropTimerDelaySec: "11"},
		{message.PropTimerDelayMS: "10001"},
		{message.PropTimerDeliverMS: "9000000000000000000"},
		{message.PropTimerDelaySec: "9223372036854775807"},
	} {
		resp := t5Send(t, cl, b, "timerBad", 0, "late", props)
		assert.Equal(t, int32(remoting.MessageIllegal), resp.Code, "%v", props)
		assert.Contains(t, resp.Remark, "timerMaxDelaySec=10", "%v", props)
	}
	var resp *remoting.Command

	// A half message that could never be committed is refused at once.
	hh := sendHeaderFor("timerBad", 0, map[string]string{message.PropTransactionPrepared: "true", message.PropProducerGroup: "pg",
		message.PropTimerDelaySec: "3600"})
	hh.SysFlag = message.TransactionPreparedType
	resp = baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.SendMessage, protocol.EncodeHeader(hh, nil), []byte("half")))
	assert.Equal(t, int32(remoting.MessageIllegal), resp.Code)
	assert.Contains(t, resp.Remark, "timerMaxDelaySec=10")

	resp = t5Send(t, cl, b, "timerBad", 0, "nan", map[string]string{message.PropTimerDeliverMS: "soon"})
	assert.Equal(t, int32(remoting.MessageIllegal), resp.Code)
	assert.Contains(t, resp.Remark, message.PropTimerDeliverMS)

	resp = baInvoke(t, cl, b.Addr(), sendReq(TimerTopic, 0, []byte("x"), map[string]string{message.PropRealTopic: "timerBad"}))
	assert.Equal(t, int32(remoting.NoPermission), resp.Code, resp.Remark)
	assert.Zero(t, b.store.MaxOffsetInQueue(TimerTopic, 0), "nothing stored")

	// In the past: delivered at once, not parked.
	resp = t5Send(t, cl, b, "timerBad", 0, "past", map[string]string{message.PropTimerDeliverMS: "1000"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "timerBad", 0, 1, 5*time.Second)
	assert.Zero(t, b.store.MaxOffsetInQueue(TimerTopic, 0), "a past delivery time is not parked")

	// DELAY wins over a timer property.
	resp = t5Send(t, cl, b, "timerBad", 0, "both", map[string]string{message.PropTimerDelaySec: "5", message.PropDelayTimeLevel: "1"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, ScheduleTopic, 0, 1, 5*time.Second)
	t5WaitArrival(t, b, "timerBad", 0, 2, 5*time.Second)
}

func TestTimerDisabled(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.TimerWheelEnable = false
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "timerOff", 1)
	resp := t5Send(t, cl, b, "timerOff", 0, "x", map[string]string{message.PropTimerDelayMS: "100"})
	assert.Equal(t, int32(remoting.MessageIllegal), resp.Code)
	assert.Contains(t, resp.Remark, "timerWheelEnable=false")
}

func TestTimerMessagesSurviveRestart(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "timerRestart", 1)
	for i := 0; i < 5; i++ {
		delay := 100 + 800*(i%2) // 100 ms (delivered before) and 900 ms (after the restart)
		resp := t5Send(t, cl, b, "timerRestart", 0, strconv.Itoa(i), map[string]string{message.PropTimerDelayMS: strconv.Itoa(delay)})
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
	t5WaitArrival(t, b, "timerRestart", 0, 3, 5*time.Second)
	mustShutdownBroker(t, b)

	b2 := MustStartBroker(t, cfg)
	t5WaitArrival(t, b2, "timerRestart", 0, 5, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	require.Eventually(t, func() bool { return b2.timer.Pending() == 0 }, 5*time.Second, 10*time.Millisecond)
	mustShutdownBroker(t, b2)

	b3 := MustStartBroker(t, cfg)
	time.Sleep(200 * time.Millisecond)
	msgs := t5Read(t, b3, "timerRestart", 0)
	bodies := map[string]int{}
	for _, m := range msgs {
		bodies[string(m.Body)]++
	}
	assert.Equal(t, map[string]int{"0": 1, "1": 1, "2": 1, "3": 1, "4": 1}, bodies, "nothing lost, nothing delivered twice")
}

// TestTimerCrashLosesNothing stops timerLoop without closing the wheel (no
// final sync, no checkpoint), as a killed process would leave it, and
// starts a new broker on the same store.
func TestTimerCrashLosesNothing(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "timerCrash", 1)
	for i := 0; i < 10; i++ {
		delay := 100 + 900*(i%2)
		resp := t5Send(t, cl, b, "timerCrash", 0, strconv.Itoa(i), map[string]string{message.PropTimerDelayMS: strconv.Itoa(delay)})
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
	t5WaitArrival(t, b, "timerCrash", 0, 5, 5*time.Second)
	old := b.timer
	old.once.Do(func() {
		close(old.stop)
		old.wg.Wait()
	})
	// The mapping stays (a killed process's pages reach the file anyway);
	// released after the new broker is gone.
	t.Cleanup(func() { _ = old.wheel.Close() })
	mustShutdownBroker(t, b)

	b2 := MustStartBroker(t, cfg)
	t5WaitArrival(t, b2, "timerCrash", 0, 10, 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	counts := map[string]int{}
	for _, m := range t5Read(t, b2, "timerCrash", 0) {
		counts[string(m.Body)]++
	}
	want := map[string]int{}
	for i := 0; i < 10; i++ {
		want[strconv.Itoa(i)] = 1
	}
	assert.Equal(t, want, counts, "every timer message once: nothing lost, nothing repeated")
}

// TestTimerLongWaitIsStoredAnewEachRoll: a timer message waiting longer
// than a roll window is stored again in the timer topic at each roll, so
// commitlog retention (which deletes files by age) never takes a message
// still waiting; it used to be kept only at its first offset, and a timer
// longer than fileReservedTime was lost. It is still delivered once.
func TestTimerLongWaitIsStoredAnewEachRoll(t *testing.T) {
	baVerifyNoLeaks(t)
	b, err := New(t5Config(t), baLogger())
	require.NoError(t, err)
	b.timer.cfg.Precision = 10 * time.Millisecond
	b.timer.cfg.RollWindow = 200 * time.Millisecond
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	cl := baClient(t)
	bcCreateTopic(t, b, "timerRoll", 1)

	sent := time.Now()
	resp := t5Send(t, cl, b, "timerRoll", 0, "patient", map[string]string{message.PropTimerDelayMS: "900"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	arrived := t5WaitArrival(t, b, "timerRoll", 0, 1, 5*time.Second)
	assert.GreaterOrEqual(t, arrived.Sub(sent), 880*time.Millisecond)
	assert.GreaterOrEqual(t, b.store.MaxOffsetInQueue(TimerTopic, 0), int64(3), "stored anew at each roll (every 200 ms of 900 ms)")
	first := t5TagsCode(t, b, TimerTopic, 0, 0)
	assert.Equal(t, first, t5TagsCode(t, b, TimerTopic, 0, b.store.MaxOffsetInQueue(TimerTopic, 0)-1), "copies keep the delivery time")

	time.Sleep(300 * time.Millisecond)
	msgs := t5Read(t, b, "timerRoll", 0)
	require.Len(t, msgs, 1, "delivered once")
	assert.Equal(t, "patient", string(msgs[0].Body))
	assert.Zero(t, b.timer.Pending())
}
