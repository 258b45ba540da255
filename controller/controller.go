package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/sirupsen/logrus"
	"go.etcd.io/bbolt"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Errors of the controller's lifecycle and requests.
var (
	// ErrNotLeader means this controller is not the Raft leader (or has
	// not caught up since it became one): ask the leader.
	ErrNotLeader = errors.New("controller: not the leader")
	// ErrBadConfig means a controller setting cannot work.
	ErrBadConfig = errors.New("controller: bad config")
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("controller: already started")
)

// Peer is one member of the controller group: its Raft server id and the
// address its Raft transport listens on.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers reads controllerDLegerPeers: "n0-127.0.0.1:9878;n1-..." (an
// id, a dash, ip:port; ';'-separated), RocketMQ 5's format.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		id, addr, ok := strings.Cut(p, "-")
		if !ok || id == "" {
			return nil, fmt.Errorf("%w: controllerDLegerPeers entry %q is not id-ip:port", ErrBadConfig, p)
		}
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return nil, fmt.Errorf("%w: controllerDLegerPeers entry %q: %q is not ip:port", ErrBadConfig, p, addr)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: controllerDLegerPeers names %s twice", ErrBadConfig, id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: controllerDLegerPeers lists no peer", ErrBadConfig)
	}
	return out, nil
}

// FormatPeers writes peers back in controllerDLegerPeers' format.
func FormatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "-" + p.Addr
	}
	return strings.Join(parts, ";")
}

// Config is a controller's configuration (conf.ControllerConfig builds it
// from RocketMQ 5's keys).
type Config struct {
	// Group is controllerDLegerGroup, shown by getControllerMetaData.
	Group string
	// Peers is controllerDLegerPeers: every member, this one included.
	Peers []Peer
	// SelfID is controllerDLegerSelfId: which of Peers this is.
	SelfID string
	// StorePath is controllerStorePath: the Raft log (raft.db) and
	// snapshots live there.
	StorePath string
	// ScanInterval is scanNotActiveBrokerInterval: how often the leader
	// looks for dead masters at the latest (it also wakes at the moment a
	// master's heartbeat timeout runs out).
	ScanInterval time.Duration
	// EnableElectUncleanMaster lets a replica outside the in-sync set
	// become master when no in-sync one lives: writes resume, but what
	// only the lost replicas held is gone.
	EnableElectUncleanMaster bool
	// NotifyBrokerRoleChanged pushes NOTIFY_BROKER_ROLE_CHANGED to a
	// group's brokers after an election; without it they learn from their
	// next heartbeat's answer.
	NotifyBrokerRoleChanged bool
	// DefaultBrokerTimeout is a replica's heartbeat timeout when it never
	// said its own (brokerNotActiveTimeoutMillis).
	DefaultBrokerTimeout time.Duration

	// Raft timings; zero takes hashicorp/raft's defaults (1 s, 1 s,
	// 500 ms). ApplyTimeout bounds one write through the log.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	ApplyTimeout       time.Duration

	// transport replaces the TCP transport (tests run groups in memory).
	transport raft.Transport
	// inmemStore keeps the log and snapshots in memory (tests).
	inmemStore bool
}

// Validate checks the settings, naming the key of a bad one.
func (c *Config) Validate() error {
	if len(c.Peers) == 0 {
		return fmt.Errorf("%w: controllerDLegerPeers lists no peer", ErrBadConfig)
	}
	if c.self() == nil {
		return fmt.Errorf("%w: controllerDLegerSelfId=%s is not one of controllerDLegerPeers (%s)", ErrBadConfig, c.SelfID, FormatPeers(c.Peers))
	}
	if len(c.Peers) > 1 {
		for _, p := range c.Peers {
			if strings.HasSuffix(p.Addr, ":0") {
				return fmt.Errorf("%w: controllerDLegerPeers entry %s-%s: port 0 works only for a group of one", ErrBadConfig, p.ID, p.Addr)
			}
		}
	}
	if c.StorePath == "" && !c.inmemStore {
		return fmt.Errorf("%w: controllerStorePath is empty", ErrBadConfig)
	}
	if c.ScanInterval <= 0 {
		return fmt.Errorf("%w: scanNotActiveBrokerInterval=%v must be positive", ErrBadConfig, c.ScanInterval)
	}
	return nil
}

