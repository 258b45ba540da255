package broker

import (
	"sort"
	"sync"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Client housekeeping defaults (RocketMQ's ClientHousekeepingService).
const (
	// defaultChannelExpiry is how long a client may stay silent (no
	// heartbeat) before the broker drops and closes its channel.
	defaultChannelExpiry = 120 * time.Second
	// defaultClientScanInterval is how often silent channels are looked for.
	defaultClientScanInterval = 10 * time.Second
)

// ClientConn is what the client managers need of a connection;
// *remoting.Conn satisfies it (tests use fakes).
type ClientConn interface {
	ID() uint64
	RemoteAddr() string
	InvokeOneway(req *remoting.Command) error
	Close() error
}

// ClientChannelInfo is one client connection of a producer or consumer
// group, as RocketMQ's ClientChannelInfo.
type ClientChannelInfo struct {
	Conn     ClientConn
	ClientID string
	Language remoting.LanguageCode
	Version  int32
	// LastUpdate is the time of the last heartbeat (guarded by the owning
	// manager's lock).
	LastUpdate time.Time
}

// subscriptionEntry is a registered subscription with its compiled
// expression, so pulls do not parse it again.
type subscriptionEntry struct {
	data     protocol.SubscriptionData
	compiled *compiledSubscription
}

// ConsumerGroupInfo is one consumer group's live members and subscriptions.
// It is guarded by the ConsumerManager's lock; read it through the manager's
// snapshot methods.
type ConsumerGroupInfo struct {
	group            string
	consumeType      protocol.ConsumeType
	messageModel     protocol.MessageModel
	consumeFromWhere protocol.ConsumeFromWhere
	notify           bool
	channels         map[uint64]*ClientChannelInfo
	subs             map[string]*subscriptionEntry
}

// GroupSnapshot is a copy of a consumer group's state.
type GroupSnapshot struct {
	Group            string
	ConsumeType      protocol.ConsumeType
	MessageModel     protocol.MessageModel
	ConsumeFromWhere protocol.ConsumeFromWhere
	Channels         []ClientChannelInfo // sorted by client id
	Subscriptions    map[string]protocol.SubscriptionData
}

// ConsumerManager tracks which clients consume in which group and what they
// subscribe to (RocketMQ's ConsumerManager). When a group's membership
// changes it calls the notify hook with the group's remaining connections
// (NOTIFY_CONSUMER_IDS_CHANGED); the hook is called without locks held and
// must not block.
type ConsumerManager struct {
	now    func() time.Time
	notify func(group string, conns []ClientConn)
	// compile turns a subscription's expression into its filter when the
	// subscription is new or newer: once, never per pull or message.
	compile func(typ, expr string) *compiledSubscription

	mu     sync.RWMutex // guards groups, firstSeen and everything inside them
	groups map[string]*ConsumerGroupInfo
	// firstSeen is when the broker first saw a subscription of "topic@group"
	// (ms). It decides where a brand-new group starts with
	// CONSUME_FROM_LAST_OFFSET (see queryConsumerOffset).
	firstSeen map[string]int64
}

// NewConsumerManager returns an empty manager; notify may be nil.
func NewConsumerManager(now func() time.Time, notify func(group string, conns []ClientConn)) *ConsumerManager {
	if now == nil {
		now = time.Now
	}
	if notify == nil {
		notify = func(string, []ClientConn) {}
	}
	return &ConsumerManager{now: now, notify: notify, compile: compileSubscription,
		groups: make(map[string]*ConsumerGroupInfo), firstSeen: make(map[string]int64)}
}

// ConsumerRegistration is one consumer group entry of a heartbeat.
type ConsumerRegistration struct {
	Group            string
	Channel          ClientChannelInfo
	ConsumeType      protocol.ConsumeType
	MessageModel     protocol.MessageModel
	ConsumeFromWhere protocol.ConsumeFromWhere
	Subscriptions    []protocol.SubscriptionData
	// Notify is the group's notifyConsumerIdsChangedEnable.
	Notify bool
}

// Register adds or refreshes a client of a group and updates the group's
// subscriptions as RocketMQ does (a topic's subscription is replaced by a
// newer subVersion; topics missing from the heartbeat are dropped). It
// reports whether the group's members or subscriptions changed; members are
// then notified when r.Notify is set.
func (m *ConsumerManager) Register(r ConsumerRegistration) bool {
	now := m.now()
	m.mu.Lock()
	g := m.groups[r.Group]
	if g == nil {
		g = &ConsumerGroupInfo{group: r.Group, channels: make(map[uint64]*ClientChannelInfo), subs: make(map[string]*subscriptionEntry)}
		m.groups[r.Group] = g
	}
	g.consumeType, g.messageModel, g.consumeFromWhere, g.notify = r.ConsumeType, r.MessageModel, r.ConsumeFromWhere, r.Notify
	changed := false
	id := r.Channel.Conn.ID()
	if ch := g.channels[id]; ch == nil {
		info := r.Channel
		info.LastUpdate = now
		g.channels[id] = &info
		changed = true
	} else {
		ch.LastUpdate = now
	}
	seen := make(map[string]bool, len(r.Subscriptions))
	for _, sd := range r.Subscriptions {
		seen[sd.Topic] = true
		old := g.subs[sd.Topic]
		if old == nil || sd.SubVersion > old.data.SubVersion {
			g.subs[sd.Topic] = &subscriptionEntry{data: sd, compiled: m.compile(sd.ExpressionType, sd.SubString)}
			if old == nil {
				changed = true
			}
		}
		key := sd.Topic + offsetKeySeparator + r.Group
		if _, ok := m.firstSeen[key]; !ok {
			m.firstSeen[key] = now.UnixMilli()
		}
	}
	for topic := range g.subs {
		if !seen[topic] {
			delete(g.subs, topic)
			changed = true
		}
	}
	var conns []ClientConn
	if changed && r.Notify {
		conns = g.connsLocked()
	}
	m.mu.Unlock()
	if conns != nil {
		m.notify(r.Group, conns)
	}
	return changed
}

// Unregister removes one connection from a group (UNREGISTER_CLIENT).
func (m *ConsumerManager) Unregister(group string, connID uint64) {
	m.mu.Lock()
	conns, notify := m.removeLocked(group, connID)
	m.mu.Unlock()
	if notify {
		m.notify(group, conns)
	}
}

// removeLocked drops a channel; it returns the remaining members to notify.
// Lock should be held.
func (m *ConsumerManager) removeLocked(group string, connID uint64) ([]ClientConn, bool) {
	g := m.groups[group]
	if g == nil {
		return nil, false
	}
	if _, ok := g.channels[connID]; !ok {
		return nil, false
	}
	delete(g.channels, connID)
	if len(g.channels) == 0 {
		delete(m.groups, group)
		return nil, false
	}
	if !g.notify {
		return nil, false
	}
	return g.connsLocked(), true
}

// ConnClosed removes a closed connection from every group at once and
// notifies the groups' remaining members.
func (m *ConsumerManager) ConnClosed(connID uint64) {
	var notes []groupNotice
	m.mu.Lock()
	for name, g := range m.groups {
		if _, ok := g.channels[connID]; !ok {
			continue
		}
		if conns, ok := m.removeLocked(name, connID); ok {
			notes = append(notes, groupNotice{name, conns})
		}
	}
	m.mu.Unlock()
	for _, n := range notes {
		m.notify(n.group, n.conns)
	}
}

// ScanExpired drops channels silent for longer than expiry, notifies their
// groups and returns the dropped connections (the caller closes them).
func (m *ConsumerManager) ScanExpired(expiry time.Duration) []ClientConn {
	deadline := m.now().Add(-expiry)
	type member struct {
		group string
		id    uint64
	}
	var stale []member
	var expired []ClientConn
	var notes []groupNotice
	m.mu.Lock()
	for name, g := range m.groups {
		for id, ch := range g.channels {
			if ch.LastUpdate.Before(deadline) {
				stale = append(stale, member{name, id})
				expired = append(expired, ch.Conn)
			}
		}
	}
	for _, s := range stale {
		if conns, ok := m.removeLocked(s.group, s.id); ok {
			notes = append(notes, groupNotice{s.group, conns})
		}
	}
	m.mu.Unlock()
	// A group losing two members at once is notified twice; the later
	// notice carries the current list and clients simply rebalance again.
	for _, n := range notes {
		m.notify(n.group, n.conns)
	}
	return expired
}

// groupNotice is a membership change to tell a group's remaining members.
type groupNotice struct {
	group string
	conns []ClientConn
}

// connsLocked returns the group's connections. Lock should be held.
func (g *ConsumerGroupInfo) connsLocked() []ClientConn {
	out := make([]ClientConn, 0, len(g.channels))
	for _, ch := range g.channels {
		out = append(out, ch.Conn)
	}
	return out
}

// Subscription returns the group's registered subscription of topic and its
// compiled expression. groupOnline reports whether the group has any member.
func (m *ConsumerManager) Subscription(group, topic string) (sd protocol.SubscriptionData, compiled *compiledSubscription, found, groupOnline bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return protocol.SubscriptionData{}, nil, false, false
	}
	e := g.subs[topic]
	if e == nil {
		return protocol.SubscriptionData{}, nil, false, true
	}
	return e.data, e.compiled, true, true
}

// GroupMode returns the group's message model and start point, and whether
// the group is online.
func (m *ConsumerManager) GroupMode(group string) (protocol.MessageModel, protocol.ConsumeFromWhere, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return "", "", false
	}
	return g.messageModel, g.consumeFromWhere, true
}

