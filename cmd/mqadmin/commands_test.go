package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// fields splits a table row on runs of spaces.
func fields(line string) []string { return strings.Fields(line) }

// rows returns the lines of out that start with prefix (after trimming).
func rows(out, prefix string) []string {
	var r []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			r = append(r, l)
		}
	}
	return r
}

func TestTopicCommands(t *testing.T) {
	c := MustStartCluster(t)
	ctx := testCtx(t)

	t.Run("updateTopic to a broker", func(t *testing.T) {
		out := c.ok(t, "updateTopic", "-b", c.addr, "-t", "TopicB", "-r", "3", "-w", "3", "-p", "6")
		assert.Contains(t, out, "create topic to "+c.addr+" success.")
		assert.Contains(t, out, "TopicConfig [topicName=TopicB, readQueueNums=3, writeQueueNums=3, perm=RW-")
		c.waitRoute(t, "TopicB")
		route, err := c.admin.TopicRoute(ctx, "TopicB")
		require.NoError(t, err)
		require.Len(t, route.QueueDatas, 1)
		assert.Equal(t, int32(3), route.QueueDatas[0].WriteQueueNums)
	})

	t.Run("updateTopic to a cluster, ordered", func(t *testing.T) {
		out := c.ok(t, "updateTopic", "-c", "DefaultCluster", "-t", "TopicC", "-o", "true")
		assert.Contains(t, out, "create topic to "+c.addr+" success.")
		assert.Contains(t, out, "set cluster orderConf. isOrder=true, orderConf=[broker-a:8]")
		assert.Contains(t, out, "readQueueNums=8, writeQueueNums=8", "Java's defaults")
		v, err := c.admin.GetKVConfig(ctx, orderConfNamespace, "TopicC")
		require.NoError(t, err)
		assert.Equal(t, "broker-a:8", v)
		c.waitRoute(t, "TopicC")
	})

	t.Run("updateTopic to a broker, ordered", func(t *testing.T) {
		out := c.ok(t, "updateTopic", "-b", c.addr, "-t", "TopicO", "-w", "2", "-r", "2", "-o", "true")
		assert.Contains(t, out, "set broker orderConf. isOrder=true, orderConf=[broker-a:2]")
		assert.Contains(t, out, "order=true]")
		r := c.fail(t, "updateTopic", "-b", "127.0.0.1:1", "-t", "TopicO", "-o", "true")
		assert.Contains(t, r.err, "no broker with address 127.0.0.1:1")
	})

	t.Run("updateTopic bad input", func(t *testing.T) {
		r := c.fail(t, "updateTopic", "-c", "NoSuchCluster", "-t", "X")
		assert.Contains(t, r.err, "clusterName exists")
		r = c.fail(t, "updateTopic", "-b", c.addr, "-t", "bad topic!")
		assert.Contains(t, r.err, "bad topic name")
	})

	t.Run("topicList", func(t *testing.T) {
		lines := strings.Split(c.ok(t, "topicList"), "\n")
		assert.Contains(t, lines, "TopicB")
		assert.Contains(t, lines, "TopicC")
	})

	t.Run("topicList -c", func(t *testing.T) {
		out := c.ok(t, "topicList", "-c")
		assert.Regexp(t, `^#Cluster Name\s+#Topic\s+#Consumer Group`, out)
		r := rows(out, "DefaultCluster")
		var found bool
		for _, l := range r {
			found = found || fields(l)[1] == "TopicB"
		}
		assert.True(t, found, out)
	})

	t.Run("topicRoute", func(t *testing.T) {
		out := c.ok(t, "topicRoute", "-t", "TopicB")
		var route protocol.TopicRouteData
		require.NoError(t, json.Unmarshal([]byte(out), &route), out)
		require.Len(t, route.BrokerDatas, 1)
		assert.Equal(t, c.addr, route.BrokerDatas[0].MasterAddr())

		out = c.ok(t, "topicRoute", "-t", "TopicB", "-l")
		assert.Regexp(t, `#ClusterName\s+#BrokerName\s+#BrokerAddrs\s+#ReadQueue\s+#WriteQueue\s+#Perm`, out)
		assert.Regexp(t, `DefaultCluster\s+broker-a\s+\{0=`+regexp.QuoteMeta(c.addr)+`\}\s+3\s+3\s+6`, out)
		assert.Regexp(t, `Total:\s+1\s+3\s+3`, out)
	})

	t.Run("topicStatus", func(t *testing.T) {
		p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithLogger(testLogger()))
		require.NoError(t, err)
		require.NoError(t, p.Start())
		defer func() { require.NoError(t, p.Shutdown()) }()
		for i := 0; i < 3; i++ {
			_, err := p.SendSync(ctx, client.NewMessage("TopicB", []byte("m")))
			require.NoError(t, err)
		}
		var out string
		maxTotal := func() int64 { // consume queues are built behind the commit log: poll
			out = c.ok(t, "topicStatus", "-t", "TopicB")
			var total int64
			for _, l := range rows(out, "broker-a") {
				n, err := strconv.ParseInt(fields(l)[3], 10, 64)
				require.NoError(t, err, l)
				total += n
			}
			return total
		}
		require.Eventually(t, func() bool { return maxTotal() == 3 }, 10*time.Second, 20*time.Millisecond, "max offsets:\n%s", out)
		assert.Regexp(t, `^#Broker Name\s+#QID\s+#Min Offset\s+#Max Offset\s+#Last Updated`, out)
		r := rows(out, "broker-a")
		require.Len(t, r, 3)
		for i, l := range r {
			assert.Equal(t, strconv.Itoa(i), fields(l)[1])
		}
	})

	t.Run("topicClusterList", func(t *testing.T) {
		assert.Equal(t, "DefaultCluster\n", c.ok(t, "topicClusterList", "-t", "TopicB"))
	})

	t.Run("updateTopicPerm", func(t *testing.T) {
		out := c.ok(t, "updateTopicPerm", "-b", c.addr, "-t", "TopicB", "-p", "4")
		assert.Contains(t, out, "update topic perm from 6 to 4 in "+c.addr+" success.")
		require.Eventually(t, func() bool {
			route, err := c.admin.TopicRoute(ctx, "TopicB")
			return err == nil && len(route.QueueDatas) == 1 && route.QueueDatas[0].Perm == 4
		}, 10*time.Second, 20*time.Millisecond)
		assert.Contains(t, c.ok(t, "updateTopicPerm", "-c", "DefaultCluster", "-t", "TopicB", "-p", "4"), "new perm equals to the old one!")
	})

	t.Run("unknown topic", func(t *testing.T) {
		for _, cmd := range []string{"topicRoute", "topicStatus", "topicClusterList"} {
			r := c.fail(t, cmd, "-t", "NoSuchTopic")
			assert.Contains(t, r.err, cmd+" command failed: topic not exist", cmd)
			assert.Contains(t, r.err, "NoSuchTopic", cmd)
		}
		r := c.fail(t, "updateTopicPerm", "-b", c.addr, "-t", "NoSuchTopic", "-p", "6")
		assert.Contains(t, r.err, "topic not exist")
	})

	t.Run("deleteTopic", func(t *testing.T) {
		out := c.ok(t, "deleteTopic", "-c", "DefaultCluster", "-t", "TopicC")
		assert.Contains(t, out, "delete topic [TopicC] from cluster [DefaultCluster] success.")
		assert.Contains(t, out, "delete topic [TopicC] from NameServer success.")
		_, err := c.admin.TopicRoute(ctx, "TopicC")
		assert.ErrorIs(t, err, client.ErrNoRoute)
		r := c.fail(t, "deleteTopic", "-c", "NoSuchCluster", "-t", "TopicB")
		assert.Contains(t, r.err, "clusterName exists")
		c.fail(t, "deleteTopic", "-t", "TopicB") // -c is required
	})
}

