// Package broker is the RocketMQ-compatible broker: it owns the message
// store, the topic, offset and subscription metadata, the request
// processors, and the registration with the nameservers.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/acl"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/store"
)

// Errors of the broker lifecycle.
var (
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("broker: already started")
	// ErrShutDown means Start was called after Shutdown.
	ErrShutDown = errors.New("broker: shut down")
)

// adminQueueCapacity bounds the admin requests waiting for a worker; RocketMQ
// has no key for it.
const adminQueueCapacity = 10000

// maxPoolQueue caps every pool's queue (a channel allocated up front).
const maxPoolQueue = 100000

// pools are the broker's worker pools, one per kind of request, so a flood of
// one kind (pulls) cannot starve another (sends, heartbeats).
type pools struct {
	Send           *remoting.Pool
	Pull           *remoting.Pool
	Query          *remoting.Pool
	Admin          *remoting.Pool
	ClientManage   *remoting.Pool // HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP
	ConsumerManage *remoting.Pool // consumer offsets
	EndTransaction *remoting.Pool
}

// Broker is one broker process: New builds it and registers the processors,
// Start opens the store and listens, Shutdown stops it.
//
// Fields shared with the consume side (consume_processors.go and friends)
// keep the names the broker contract gives them.
type Broker struct {
	cfg     *conf.BrokerConfig
	log     logrus.FieldLogger
	store   *store.Store
	server  *remoting.Server
	topics  *TopicConfigManager
	pools   pools
	consume *consumeState

	// Delay, timer and transaction services (issue 5): started after the
	// consume side, stopped before the store closes.
	schedule *scheduleService
	timer    *timerService
	trans    *transactionService

	// wg and stop own the broker's loops (registerLoop); stopCtx ends with
	// stop, for calls a loop makes (a slave's sync from its master).
	wg         sync.WaitGroup
	stop       chan struct{}
	stopCtx    context.Context
	cancelStop context.CancelFunc

	ip        netip.Addr                     // brokerIP1, resolved
	storeHost atomic.Pointer[netip.AddrPort] // ip:real port, set once listening
	uniqIDs   *message.UniqIDGenerator       // ids for batch members sent without UNIQ_KEY

	bootTime time.Time
	stats    *brokerStats // put and get counters, sampled by statsLoop (stats.go)

	nsClient     *remoting.Client
	registerNow  chan struct{} // wakes registerLoop after a topic change
	registeredID atomic.Int64  // the brokerId last registered with the nameservers

	ha replication // the HA master or slave (ha.go)
	// acceptWrites says this broker takes sends: a master by brokerRole,
	// or in controller mode the controller's master within its lease
	// (controller_mode.go). Sends, send-backs and transaction ends are
	// refused without it; the store refuses puts too.
	acceptWrites atomic.Bool
	ctl          ctlState // controller mode (controller_mode.go)

	acl *acl.Validator // the ACL rules when aclEnable (acl.go), else nil

	// A slave's view of its master (register.go, slave_sync.go).
	masterAddr atomic.Pointer[string] // the master's broker address, from REGISTER_BROKER answers
	onHAMaster func(haAddr string)    // told the master's HA address (the replication client)
	slaveSync  slaveSyncState

	startMu   sync.Mutex
	started   bool
	stopped   bool
	stopOnce  sync.Once
	stopErr   error
	storeOpen bool
}