// FirstSeen returns when the broker first saw the group subscribe to topic
// (ms), or false.
func (m *ConsumerManager) FirstSeen(group, topic string) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts, ok := m.firstSeen[topic+offsetKeySeparator+group]
	return ts, ok
}

// ClientIDs returns the client ids of the group's members, sorted.
func (m *ConsumerManager) ClientIDs(group string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return nil
	}
	out := make([]string, 0, len(g.channels))
	for _, ch := range g.channels {
		out = append(out, ch.ClientID)
	}
	sort.Strings(out)
	return out
}

// Snapshot copies the group's state; false if the group has no member.
func (m *ConsumerManager) Snapshot(group string) (GroupSnapshot, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return GroupSnapshot{}, false
	}
	s := GroupSnapshot{
		Group: g.group, ConsumeType: g.consumeType, MessageModel: g.messageModel, ConsumeFromWhere: g.consumeFromWhere,
		Channels:      make([]ClientChannelInfo, 0, len(g.channels)),
		Subscriptions: make(map[string]protocol.SubscriptionData, len(g.subs)),
	}
	for _, ch := range g.channels {
		s.Channels = append(s.Channels, *ch)
	}
	sort.Slice(s.Channels, func(i, j int) bool { return s.Channels[i].ClientID < s.Channels[j].ClientID })
	for t, e := range g.subs {
		s.Subscriptions[t] = e.data
	}
	return s, true
}

