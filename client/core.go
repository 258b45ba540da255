package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// nsTimeout bounds one nameserver query, as the official clients (6 s there;
// a live nameserver answers in milliseconds, so a shorter bound fails over sooner).
const nsTimeout = 3 * time.Second

// topicRoute is a route with the queue lists derived from it.
type topicRoute struct {
	data      *protocol.TopicRouteData
	publish   []MessageQueue // writable queues of brokers with a master, by broker then id
	subscribe []MessageQueue // readable queues, by broker then id

	// asked is when the nameservers were last asked for this route (unix
	// nanoseconds); suspect asks for a re-read on the next use (see
	// suspectRoute).
	asked   atomic.Int64
	suspect atomic.Bool
}

// routeRecheckMin is the least time between two re-reads of a route that a
// failed send asked for (suspectRoute): a dead master costs its senders at
// most one nameserver lookup a second, not one a send.
const routeRecheckMin = time.Second

// core is what every client object has: the transport, the nameserver list,
// the route cache and the heartbeat. Each Producer or consumer owns its own
// core, so nothing is shared between objects and Shutdown stops everything.
type core struct {
	o        *options
	log      logrus.FieldLogger
	clientID string
	ip       netip.Addr
	rc       *remoting.Client
	uniq     *message.UniqIDGenerator

	nsMu   sync.Mutex
	nsNext int // index of the nameserver to try first

	mu          sync.RWMutex // guards routes and brokerAddrs
	routes      map[string]*topicRoute
	brokerAddrs map[string]map[int64]string // brokerName -> brokerId -> addr

	// heartbeat builds the body sent to brokers; set before start.
	heartbeat func() *protocol.HeartbeatData

	ctx       context.Context // cancelled by shutdown
	cancel    context.CancelFunc
	stopCh    chan struct{}
	wg        sync.WaitGroup
	stateMu   sync.Mutex
	started   bool
	stopped   bool
	hbTrigger chan struct{}
}

func newCore(o *options, kind string) *core {
	ip := localIP()
	instance := o.instanceName
	if instance == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		instance = strconv.Itoa(os.Getpid()) + "#" + hex.EncodeToString(b[:])
	}
	c := &core{
		o:           o,
		ip:          ip,
		clientID:    ip.String() + "@" + instance,
		uniq:        message.NewUniqIDGenerator(ip),
		routes:      make(map[string]*topicRoute),
		brokerAddrs: make(map[string]map[int64]string),
		stopCh:      make(chan struct{}),
		hbTrigger:   make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.log = o.log.WithFields(logrus.Fields{"component": "client", "kind": kind, "clientId": c.clientID})
	cfg := remoting.ClientConfig{Logger: o.log, Language: remoting.LangGo, TLS: o.tls}
	serialize := remoting.RocketMQSerialize
	if o.headers == HeadersJSON {
		serialize = remoting.JSONSerialize
	}
	sign := o.credentials.enabled()
	cred := o.credentials
	cfg.BeforeRequest = func(_ string, req *remoting.Command) {
		req.SerializeType = serialize
		if sign {
			Sign(cred, req)
		}
	}
	c.rc = remoting.NewClient(cfg)
	return c
}

// localIP returns the first non-loopback IPv4 address, else 127.0.0.1. It
// only seeds ids and names the client; nothing connects to it.
func localIP() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok {
					return ip
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// start launches the route and heartbeat loops.
func (c *core) start() error {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.stopped {
		return ErrNotStarted
	}
	if c.started {
		return ErrAlreadyStarted
	}
	c.started = true
	c.wg.Add(2)
	go c.routeLoop()
	go c.heartbeatLoop()
	c.log.WithFields(logrus.Fields{"namesrv": strings.Join(c.o.nameServers, ";"), "group": c.o.group}).Info("client started")
	return nil
}

// running reports whether start ran and shutdown did not.
func (c *core) running() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.started && !c.stopped
}

// shutdown stops the loops and closes every connection. Safe to call twice.
func (c *core) shutdown() {
	c.stateMu.Lock()
	if c.stopped {
		c.stateMu.Unlock()
		return
	}
	c.stopped = true
	c.stateMu.Unlock()
	close(c.stopCh)
	c.cancel()
	c.wg.Wait()
	_ = c.rc.Close()
	c.log.Info("client stopped")
}

// go runs f on a goroutine owned by the core (waited for by shutdown).
func (c *core) goLoop(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// sleep waits d or until shutdown; false means shutting down.
func (c *core) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stopCh:
		return false
	}
}

// invoke sends req to addr and waits at most timeout (and ctx).
func (c *core) invoke(ctx context.Context, addr string, req *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.rc.InvokeSync(ctx, addr, req)
}