// New builds a broker for cfg (validated here) without opening anything: the
// store opens and the server listens in Start.
func New(cfg *conf.BrokerConfig, log logrus.FieldLogger) (*Broker, error) {
	if cfg == nil {
		return nil, errors.New("broker: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		log = l
	}
	log = log.WithFields(logrus.Fields{"component": "broker", "brokerName": cfg.BrokerName})
	ip, err := resolveBrokerIP(cfg.BrokerIP1)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:         cfg,
		log:         log,
		stop:        make(chan struct{}),
		ip:          ip,
		uniqIDs:     message.NewUniqIDGenerator(ip),
		registerNow: make(chan struct{}, 1),
		bootTime:    time.Now(),
		stats:       newBrokerStats(),
		slaveSync:   slaveSyncState{first: slaveSyncFirst, every: slaveSyncInterval, now: make(chan struct{}, 1)},
	}
	b.ctl.notify = make(chan struct{}, 1)
	b.registeredID.Store(cfg.BrokerID)
	b.stopCtx, b.cancelStop = context.WithCancel(context.Background())
	b.setStoreHost(uint16(cfg.ListenPort))
	b.topics = NewTopicConfigManager(cfg, filepath.Join(cfg.StorePathRootDir, "config", "topics.json"), log)
	b.topics.SetOnChange(b.triggerRegister)
	tlsMode, serverTLS, err := cfg.ServerTLS()
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	// Calls to the nameservers and, from a slave, to its master's remoting
	// port go over TLS with tls.enable, as RocketMQ's BrokerOuterAPI, and
	// are signed with innerClientAuthenticationCredentials where ACL is on.
	clientTLS, err := cfg.ClientTLS()
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if clientTLS != nil && clientTLS.InsecureSkipVerify && clientTLS.VerifyConnection == nil {
		log.Warn("tls.enable without tls.client.authServer or tls.client.trustCertPath: nameserver and master certificates are not verified")
	}
	sign, err := innerSigner(cfg.InnerClientAuthenticationCredentials)
	if err != nil {
		return nil, err
	}
	b.nsClient = remoting.NewClient(remoting.ClientConfig{Logger: log, TLS: clientTLS, BeforeRequest: sign})
	if b.acl, err = newACL(b); err != nil {
		return nil, err
	}
	var authorize remoting.Authorizer
	if b.acl != nil {
		authorize = b.acl.Authorize
	}
	b.server = remoting.NewServer(remoting.ServerConfig{
		Addr:            cfg.ListenAddr(),
		Logger:          log,
		IdleTimeout:     time.Duration(cfg.ServerChannelMaxIdleTimeSeconds) * time.Second,
		NumEventLoops:   cfg.ServerSelectorThreads,
		TLSMode:         tlsMode,
		TLS:             serverTLS,
		MaxConns:        cfg.ServerMaxConnections,
		MaxConnsPerAddr: cfg.ServerMaxConnectionsPerAddress,
		Authorize:       authorize,
	})
	// Queues are channels allocated up front, unlike Java's lazy linked
	// queues, so RocketMQ's million-entry capacities are capped.
	queue := func(n int) int { return min(n, maxPoolQueue) }
	b.pools = pools{
		Send:           b.server.NewPool("send", cfg.SendMessageThreadPoolNums, queue(cfg.SendThreadPoolQueueCapacity)),
		Pull:           b.server.NewPool("pull", cfg.PullMessageThreadPoolNums, queue(cfg.PullThreadPoolQueueCapacity)),
		Query:          b.server.NewPool("query", cfg.QueryMessageThreadPoolNums, queue(cfg.QueryThreadPoolQueueCapacity)),
		Admin:          b.server.NewPool("admin", cfg.AdminBrokerThreadPoolNums, adminQueueCapacity),
		ClientManage:   b.server.NewPool("clientManage", cfg.ClientManageThreadPoolNums, queue(cfg.ClientManagerThreadPoolQueueCapacity)),
		ConsumerManage: b.server.NewPool("consumerManage", cfg.ConsumerManageThreadPoolNums, queue(cfg.ConsumerManagerThreadPoolQueueCapacity)),
		EndTransaction: b.server.NewPool("endTransaction", cfg.EndTransactionThreadPoolNums, queue(cfg.EndTransactionPoolQueueCapacity)),
	}
	b.consume = newConsumeState(b)
	if b.schedule, err = newScheduleService(b); err != nil {
		return nil, err
	}
	b.timer = newTimerService(b)
	b.trans = newTransactionService(b)
	b.registerProcessors()
	return b, nil
}

