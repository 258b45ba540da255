package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

const bcSuspendFlags = protocol.PullFlagSuspend

func TestPullLongPollWakesOnSend(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "LP", 2)
	cl := baClient(t)
	bcHeartbeat(t, cl, b.Addr(), "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("LP", "*"))

	// Park a pull on an empty queue (NO_MESSAGE_IN_QUEUE at 0) and one at
	// the end of a queue with messages (OFFSET_OVERFLOW_ONE).
	bcSend(t, cl, b.Addr(), "LP", 1, "m0", "", "")
	bcWaitQueue(t, b, "LP", 1, 1)
	empty := bcAsyncPull(t, cl, b.Addr(), bcPullHeader("cg", "LP", 0, 0, bcSuspendFlags, 20000))
	atEnd := bcAsyncPull(t, cl, b.Addr(), bcPullHeader("cg", "LP", 1, 1, bcSuspendFlags, 20000))
	require.Eventually(t, func() bool { return b.consume.hold.held() == 2 }, 5*time.Second, time.Millisecond)
	select {
	case <-empty:
		t.Fatal("a pull with nothing to read must be parked")
	case <-time.After(100 * time.Millisecond):
	}

	for _, q := range []struct {
		ch    <-chan *remoting.Command
		queue int32
		off   int64
	}{{empty, 0, 0}, {atEnd, 1, 1}} {
		start := time.Now()
		bcSend(t, cl, b.Addr(), "LP", q.queue, fmt.Sprintf("wake-%d", q.queue), "", "")
		var resp *remoting.Command
		select {
		case resp = <-q.ch:
		case <-time.After(5 * time.Second):
			t.Fatal("the parked pull was not answered after a send")
		}
		latency := time.Since(start)
		require.NotNil(t, resp)
		r := bcDecodePull(t, resp)
		require.Equal(t, remoting.Success, r.code, r.remark)
		assert.Equal(t, []string{fmt.Sprintf("wake-%d", q.queue)}, r.bodies)
		assert.Equal(t, []int64{q.off}, r.offs)
		assert.Equal(t, q.off+1, r.hdr.NextBeginOffset)
		assert.Equal(t, q.off+1, r.hdr.MaxOffset)
		assert.Less(t, latency, 500*time.Millisecond, "a message sent while a consumer waits must reach it at once")
		t.Logf("queue %d: send-to-pull latency %v", q.queue, latency)
	}
	assert.Equal(t, 0, b.consume.hold.held())
}

func TestPullSuspendTimeoutAnswersNotFound(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "TO", 1)
	cl := baClient(t)
	bcHeartbeat(t, cl, b.Addr(), "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("TO", "*"))

	start := time.Now()
	r := bcPull(t, cl, b.Addr(), bcPullHeader("cg", "TO", 0, 0, bcSuspendFlags, 300))
	elapsed := time.Since(start)
	assert.Equal(t, remoting.PullNotFound, r.code)
	assert.Equal(t, int64(0), r.hdr.NextBeginOffset)
	assert.GreaterOrEqual(t, elapsed, 300*time.Millisecond)
	assert.Less(t, elapsed, 2*time.Second)

	// Without the SUSPEND flag the answer comes at once.
	start = time.Now()
	r = bcPull(t, cl, b.Addr(), bcPullHeader("cg", "TO", 0, 0, 0, 20000))
	assert.Equal(t, remoting.PullNotFound, r.code)
	assert.Less(t, time.Since(start), 300*time.Millisecond)
}

