package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestSignKnownVectors(t *testing.T) {
	// Expected values computed independently with
	//   printf 'aktokThi' | openssl dgst -sha1 -hmac sk -binary | base64
	// following protocol.md §5.1: values sorted by key (AccessKey,
	// SecurityToken, topic), concatenated, body appended.
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{"topic": "T"}, []byte("hi"))
	Sign(Credentials{AccessKey: "ak", SecretKey: "sk", SecurityToken: "tok"}, req)
	assert.Equal(t, "ZOswHF2caGt4nbR/ZMMG60n9RMY=", req.ExtFields["Signature"])
	assert.Equal(t, "ak", req.ExtFields["AccessKey"])
	assert.Equal(t, "tok", req.ExtFields["SecurityToken"])

	// printf 'ak4TopicTesthello' | openssl dgst -sha1 -hmac secret -binary | base64
	req = remoting.NewRequest(remoting.SendMessage, map[string]string{"topic": "TopicTest", "queueId": "4"}, []byte("hello"))
	Sign(Credentials{AccessKey: "ak", SecretKey: "secret"}, req)
	assert.Equal(t, "qmSzQA3mn87kKxjffH4MHrIhvu8=", req.ExtFields["Signature"])
	_, hasToken := req.ExtFields["SecurityToken"]
	assert.False(t, hasToken)

	// Re-signing (a retried request) ignores the old signature.
	Sign(Credentials{AccessKey: "ak", SecretKey: "secret"}, req)
	assert.Equal(t, "qmSzQA3mn87kKxjffH4MHrIhvu8=", req.ExtFields["Signature"])
}

func TestOptions(t *testing.T) {
	t.Setenv("NAMESRV_ADDR", "")
	_, err := buildOptions("g", nil)
	require.ErrorIs(t, err, ErrNoNameServer)

	t.Setenv("NAMESRV_ADDR", "10.0.0.1:9876;http://10.0.0.2:9876")
	o, err := buildOptions("g", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.1:9876", "10.0.0.2:9876"}, o.nameServers)
	assert.Equal(t, "g", o.group)
	assert.Equal(t, 3*time.Second, o.sendTimeout)
	assert.Equal(t, 2, o.retry)

	o, err = buildOptions("g", []Option{WithNameServer("1.1.1.1:1", "2.2.2.2:2"), WithGroupName("pg"), WithRetry(5),
		WithSendTimeout(time.Second), WithNamespace("ns"), WithInstanceName("i1")})
	require.NoError(t, err)
	assert.Equal(t, []string{"1.1.1.1:1", "2.2.2.2:2"}, o.nameServers)
	assert.Equal(t, "pg", o.group)
	assert.Equal(t, 5, o.retry)
	assert.Equal(t, time.Second, o.sendTimeout)

	for _, bad := range []Option{WithRetry(-1), WithSendTimeout(0), WithGroupName(""), WithNameServer(""),
		WithCompressLevel(10), WithPullBatchSize(0), WithConsumeMessageBatchMaxSize(0), WithLogger(nil)} {
		_, err := buildOptions("g", []Option{WithNameServer("1.1.1.1:1"), bad})
		assert.ErrorIs(t, err, ErrBadOption)
	}
}

func TestClientIDUniqueByDefault(t *testing.T) {
	o, err := buildOptions("g", []Option{WithNameServer("127.0.0.1:1")})
	require.NoError(t, err)
	a, b := newCore(o, "t"), newCore(o, "t")
	defer a.shutdown()
	defer b.shutdown()
	assert.NotEqual(t, a.clientID, b.clientID)

	o.instanceName = "fixed"
	c := newCore(o, "t")
	defer c.shutdown()
	assert.Equal(t, c.ip.String()+"@fixed", c.clientID)
}

func TestNamespaceWrap(t *testing.T) {
	o, err := buildOptions("g", []Option{WithNameServer("127.0.0.1:1"), WithNamespace("ns")})
	require.NoError(t, err)
	c := newCore(o, "t")
	defer c.shutdown()
	for _, tc := range []struct{ in, wrapped string }{
		{"T", "ns%T"}, {"ns%T", "ns%T"}, {"%RETRY%g", "%RETRY%ns%g"}, {"%DLQ%g", "%DLQ%ns%g"}, {"%RETRY%ns%g", "%RETRY%ns%g"},
	} {
		assert.Equal(t, tc.wrapped, c.wrapName(tc.in), tc.in)
		assert.Equal(t, c.unwrapName(tc.wrapped), c.unwrapName(c.wrapName(tc.in)))
	}
	assert.Equal(t, "T", c.unwrapName("ns%T"))
	assert.Equal(t, "%RETRY%g", c.unwrapName("%RETRY%ns%g"))
}

func queues(brokers []string, n int) []MessageQueue {
	var out []MessageQueue
	for _, b := range brokers {
		for i := 0; i < n; i++ {
			out = append(out, MessageQueue{Topic: "T", BrokerName: b, QueueID: int32(i)})
		}
	}
	return out
}

func TestSelectors(t *testing.T) {
	qs := queues([]string{"a", "b"}, 4)
	msg := NewMessage("T", []byte("x"))

	rr := NewRoundRobinSelector()
	seen := map[MessageQueue]int{}
	for i := 0; i < 16; i++ {
		q, err := rr.Select(msg, qs, "")
		require.NoError(t, err)
		seen[q]++
	}
	assert.Len(t, seen, 8)
	for _, n := range seen {
		assert.Equal(t, 2, n)
	}
	// A retry avoids the broker that failed.
	for i := 0; i < 8; i++ {
		q, _ := rr.Select(msg, qs, "a")
		assert.Equal(t, "b", q.BrokerName)
	}

	h := NewHashSelector()
	keyed := NewMessage("T", []byte("x")).WithShardingKey("order-1")
	first, _ := h.Select(keyed, qs, "")
	for i := 0; i < 10; i++ {
		q, _ := h.Select(keyed, qs, "a")
		assert.Equal(t, first, q, "a sharding key always maps to one queue")
	}
	// FNV-32a, as the official client's hash selector.
	assert.Equal(t, qs[hashIndex("order-1", len(qs))], first)
	spread := map[MessageQueue]bool{}
	for i := 0; i < 100; i++ {
		q, _ := h.Select(NewMessage("T", nil).WithShardingKey(fmt.Sprint("k", i)), qs, "")
		spread[q] = true
	}
	assert.Greater(t, len(spread), 4)

	m := NewManualSelector()
	_, err := m.Select(msg, qs, "")
	assert.ErrorIs(t, err, ErrNoQueueChosen)
	msg.Queue = &qs[5]
	q, err := m.Select(msg, qs, "")
	require.NoError(t, err)
	assert.Equal(t, qs[5], q)
}

func TestFaultTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFaultTracker(30 * time.Second)
	f.now = func() time.Time { return now }
	qs := queues([]string{"a", "b"}, 2)
	f.mark("a")
	assert.False(t, f.available("a"))
	assert.Equal(t, qs[2:], f.filter(qs))
	f.mark("b")
	assert.Equal(t, qs, f.filter(qs), "all avoided: use them all rather than none")
	now = now.Add(31 * time.Second)
	assert.True(t, f.available("a"))
	f.mark("b")
	f.clear("b")
	assert.True(t, f.available("b"))

	off := newFaultTracker(0)
	off.mark("a")
	assert.True(t, off.available("a"))
}