// Groups returns the names of the online groups, sorted.
func (m *ConsumerManager) Groups() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.groups))
	for g := range m.groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// ProducerManager tracks the connections of each producer group (RocketMQ's
// ProducerManager); transaction checks pick a live one, and replies find
// their requester by client id (FindConn).
type ProducerManager struct {
	now func() time.Time

	mu     sync.RWMutex // guards groups, the channels inside and byClient
	groups map[string]map[uint64]*ClientChannelInfo
	// byClient is the latest connection each client id heartbeated on
	// (RocketMQ's clientChannelTable), for pushing replies.
	byClient map[string]ClientConn
}

// NewProducerManager returns an empty manager.
func NewProducerManager(now func() time.Time) *ProducerManager {
	if now == nil {
		now = time.Now
	}
	return &ProducerManager{now: now, groups: make(map[string]map[uint64]*ClientChannelInfo), byClient: make(map[string]ClientConn)}
}

// FindConn returns the connection of the client with id clientID, or nil
// when no producer of that client is registered here.
func (m *ProducerManager) FindConn(clientID string) ClientConn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byClient[clientID]
}

// NoteRequester records conn as the way to client clientID unless a live
// connection of it is known: a requester's request message names it
// (REPLY_TO_CLIENT), so its reply can be pushed before its first heartbeat
// reaches this broker (the official Go client heartbeats only on its 30 s
// tick). A heartbeat replaces the entry; closing conn removes it.
func (m *ProducerManager) NoteRequester(clientID string, conn ClientConn) {
	m.mu.RLock()
	old := m.byClient[clientID]
	m.mu.RUnlock()
	if old != nil && old.ID() == conn.ID() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.byClient[clientID]; old == nil || !m.stillRegisteredLocked(old.ID()) {
		m.byClient[clientID] = conn
	}
}

