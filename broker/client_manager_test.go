package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// fakeConn records what the managers send and whether they closed it.
type fakeConn struct {
	id uint64

	mu     sync.Mutex
	sent   []*remoting.Command
	closed bool
}

func (c *fakeConn) ID() uint64         { return c.id }
func (c *fakeConn) RemoteAddr() string { return "127.0.0.1:1" }
func (c *fakeConn) InvokeOneway(req *remoting.Command) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, req)
	return nil
}
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// notifyLog records the notify hook's calls.
type notifyLog struct {
	mu    sync.Mutex
	calls []notifyCall
}

type notifyCall struct {
	group string
	ids   []uint64
}

func (n *notifyLog) hook(group string, conns []ClientConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make([]uint64, 0, len(conns))
	for _, c := range conns {
		ids = append(ids, c.ID())
	}
	n.calls = append(n.calls, notifyCall{group, ids})
}

func (n *notifyLog) take() []notifyCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.calls
	n.calls = nil
	return out
}

func reg(group string, c *fakeConn, clientID string, subs ...protocol.SubscriptionData) ConsumerRegistration {
	return ConsumerRegistration{
		Group: group, Channel: ClientChannelInfo{Conn: c, ClientID: clientID, Language: remoting.LangGo, Version: 317},
		ConsumeType: protocol.ConsumePassively, MessageModel: protocol.Clustering,
		ConsumeFromWhere: protocol.ConsumeFromLastOffset, Subscriptions: subs, Notify: true,
	}
}

func sub(topic, expr string, version int64) protocol.SubscriptionData {
	return protocol.SubscriptionData{Topic: topic, SubString: expr, SubVersion: version, ExpressionType: protocol.ExpressionTag}
}

func TestConsumerManagerMembershipAndNotify(t *testing.T) {
	clk := newFakeClock()
	var n notifyLog
	m := NewConsumerManager(clk.Now, n.hook)
	c1, c2 := &fakeConn{id: 1}, &fakeConn{id: 2}

	assert.True(t, m.Register(reg("cg", c1, "ip@1", sub("T", "tagA || tagB", 10))))
	assert.Equal(t, []notifyCall{{"cg", []uint64{1}}}, n.take())
	assert.False(t, m.Register(reg("cg", c1, "ip@1", sub("T", "tagA || tagB", 10))), "a repeated heartbeat changes nothing")
	assert.Empty(t, n.take())

	assert.True(t, m.Register(reg("cg", c2, "ip@2", sub("T", "tagA || tagB", 10))))
	calls := n.take()
	require.Len(t, calls, 1)
	assert.ElementsMatch(t, []uint64{1, 2}, calls[0].ids, "every member hears of the change")
	assert.Equal(t, []string{"ip@1", "ip@2"}, m.ClientIDs("cg"))

	sd, f, found, online := m.Subscription("cg", "T")
	require.True(t, found)
	assert.True(t, online)
	assert.Equal(t, "tagA || tagB", sd.SubString)
	assert.True(t, f.filter.IsMatchedByConsumeQueue(message.TagsHashCode("tagA")))
	assert.False(t, f.filter.IsMatchedByConsumeQueue(message.TagsHashCode("tagC")))
	_, _, found, online = m.Subscription("cg", "Other")
	assert.False(t, found)
	assert.True(t, online)
	_, _, _, online = m.Subscription("nobody", "T")
	assert.False(t, online)

	// A newer subVersion replaces the filter; an older one does not.
	m.Register(reg("cg", c1, "ip@1", sub("T", "tagC", 11)))
	_, f, _, _ = m.Subscription("cg", "T")
	assert.True(t, f.filter.IsMatchedByConsumeQueue(message.TagsHashCode("tagC")))
	m.Register(reg("cg", c2, "ip@2", sub("T", "tagA", 5)))
	sd, _, _, _ = m.Subscription("cg", "T")
	assert.Equal(t, "tagC", sd.SubString)
	n.take()

	// Closing a connection removes it at once and tells the rest.
	m.ConnClosed(1)
	assert.Equal(t, []notifyCall{{"cg", []uint64{2}}}, n.take())
	assert.Equal(t, []string{"ip@2"}, m.ClientIDs("cg"))
	m.Unregister("cg", 2)
	assert.Empty(t, n.take(), "nobody is left to notify")
	assert.Nil(t, m.ClientIDs("cg"))
	_, ok := m.Snapshot("cg")
	assert.False(t, ok)
}