// registerProcessors routes every request code the broker answers; codes not
// routed get REQUEST_CODE_NOT_SUPPORTED from the server.
func (b *Broker) registerProcessors() {
	b.registerSendProcessors()
	b.registerReplyProcessors()
	b.registerAdminProcessors()
	registerConsumeProcessors(b)
	b.registerSendBackProcessor()
	b.registerTransactionProcessor()
	b.registerResetOffsetProcessor()
	b.registerDelayOffsetProcessor()
	b.registerACLProcessors()
	b.registerMonitorProcessors()
	b.registerControllerProcessors()
}

// Start opens the store, loads the metadata, starts the consume side,
// listens, registers with every nameserver and starts registerLoop. It
// returns once the broker accepts connections, or with the first error (the
// store is closed again then).
func (b *Broker) Start() error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	switch {
	case b.stopped:
		return ErrShutDown
	case b.started:
		return ErrAlreadyStarted
	}
	b.started = true
	if b.acl != nil {
		b.acl.Start()
	}
	st, err := store.Open(b.cfg.StoreConfig(), b.log)
	if err != nil {
		return fmt.Errorf("broker: open store: %w", err)
	}
	b.store = st
	b.storeOpen = true
	fail := func(err error) error {
		if b.acl != nil {
			b.acl.Close()
		}
		if serr := b.stopReplication(context.Background()); serr != nil {
			b.log.WithError(serr).Error("stopping replication after a failed start")
		}
		b.stopDelayServices()
		b.consume.shutdown()
		if serr := b.store.Shutdown(context.Background()); serr != nil {
			b.log.WithError(serr).Error("closing the store after a failed start")
		}
		b.storeOpen = false
		return err
	}
	if err := b.topics.Load(); err != nil {
		return fail(err)
	}
	if err := b.consume.start(); err != nil {
		return fail(fmt.Errorf("broker: start consume side: %w", err))
	}
	if !b.cfg.EnableControllerMode { // there they run while master only
		if err := b.startDelayServices(); err != nil {
			return fail(err)
		}
	}
	if err := b.startReplication(); err != nil {
		return fail(err)
	}
	b.acceptWrites.Store(!b.cfg.IsSlave() && !b.cfg.EnableControllerMode)
	if err := b.server.Start(); err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	port, err := portOf(b.server.Addr())
	if err != nil {
		return fail(err)
	}
	b.setStoreHost(port)
	// In controller mode the broker registers with the nameservers once
	// the controller gave it a role (registerAll waits for it).
	ctx, cancel := context.WithTimeout(context.Background(), b.registerTimeout())
	b.registerAll(ctx)
	cancel()
	b.wg.Add(2)
	go b.registerLoop()
	go b.statsLoop()
	if b.cfg.IsSlave() {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.slaveSyncLoop(nil)
		}()
	}
	if b.cfg.EnableControllerMode {
		b.wg.Add(1)
		go b.controllerLoop()
	}
	b.log.WithFields(logrus.Fields{"addr": b.Addr(), "namesrv": b.cfg.NamesrvAddr}).Info("broker started")
	b.logRole()
	return nil
}

