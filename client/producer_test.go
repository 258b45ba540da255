package client

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// MustStartProducer starts a producer and shuts it down when the test ends.
func MustStartProducer(t *testing.T, opts ...Option) *Producer {
	t.Helper()
	p, err := NewProducer(append([]Option{WithLogger(testLogger())}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { require.NoError(t, p.Shutdown()) })
	return p
}

func TestProducerSendSync(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 4)
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithGroupName("pg"))

	res, err := p.SendSync(testCtx(t), NewMessage("T", []byte("hello")).WithTag("tagA").WithKeys("k1", "k2").WithProperty("p", "v"))
	require.NoError(t, err)
	assert.Equal(t, SendOK, res.Status)
	assert.Len(t, res.MsgID, 32)
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	require.NoError(t, err)
	assert.Equal(t, int64(0), off)
	assert.Equal(t, "T", res.Queue.Topic)
	assert.Equal(t, "broker-a", res.Queue.BrokerName)
	assert.Equal(t, "DefaultRegion", res.RegionID)

	stored := fb.messages("T")
	require.Len(t, stored, 1)
	m := stored[0]
	assert.Equal(t, []byte("hello"), m.Body)
	assert.Equal(t, "tagA", m.Tags())
	assert.Equal(t, "k1 k2", m.Keys())
	assert.Equal(t, "v", m.Property("p"))
	assert.Equal(t, res.MsgID, m.UniqKey())
	assert.Equal(t, res.Queue.QueueID, m.QueueID)
}

func TestProducerRoundRobinAndShardingKey(t *testing.T) {
	ns := MustStartNameServer(t)
	a := MustStartFakeBroker(t, "broker-a", ns.Addr())
	b := MustStartFakeBroker(t, "broker-b", ns.Addr())
	a.AddTopic("T", 2)
	b.AddTopic("T", 2)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)

	seen := map[MessageQueue]int{}
	for i := 0; i < 8; i++ {
		res, err := p.SendSync(ctx, NewMessage("T", []byte("x")))
		require.NoError(t, err)
		seen[res.Queue]++
	}
	assert.Len(t, seen, 4, "round-robin reaches every queue of both brokers")

	var first MessageQueue
	for i := 0; i < 6; i++ {
		res, err := p.SendSync(ctx, NewMessage("T", []byte("x")).WithShardingKey("order-7"))
		require.NoError(t, err)
		if i == 0 {
			first = res.Queue
		}
		assert.Equal(t, first, res.Queue, "same sharding key, same queue")
	}
}

func TestProducerBatchAndCompression(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)

	res, err := p.SendSync(ctx, NewMessage("T", []byte("m0")).WithTag("a"), NewMessage("T", []byte("m1")).WithKeys("k"), NewMessage("T", []byte("m2")))
	require.NoError(t, err)
	ids := strings.Split(res.MsgID, ",")
	require.Len(t, ids, 3)
	assert.Len(t, strings.Split(res.OffsetMsgID, ","), 3)
	stored := fb.messages("T")
	require.Len(t, stored, 3)
	for i, m := range stored {
		assert.Equal(t, ids[i], m.UniqKey(), "every batch member carries its UNIQ_KEY")
		assert.Equal(t, []byte{'m', byte('0' + i)}, m.Body)
	}
	assert.Equal(t, "a", stored[0].Tags())
	assert.Equal(t, "k", stored[1].Keys())

	_, err = p.SendSync(ctx, NewMessage("T", []byte("x")), NewMessage("U", []byte("y")))
	assert.ErrorIs(t, err, ErrMixedTopics)
	_, err = p.SendSync(ctx, NewMessage("T", nil))
	assert.ErrorIs(t, err, ErrEmptyBody)
	_, err = p.SendSync(ctx)
	assert.ErrorIs(t, err, ErrNoMessage)
	_, err = p.SendSync(ctx, NewMessage("bad topic!", []byte("x")))
	assert.ErrorIs(t, err, ErrBadTopic)

	big := bytes.Repeat([]byte("compressible "), 1000) // 13 KB
	_, err = p.SendSync(ctx, NewMessage("T", big))
	require.NoError(t, err)
	stored = fb.messages("T")
	m := stored[len(stored)-1]
	assert.NotZero(t, m.SysFlag&message.FlagCompressed, "bodies over 4 KiB go compressed")
	assert.Less(t, len(m.Body), len(big))
	plain, err := message.UncompressBody(m.SysFlag, m.Body)
	require.NoError(t, err)
	assert.Equal(t, big, plain)

	_, err = p.SendSync(ctx, NewMessage("T", bytes.Repeat([]byte{1}, 5<<20)))
	assert.ErrorIs(t, err, ErrMessageTooLarge)
}