func TestRetryDecisions(t *testing.T) {
	for _, tc := range []struct {
		err          error
		retry, avoid bool
	}{
		{fmt.Errorf("dial: %w", remoting.ErrConnClosed), true, true},
		{&BrokerError{Code: remoting.SystemBusy}, true, false},
		{&BrokerError{Code: remoting.SystemError}, true, false},
		{&BrokerError{Code: remoting.TopicNotExist}, true, false},
		{&BrokerError{Code: remoting.ServiceNotAvailable}, true, false},
		{&BrokerError{Code: remoting.NoPermission}, true, false},
		{&BrokerError{Code: remoting.MessageIllegal}, false, false},
		{fmt.Errorf("wrapped: %w", &BrokerError{Code: remoting.MessageIllegal}), false, false},
	} {
		retry, avoid := retryable(tc.err)
		assert.Equal(t, tc.retry, retry, tc.err.Error())
		assert.Equal(t, tc.avoid, avoid, tc.err.Error())
	}
	assert.Equal(t, 50*time.Millisecond, busyBackoff(0))
	assert.Equal(t, 100*time.Millisecond, busyBackoff(1))
	assert.Equal(t, 800*time.Millisecond, busyBackoff(4))
	assert.Equal(t, time.Second, busyBackoff(5))
	assert.Equal(t, time.Second, busyBackoff(70))
}

func cids(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("c%d", i))
	}
	return out
}

// checkPartition asserts that every queue is allocated exactly once.
func checkPartition(t *testing.T, s AllocateStrategy, mqs []MessageQueue, ids []string) map[string][]MessageQueue {
	t.Helper()
	got := map[string][]MessageQueue{}
	owner := map[MessageQueue]string{}
	for _, id := range ids {
		got[id] = s.Allocate("g", id, mqs, ids)
		for _, q := range got[id] {
			_, dup := owner[q]
			assert.False(t, dup, "%s: %v allocated twice", s.Name(), q)
			owner[q] = id
		}
	}
	assert.Len(t, owner, len(mqs), s.Name())
	return got
}

func TestAllocateAveragely(t *testing.T) {
	mqs := queues([]string{"a", "b"}, 4) // 8 queues
	got := checkPartition(t, AllocateAveragely{}, mqs, cids(3))
	// Java: 8 % 3 = 2, so c0 and c1 get 3 contiguous queues, c2 the last 2.
	assert.Equal(t, mqs[0:3], got["c0"])
	assert.Equal(t, mqs[3:6], got["c1"])
	assert.Equal(t, mqs[6:8], got["c2"])
	// More members than queues: the last ones get nothing.
	got = map[string][]MessageQueue{}
	ids := cids(10)
	for _, id := range ids {
		got[id] = AllocateAveragely{}.Allocate("g", id, mqs, ids)
	}
	assert.Equal(t, mqs[7:8], got["c7"])
	assert.Empty(t, got["c8"])
	assert.Empty(t, AllocateAveragely{}.Allocate("g", "stranger", mqs, ids))
}