func TestConsumerManagerExpiryAndFirstSeen(t *testing.T) {
	clk := newFakeClock()
	var n notifyLog
	m := NewConsumerManager(clk.Now, n.hook)
	c1, c2 := &fakeConn{id: 1}, &fakeConn{id: 2}
	start := clk.Now().UnixMilli()
	m.Register(reg("cg", c1, "ip@1", sub("T", "*", 1)))
	clk.Advance(100 * time.Second)
	m.Register(reg("cg", c2, "ip@2", sub("T", "*", 1), sub("U", "*", 1)))
	n.take()

	ts, ok := m.FirstSeen("cg", "T")
	require.True(t, ok)
	assert.Equal(t, start, ts, "the first subscription time sticks")
	ts, ok = m.FirstSeen("cg", "U")
	require.True(t, ok)
	assert.Equal(t, start+100_000, ts)

	clk.Advance(30 * time.Second) // c1 silent 130 s, c2 30 s
	expired := m.ScanExpired(120 * time.Second)
	require.Len(t, expired, 1)
	assert.Equal(t, uint64(1), expired[0].ID())
	assert.Equal(t, []notifyCall{{"cg", []uint64{2}}}, n.take())
	snap, ok := m.Snapshot("cg")
	require.True(t, ok)
	require.Len(t, snap.Channels, 1)
	assert.Equal(t, "ip@2", snap.Channels[0].ClientID)
	assert.Contains(t, snap.Subscriptions, "U")
	assert.Equal(t, []string{"cg"}, m.Groups())
	model, where, ok := m.GroupMode("cg")
	assert.True(t, ok)
	assert.Equal(t, protocol.Clustering, model)
	assert.Equal(t, protocol.ConsumeFromLastOffset, where)
}

func TestProducerManager(t *testing.T) {
	clk := newFakeClock()
	m := NewProducerManager(clk.Now)
	c1, c2 := &fakeConn{id: 1}, &fakeConn{id: 2}
	m.Register("pg", ClientChannelInfo{Conn: c1, ClientID: "a"})
	clk.Advance(100 * time.Second)
	m.Register("pg", ClientChannelInfo{Conn: c2, ClientID: "b"})
	m.Register("tx", ClientChannelInfo{Conn: c2, ClientID: "b"})
	require.Len(t, m.Channels("pg"), 2)

	clk.Advance(30 * time.Second)
	expired := m.ScanExpired(120 * time.Second)
	require.Len(t, expired, 1)
	assert.Equal(t, uint64(1), expired[0].ID())
	m.ConnClosed(2)
	assert.Empty(t, m.Channels("pg"))
	assert.Empty(t, m.Channels("tx"))
	m.Register("pg", ClientChannelInfo{Conn: c1, ClientID: "a"})
	m.Unregister("pg", 1)
	assert.Empty(t, m.Channels("pg"))
}

// TestProducerManagerFindConn: replies find their requester by client id
// through heartbeats and through a noted request, and lose it when the
// connection closes, expires or unregisters.
func TestProducerManagerFindConn(t *testing.T) {
	clk := newFakeClock()
	m := NewProducerManager(clk.Now)
	c1, c2, c3 := &fakeConn{id: 1}, &fakeConn{id: 2}, &fakeConn{id: 3}
	assert.Nil(t, m.FindConn("a"))
	m.Register("pg", ClientChannelInfo{Conn: c1, ClientID: "a"})
	assert.Same(t, c1, m.FindConn("a"))
	m.NoteRequester("a", c2)
	assert.Same(t, c1, m.FindConn("a"), "a heartbeated connection is not replaced by a noted one")
	m.Unregister("pg", 1)
	assert.Nil(t, m.FindConn("a"))

	m.NoteRequester("b", c2)
	assert.Same(t, c2, m.FindConn("b"), "known from its request before any heartbeat")
	m.Register("pg", ClientChannelInfo{Conn: c3, ClientID: "b"})
	assert.Same(t, c3, m.FindConn("b"), "the heartbeat wins")
	m.ConnClosed(3)
	assert.Nil(t, m.FindConn("b"))
	m.NoteRequester("b", c2)
	m.ConnClosed(2)
	assert.Nil(t, m.FindConn("b"), "a noted connection goes when it closes")

	m.Register("pg", ClientChannelInfo{Conn: c1, ClientID: "c"})
	clk.Advance(200 * time.Second)
	require.Len(t, m.ScanExpired(120*time.Second), 1)
	assert.Nil(t, m.FindConn("c"))
}