func TestMessageCommands(t *testing.T) {
	c := MustStartCluster(t)
	c.createTopic(t, "MsgTopic")
	ctx := testCtx(t)
	p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { require.NoError(t, p.Shutdown()) }()
	res, err := p.SendSync(ctx, client.NewMessage("MsgTopic", []byte("hello body")).WithTag("TagA").WithKeys("order-1", "k2"))
	require.NoError(t, err)
	_, err = p.SendSync(ctx, client.NewMessage("MsgTopic", []byte("other")).WithKeys("order-2"))
	require.NoError(t, err)

	checkMsg := func(t *testing.T, out string) {
		t.Helper()
		assert.Regexp(t, `(?m)^Topic:\s+MsgTopic$`, out)
		assert.Regexp(t, `(?m)^Tags:\s+\[TagA\]$`, out)
		assert.Regexp(t, `(?m)^Keys:\s+\[order-1 k2\]$`, out)
		assert.Regexp(t, fmt.Sprintf(`(?m)^Queue ID:\s+%d$`, res.Queue.QueueID), out)
		assert.Regexp(t, fmt.Sprintf(`(?m)^Queue Offset:\s+%d$`, res.QueueOffset), out)
		assert.Regexp(t, `(?m)^Store Host:\s+`+regexp.QuoteMeta(c.addr)+`$`, out)
		assert.Contains(t, out, "UNIQ_KEY="+res.MsgID)
		m := regexp.MustCompile(`(?m)^Message Body Path:\s+(\S+)$`).FindStringSubmatch(out)
		require.Len(t, m, 2, out)
		body, err := os.ReadFile(m[1])
		require.NoError(t, err)
		assert.Equal(t, "hello body", string(body))
	}

	t.Run("queryMsgById", func(t *testing.T) {
		out := c.ok(t, "queryMsgById", "-i", res.OffsetMsgID)
		assert.Regexp(t, `(?m)^OffsetID:\s+`+res.OffsetMsgID+`$`, out)
		checkMsg(t, out)
		r := c.fail(t, "queryMsgById", "-i", "not-an-id")
		assert.Contains(t, r.err, "queryMsgById command failed: message not-an-id")
	})

	t.Run("queryMsgByKey", func(t *testing.T) {
		var out string
		// The index is built behind the commit log: poll.
		require.Eventually(t, func() bool {
			r := mqadmin(t, nil, "queryMsgByKey", "-t", "MsgTopic", "-k", "order-1", "-n", c.ns)
			out = r.out
			return r.code == 0
		}, 10*time.Second, 50*time.Millisecond)
		assert.Regexp(t, `^#Message ID\s+#QID\s+#Offset`, out)
		r := rows(out, res.MsgID)
		require.Len(t, r, 1, out)
		assert.Equal(t, []string{res.MsgID, strconv.Itoa(int(res.Queue.QueueID)), strconv.FormatInt(res.QueueOffset, 10)}, fields(r[0]))

		fr := c.fail(t, "queryMsgByKey", "-t", "MsgTopic", "-k", "no-such-key")
		assert.Contains(t, fr.err, "no message")
		fr = c.fail(t, "queryMsgByKey", "-t", "NoSuchTopic", "-k", "order-1")
		assert.Contains(t, fr.err, "topic not exist")
	})

	t.Run("queryMsgByUniqueKey", func(t *testing.T) {
		var out string
		require.Eventually(t, func() bool {
			r := mqadmin(t, nil, "queryMsgByUniqueKey", "-t", "MsgTopic", "-i", res.MsgID, "-n", c.ns)
			out = r.out
			return r.code == 0
		}, 10*time.Second, 50*time.Millisecond)
		assert.NotContains(t, out, "OffsetID:")
		checkMsg(t, out)
		fr := c.fail(t, "queryMsgByUniqueKey", "-t", "MsgTopic", "-i", "00000000000000000000000000000000")
		assert.Contains(t, fr.err, "no message")
	})

	t.Run("sendMessage", func(t *testing.T) {
		out := c.ok(t, "sendMessage", "-t", "MsgTopic", "-p", "from cli", "-c", "TagS", "-k", "cli-key", "-b", "broker-a", "-i", "2")
		assert.Regexp(t, `^#Broker Name\s+#QID\s+#Send Result\s+#MsgId`, out)
		r := rows(out, "broker-a")
		require.Len(t, r, 1, out)
		f := fields(r[0])
		require.Len(t, f, 4)
		assert.Equal(t, []string{"broker-a", "2", "SEND_OK"}, f[:3])
		var msgs []*client.MessageExt
		require.Eventually(t, func() bool { // the index is built behind the commit log
			msgs, err = c.admin.QueryMessageByUniqKey(ctx, "MsgTopic", f[3])
			return err == nil && len(msgs) == 1
		}, 10*time.Second, 50*time.Millisecond)
		m := msgs[0]
		assert.Equal(t, int32(2), m.QueueID)
		assert.Equal(t, "from cli", string(m.Body))
		assert.Equal(t, "TagS", m.Tags())
		assert.Equal(t, "cli-key", m.Keys())

		out = c.ok(t, "sendMessage", "-t", "MsgTopic", "-p", "any queue")
		assert.Contains(t, out, "SEND_OK")
		fr := c.fail(t, "sendMessage", "-t", "MsgTopic", "-p", "x", "-i", "1")
		assert.Contains(t, fr.err, "broker name must be set")
		c.fail(t, "sendMessage", "-t", "MsgTopic")
	})

	t.Run("queryMsgByOffset", func(t *testing.T) {
		out := c.ok(t, "queryMsgByOffset", "-t", "MsgTopic", "-b", res.Queue.BrokerName,
			"-i", strconv.Itoa(int(res.Queue.QueueID)), "-o", strconv.FormatInt(res.QueueOffset, 10))
		checkMsg(t, out)
		fr := c.fail(t, "queryMsgByOffset", "-t", "MsgTopic", "-b", res.Queue.BrokerName,
			"-i", strconv.Itoa(int(res.Queue.QueueID)), "-o", "1000")
		assert.Contains(t, fr.err, "queryMsgByOffset command failed")
		fr = c.fail(t, "queryMsgByOffset", "-t", "NoSuchTopic", "-b", "broker-a", "-i", "0", "-o", "0")
		assert.Contains(t, fr.err, "topic not exist")
		fr = c.fail(t, "queryMsgByOffset", "-t", "MsgTopic", "-b", "broker-a", "-i", "x", "-o", "0")
		assert.Contains(t, fr.err, "option -i wants an integer")
	})
}