func TestProducerAsyncAndOneway(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 4)
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)

	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := 0; i < 20; i++ {
		wg.Add(1)
		require.NoError(t, p.SendAsync(ctx, func(_ context.Context, r *SendResult, err error) {
			defer wg.Done()
			if err == nil && r.Status == SendOK {
				ok.Add(1)
			}
		}, NewMessage("T", []byte("async"))))
	}
	wg.Wait()
	assert.Equal(t, int32(20), ok.Load())

	require.NoError(t, p.SendOneWay(ctx, NewMessage("T", []byte("oneway"))))
	require.Eventually(t, func() bool { return len(fb.messages("T")) == 21 }, 5*time.Second, 10*time.Millisecond)
}

func TestProducerRetriesOnAnotherBrokerAndAvoidsIt(t *testing.T) {
	ns := MustStartNameServer(t)
	a := MustStartFakeBroker(t, "broker-a", ns.Addr())
	b := MustStartFakeBroker(t, "broker-b", ns.Addr())
	a.AddTopic("T", 1)
	b.AddTopic("T", 1)
	// broker-a accepts connections but never answers sends: a hung broker.
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	a.setSendHook(func(req *remoting.Command) *remoting.Command {
		<-hang
		return remoting.NewResponse(req, remoting.SystemError, "stopped")
	})
	// The timeout is long enough that broker-b, slowed by a loaded machine,
	// never times out too (both avoided, a send would go to broker-a again);
	// broker-a costs it once.
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithSendTimeout(2*time.Second))
	ctx := testCtx(t)
	for i := 0; i < 6; i++ {
		res, err := p.SendSync(ctx, NewMessage("T", []byte("x")))
		require.NoError(t, err)
		assert.Equal(t, "broker-b", res.Queue.BrokerName)
	}
	assert.Equal(t, 1, a.sendCount(), "after one timeout broker-a is avoided")
	assert.Len(t, b.messages("T"), 6)
}

func TestProducerBusyBackoffAndErrors(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	var calls atomic.Int32
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		if calls.Add(1) <= 2 {
			return remoting.NewResponse(req, remoting.SystemBusy, "[TIMEOUT_CLEAN_QUEUE]broker busy")
		}
		return nil
	})
	p := MustStartProducer(t, WithNameServer(ns.Addr()))
	start := time.Now()
	res, err := p.SendSync(testCtx(t), NewMessage("T", []byte("x")))
	require.NoError(t, err)
	assert.Equal(t, SendOK, res.Status)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "backoff 50 ms then 100 ms")

	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.MessageIllegal, "bad message")
	})
	before := fb.sendCount()
	_, err = p.SendSync(testCtx(t), NewMessage("T", []byte("x")))
	var be *BrokerError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, remoting.MessageIllegal, be.Code)
	assert.Equal(t, before+1, fb.sendCount(), "an illegal message is not retried")

	_, err = p.SendSync(testCtx(t), NewMessage("NoSuchTopic", []byte("x")))
	assert.Error(t, err)
}

func TestProducerNameServerFailoverAndACL(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	cred := Credentials{AccessKey: "ak", SecretKey: "sk", SecurityToken: "tok"}
	var bad atomic.Int32
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		f := req.FieldMap()
		if f["Signature"] != testSignature(cred.SecretKey, f, req.Body) || f["AccessKey"] != "ak" || f["SecurityToken"] != "tok" {
			bad.Add(1)
			return remoting.NewResponse(req, remoting.NoPermission, "bad signature")
		}
		return nil
	})
	// The first nameserver is dead: the client moves on to the live one.
	p := MustStartProducer(t, WithNameServer("127.0.0.1:1", ns.Addr()), WithCredentials(cred))
	_, err := p.SendSync(testCtx(t), NewMessage("T", []byte("signed")))
	require.NoError(t, err)
	assert.Zero(t, bad.Load())
}

func TestProducerLifecycle(t *testing.T) {
	ns := MustStartNameServer(t)
	p, err := NewProducer(WithNameServer(ns.Addr()), WithLogger(testLogger()))
	require.NoError(t, err)
	_, err = p.SendSync(testCtx(t), NewMessage("T", []byte("x")))
	assert.ErrorIs(t, err, ErrNotStarted)
	require.NoError(t, p.Start())
	assert.ErrorIs(t, p.Start(), ErrAlreadyStarted)
	require.NoError(t, p.Shutdown())
	require.NoError(t, p.Shutdown())
	assert.ErrorIs(t, p.SendAsync(testCtx(t), func(context.Context, *SendResult, error) {}, NewMessage("T", []byte("x"))), ErrNotStarted)
}