func TestPullTagFilterFromHeartbeat(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, func(b *Broker) { b.consume.cfg.holdRecheck = time.Hour })
	bcCreateTopic(t, b, "TF", 1)
	cl := baClient(t)
	addr := b.Addr()
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("TF", "tagA || tagC"))
	for i, tag := range []string{"tagA", "tagB", "tagC", "tagB"} {
		bcSend(t, cl, addr, "TF", 0, fmt.Sprintf("m%d", i), tag, "")
	}
	bcWaitQueue(t, b, "TF", 0, 4)

	// The Go push consumer sends no subscription: the heartbeat's applies.
	r := bcPull(t, cl, addr, bcPullHeader("cg", "TF", 0, 0, 0, 0))
	require.Equal(t, remoting.Success, r.code, r.remark)
	assert.Equal(t, []string{"tagA", "tagC"}, r.tags)
	assert.Equal(t, []int64{0, 2}, r.offs)
	assert.Equal(t, int64(4), r.hdr.NextBeginOffset, "the scan covered every entry")

	// With the SUBSCRIPTION flag the request's expression applies.
	h := bcPullHeader("cg", "TF", 0, 0, protocol.PullFlagSubscription, 0)
	h.Subscription = "tagB"
	r = bcPull(t, cl, addr, h)
	require.Equal(t, remoting.Success, r.code, r.remark)
	assert.Equal(t, []string{"tagB", "tagB"}, r.tags)

	// Entries scanned but none matched: PULL_RETRY_IMMEDIATELY past them.
	r = bcPull(t, cl, addr, bcPullHeader("cg", "TF", 0, 3, 0, 0))
	assert.Equal(t, remoting.PullRetryImmediately, r.code)
	assert.Equal(t, int64(4), r.hdr.NextBeginOffset)

	// A parked pull is not woken by a message its filter rejects, and is
	// by one it accepts.
	ch := bcAsyncPull(t, cl, addr, bcPullHeader("cg", "TF", 0, 4, bcSuspendFlags, 20000))
	require.Eventually(t, func() bool { return b.consume.hold.held() == 1 }, 5*time.Second, time.Millisecond)
	bcSend(t, cl, addr, "TF", 0, "skip", "tagB", "")
	select {
	case <-ch:
		t.Fatal("a message the filter rejects must not wake the pull")
	case <-time.After(200 * time.Millisecond):
	}
	bcSend(t, cl, addr, "TF", 0, "take", "tagC", "")
	select {
	case resp := <-ch:
		r := bcDecodePull(t, resp)
		require.Equal(t, remoting.Success, r.code, r.remark)
		assert.Equal(t, []string{"take"}, r.bodies)
		assert.Equal(t, int64(6), r.hdr.NextBeginOffset)
	case <-time.After(5 * time.Second):
		t.Fatal("a matching message must wake the pull")
	}
}