// invokeOK is invoke that also turns a non-success code into a BrokerError.
func (c *core) invokeOK(ctx context.Context, addr string, req *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	resp, err := c.invoke(ctx, addr, req, timeout)
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return resp, brokerError(addr, resp)
	}
	return resp, nil
}

// invokeNameServer sends req to the nameservers in turn, starting with the
// one that answered last, until one answers. A nameserver that fails moves
// the starting point on, so the next call begins with a live one.
func (c *core) invokeNameServer(ctx context.Context, req func() *remoting.Command) (*remoting.Command, string, error) {
	c.nsMu.Lock()
	first := c.nsNext
	c.nsMu.Unlock()
	n := len(c.o.nameServers)
	var lastErr error
	for i := 0; i < n; i++ {
		idx := (first + i) % n
		addr := c.o.nameServers[idx]
		resp, err := c.invoke(ctx, addr, req(), nsTimeout)
		if err == nil {
			c.nsMu.Lock()
			c.nsNext = idx
			c.nsMu.Unlock()
			return resp, addr, nil
		}
		lastErr = err
		c.log.WithFields(logrus.Fields{"namesrv": addr, "err": err}).Debug("nameserver unreachable, trying the next")
		if ctx.Err() != nil {
			break
		}
	}
	c.nsMu.Lock()
	c.nsNext = (first + 1) % n
	c.nsMu.Unlock()
	return nil, "", lastErr
}

// queryRoute asks the nameservers for topic's route.
func (c *core) queryRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	resp, addr, err := c.invokeNameServer(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetRouteInfoByTopic,
			protocol.EncodeHeader(&protocol.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJSONOnly: true}, nil), nil)
	})
	if err != nil {
		return nil, fmt.Errorf("client: route of %s: %w", topic, err)
	}
	switch resp.ResponseCode() {
	case remoting.Success:
	case remoting.TopicNotExist:
		return nil, fmt.Errorf("%w %s: %w", ErrNoRoute, topic, brokerError(addr, resp))
	default:
		return nil, brokerError(addr, resp)
	}
	if len(resp.Body) == 0 {
		return nil, fmt.Errorf("%w %s: empty route body", ErrNoRoute, topic)
	}
	return protocol.DecodeTopicRouteData(resp.Body)
}

// updateRoute reads topic's route from the nameservers into the cache.
func (c *core) updateRoute(ctx context.Context, topic string) (*topicRoute, error) {
	data, err := c.queryRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	tr := buildRoute(topic, data)
	tr.asked.Store(time.Now().UnixNano())
	c.mu.Lock()
	c.routes[topic] = tr
	for _, bd := range data.BrokerDatas {
		addrs := make(map[int64]string, len(bd.BrokerAddrs))
		for id, a := range bd.BrokerAddrs {
			addrs[id] = a
		}
		c.brokerAddrs[bd.BrokerName] = addrs
	}
	c.mu.Unlock()
	return tr, nil
}