// TestProducerHeaderEncoding checks the wire encoding of send headers: binary
// by default, JSON on request, and the answer read back either way.
func TestProducerHeaderEncoding(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 1)
	var mu sync.Mutex
	var seen []remoting.SerializeType
	fb.setSendHook(func(req *remoting.Command) *remoting.Command {
		mu.Lock()
		seen = append(seen, req.SerializeType)
		mu.Unlock()
		return nil
	})
	for _, tc := range []struct {
		opts []Option
		want remoting.SerializeType
	}{
		{nil, remoting.RocketMQSerialize},
		{[]Option{WithHeaderEncoding(HeadersJSON)}, remoting.JSONSerialize},
		{[]Option{WithHeaderEncoding(HeadersBinary)}, remoting.RocketMQSerialize},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		p := MustStartProducer(t, append([]Option{WithNameServer(ns.Addr()), WithGroupName("pg-enc")}, tc.opts...)...)
		res, err := p.SendSync(testCtx(t), NewMessage("T", []byte("x")).WithTag("a"))
		require.NoError(t, err)
		assert.Equal(t, SendOK, res.Status)
		mu.Lock()
		assert.Equal(t, []remoting.SerializeType{tc.want}, seen)
		mu.Unlock()
		require.NoError(t, p.Shutdown())
	}
	_, err := NewProducer(WithNameServer(ns.Addr()), WithHeaderEncoding(HeaderEncoding(7)))
	assert.ErrorIs(t, err, ErrBadOption)
}

// TestProducerFollowsAMovedMaster: when a broker group's master moves to a
// new address (a controller promoted a replica, or an operator moved the
// master), a send that cannot reach the old address has the route re-read,
// so sends resume on the new master long before the periodic route refresh
// (an hour here). Without the re-read every send keeps going to the dead
// address until that refresh.
func TestProducerFollowsAMovedMaster(t *testing.T) {
	ns := MustStartNameServer(t)
	old := MustStartFakeBroker(t, "broker-a", ns.Addr())
	old.AddTopic("T", 2)
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithRouteRefreshInterval(time.Hour), WithSendTimeout(2*time.Second))
	ctx := testCtx(t)
	_, err := p.SendSync(ctx, NewMessage("T", []byte("before")))
	require.NoError(t, err)
	require.Len(t, old.messages("T"), 1)

	old.stop()
	moved := MustStartFakeBroker(t, "broker-a", ns.Addr()) // registers broker-a's master at a new address
	moved.AddTopic("T", 2)
	require.NotEqual(t, old.Addr(), moved.Addr())

	failed := 0
	require.Eventually(t, func() bool {
		_, err := p.SendSync(ctx, NewMessage("T", []byte("after")))
		if err != nil {
			failed++
		}
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "sends never reached the moved master")
	assert.Len(t, moved.messages("T"), 1)
	// The re-read waits for routeRecheckMin after the last lookup, so a few
	// sends may fail first; each costs its retries, not a lookup.
	t.Logf("%d sends failed before the route was re-read", failed)

	// Sends stay on the new master.
	for i := 0; i < 5; i++ {
		_, err := p.SendSync(ctx, NewMessage("T", []byte("more")))
		require.NoError(t, err)
	}
	assert.Len(t, moved.messages("T"), 6)
}

// TestRouteSuspectKeepsTheCachedRouteWhenNameServersFail: a suspect route
// is re-read once; if no nameserver answers, the cached route is used as
// before rather than failing the send, and the attempt holds off the next
// re-read as a successful one would.
func TestRouteSuspectKeepsTheCachedRouteWhenNameServersFail(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 2)
	p := MustStartProducer(t, WithNameServer(ns.Addr()), WithRouteRefreshInterval(time.Hour), WithSendTimeout(2*time.Second))
	ctx := testCtx(t)
	_, err := p.SendSync(ctx, NewMessage("T", []byte("1")))
	require.NoError(t, err)

	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ns.Shutdown(shut))
	tr, ok := p.c.cachedRoute("T")
	require.True(t, ok)
	tr.asked.Store(0) // as if the last lookup were long ago
	p.c.suspectRoute("T")
	require.True(t, tr.suspect.Load())

	tried := time.Now().UnixNano()
	_, err = p.SendSync(ctx, NewMessage("T", []byte("2")))
	require.NoError(t, err, "the cached route still works while the nameserver is down")
	assert.False(t, tr.suspect.Load(), "one re-read was tried")
	// The failed re-read counts as a lookup: failed sends do not make the
	// route suspect again before routeRecheckMin, so while the nameservers
	// cannot answer each send does not wait for them.
	assert.GreaterOrEqual(t, tr.asked.Load(), tried, "the failed re-read is not recorded as a lookup")
	assert.Len(t, fb.messages("T"), 2)
}
