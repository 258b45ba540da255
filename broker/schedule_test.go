package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/store"
)

// t5LateSlack bounds lateness in these tests, measured by the broker's own
// clock: a delivered message's store time against its due time, so a slow
// send or a slow test goroutine does not count. At light load a due message
// is delivered within 100 ms (the e2e test measures it); here the machine
// may be running -race builds of every package at once and has been seen
// to stall every process for 1.5 s, so only gross lateness (a lost wake-up
// left to no poll) fails.
const t5LateSlack = 3 * time.Second

// t5CheckOnTime checks a delivered message's store time against the
// delivery time the broker gave it (both unix ms, the broker's clock): never
// before it, and not grossly after.
func t5CheckOnTime(t *testing.T, what string, due, stored int64) {
	t.Helper()
	assert.GreaterOrEqual(t, stored, due, "%s: delivered too early", what)
	assert.Less(t, stored-due, t5LateSlack.Milliseconds(), "%s: far too late", what)
}

// t5Config is a test broker config with short delay levels and check-back
// timings.
func t5Config(t *testing.T) *conf.BrokerConfig {
	cfg := testBrokerConfig(t)
	cfg.MessageDelayLevel = "100ms 300ms 100ms 100ms 100ms"
	cfg.FlushDelayOffsetInterval = 50
	cfg.TransactionTimeOut = 100
	cfg.TransactionCheckInterval = 100
	cfg.TransactionCheckMax = 3
	return cfg
}

// t5Start starts a broker for cfg (not shut down by the test's end when the
// test shuts it down itself: Shutdown is idempotent).
func t5Start(t *testing.T, cfg *conf.BrokerConfig) (*Broker, *remoting.Client) {
	t.Helper()
	b := MustStartBroker(t, cfg)
	return b, baClient(t)
}

// t5Send sends one message with props and returns the response.
func t5Send(t *testing.T, cl *remoting.Client, b *Broker, topic string, queueID int32, body string, props map[string]string) *remoting.Command {
	t.Helper()
	all := map[string]string{message.PropUniqKey: strconv.FormatInt(time.Now().UnixNano(), 16), message.PropTags: "tagA"}
	for k, v := range props {
		all[k] = v
	}
	return baInvoke(t, cl, b.Addr(), sendReq(topic, queueID, []byte(body), all))
}

// t5Read decodes every message of topic/queueID from offset 0.
func t5Read(t *testing.T, b *Broker, topic string, queueID int32) []*message.MessageExt {
	t.Helper()
	var out []*message.MessageExt
	for off := int64(0); off < b.store.MaxOffsetInQueue(topic, queueID); {
		res, err := b.store.GetMessage("", topic, queueID, off, 32, 0, nil)
		require.NoError(t, err)
		if res.Status != store.Found {
			res.Release()
			break
		}
		for i := range res.Messages {
			m, _, err := message.DecodeRecord(res.Messages[i].Bytes)
			require.NoError(t, err)
			out = append(out, m)
			off = m.QueueOffset + 1
		}
		res.Release()
	}
	return out
}

// tagsCodes captures the consume-queue tags codes a read scans.
type tagsCodes struct{ codes []int64 }

func (f *tagsCodes) IsMatchedByConsumeQueue(code int64) bool {
	f.codes = append(f.codes, code)
	return true
}
func (f *tagsCodes) IsMatchedByCommitLog([]byte) bool { return true }

// t5TagsCode returns the tags code of the entry at offset.
func t5TagsCode(t *testing.T, b *Broker, topic string, queueID int32, offset int64) int64 {
	t.Helper()
	f := &tagsCodes{}
	require.Eventually(t, func() bool { return b.store.MaxOffsetInQueue(topic, queueID) > offset }, 5*time.Second, 5*time.Millisecond)
	res, err := b.store.GetMessage("", topic, queueID, offset, 1, 0, f)
	require.NoError(t, err)
	res.Release()
	require.NotEmpty(t, f.codes)
	return f.codes[0]
}

