package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
)

// TestMonitorCommands runs the commands that look into a running cluster
// against a nameserver and broker with a producer and a push consumer.
func TestMonitorCommands(t *testing.T) {
	c := MustStartCluster(t)
	c.createTopic(t, "MTopic")
	ctx := testCtx(t)
	const group, pgroup, n = "mcg", "mpg", 10

	p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithLogger(testLogger()), client.WithGroupName(pgroup))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { require.NoError(t, p.Shutdown()) }()
	var sent []*client.SendResult
	for i := range n {
		tag := "tagA"
		if i%2 == 1 {
			tag = "tagB"
		}
		res, err := p.SendSync(ctx, client.NewMessage("MTopic", []byte(fmt.Sprintf("body-%d", i))).WithTag(tag).WithKeys(fmt.Sprintf("key%d", i)))
		require.NoError(t, err)
		sent = append(sent, res)
	}
	var got atomic.Int64
	pc, err := client.NewPushConsumer(client.WithNameServer(c.ns), client.WithLogger(testLogger()), client.WithGroupName(group),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithPersistInterval(100*time.Millisecond),
		client.WithHeartbeatInterval(200*time.Millisecond), client.WithRebalanceInterval(200*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("MTopic", client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		got.Add(int64(len(msgs)))
		return client.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	defer func() { require.NoError(t, pc.Shutdown()) }()
	require.Eventually(t, func() bool { return got.Load() >= n }, 20*time.Second, 20*time.Millisecond)

	t.Run("producerConnection", func(t *testing.T) {
		var out string
		require.Eventually(t, func() bool {
			r := mqadmin(t, nil, "producerConnection", "-g", pgroup, "-t", "MTopic", "-n", c.ns)
			out = r.out
			return r.code == 0
		}, 15*time.Second, 50*time.Millisecond)
		assert.Regexp(t, `(?m)^0001  \S+@\S+\s+127\.0\.0\.1:\d+\s+GO\s+V4_9_8$`, out)
		r := c.fail(t, "producerConnection", "-g", "nobody", "-t", "MTopic")
		assert.Contains(t, r.err, "not exist")
	})

	t.Run("consumerStatus", func(t *testing.T) {
		out := c.ok(t, "consumerStatus", "-g", group)
		row := rows(out, "1 ")
		require.Len(t, row, 1, out)
		f := fields(row[0])
		require.Len(t, f, 4)
		assert.Equal(t, pc.ClientID(), f[1])
		body, err := os.ReadFile(f[3])
		require.NoError(t, err, "the running info file")
		assert.Contains(t, string(body), "#Consumer Properties#")
		assert.Contains(t, out, "Same subscription in the same group of consumer")

		out = c.ok(t, "consumerStatus", "-g", group, "-i", pc.ClientID(), "-s")
		assert.Regexp(t, `(?m)^PROP_CONSUME_TYPE\s+: CONSUME_PASSIVELY$`, out)
		assert.Regexp(t, `(?m)^\d{3} Topic: MTopic\s+ClassFilter: false\s+SubExpression: \*$`, out)
		assert.Contains(t, out, "#Consumer RT&TPS#")
		assert.Contains(t, out, "#Consumer jstack#", "-s asks for the goroutines")
		out = c.ok(t, "consumerStatus", "-g", group, "-b", c.addr)
		assert.Contains(t, out, pc.ClientID())
		r := c.fail(t, "consumerStatus", "-g", group, "-i", "127.0.0.1@nobody")
		assert.Contains(t, r.err, "not online")
	})

	t.Run("brokerConsumeStats", func(t *testing.T) {
		var out string
		require.Eventually(t, func() bool {
			out = c.ok(t, "brokerConsumeStats", "-b", c.addr)
			return strings.Contains(out, "Diff Total: 0\n") && len(rows(out, "MTopic")) > 0
		}, 15*time.Second, 50*time.Millisecond, "the group's offsets reach the broker")
		for _, r := range rows(out, "MTopic") {
			f := fields(r)
			assert.Equal(t, group, f[1])
			assert.Equal(t, f[4], f[5], "consumed up to the end")
		}
		c.fail(t, "brokerConsumeStats", "-b", c.addr, "-t", "0")
	})

	t.Run("statsAll", func(t *testing.T) {
		out := c.ok(t, "statsAll", "-t", "MTopic")
		r := rows(out, "MTopic")
		require.Len(t, r, 1, out)
		f := fields(r[0])
		require.Len(t, f, 7, r[0])
		assert.Equal(t, group, f[1])
		assert.Equal(t, "0", f[2], "no backlog")
		assert.Equal(t, fmt.Sprint(n), f[5], "stored today")
		assert.Equal(t, fmt.Sprint(n), f[6], "pulled today")
		out = c.ok(t, "statsAll", "-a")
		assert.Contains(t, out, "MTopic")
	})

	t.Run("printMsg", func(t *testing.T) {
		out := c.ok(t, "printMsg", "-t", "MTopic")
		assert.Len(t, rows(out, "minOffset="), 4, "one header per queue")
		msgs := rows(out, "MSGID:")
		assert.Len(t, msgs, n)
		assert.Contains(t, out, "BODY: body-3\n")
		out = c.ok(t, "printMsg", "-t", "MTopic", "-s", "tagB", "-d", "false")
		assert.Len(t, rows(out, "MSGID:"), n/2)
		assert.Contains(t, out, "BODY: NOT PRINT BODY")
		assert.NotContains(t, out, "body-")
		later := time.Now().Add(time.Hour).UnixMilli()
		out = c.ok(t, "printMsg", "-t", "MTopic", "-b", fmt.Sprint(later))
		assert.Empty(t, rows(out, "MSGID:"), "nothing stored after an hour from now")
		c.fail(t, "printMsg", "-t", "MTopic", "-c", "NO-SUCH-CHARSET")
	})

	t.Run("printMsgByQueue", func(t *testing.T) {
		total := 0
		tags := map[string]int{}
		for q := range 4 {
			out := c.ok(t, "printMsgByQueue", "-t", "MTopic", "-a", "broker-a", "-i", fmt.Sprint(q), "-p", "true", "-d", "true", "-f", "true")
			total += len(rows(out, "MSGID:"))
			for _, r := range rows(out, "Tag:") {
				f := fields(r)
				var count int
				fmt.Sscan(f[3], &count)
				tags[f[1]] += count
			}
		}
		assert.Equal(t, n, total)
		assert.Equal(t, map[string]int{"tagA": n / 2, "tagB": n / 2}, tags)
		out := c.ok(t, "printMsgByQueue", "-t", "MTopic", "-a", "broker-a", "-i", "0")
		assert.Empty(t, rows(out, "MSGID:"), "-p defaults to false")
	})

	t.Run("consumeMessage", func(t *testing.T) {
		out := c.ok(t, "consumeMessage", "-t", "MTopic", "-c", "3")
		assert.Len(t, rows(out, "MSGID:"), 3)
		out = c.ok(t, "consumeMessage", "-t", "MTopic", "-b", "broker-a", "-i", "1", "-o", "1")
		for _, r := range rows(out, "MSGID:") {
			assert.Contains(t, r, "queueId=1,")
			assert.NotContains(t, r, "queueOffset=0,")
		}
		r := c.fail(t, "consumeMessage", "-t", "MTopic", "-i", "1")
		assert.Equal(t, exitUsage, r.code, "a queue id needs a broker name")
		r = c.fail(t, "consumeMessage", "-t", "MTopic", "-c", "0")
		assert.Equal(t, exitUsage, r.code)
	})

	t.Run("cloneGroupOffset", func(t *testing.T) {
		require.Eventually(t, func() bool {
			rows, err := c.admin.ConsumerProgress(ctx, group, "MTopic")
			if err != nil {
				return false
			}
			var sum int64
			for _, r := range rows {
				sum += r.ConsumerOffset
			}
			return sum == n
		}, 15*time.Second, 50*time.Millisecond)
		out := c.ok(t, "cloneGroupOffset", "-s", group, "-d", "mcg-copy", "-t", "MTopic")
		assert.Contains(t, out, "clone group offset success. srcGroup[mcg], destGroup=[mcg-copy], topic[MTopic]")
		rows, err := c.admin.ConsumerProgress(ctx, "mcg-copy", "MTopic")
		require.NoError(t, err)
		var sum int64
		for _, r := range rows {
			sum += r.ConsumerOffset
		}
		assert.Equal(t, int64(n), sum)
	})

	t.Run("queryMsgById to a consumer and resent", func(t *testing.T) {
		before := got.Load()
		out := c.ok(t, "queryMsgById", "-i", sent[2].OffsetMsgID, "-g", group, "-d", pc.ClientID())
		assert.Contains(t, out, "consumeResult=CR_SUCCESS")
		assert.Equal(t, before+1, got.Load(), "the listener ran on it once more")

		out = c.ok(t, "queryMsgById", "-i", sent[4].OffsetMsgID, "-s", "true")
		assert.Contains(t, out, "prepare resend msg. originalMsgId="+sent[4].OffsetMsgID)
		m := regexp.MustCompile(`offsetMsgId=([0-9A-F]+)`).FindStringSubmatch(out)
		require.Len(t, m, 2, out)
		resent, err := c.admin.ViewMessage(ctx, m[1])
		require.NoError(t, err)
		assert.Equal(t, "body-4", string(resent.Body))
		assert.Equal(t, "key4", resent.Keys())
		assert.Equal(t, "tagA", resent.Tags())
		assert.NotEqual(t, sent[4].MsgID, resent.UniqKey(), "a new message, with its own id")
	})

	t.Run("clean-up triggers", func(t *testing.T) {
		assert.Equal(t, "success\n", c.ok(t, "cleanExpiredCQ", "-b", c.addr))
		assert.Equal(t, "success\n", c.ok(t, "cleanExpiredCQ", "-c", "DefaultCluster"))
		assert.Equal(t, "success\n", c.ok(t, "deleteExpiredCommitLog"))
		c.fail(t, "deleteExpiredCommitLog", "-c", "NoSuchCluster")
	})
}

func TestCharsetDecoder(t *testing.T) {
	dec, err := charsetDecoder("GBK")
	require.NoError(t, err)
	assert.Equal(t, "你好", dec([]byte{0xc4, 0xe3, 0xba, 0xc3}))
	dec, err = charsetDecoder("")
	require.NoError(t, err)
	assert.Equal(t, "plain", dec([]byte("plain")))
	_, err = charsetDecoder("klingon")
	assert.ErrorIs(t, err, errUsage)
}