func TestPullStatusCodes(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "SC", 2)
	cl := baClient(t)
	addr := b.Addr()
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("SC", "*"))
	for i := range 3 {
		bcSend(t, cl, addr, "SC", 1, fmt.Sprintf("m%d", i), "", "")
	}
	bcWaitQueue(t, b, "SC", 1, 3)
	tests := []struct {
		name      string
		queue     int32
		offset    int64
		code      remoting.ResponseCode
		next      int64
		msgs      int
		min, maxO int64
	}{
		{"empty queue at 0", 0, 0, remoting.PullNotFound, 0, 0, 0, 0},
		{"empty queue past 0", 0, 5, remoting.PullOffsetMoved, 0, 0, 0, 0},
		{"found", 1, 1, remoting.Success, 3, 2, 0, 3},
		{"at the end", 1, 3, remoting.PullNotFound, 3, 0, 0, 3},
		{"beyond the end", 1, 10, remoting.PullOffsetMoved, 0, 0, 0, 3}, // min 0: RocketMQ moves to 0
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bcPull(t, cl, addr, bcPullHeader("cg", "SC", tc.queue, tc.offset, 0, 0))
			assert.Equal(t, tc.code, r.code, r.remark)
			assert.Equal(t, tc.next, r.hdr.NextBeginOffset)
			assert.Len(t, r.bodies, tc.msgs)
			assert.Equal(t, tc.min, r.hdr.MinOffset)
			assert.Equal(t, tc.maxO, r.hdr.MaxOffset)
			assert.Equal(t, int64(0), r.hdr.SuggestWhichBrokerID)
		})
	}

	// Rejections, each with RocketMQ's code.
	newer := bcPullHeader("cg", "SC", 0, 0, 0, 0)
	newer.SubVersion = time.Now().Add(time.Hour).UnixNano()
	missing := bcPullReq(bcPullHeader("cg", "SC", 0, 0, 0, 0))
	delete(missing.ExtFields, "queueOffset")
	sql := bcPullHeader("cg", "SC", 0, 0, protocol.PullFlagSubscription, 0)
	sql.ExpressionType = protocol.ExpressionSQL92
	sql.Subscription = "a > 1"
	rejections := []struct {
		name string
		req  *remoting.Command
		code remoting.ResponseCode
	}{
		{"unknown topic", bcPullReq(bcPullHeader("cg", "Nope", 0, 0, 0, 0)), remoting.TopicNotExist},
		{"queue id out of range", bcPullReq(bcPullHeader("cg", "SC", 2, 0, 0, 0)), remoting.SystemError},
		{"negative queue id", bcPullReq(bcPullHeader("cg", "SC", -1, 0, 0, 0)), remoting.SystemError},
		{"no heartbeat from the group", bcPullReq(bcPullHeader("silent", "SC", 0, 0, 0, 0)), remoting.SubscriptionNotExist},
		{"topic not subscribed", bcPullReq(bcPullHeader("cg", "%RETRY%cg", 0, 0, 0, 0)), remoting.SubscriptionNotExist},
		{"subscription not latest", bcPullReq(newer), remoting.SubscriptionNotLatest},
		{"missing header key", missing, remoting.SystemError},
		{"sql92 filter while enablePropertyFilter is off", bcPullReq(sql), remoting.SystemError},
	}
	for _, tc := range rejections {
		t.Run(tc.name, func(t *testing.T) {
			resp := baInvoke(t, cl, addr, tc.req)
			assert.Equal(t, int32(tc.code), resp.Code, resp.Remark)
			assert.NotEmpty(t, resp.Remark)
		})
	}
	// The heartbeat subscribed %RETRY%cg? No: bcHeartbeat only sent SC, so
	// the retry topic exists (created by the heartbeat) but is not subscribed.
	require.NotNil(t, b.topics.Get("%RETRY%cg"))

	t.Run("group may not consume", func(t *testing.T) {
		c := *b.consume.groups.Get("cg")
		c.ConsumeEnable = false
		body, err := jsonMarshal(&c)
		require.NoError(t, err)
		resp := baInvoke(t, cl, addr, bcReq(remoting.UpdateAndCreateSubscription, nil, body))
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
		resp = baInvoke(t, cl, addr, bcPullReq(bcPullHeader("cg", "SC", 1, 0, 0, 0)))
		assert.Equal(t, int32(remoting.NoPermission), resp.Code, resp.Remark)
	})
}

func TestPullGroupMustExistWithoutAutoCreate(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, func(b *Broker) { b.consume.groups.autoCreate = false })
	bcCreateTopic(t, b, "NG", 1)
	cl := baClient(t)
	h := bcPullHeader("unknown", "NG", 0, 0, protocol.PullFlagSubscription, 0)
	h.Subscription = "*"
	resp := baInvoke(t, cl, b.Addr(), bcPullReq(h))
	assert.Equal(t, int32(remoting.SubscriptionGroupNotExist), resp.Code, resp.Remark)
}