// t5WaitArrival polls until topic/queueID holds n messages and returns when
// the n-th arrived.
func t5WaitArrival(t *testing.T, b *Broker, topic string, queueID int32, n int64, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if b.store.MaxOffsetInQueue(topic, queueID) >= n {
			return time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.FailNowf(t, "message did not arrive", "%s/%d has %d of %d messages after %v", topic, queueID, b.store.MaxOffsetInQueue(topic, queueID), n, within)
	return time.Time{}
}

func TestDelayLevelIsParkedThenDeliveredWithItsProperties(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "delayT", 4)
	before := time.Now()
	resp := t5Send(t, cl, b, "delayT", 2, "hello", map[string]string{message.PropDelayTimeLevel: "2", message.PropKeys: "k1"})
	after := time.Now()
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	assert.Equal(t, "2", resp.FieldMap()["queueId"])

	// Parked in SCHEDULE_TOPIC_XXXX, queue level-1, tags code = delivery
	// time: the broker's receipt (between before and after) + 300 ms.
	code := t5TagsCode(t, b, ScheduleTopic, 1, 0)
	assert.GreaterOrEqual(t, code, before.Add(300*time.Millisecond).UnixMilli())
	assert.LessOrEqual(t, code, after.Add(300*time.Millisecond).UnixMilli())
	// Only while the delivery time is surely ahead can the real queue be
	// checked for being still empty (5 ms: the broker's wall clock in ms
	// against this monotonic one).
	delivered := b.store.MaxOffsetInQueue("delayT", 2)
	if time.Since(before) < 295*time.Millisecond {
		assert.Zero(t, delivered, "delivered too early")
	}

	arrived := t5WaitArrival(t, b, "delayT", 2, 1, 5*time.Second)
	assert.GreaterOrEqual(t, arrived.Sub(before), 295*time.Millisecond, "delivered too early")

	msgs := t5Read(t, b, "delayT", 2)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "hello", string(m.Body))
	assert.Equal(t, "k1", m.Keys())
	assert.Equal(t, "tagA", m.Tags())
	t5CheckOnTime(t, "level 2", code, m.StoreTimestamp)
	for _, k := range []string{message.PropDelayTimeLevel, message.PropRealTopic, message.PropRealQueueID, message.PropTimerOutMS} {
		assert.NotContains(t, m.Properties, k)
	}
	assert.Equal(t, message.TagsHashCode("tagA"), t5TagsCode(t, b, "delayT", 2, 0), "the real queue has the tag's hash again")
	require.Eventually(t, func() bool { return b.schedule.Offset(2) == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestDelayLevelAboveMaxIsClamped(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "clampT", 1)
	resp := t5Send(t, cl, b, "clampT", 0, "x", map[string]string{message.PropDelayTimeLevel: "99"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, ScheduleTopic, 4, 1, 5*time.Second) // level 5 = the last
	t5WaitArrival(t, b, "clampT", 0, 1, 5*time.Second)
	assert.Len(t, t5Read(t, b, ScheduleTopic, 4), 1)
}

func TestDelayMessagesSurviveRestartWithoutReplay(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.MessageDelayLevel = "2s 100ms"
	b, cl := t5Start(t, cfg)
	start := time.Now()
	bcCreateTopic(t, b, "restartT", 1)
	for i := 0; i < 3; i++ {
		resp := t5Send(t, cl, b, "restartT", 0, strconv.Itoa(i), map[string]string{message.PropDelayTimeLevel: "1"})
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
	// Delivered one level-2 message first, so there is progress to keep.
	resp := t5Send(t, cl, b, "restartT", 0, "fast", map[string]string{message.PropDelayTimeLevel: "2"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "restartT", 0, 1, 5*time.Second)
	mustShutdownBroker(t, b)
	if time.Since(start) < 2*time.Second {
		require.Zero(t, int(b.schedule.Offset(1)), "level 1 was not due before the restart")
	}

	data, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", delayOffsetFile))
	require.NoError(t, err)
	var table delayOffsetTable
	require.NoError(t, json.Unmarshal(data, &table))
	assert.Equal(t, int64(1), table.OffsetTable[2])

	b2 := MustStartBroker(t, cfg)
	t5WaitArrival(t, b2, "restartT", 0, 4, 5*time.Second)
	mustShutdownBroker(t, b2)

	b3 := MustStartBroker(t, cfg)
	time.Sleep(300 * time.Millisecond) // a replay would happen now
	msgs := t5Read(t, b3, "restartT", 0)
	require.Len(t, msgs, 4, "nothing lost, nothing replayed")
	bodies := map[string]int{}
	for _, m := range msgs {
		bodies[string(m.Body)]++
	}
	assert.Equal(t, map[string]int{"0": 1, "1": 1, "2": 1, "fast": 1}, bodies)
}

func TestDelayOffsetFileFromJavaAndOutOfRange(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	dir := filepath.Join(cfg.StorePathRootDir, "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// fastjson's integer keys; offsets beyond the (empty) queues.
	require.NoError(t, os.WriteFile(filepath.Join(dir, delayOffsetFile), []byte(`{"offsetTable":{1:7,2:3}}`), 0o644))
	b, _ := t5Start(t, cfg)
	assert.Zero(t, b.schedule.Offset(1), "clamped into the queue")
	assert.Zero(t, b.schedule.Offset(2))
	mustShutdownBroker(t, b)

	require.NoError(t, os.WriteFile(filepath.Join(dir, delayOffsetFile), []byte(`{"offsetTable":`), 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, delayOffsetFile+".bak")))
	b2, err := New(cfg, baLogger())
	require.NoError(t, err)
	err = b2.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), delayOffsetFile)
	require.NoError(t, b2.Shutdown(context.Background()))
}

func TestParseDelayLevelsRejectsBadConfig(t *testing.T) {
	cfg := t5Config(t)
	cfg.MessageDelayLevel = "1s 5x"
	_, err := New(cfg, baLogger())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "messageDelayLevel")
}

// t5CrashSchedule stops the schedule service's loops without the final
// persist, as a kill -9 would leave delayOffset.json: as of the last
// periodic write. The broker's Shutdown then finds it already stopped.
func t5CrashSchedule(b *Broker) {
	b.schedule.once.Do(func() {
		close(b.schedule.stop)
		b.schedule.wg.Wait()
	})
}

// TestDelayCrashRedeliversOnlySinceLastPersist is reliability case 30 in
// process: after a crash the delay levels resume from the last persisted
// offsets, so every message is delivered, and the repeats are at most those
// delivered since that write (no replay from 0).
func TestDelayCrashRedeliversOnlySinceLastPersist(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.MessageDelayLevel = "50ms"
	cfg.FlushDelayOffsetInterval = 100
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "crashT", 1)
	send := func(prefix string, n int) {
		for i := range n {
			resp := t5Send(t, cl, b, "crashT", 0, prefix+strconv.Itoa(i), map[string]string{message.PropDelayTimeLevel: "1"})
			require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
		}
	}
	send("a", 20)
	t5WaitArrival(t, b, "crashT", 0, 20, 5*time.Second)
	path := filepath.Join(cfg.StorePathRootDir, "config", delayOffsetFile)
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(path)
		var table delayOffsetTable
		return err == nil && json.Unmarshal(data, &table) == nil && table.OffsetTable[1] == 20
	}, 5*time.Second, 10*time.Millisecond, "offsets persisted periodically")
	send("b", 10)
	t5WaitArrival(t, b, "crashT", 0, 30, 5*time.Second)
	t5CrashSchedule(b)
	mustShutdownBroker(t, b)

	b2 := MustStartBroker(t, cfg)
	time.Sleep(300 * time.Millisecond) // replays, if any, are delivered now
	require.Eventually(t, func() bool { return b2.schedule.Offset(1) == 30 }, 5*time.Second, 10*time.Millisecond)
	msgs := t5Read(t, b2, "crashT", 0)
	counts := map[string]int{}
	for _, m := range msgs {
		counts[string(m.Body)]++
	}
	assert.Len(t, counts, 30, "every message delivered")
	for i := range 20 {
		assert.Equal(t, 1, counts["a"+strconv.Itoa(i)], "delivered before the last persist: never again")
	}
	assert.LessOrEqual(t, len(msgs), 40, "repeats bounded by what was delivered since the last persist")
}