// buildRoute derives the publish and subscribe queue lists of a route.
// Producers write only to brokers that have a master, as the official
// clients do; the lists are sorted so every client sees the same order
// (sharding-key hashing depends on it).
func buildRoute(topic string, data *protocol.TopicRouteData) *topicRoute {
	masters := make(map[string]bool)
	for _, bd := range data.BrokerDatas {
		if bd.BrokerAddrs[protocol.MasterID] != "" {
			masters[bd.BrokerName] = true
		}
	}
	qds := append([]*protocol.QueueData(nil), data.QueueDatas...)
	sort.Slice(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	tr := &topicRoute{data: data}
	for _, qd := range qds {
		if protocol.IsWriteable(qd.Perm) && masters[qd.BrokerName] {
			for i := int32(0); i < qd.WriteQueueNums; i++ {
				tr.publish = append(tr.publish, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
			}
		}
		if protocol.IsReadable(qd.Perm) {
			for i := int32(0); i < qd.ReadQueueNums; i++ {
				tr.subscribe = append(tr.subscribe, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
			}
		}
	}
	return tr
}

// route returns topic's cached route, reading it on a miss, or when a
// failed send made it suspect: then one caller re-reads it while the others
// go on with the cached one, which is also kept if the nameservers cannot
// answer.
func (c *core) route(ctx context.Context, topic string) (*topicRoute, error) {
	c.mu.RLock()
	tr := c.routes[topic]
	c.mu.RUnlock()
	if tr == nil {
		return c.updateRoute(ctx, topic)
	}
	if !tr.suspect.Load() || !tr.suspect.CompareAndSwap(true, false) {
		return tr, nil
	}
	// The attempt counts as a lookup even if it fails: while the
	// nameservers cannot answer, suspectRoute must not have every failed
	// send wait for them again.
	tr.asked.Store(time.Now().UnixNano())
	fresh, err := c.updateRoute(ctx, topic)
	if err != nil {
		c.log.WithFields(logrus.Fields{"topic": topic, "err": err}).Debug("route re-read failed; keeping the cached one")
		return tr, nil
	}
	return fresh, nil
}

// suspectRoute asks for topic's route to be re-read on its next use,
// unless the nameservers were asked less than routeRecheckMin ago. A send
// that could not reach its broker calls it: in controller mode (or after an
// operator moved a master) the nameservers already name the new master
// while the cached route still points at the dead one, and the periodic
// refresh (30 s) would keep every send failing until then.
func (c *core) suspectRoute(topic string) {
	c.mu.RLock()
	tr := c.routes[topic]
	c.mu.RUnlock()
	if tr != nil && time.Now().UnixNano()-tr.asked.Load() >= int64(routeRecheckMin) {
		tr.suspect.Store(true)
	}
}

// cachedRoute returns topic's cached route without asking a nameserver.
func (c *core) cachedRoute(topic string) (*topicRoute, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.routes[topic]
	return r, ok
}

// forgetRoute drops a cached route, so the next use re-reads it.
func (c *core) forgetRoute(topic string) {
	c.mu.Lock()
	delete(c.routes, topic)
	c.mu.Unlock()
}

// routeLoop refreshes every cached route on the route interval.
func (c *core) routeLoop() {
	defer c.wg.Done()
	ctx := c.ctx
	for c.sleep(c.o.routeInterval) {
		c.refreshRoutes(ctx)
	}
}

func (c *core) refreshRoutes(ctx context.Context) {
	c.mu.RLock()
	topics := make([]string, 0, len(c.routes))
	for t := range c.routes {
		topics = append(topics, t)
	}
	c.mu.RUnlock()
	for _, t := range topics {
		if _, err := c.updateRoute(ctx, t); err != nil && ctx.Err() == nil {
			c.log.WithFields(logrus.Fields{"topic": t, "err": err}).Debug("route refresh failed")
		}
	}
	c.forgetOfflineBrokers()
}

// forgetOfflineBrokers drops brokers no cached route names any more, so
// heartbeats stop going to brokers that left the cluster.
func (c *core) forgetOfflineBrokers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := map[string]bool{}
	for _, tr := range c.routes {
		for _, bd := range tr.data.BrokerDatas {
			live[bd.BrokerName] = true
		}
	}
	for name := range c.brokerAddrs {
		if !live[name] {
			delete(c.brokerAddrs, name)
		}
	}
}

// masterAddr returns the master address of brokerName, or "".
func (c *core) masterAddr(brokerName string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.brokerAddrs[brokerName][protocol.MasterID]
}

// brokerAddr returns the member of brokerName to read from when brokerID
// is wanted, as the official clients' findBrokerAddressInSubscribe:
// brokerID if the route has it; for a slave id the route lacks, the next
// id; else any member, the master first, then the lowest id (Java's
// HashMap of ids yields the master first too). So pulls follow the
// broker's suggestion, fall back to a slave while the master is out of the
// route and go back to the master once it returns and suggests 0. With
// MasterID it is findBrokerAddressInAdmin: the master, else a slave.
// "" when the route has no member of brokerName.
func (c *core) brokerAddr(brokerName string, brokerID int64) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	addrs := c.brokerAddrs[brokerName]
	if a := addrs[brokerID]; a != "" {
		return a
	}
	if brokerID != protocol.MasterID {
		if a := addrs[brokerID+1]; a != "" {
			return a
		}
	}
	if a := addrs[protocol.MasterID]; a != "" {
		return a
	}
	ids := make([]int64, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if a := addrs[id]; a != "" {
			return a
		}
	}
	return ""
}

// findBroker is brokerAddr, refreshing topic's route once when brokerName
// has no member in it (the official clients' tryFindBroker).
func (c *core) findBroker(ctx context.Context, topic, brokerName string, brokerID int64) (string, error) {
	if a := c.brokerAddr(brokerName, brokerID); a != "" {
		return a, nil
	}
	if topic != "" {
		if _, err := c.updateRoute(ctx, topic); err != nil {
			return "", err
		}
		if a := c.brokerAddr(brokerName, brokerID); a != "" {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrBrokerNotFound, brokerName)
}

// findMaster returns brokerName's master, refreshing topic's route once when
// it is unknown.
func (c *core) findMaster(ctx context.Context, topic, brokerName string) (string, error) {
	if a := c.masterAddr(brokerName); a != "" {
		return a, nil
	}
	if topic != "" {
		if _, err := c.updateRoute(ctx, topic); err != nil {
			return "", err
		}
		if a := c.masterAddr(brokerName); a != "" {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrBrokerNotFound, brokerName)
}

// allBrokerAddrs lists every known broker address; mastersOnly limits it to
// brokerId 0.
func (c *core) allBrokerAddrs(mastersOnly bool) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, addrs := range c.brokerAddrs {
		for id, a := range addrs {
			if !mastersOnly || id == protocol.MasterID {
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// triggerHeartbeat asks the heartbeat loop to send one now.
func (c *core) triggerHeartbeat() {
	select {
	case c.hbTrigger <- struct{}{}:
	default:
	}
}

// heartbeatLoop heartbeats every broker shortly after start, then on the
// interval and whenever triggered.
func (c *core) heartbeatLoop() {
	defer c.wg.Done()
	ctx := c.ctx
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stopCh:
			return
		case <-t.C:
		case <-c.hbTrigger:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		c.sendHeartbeats(ctx)
		t.Reset(c.o.heartbeatInterval)
	}
}

// sendHeartbeats sends the heartbeat to every broker (masters only when the
// client has no consumer group, as the official clients).
func (c *core) sendHeartbeats(ctx context.Context) {
	if c.heartbeat == nil {
		return
	}
	hb := c.heartbeat()
	body, err := hb.Encode()
	if err != nil {
		c.log.WithError(err).Error("cannot encode heartbeat")
		return
	}
	for _, addr := range c.allBrokerAddrs(len(hb.ConsumerDataSet) == 0) {
		req := remoting.NewRequest(remoting.HeartBeat, nil, body)
		if _, err := c.invokeOK(ctx, addr, req, 3*time.Second); err != nil && ctx.Err() == nil {
			c.log.WithFields(logrus.Fields{"broker": addr, "err": err}).Debug("heartbeat failed")
		}
	}
}

// heartbeatBroker sends the heartbeat to one broker and waits for the answer.
func (c *core) heartbeatBroker(ctx context.Context, addr string) error {
	if c.heartbeat == nil {
		return nil
	}
	body, err := c.heartbeat().Encode()
	if err != nil {
		return err
	}
	_, err = c.invokeOK(ctx, addr, remoting.NewRequest(remoting.HeartBeat, nil, body), 3*time.Second)
	return err
}

// Namespace handling, as the official clients: "ns%topic", "%RETRY%ns%group".

const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
	nsSep       = "%"
)

func (c *core) wrapName(name string) string {
	ns := c.o.namespace
	if ns == "" || name == "" || strings.HasPrefix(name, ns+nsSep) {
		return name
	}
	for _, p := range []string{retryPrefix, dlqPrefix} {
		if strings.HasPrefix(name, p) {
			rest := name[len(p):]
			if strings.HasPrefix(rest, ns+nsSep) {
				return name
			}
			return p + ns + nsSep + rest
		}
	}
	return ns + nsSep + name
}

func (c *core) unwrapName(name string) string {
	ns := c.o.namespace
	if ns == "" {
		return name
	}
	for _, p := range []string{retryPrefix, dlqPrefix} {
		if strings.HasPrefix(name, p) {
			return p + strings.TrimPrefix(name[len(p):], ns+nsSep)
		}
	}
	return strings.TrimPrefix(name, ns+nsSep)
}

// checkTopic applies RocketMQ's topic rules (Validators.checkTopic).
func checkTopic(topic string) error {
	if topic == "" || len(topic) > message.MaxTopicLength {
		return fmt.Errorf("%w: %q", ErrBadTopic, topic)
	}
	for _, r := range topic {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '%' || r == '|') {
			return fmt.Errorf("%w: %q", ErrBadTopic, topic)
		}
	}
	return nil
}

// isTimeout reports whether err is a transport timeout or a failure to
// reach the peer (as opposed to an answer from it).
func isTransportErr(err error) bool {
	var be *BrokerError
	return err != nil && !errors.As(err, &be)
}

// unregister tells every broker this client leaves its groups
// (UNREGISTER_CLIENT), so the others rebalance at once instead of when the
// broker notices the closed connection. Failures are ignored: the broker
// finds out either way.
func (c *core) unregister(producerGroup, consumerGroup string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	h := &protocol.UnregisterClientRequestHeader{ClientID: c.clientID, ProducerGroup: producerGroup, ConsumerGroup: consumerGroup}
	for _, addr := range c.allBrokerAddrs(false) {
		_, _ = c.invoke(ctx, addr, remoting.NewRequest(remoting.UnregisterClient, protocol.EncodeHeader(h, nil), nil), time.Second)
	}
}