func TestPullCommitOffsetAndHoldLimits(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, func(b *Broker) { b.consume.cfg.maxHeldPulls = 1 })
	bcCreateTopic(t, b, "CO", 2)
	cl := baClient(t)
	addr := b.Addr()
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("CO", "*"))
	for range 3 {
		bcSend(t, cl, addr, "CO", 0, "x", "", "")
	}
	bcWaitQueue(t, b, "CO", 0, 3)
	h := bcPullHeader("cg", "CO", 0, 2, protocol.PullFlagCommitOffset, 0)
	h.CommitOffset = 2
	r := bcPull(t, cl, addr, h)
	require.Equal(t, remoting.Success, r.code)
	q := bcReq(remoting.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "CO", QueueID: 0}, nil)
	assert.Equal(t, int64(2), bcOffset(t, baInvoke(t, cl, addr, q)), "commitOffset of the pull is stored")

	// One parked pull fills the hold; the next is refused with SYSTEM_BUSY.
	first := bcAsyncPull(t, cl, addr, bcPullHeader("cg", "CO", 1, 0, bcSuspendFlags, 20000))
	require.Eventually(t, func() bool { return b.consume.hold.held() == 1 }, 5*time.Second, time.Millisecond)
	resp := baInvoke(t, cl, addr, bcPullReq(bcPullHeader("cg", "CO", 0, 3, bcSuspendFlags, 20000)))
	assert.Equal(t, int32(remoting.SystemBusy), resp.Code, resp.Remark)

	// Parked pulls are answered when the broker stops holding, with
	// SYSTEM_BUSY so clients back off instead of re-pulling into the close.
	b.consume.stopHolding()
	select {
	case resp := <-first:
		require.NotNil(t, resp)
		assert.Equal(t, int32(remoting.SystemBusy), resp.Code, resp.Remark)
	case <-time.After(5 * time.Second):
		t.Fatal("stopHolding must answer parked pulls")
	}
	resp = baInvoke(t, cl, addr, bcPullReq(bcPullHeader("cg", "CO", 0, 3, bcSuspendFlags, 20000)))
	assert.Equal(t, int32(remoting.SystemBusy), resp.Code, "no parking after stopHolding")
	assert.Contains(t, resp.Remark, "SHUTDOWN")
}