func (c *Config) self() *Peer {
	for i := range c.Peers {
		if c.Peers[i].ID == c.SelfID {
			return &c.Peers[i]
		}
	}
	return nil
}

// Controller is one member of a controller group (RocketMQ 5's
// DLedgerController, on hashicorp/raft): it keeps the replica state of
// every broker group in its Raft log, and while it leads, tracks the
// brokers' heartbeats and replaces dead masters. It serves requests on a
// remoting server it shares (a nameserver's, enableControllerInNamesrv) or
// that its caller owns (cmd/mqcontroller): Register routes them, Start
// opens the log and joins the group.
type Controller struct {
	cfg Config
	log logrus.FieldLogger
	fsm *fsm

	raftPtr atomic.Pointer[raft.Raft] // nil until Start
	trans   raft.Transport
	closers []func() error // stores and transport, closed after raft

	advertise atomic.Pointer[string] // this controller's remoting address
	notifyCh  chan bool              // raft's leadership changes
	client    *remoting.Client       // role-change notifications to brokers

	live    *liveTable
	ready   atomic.Bool // leader, caught up: serves reads and writes
	electMu sync.Mutex  // one election decision at a time
	scanNow chan struct{}
	// noMasterLogged remembers groups whose "no master" was logged, so
	// the scan logs it once, not every pass; guarded by electMu.
	noMasterLogged map[string]bool

	stop chan struct{}
	// stopMu orders notifyGroup's wg.Add before Shutdown's close of stop
	// (and so before its wg.Wait): processors elect on remoting's
	// workers, which the WaitGroup does not otherwise own.
	stopMu   sync.Mutex
	stopCtx  context.Context // ends with stop: bounds calls to brokers
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	startMu  sync.Mutex
	started  bool
	stopOnce sync.Once
	stopErr  error
}

// New returns a controller for cfg, not yet started.
func New(cfg Config, log logrus.FieldLogger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		log = l
	}
	if cfg.DefaultBrokerTimeout <= 0 {
		cfg.DefaultBrokerTimeout = 3 * time.Second
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 5 * time.Second
	}
	log = log.WithFields(logrus.Fields{"component": "controller", "controllerId": cfg.SelfID})
	c := &Controller{
		cfg:            cfg,
		log:            log,
		fsm:            newFSM(log),
		notifyCh:       make(chan bool, 16),
		client:         remoting.NewClient(remoting.ClientConfig{Logger: log}),
		live:           newLiveTable(),
		scanNow:        make(chan struct{}, 1),
		noMasterLogged: map[string]bool{},
		stop:           make(chan struct{}),
	}
	c.stopCtx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// raft returns the Raft node, nil before Start.
func (c *Controller) raft() *raft.Raft { return c.raftPtr.Load() }