func TestAllocateByCircle(t *testing.T) {
	mqs := queues([]string{"a", "b"}, 4)
	got := checkPartition(t, AllocateAveragelyByCircle{}, mqs, cids(3))
	assert.Equal(t, []MessageQueue{mqs[0], mqs[3], mqs[6]}, got["c0"])
	assert.Equal(t, []MessageQueue{mqs[2], mqs[5]}, got["c2"])
}

func TestAllocateByConfigAndMachineRoom(t *testing.T) {
	mqs := queues([]string{"a", "b"}, 2)
	cfg := AllocateByConfig{Queues: []MessageQueue{mqs[1], {Topic: "T", BrokerName: "zz"}}}
	assert.Equal(t, []MessageQueue{mqs[1]}, cfg.Allocate("g", "c0", mqs, cids(2)))

	room := queues([]string{"hz@a", "hz@b", "sh@c"}, 2)
	checkPartition(t, AllocateByMachineRoom{Rooms: []string{"hz", "sh"}}, room, cids(4))
	got := map[string][]MessageQueue{}
	for _, id := range cids(3) {
		got[id] = AllocateByMachineRoom{Rooms: []string{"hz"}}.Allocate("g", id, room, cids(3))
	}
	// 4 queues in room hz over 3 members: 1 each, the remainder to c0.
	assert.Equal(t, []MessageQueue{room[0], room[3]}, got["c0"])
	assert.Equal(t, []MessageQueue{room[1]}, got["c1"])
	assert.Equal(t, []MessageQueue{room[2]}, got["c2"])
}

func TestAllocateConsistentHash(t *testing.T) {
	mqs := queues([]string{"a", "b", "c"}, 8)
	before := checkPartition(t, AllocateByConsistentHash{}, mqs, cids(3))
	after := checkPartition(t, AllocateByConsistentHash{}, mqs, cids(4))
	// Adding a member only moves queues to the new member.
	for _, id := range cids(3) {
		kept := map[MessageQueue]bool{}
		for _, q := range after[id] {
			kept[q] = true
		}
		for _, q := range after[id] {
			assert.Contains(t, before[id], q, "%s gained a queue from a peer", id)
		}
		_ = kept
	}
	// The Java MD5Hash: first four digest bytes, big-endian, unsigned.
	// md5("a") = 0cc175b9...
	assert.Equal(t, int64(0x0cc175b9), md5Hash("a"))
}

func TestForgetOfflineBrokers(t *testing.T) {
	o, err := buildOptions("g", []Option{WithNameServer("127.0.0.1:1")})
	require.NoError(t, err)
	c := newCore(o, "t")
	defer c.shutdown()
	route := func(brokers ...string) *topicRoute {
		data := &protocol.TopicRouteData{}
		for _, b := range brokers {
			data.BrokerDatas = append(data.BrokerDatas, &protocol.BrokerData{BrokerName: b, BrokerAddrs: map[int64]string{0: b + ":1"}})
			data.QueueDatas = append(data.QueueDatas, &protocol.QueueData{BrokerName: b, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
		}
		return buildRoute("T", data)
	}
	c.routes["T"] = route("a", "b")
	c.brokerAddrs["a"] = map[int64]string{0: "a:1"}
	c.brokerAddrs["b"] = map[int64]string{0: "b:1"}
	c.brokerAddrs["gone"] = map[int64]string{0: "gone:1"}
	c.forgetOfflineBrokers()
	assert.Equal(t, []string{"a:1", "b:1"}, c.allBrokerAddrs(false))
	assert.Len(t, c.routes["T"].publish, 4)
	assert.Len(t, c.routes["T"].subscribe, 4)
}

func TestBuildRouteSkipsBrokersWithoutMaster(t *testing.T) {
	data := &protocol.TopicRouteData{
		QueueDatas: []*protocol.QueueData{
			{BrokerName: "b", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6},
			{BrokerName: "a", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6},
			{BrokerName: "ro", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 4},
		},
		BrokerDatas: []*protocol.BrokerData{
			{BrokerName: "a", BrokerAddrs: map[int64]string{0: "a:1"}},
			{BrokerName: "b", BrokerAddrs: map[int64]string{1: "b-slave:1"}},
			{BrokerName: "ro", BrokerAddrs: map[int64]string{0: "ro:1"}},
		},
	}
	tr := buildRoute("T", data)
	assert.Equal(t, []MessageQueue{{Topic: "T", BrokerName: "a", QueueID: 0}}, tr.publish,
		"writes need a master and write permission")
	assert.Len(t, tr.subscribe, 4, "a slave and a read-only broker still serve reads")
}