// TestDelayLevelRemovedFromConfigStillDelivers: messageDelayLevel shortened
// across a restart while messages wait in a removed level's queue. That
// queue used to be read no more: its messages were never delivered. It is
// served at the messages' recorded delivery times (corrected to now when
// further off than the longest remaining level).
func TestDelayLevelRemovedFromConfigStillDelivers(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.MessageDelayLevel = "100ms 1h"
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "shrinkT", 1)
	resp := t5Send(t, cl, b, "shrinkT", 0, "waiting", map[string]string{message.PropDelayTimeLevel: "2"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, ScheduleTopic, 1, 1, 5*time.Second)
	mustShutdownBroker(t, b)

	cfg.MessageDelayLevel = "100ms"
	b2 := MustStartBroker(t, cfg)
	t5WaitArrival(t, b2, "shrinkT", 0, 1, 5*time.Second)
	msgs := t5Read(t, b2, "shrinkT", 0)
	require.Len(t, msgs, 1)
	assert.Equal(t, "waiting", string(msgs[0].Body))
	require.Eventually(t, func() bool { return b2.schedule.Offset(2) == 1 }, 5*time.Second, 5*time.Millisecond, "progress of the removed level is kept")
}

// TestDueMessagesRefusedForGoodAreSkipped: a parked message the store can
// never take again (here: over a maxMessageSize lowered across a restart)
// used to be retried for ever, holding every later message of its delay
// level, or every later timer, behind it. It is skipped with an error log.
func TestDueMessagesRefusedForGoodAreSkipped(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5Config(t)
	cfg.MessageDelayLevel = "100ms 1s"
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "skipT", 1)
	big := strings.Repeat("x", 4096)
	for _, props := range []map[string]string{{message.PropDelayTimeLevel: "2"}, {message.PropTimerDelayMS: "500"}} {
		resp := t5Send(t, cl, b, "skipT", 0, big, props)
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
	mustShutdownBroker(t, b)

	cfg.MaxMessageSize = 1024
	b2, cl2 := t5Start(t, cfg)
	for _, props := range []map[string]string{{message.PropDelayTimeLevel: "2"}, {message.PropTimerDelayMS: "1500"}} {
		resp := t5Send(t, cl2, b2, "skipT", 0, "small", props)
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
	t5WaitArrival(t, b2, "skipT", 0, 2, 10*time.Second)
	for _, m := range t5Read(t, b2, "skipT", 0) {
		assert.Equal(t, "small", string(m.Body))
	}
}