// Start opens the Raft log under controllerStorePath, joins the group
// (bootstrapping it with every peer the first time) and starts the
// leadership and scan loops. advertise is the remoting address brokers
// reach this controller at; followers hand the leader's to brokers.
func (c *Controller) Start(advertise string) error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	if c.started {
		return ErrAlreadyStarted
	}
	c.started = true
	c.advertise.Store(&advertise)
	self := c.cfg.self()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(self.ID)
	rc.Logger = hclogFor(c.log.WithField("module", "raft"), "raft")
	rc.NotifyCh = c.notifyCh
	if c.cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = c.cfg.HeartbeatTimeout
	}
	if c.cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = c.cfg.ElectionTimeout
	}
	if c.cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = c.cfg.LeaderLeaseTimeout
	}
	// The state is small (a few records per broker): snapshot often, so
	// a restart replays little.
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 1024

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if c.cfg.inmemStore {
		ms := raft.NewInmemStore()
		logs, stable, snaps = ms, ms, raft.NewInmemSnapshotStore()
	} else {
		if err := os.MkdirAll(c.cfg.StorePath, 0o755); err != nil {
			return fmt.Errorf("controller: controllerStorePath: %w", err)
		}
		// A second controller on the same directory fails at once instead
		// of waiting for bolt's file lock forever.
		bs, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(c.cfg.StorePath, "raft.db"),
			BoltOptions: &bbolt.Options{Timeout: time.Second},
		})
		if err != nil {
			return fmt.Errorf("controller: open Raft log %s: %w", filepath.Join(c.cfg.StorePath, "raft.db"), err)
		}
		c.closers = append(c.closers, bs.Close)
		fss, err := raft.NewFileSnapshotStoreWithLogger(c.cfg.StorePath, 2, rc.Logger)
		if err != nil {
			c.closeAll()
			return fmt.Errorf("controller: snapshot store: %w", err)
		}
		logs, stable, snaps = bs, bs, fss
	}
	trans := c.cfg.transport
	if trans == nil {
		addr, err := net.ResolveTCPAddr("tcp", self.Addr)
		if err != nil {
			c.closeAll()
			return fmt.Errorf("controller: %w: %v", ErrBadConfig, err)
		}
		var advertise net.Addr = addr
		if addr.Port == 0 {
			advertise = nil // a group of one on any free port (tests): the listener's
		}
		nt, err := raft.NewTCPTransportWithLogger(self.Addr, advertise, 3, 5*time.Second, rc.Logger)
		if err != nil {
			c.closeAll()
			return fmt.Errorf("controller: Raft transport on %s: %w", self.Addr, err)
		}
		trans = nt
		c.closers = append(c.closers, nt.Close)
	}
	c.trans = trans
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		c.closeAll()
		return fmt.Errorf("controller: read Raft state: %w", err)
	}
	if !existing {
		// Every member bootstraps with the same configuration; raft
		// tolerates that, and the group forms once a majority runs.
		var servers []raft.Server
		for _, p := range c.cfg.Peers {
			addr := raft.ServerAddress(p.Addr)
			if p.ID == self.ID {
				addr = trans.LocalAddr()
			}
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: addr})
		}
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			c.closeAll()
			return fmt.Errorf("controller: bootstrap the Raft group: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, c.fsm, logs, stable, snaps, trans)
	if err != nil {
		c.closeAll()
		return fmt.Errorf("controller: start Raft: %w", err)
	}
	c.raftPtr.Store(r)
	c.wg.Add(2)
	go c.leaderLoop()
	go c.scanLoop()
	c.log.WithFields(logrus.Fields{"raftAddr": trans.LocalAddr(), "addr": advertise, "peers": FormatPeers(c.cfg.Peers),
		"group": c.cfg.Group, "existingState": existing}).Info("controller started")
	return nil
}

// closeAll closes the stores and the transport (after a failed start or
// Raft's shutdown).
func (c *Controller) closeAll() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	c.closers = nil
	return errors.Join(errs...)
}

// Shutdown stops the loops and leaves the group (Raft stops; the others
// elect a new leader if this one led). Safe to call twice and before Start.
func (c *Controller) Shutdown(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.stopMu.Lock()
		close(c.stop)
		c.stopMu.Unlock()
		c.cancel()
		c.ready.Store(false)
		var errs []error
		if r := c.raft(); r != nil {
			errs = append(errs, r.Shutdown().Error())
		}
		c.wg.Wait()
		errs = append(errs, c.closeAll())
		if err := c.client.Close(); err != nil && !errors.Is(err, remoting.ErrClientClosed) {
			errs = append(errs, err)
		}
		c.stopErr = errors.Join(errs...)
		c.log.Info("controller stopped")
	})
	_ = ctx // raft's shutdown waits for its own goroutines; nothing else blocks
	return c.stopErr
}

// IsLeader reports whether this controller leads and serves requests.
func (c *Controller) IsLeader() bool { return c.ready.Load() }

// Addr is the remoting address this controller advertises.
func (c *Controller) Addr() string {
	if p := c.advertise.Load(); p != nil {
		return *p
	}
	return ""
}