// Shutdown stops the broker in a fixed order: registerLoop stops, the
// nameservers are told to forget this broker, parked pulls are answered,
// the server stops accepting and drains its workers, the consume side
// persists its offsets, and the store flushes and closes. Safe to call twice
// and before Start; later calls return the first result.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.stopOnce.Do(func() {
		b.startMu.Lock()
		b.stopped = true
		started, storeOpen := b.started, b.storeOpen
		b.startMu.Unlock()
		close(b.stop)
		b.cancelStop()
		b.wg.Wait()
		b.ctl.slaveWG.Wait() // controller mode's slave sync: ends with stop
		b.ctl.writableMu.Lock()
		if b.ctl.fence != nil {
			b.ctl.fence.Stop()
		}
		b.ctl.writableMu.Unlock()
		b.acceptWrites.Store(false)
		var errs []error
		if started && storeOpen {
			b.unregisterAll(ctx)
			// Parked long-poll pulls are answered while their connections
			// are still open.
			b.consume.stopHolding()
		}
		// Also before Start: the pools' workers run from New on.
		if err := b.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker: stop server: %w", err))
		}
		if started && storeOpen {
			// Slaves are answered before the store closes; a SYNC_MASTER's
			// sends still waiting get their answer now.
			if err := b.stopReplication(ctx); err != nil {
				errs = append(errs, fmt.Errorf("broker: stop replication: %w", err))
			}
			// They put messages: stopped while the store is open.
			b.stopDelayServices()
			b.consume.shutdown()
			if err := b.topics.Persist(); err != nil {
				errs = append(errs, err)
			}
			if err := b.store.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("broker: shut down store: %w", err))
			}
		}
		if b.acl != nil {
			b.acl.Close()
		}
		if err := b.nsClient.Close(); err != nil && !errors.Is(err, remoting.ErrClientClosed) {
			errs = append(errs, err)
		}
		b.stopErr = errors.Join(errs...)
		b.log.Info("broker stopped")
	})
	return b.stopErr
}

// startDelayServices starts the schedule, timer and transaction services
// (the store is open, the topics and consumer state loaded). A slave runs
// none of them: they write messages (deliveries, check-backs), and a slave's
// commitlog must hold exactly its master's bytes; their progress comes from
// the master (slaveSyncLoop). In controller mode they start each time the
// broker becomes master and stop when it is no longer.
func (b *Broker) startDelayServices() error {
	if b.cfg.IsSlave() {
		return nil
	}
	if err := b.schedule.start(); err != nil {
		return fmt.Errorf("broker: start schedule service: %w", err)
	}
	if err := b.timer.start(); err != nil {
		return fmt.Errorf("broker: start timer service: %w", err)
	}
	if err := b.trans.start(); err != nil {
		return fmt.Errorf("broker: start transaction service: %w", err)
	}
	return nil
}

// stopDelayServices stops them (safe when some never started), persisting
// their progress.
func (b *Broker) stopDelayServices() {
	b.trans.shutdown()
	b.timer.shutdown()
	b.schedule.shutdown()
}

// Addr is brokerIP1:port, the address clients and nameservers use (the real
// port when listenPort was 0). Valid after Start.
func (b *Broker) Addr() string { return b.StoreHost().String() }

// StoreHost is Addr as an address: written into every record as its store
// host and into every offsetMsgId.
func (b *Broker) StoreHost() netip.AddrPort { return *b.storeHost.Load() }

// Store is the message store (nil before Start).
func (b *Broker) Store() *store.Store { return b.store }

// ACL is the ACL validator, nil unless aclEnable.
func (b *Broker) ACL() *acl.Validator { return b.acl }

// Topics is the topic table.
func (b *Broker) Topics() *TopicConfigManager { return b.topics }

// Server is the remoting server.
func (b *Broker) Server() *remoting.Server { return b.server }

// Config is the broker's configuration; do not modify it.
func (b *Broker) Config() *conf.BrokerConfig { return b.cfg }

func (b *Broker) setStoreHost(port uint16) {
	hp := netip.AddrPortFrom(b.ip, port)
	b.storeHost.Store(&hp)
}

func (b *Broker) registerTimeout() time.Duration {
	return time.Duration(b.cfg.RegisterBrokerTimeoutMills) * time.Millisecond
}

// resolveBrokerIP returns brokerIP1, or when it is empty the first
// non-loopback IPv4 address of this host (as RocketMQ picks it), or
// 127.0.0.1 when there is none.
func resolveBrokerIP(configured string) (netip.Addr, error) {
	if configured != "" {
		ip, err := netip.ParseAddr(configured)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("broker: brokerIP1 %q: %w", configured, err)
		}
		return ip.Unmap(), nil
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := pfx.Addr().Unmap()
			if ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() {
				return ip, nil
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
}

// portOf returns the port of a host:port string.
func portOf(addr string) (uint16, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("broker: listening address %q: %w", addr, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("broker: listening port %q: %w", p, err)
	}
	return uint16(n), nil
}