// forgetClientLocked drops clientID's entry in byClient if it is the
// connection connID. Lock should be held.
func (m *ProducerManager) forgetClientLocked(clientID string, connID uint64) {
	if c := m.byClient[clientID]; c != nil && c.ID() == connID {
		delete(m.byClient, clientID)
	}
}

// stillRegisteredLocked reports whether connection connID is in any group.
// Lock should be held.
func (m *ProducerManager) stillRegisteredLocked(connID uint64) bool {
	for _, chans := range m.groups {
		if chans[connID] != nil {
			return true
		}
	}
	return false
}

// Register adds or refreshes a producer connection of group.
func (m *ProducerManager) Register(group string, ch ClientChannelInfo) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	chans := m.groups[group]
	if chans == nil {
		chans = make(map[uint64]*ClientChannelInfo)
		m.groups[group] = chans
	}
	id := ch.Conn.ID()
	if ch.ClientID != "" {
		m.byClient[ch.ClientID] = ch.Conn
	}
	if old := chans[id]; old != nil {
		old.LastUpdate = now
		return
	}
	ch.LastUpdate = now
	chans[id] = &ch
}

// Unregister removes one connection of group.
func (m *ProducerManager) Unregister(group string, connID uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if chans := m.groups[group]; chans != nil {
		ch := chans[connID]
		delete(chans, connID)
		if len(chans) == 0 {
			delete(m.groups, group)
		}
		if ch != nil && !m.stillRegisteredLocked(connID) {
			m.forgetClientLocked(ch.ClientID, connID)
		}
	}
}

// ConnClosed removes a closed connection from every group.
func (m *ProducerManager) ConnClosed(connID uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, c := range m.byClient { // also the entries NoteRequester made
		if c.ID() == connID {
			delete(m.byClient, id)
		}
	}
	for g, chans := range m.groups {
		delete(chans, connID)
		if len(chans) == 0 {
			delete(m.groups, g)
		}
	}
}

// ScanExpired drops channels silent for longer than expiry and returns them.
func (m *ProducerManager) ScanExpired(expiry time.Duration) []ClientConn {
	deadline := m.now().Add(-expiry)
	var out []ClientConn
	m.mu.Lock()
	defer m.mu.Unlock()
	for g, chans := range m.groups {
		for id, ch := range chans {
			if ch.LastUpdate.Before(deadline) {
				out = append(out, ch.Conn)
				delete(chans, id)
				m.forgetClientLocked(ch.ClientID, id)
			}
		}
		if len(chans) == 0 {
			delete(m.groups, g)
		}
	}
	return out
}

// Channels returns copies of the group's channels, sorted by client id.
func (m *ProducerManager) Channels(group string) []ClientChannelInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]ClientChannelInfo, 0, len(m.groups[group]))
	for _, ch := range m.groups[group] {
		out = append(out, *ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// GroupsOfTopic returns the online groups subscribing to topic, sorted.
func (m *ConsumerManager) GroupsOfTopic(topic string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for name, g := range m.groups {
		if g.subs[topic] != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