// leader returns the leader's Raft id and remoting address as this
// controller knows them ("" when unknown).
func (c *Controller) leader() (id, addr string) {
	r := c.raft()
	if r == nil {
		return "", ""
	}
	_, sid := r.LeaderWithID()
	id = string(sid)
	if id == "" {
		return "", ""
	}
	if id == c.cfg.SelfID {
		return id, c.Addr()
	}
	return id, c.fsm.controllerAddr(id)
}

// leaderLoop follows raft's leadership changes. On becoming leader it
// waits for every earlier entry to be applied (a barrier), so its reads see
// everything committed, gives every replica a fresh heartbeat timeout,
// records its remoting address, and only then serves.
func (c *Controller) leaderLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case leading := <-c.notifyCh:
			c.ready.Store(false)
			if !leading {
				c.log.Info("no longer the controller leader")
				continue
			}
			c.becomeLeader()
		}
	}
}

func (c *Controller) becomeLeader() {
	r := c.raft()
	for r.State() == raft.Leader {
		err := r.Barrier(c.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		c.log.WithError(err).Warn("controller leader barrier failed; retrying")
		select {
		case <-c.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if r.State() != raft.Leader {
		return
	}
	c.live.reset(c.fsm.groups(), time.Now(), c.cfg.DefaultBrokerTimeout)
	c.ready.Store(true)
	if c.fsm.controllerAddr(c.cfg.SelfID) != c.Addr() {
		e := &event{Type: evControllerAddr, ControllerAddr: &controllerAddrEvent{ID: c.cfg.SelfID, Addr: c.Addr()}}
		if _, err := c.propose(e); err != nil {
			c.log.WithError(err).Warn("cannot record this controller's address in the log")
		}
	}
	c.log.WithField("addr", c.Addr()).Info("controller leader: serving brokers")
	c.kickScan()
}

// propose writes e through the Raft log and returns its result once this
// controller applied it.
func (c *Controller) propose(e *event) (applyResult, error) {
	r := c.raft()
	if r == nil || !c.ready.Load() {
		return applyResult{}, ErrNotLeader
	}
	f := r.Apply(e.encode(), c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return applyResult{}, fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return applyResult{}, fmt.Errorf("controller: Raft apply: %w", err)
	}
	res, _ := f.Response().(applyResult)
	return res, res.err
}

// verifyLeader confirms, with a round trip to a majority, that this
// controller still leads: what it reads afterwards is linearizable.
func (c *Controller) verifyLeader() error {
	r := c.raft()
	if r == nil || !c.ready.Load() {
		return ErrNotLeader
	}
	if err := r.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}

// kickScan makes scanLoop look at every group now.
func (c *Controller) kickScan() {
	select {
	case c.scanNow <- struct{}{}:
	default:
	}
}

// minScanWait keeps the scan from spinning on a deadline in the past.
const minScanWait = 10 * time.Millisecond

// scanLoop replaces dead masters, while this controller leads: every
// ScanInterval, when kicked (a registration, a heartbeat of a group without
// master), and at the moment the next master's heartbeat timeout runs out,
// so a failover does not wait for the next scan.
func (c *Controller) scanLoop() {
	defer c.wg.Done()
	t := time.NewTimer(c.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.scanNow:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		wait := c.cfg.ScanInterval
		if c.ready.Load() {
			if next := c.scan(); !next.IsZero() {
				wait = min(wait, max(time.Until(next), minScanWait))
			}
		}
		t.Reset(wait)
	}
}

// scan checks every group and returns the earliest moment a live master's
// timeout runs out (zero when none).
func (c *Controller) scan() time.Time {
	var next time.Time
	for _, name := range c.fsm.groupNames() {
		c.checkGroup(name)
		if g := c.fsm.group(name); g != nil && g.MasterID != protocol.NoMaster {
			if d := c.live.deadline(liveKey{g.BrokerName, g.MasterID}); !d.IsZero() && d.After(time.Now()) && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
	}
	return next
}

// checkGroup elects a master for the group when its master is dead, or it
// has none and an eligible replica lives.
func (c *Controller) checkGroup(name string) {
	c.electMu.Lock()
	defer c.electMu.Unlock()
	g := c.fsm.group(name)
	if g == nil || !c.ready.Load() {
		return
	}
	now := time.Now()
	live := c.live.candidates(name, now)
	if g.MasterID != protocol.NoMaster {
		if _, ok := live[g.MasterID]; ok {
			delete(c.noMasterLogged, name)
			return
		}
	}
	newMaster := chooseMaster(g, live, c.cfg.EnableElectUncleanMaster, protocol.NoMaster)
	log := c.log.WithFields(logrus.Fields{"brokerName": name, "oldMaster": g.MasterID, "masterEpoch": g.MasterEpoch,
		"syncStateSet": g.SyncStateSet, "alive": sortedKeys(live)})
	if newMaster == protocol.NoMaster {
		if g.MasterID == protocol.NoMaster {
			if !c.noMasterLogged[name] {
				c.noMasterLogged[name] = true
				log.WithField("enableElectUncleanMaster", c.cfg.EnableElectUncleanMaster).
					Error("broker group has no master and no in-sync replica is alive: writes to it stop until one returns (or with enableElectUncleanMaster, any replica)")
			}
			return
		}
		// The master is dead and nobody may take over: record that the
		// group has none, so no broker acts as its master.
		log.Error("master is dead and no in-sync replica is alive: the group stays without a master")
	} else {
		log.WithField("newMaster", newMaster).Warn("electing a new master")
	}
	c.elect(g, newMaster, log)
}

// elect writes the election of newMaster (NoMaster: none) through the log
// and tells the group's brokers. Caller holds electMu.
func (c *Controller) elect(g *Group, newMaster int64, log logrus.FieldLogger) (*Group, error) {
	res, err := c.propose(&event{Type: evElect, Elect: &electEvent{BrokerName: g.BrokerName, ExpectMasterEpoch: g.MasterEpoch, NewMaster: newMaster}})
	if err != nil {
		log.WithError(err).Warn("election not written")
		return nil, err
	}
	ng := res.group
	if newMaster == protocol.NoMaster {
		c.noMasterLogged[g.BrokerName] = true
	} else {
		delete(c.noMasterLogged, g.BrokerName)
	}
	log.WithFields(logrus.Fields{"master": ng.MasterID, "newMasterEpoch": ng.MasterEpoch}).Info("master elected")
	c.notifyGroup(ng)
	// scanLoop's timer follows the masters' heartbeat deadlines; an
	// election outside it (a registration, electMaster) must reset it, or
	// the new master's death waits for the next ScanInterval.
	c.kickScan()
	return ng, nil
}

// notifyTimeout bounds one NOTIFY_BROKER_ROLE_CHANGED call.
const notifyTimeout = 3 * time.Second

// notifyGroup pushes the group's new master to its brokers, in parallel,
// without waiting: a broker that misses it learns at its next heartbeat.
func (c *Controller) notifyGroup(g *Group) {
	if !c.cfg.NotifyBrokerRoleChanged {
		return
	}
	hdr := g.ReplicaInfo()
	body := g.SyncState().Encode()
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	select {
	case <-c.stop:
		return // Shutdown waits for no goroutine started now
	default:
	}
	for _, id := range g.ids() {
		addr := g.Replicas[id].Addr
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ctx, cancel := context.WithTimeout(c.stopCtx, notifyTimeout)
			defer cancel()
			req := remoting.NewRequest(remoting.NotifyBrokerRoleChanged, protocol.EncodeHeader(&hdr, nil), body)
			if _, err := c.client.InvokeSync(ctx, addr, req); err != nil {
				c.log.WithError(err).WithFields(logrus.Fields{"broker": addr, "brokerName": g.BrokerName}).
					Debug("role change notification failed; the broker learns at its next heartbeat")
			}
		}()
	}
}

func sortedKeys(m map[int64]candidate) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	return protocol.SortedIDs(ids)
}