func TestShutdownAnswersParkedPulls(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "SD", 1)
	cl := baClient(t)
	bcHeartbeat(t, cl, b.Addr(), "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("SD", "*"))
	ch := bcAsyncPull(t, cl, b.Addr(), bcPullHeader("cg", "SD", 0, 0, bcSuspendFlags, 20000))
	require.Eventually(t, func() bool { return b.consume.hold.held() == 1 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	mustShutdownBroker(t, b)
	select {
	case resp := <-ch:
		require.NotNil(t, resp, "the parked pull gets an answer, not a closed connection")
		assert.Equal(t, int32(remoting.SystemBusy), resp.Code, resp.Remark)
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown left a parked pull unanswered")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestLongPollManyConsumersNoLostWakeups runs a pulling consumer per queue
// against a producer sending in bursts. The periodic max-offset recheck is
// off, so every wake-up must come from the arriving listener: a lost one
// would stall a consumer until its 20 s suspend timeout.
func TestLongPollManyConsumersNoLostWakeups(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, func(b *Broker) { b.consume.cfg.holdRecheck = time.Hour })
	const queues, perQueue = 4, 60
	bcCreateTopic(t, b, "MC", queues)
	addr := b.Addr()
	bcHeartbeat(t, baClient(t), addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("MC", "*"))

	type result struct {
		queue int32
		got   []string
		err   string
	}
	results := make(chan result, queues)
	deadline := time.Now().Add(15 * time.Second)
	for q := range int32(queues) {
		cl := baClient(t)
		go func() {
			res := result{queue: q}
			defer func() { results <- res }()
			offset := int64(0)
			for len(res.got) < perQueue {
				if time.Now().After(deadline) {
					res.err = fmt.Sprintf("stalled at offset %d", offset)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
				resp, err := cl.InvokeSync(ctx, addr, bcPullReq(bcPullHeader("cg", "MC", q, offset, bcSuspendFlags, 20000)))
				cancel()
				if err != nil {
					res.err = err.Error()
					return
				}
				var h protocol.PullMessageResponseHeader
				if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
					res.err = err.Error()
					return
				}
				for body := resp.Body; len(body) > 0; {
					rec, err := message.ParseRecord(body)
					if err != nil {
						res.err = err.Error()
						return
					}
					res.got = append(res.got, string(rec.Body()))
					body = body[rec.Size():]
				}
				offset = h.NextBeginOffset
			}
		}()
	}
	producer := baClient(t)
	for i := range perQueue {
		for q := range int32(queues) {
			bcSend(t, producer, addr, "MC", q, fmt.Sprintf("%d-%d", q, i), "", "")
		}
		if i%10 == 9 {
			time.Sleep(20 * time.Millisecond) // let the consumers park again
		}
	}
	for range queues {
		r := <-results
		require.Empty(t, r.err, "queue %d", r.queue)
		want := make([]string, perQueue)
		for i := range want {
			want[i] = fmt.Sprintf("%d-%d", r.queue, i)
		}
		assert.Equal(t, want, r.got, "queue %d: every message once, in order", r.queue)
	}
}

func TestPullOnSlaveRetriesInsteadOfMovingOffsets(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.BrokerRole = conf.RoleSlave
	cfg.BrokerID = 1
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	bcCreateTopic(t, b, "SL", 1)
	cl := baClient(t)
	bcHeartbeat(t, cl, b.Addr(), "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, bcTagSub("SL", "*"))

	h := bcPullHeader("cg", "SL", 0, 5, protocol.PullFlagCommitOffset, 0)
	h.CommitOffset = 5
	r := bcPull(t, cl, b.Addr(), h)
	assert.Equal(t, remoting.PullRetryImmediately, r.code, "a lagging slave must not move the consumer's offset")
	assert.Equal(t, int64(5), r.hdr.NextBeginOffset)
	assert.Equal(t, int64(-1), b.consume.offsets.Query("cg", "SL", 0), "a slave does not store commitOffset")
}

// TestPullInlineHandsOffWhatMayBlock checks that the event loop answers a
// pull of a known group itself and hands one that must create its group to
// the pull pool, having created nothing.
func TestPullInlineHandsOffWhatMayBlock(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "PI", 1)
	h := bcPullHeader("new-group", "PI", 0, 0, protocol.PullFlagSubscription, 0)
	h.Subscription = "*"
	resp, err := b.consume.processPullInline(&remoting.Conn{}, bcPullReq(h))
	assert.ErrorIs(t, err, remoting.ErrRunOnPool)
	assert.Nil(t, resp)
	assert.Nil(t, b.consume.groups.Get("new-group"), "a handed-off pull created nothing")

	// Through the wire the pool creates the group; from then on the loop
	// answers.
	cl := baClient(t)
	assert.Equal(t, remoting.PullNotFound, bcPull(t, cl, b.Addr(), h).code)
	require.NotNil(t, b.consume.groups.Get("new-group"))
	resp, err = b.consume.processPullInline(&remoting.Conn{}, bcPullReq(h))
	require.NoError(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, int32(remoting.PullNotFound), resp.Code, resp.Remark)
}

// The broker a pull answer suggests follows RocketMQ's rule (store.md
// §10.5): always the master unless slaveReadEnable, then the group's
// whichBrokerWhenConsumeSlowly for a consumer reading from disk, else the
// group's brokerId.
func TestPullSuggestWhichBroker(t *testing.T) {
	group := protocol.NewSubscriptionGroupConfig("G")
	group.BrokerID, group.WhichBrokerWhenConsumeSlowly = 2, 1
	for _, tc := range []struct {
		slaveRead, behind bool
		want              int64
	}{
		{false, false, 0}, {false, true, 0}, {true, false, 2}, {true, true, 1},
	} {
		cfg := testBrokerConfig(t)
		cfg.SlaveReadEnable = tc.slaveRead
		cs := &consumeState{b: &Broker{cfg: cfg}}
		got := cs.suggestBroker(&pullRequest{group: group}, &store.GetMessageResult{SuggestPullingFromSlave: tc.behind})
		assert.Equal(t, tc.want, got, "slaveReadEnable=%v behind=%v", tc.slaveRead, tc.behind)
	}
}