func TestConsumerCommands(t *testing.T) {
	c := MustStartCluster(t)
	c.createTopic(t, "CTopic")
	ctx := testCtx(t)
	const group = "cg-admin"

	t.Run("updateSubGroup", func(t *testing.T) {
		out := c.ok(t, "updateSubGroup", "-b", c.addr, "-g", group, "-r", "3", "-d", "false")
		assert.Contains(t, out, "create subscription group to "+c.addr+" success.")
		assert.Contains(t, out, "SubscriptionGroupConfig [groupName="+group+", consumeEnable=true")
		assert.Contains(t, out, "retryMaxTimes=3")
		w, err := c.admin.SubscriptionGroups(ctx, c.addr)
		require.NoError(t, err)
		require.Contains(t, w.SubscriptionGroupTable, group)
		assert.Equal(t, int32(3), w.SubscriptionGroupTable[group].RetryMaxTimes)

		out = c.ok(t, "getConsumerConfig", "-g", group)
		assert.Contains(t, out, "=============================DefaultCluster:broker-a=============================\n")
		assert.Regexp(t, `(?m)^retryMaxTimes\s+=  3$`, out)
		assert.Regexp(t, `(?m)^groupName\s+=  `+group+`$`, out)
		r := c.fail(t, "getConsumerConfig", "-g", "no-such-group")
		assert.Contains(t, r.err, "subscription group no-such-group not found")

		out = c.ok(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "cg-cluster", "-m", "true")
		assert.Contains(t, out, "consumeFromMinEnable=true")
		c.fail(t, "updateSubGroup", "-g", "x")                             // no -b/-c
		c.fail(t, "updateSubGroup", "-b", c.addr, "-g", "x", "-q", "many") // bad number
	})

	// Produce, then consume everything with a push consumer of the group.
	p, err := client.NewProducer(client.WithNameServer(c.ns), client.WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { require.NoError(t, p.Shutdown()) }()
	before := time.Now()
	const n = 8
	for i := 0; i < n; i++ {
		_, err := p.SendSync(ctx, client.NewMessage("CTopic", []byte(fmt.Sprint(i))).WithTag("T"))
		require.NoError(t, err)
	}
	pc, err := client.NewPushConsumer(client.WithNameServer(c.ns), client.WithLogger(testLogger()), client.WithGroupName(group),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithPersistInterval(100*time.Millisecond),
		client.WithHeartbeatInterval(200*time.Millisecond), client.WithRebalanceInterval(200*time.Millisecond))
	require.NoError(t, err)
	var got atomic.Int64
	require.NoError(t, pc.Subscribe("CTopic", client.MessageSelector{Expression: "T"},
		func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			got.Add(int64(len(msgs)))
			return client.ConsumeSuccess, nil
		}))
	require.NoError(t, pc.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			require.NoError(t, pc.Shutdown())
		}
	}
	defer stop()
	require.Eventually(t, func() bool { return got.Load() >= n }, 15*time.Second, 20*time.Millisecond)

	t.Run("updateSubGroup -q resizes the retry topic", func(t *testing.T) {
		c.waitRoute(t, "%RETRY%"+group) // created by the consumer's registration
		out := c.ok(t, "updateSubGroup", "-b", c.addr, "-g", group, "-q", "2", "-r", "3")
		assert.Contains(t, out, "retryQueueNums=2")
		require.Eventually(t, func() bool {
			route, err := c.admin.TopicRoute(ctx, "%RETRY%"+group)
			return err == nil && len(route.QueueDatas) == 1 && route.QueueDatas[0].WriteQueueNums == 2
		}, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("consumerProgress -g", func(t *testing.T) {
		var out string
		require.Eventually(t, func() bool { // offsets are committed in the background
			r := mqadmin(t, nil, "consumerProgress", "-g", group, "-n", c.ns)
			out = r.out
			return r.code == 0 && strings.Contains(out, "Diff Total: 0") && len(rows(out, "CTopic")) == 4
		}, 10*time.Second, 50*time.Millisecond, "progress: %s", out)
		assert.Regexp(t, `^#Topic\s+#Broker Name\s+#QID\s+#Broker Offset\s+#Consumer Offset\s+#Client IP\s+#Diff\s+#LastTime`, out)
		var sum int64
		for _, l := range rows(out, "CTopic") {
			f := fields(l)
			assert.Equal(t, f[3], f[4], "broker offset = consumer offset: %s", l)
			v, _ := strconv.ParseInt(f[3], 10, 64)
			sum += v
		}
		assert.Equal(t, int64(n), sum)
		out = c.ok(t, "consumerProgress", "-g", group, "-t", "CTopic")
		assert.Len(t, rows(out, "CTopic"), 4)
		r := c.fail(t, "consumerProgress", "-g", "no-such-group")
		assert.Contains(t, r.err, "consume stats")
	})

	t.Run("consumerProgress lists groups", func(t *testing.T) {
		out := c.ok(t, "consumerProgress")
		assert.Regexp(t, `^#Group\s+#Count\s+#Version\s+#Type\s+#Model\s+#TPS\s+#Diff Total`, out)
		r := rows(out, group)
		require.Len(t, r, 1, out)
		assert.Equal(t, []string{group, "1", "V4_9_8", "PUSH", "CLUSTERING", "NA", "0"}, fields(r[0]))
	})

	t.Run("consumerConnection", func(t *testing.T) {
		out := c.ok(t, "consumerConnection", "-g", group)
		assert.Regexp(t, `(?m)^001  `+regexp.QuoteMeta(pc.ClientID())+`\s+127\.0\.0\.1:\d+\s+GO\s+V4_9_8$`, out)
		assert.Regexp(t, `(?m)^\d{3}  Topic: CTopic\s+SubExpression: T$`, out)
		assert.Contains(t, out, "ConsumeType: CONSUME_PASSIVELY")
		assert.Contains(t, out, "MessageModel: CLUSTERING")
		assert.Contains(t, out, "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET")
		r := c.fail(t, "consumerConnection", "-g", "no-such-group")
		assert.Contains(t, r.err, "consumerConnection command failed")
	})

	// Reset needs the consumer stopped: our broker has no
	// INVOKE_BROKER_TO_RESET_OFFSET yet, so the offsets are written directly
	// and a running consumer would commit over them.
	stop()

	t.Run("resetOffsetByTime", func(t *testing.T) {
		ts := strconv.FormatInt(before.Add(-time.Second).UnixMilli(), 10)
		out := c.ok(t, "resetOffsetByTime", "-g", group, "-t", "CTopic", "-s", ts)
		assert.Contains(t, out, "rollback consumer offset by specified group["+group+"], topic[CTopic], force[true], timestamp(string)["+ts+"]")
		r := rows(out, "broker-a")
		require.Len(t, r, 4, out)
		for _, l := range r {
			assert.Equal(t, "0", fields(l)[2], l)
		}
		progress := c.ok(t, "consumerProgress", "-g", group)
		assert.Contains(t, progress, fmt.Sprintf("Diff Total: %d", n))

		out = c.ok(t, "resetOffsetByTime", "-g", group, "-t", "CTopic", "-s", "now", "-f", "true")
		assert.Contains(t, out, "timestamp(string)[now]")
		progress = c.ok(t, "consumerProgress", "-g", group)
		assert.Contains(t, progress, "Diff Total: 0", "now skips the backlog:\n%s", progress)

		fr := c.fail(t, "resetOffsetByTime", "-g", group, "-t", "NoSuchTopic", "-s", "now")
		assert.Contains(t, fr.err, "topic not exist")
	})

	t.Run("skipAccumulatedMessage", func(t *testing.T) {
		c.ok(t, "resetOffsetByTime", "-g", group, "-t", "CTopic", "-s", "0")
		assert.Contains(t, c.ok(t, "consumerProgress", "-g", group), fmt.Sprintf("Diff Total: %d", n))
		out := c.ok(t, "skipAccumulatedMessage", "-g", group, "-t", "CTopic")
		assert.Regexp(t, `^#brokerName\s+#queueId\s+#offset`, out)
		assert.Len(t, rows(out, "broker-a"), 4)
		assert.Contains(t, c.ok(t, "consumerProgress", "-g", group), "Diff Total: 0")
		r := c.fail(t, "skipAccumulatedMessage", "-g", group, "-t", "NoSuchTopic")
		assert.Contains(t, r.err, "topic not exist")
		c.fail(t, "skipAccumulatedMessage", "-g", group)
	})

	t.Run("deleteSubGroup", func(t *testing.T) {
		out := c.ok(t, "deleteSubGroup", "-b", c.addr, "-g", "cg-cluster")
		assert.Contains(t, out, "delete subscription group [cg-cluster] from broker ["+c.addr+"] success.")
		out = c.ok(t, "deleteSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "true")
		assert.Contains(t, out, "delete subscription group ["+group+"] from broker ["+c.addr+"] in cluster [DefaultCluster] success.")
		assert.Contains(t, out, "delete topic [%RETRY%"+group+"] from cluster [DefaultCluster] success.")
		w, err := c.admin.SubscriptionGroups(ctx, c.addr)
		require.NoError(t, err)
		assert.NotContains(t, w.SubscriptionGroupTable, group)
		assert.NotContains(t, w.SubscriptionGroupTable, "cg-cluster")
		r := c.fail(t, "deleteSubGroup", "-c", "NoSuchCluster", "-g", group)
		assert.Contains(t, r.err, "clusterName exists")
	})
}

func TestClusterAndConfigCommands(t *testing.T) {
	c := MustStartCluster(t)
	ctx := testCtx(t)

	t.Run("clusterList", func(t *testing.T) {
		out := c.ok(t, "clusterList")
		assert.Regexp(t, `^#Cluster Name\s+#Broker Name\s+#BID\s+#Addr\s+#Version\s+#InTPS\(LOAD\)\s+#OutTPS\(LOAD\)\s+#PCWait\(ms\)\s+#Hour\s+#SPACE`, out)
		r := rows(out, "DefaultCluster")
		require.Len(t, r, 1, out)
		f := fields(r[0])
		assert.Equal(t, []string{"DefaultCluster", "broker-a", "0", c.addr, "V4_9_8"}, f[:5])

		out = c.ok(t, "clusterList", "-m")
		assert.Regexp(t, `^#Cluster Name\s+#Broker Name\s+#InTotalYest\s+#OutTotalYest\s+#InTotalToday\s+#OutTotalToday`, out)
		assert.Len(t, rows(out, "DefaultCluster"), 1)
	})

	t.Run("brokerStatus", func(t *testing.T) {
		out := c.ok(t, "brokerStatus", "-b", c.addr)
		assert.Regexp(t, `(?m)^brokerVersionDesc\s+: V4_9_8$`, out)
		out = c.ok(t, "brokerStatus", "-c", "DefaultCluster")
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(c.addr)+`\s+brokerVersionDesc\s+: V4_9_8$`, out)
		c.fail(t, "brokerStatus")
		r := c.fail(t, "brokerStatus", "-b", "127.0.0.1:1")
		assert.Contains(t, r.err, "brokerStatus command failed")
	})

	t.Run("getBrokerConfig and updateBrokerConfig", func(t *testing.T) {
		out := c.ok(t, "getBrokerConfig", "-b", c.addr)
		assert.Contains(t, out, "============"+c.addr+"============\n")
		assert.Regexp(t, `(?m)^brokerName\s+=  broker-a$`, out)
		out = c.ok(t, "getBrokerConfig", "-c", "DefaultCluster")
		assert.Contains(t, out, "============Master: "+c.addr+"============\n")

		r := mqadmin(t, nil, "updateBrokerConfig", "-b", c.addr, "-k", "maxMessageSize", "-v", "1048576", "-n", c.ns)
		if r.code != 0 {
			// Our broker does not answer UPDATE_BROKER_CONFIG (25) yet; the
			// command must say so plainly rather than pretend.
			assert.Contains(t, r.err, "updateBrokerConfig command failed: "+c.addr+" answered code 3")
		} else {
			assert.Contains(t, r.out, "update broker config success, "+c.addr)
			cfg, err := c.admin.BrokerConfig(ctx, c.addr)
			require.NoError(t, err)
			assert.Equal(t, "1048576", cfg["maxMessageSize"])
		}
		c.fail(t, "updateBrokerConfig", "-b", c.addr, "-k", "maxMessageSize") // -v required
	})

	t.Run("getNamesrvConfig and updateNamesrvConfig", func(t *testing.T) {
		out := c.ok(t, "getNamesrvConfig")
		assert.Contains(t, out, "============"+c.ns+"============\n")
		assert.Regexp(t, `(?m)^kvConfigPath\s+=  \S+kvConfig\.json$`, out)
		out = c.ok(t, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
		assert.Contains(t, out, "update name server config success![")
		cfg, err := c.admin.NameServerConfig(ctx, c.ns)
		require.NoError(t, err)
		assert.Equal(t, "true", cfg["orderMessageEnable"])
	})

	t.Run("updateKvConfig and deleteKvConfig", func(t *testing.T) {
		out := c.ok(t, "updateKvConfig", "-s", "NS1", "-k", "k1", "-v", "v1")
		assert.Equal(t, "create or update kv config to namespace success.\n", out)
		v, err := c.admin.GetKVConfig(ctx, "NS1", "k1")
		require.NoError(t, err)
		assert.Equal(t, "v1", v)
		out = c.ok(t, "deleteKvConfig", "-s", "NS1", "-k", "k1")
		assert.Equal(t, "delete kv config from namespace success.\n", out)
		_, err = c.admin.GetKVConfig(ctx, "NS1", "k1")
		assert.Error(t, err)
		c.fail(t, "updateKvConfig", "-s", "NS1", "-k", "k1")
	})

	t.Run("updateOrderConf", func(t *testing.T) {
		out := c.ok(t, "updateOrderConf", "-t", "OT", "-m", "put", "-v", "broker-a:4")
		assert.Equal(t, "update orderConf success. topic=[OT], orderConf=[broker-a:4]\n", out)
		out = c.ok(t, "updateOrderConf", "-t", "OT", "-m", "get")
		assert.Equal(t, "get orderConf success. topic=[OT], orderConf=[broker-a:4]\n", out)
		out = c.ok(t, "updateOrderConf", "-t", "OT", "-m", "delete")
		assert.Equal(t, "delete orderConf success. topic=[OT]\n", out)
		r := c.fail(t, "updateOrderConf", "-t", "OT", "-m", "get")
		assert.Contains(t, r.err, "updateOrderConf command failed")
		r = c.fail(t, "updateOrderConf", "-t", "OT", "-m", "put")
		assert.Contains(t, r.err, "please set orderConf with option -v")
		r = c.fail(t, "updateOrderConf", "-t", "OT", "-m", "drop")
		assert.Contains(t, r.err, "must be put, get or delete")
	})
}
