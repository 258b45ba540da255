package nameserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// ErrAlreadyStarted means Start was called twice.
var ErrAlreadyStarted = errors.New("nameserver: already started")

// NameServer is a running nameserver: a remoting server whose processors
// read and write a RouteInfoManager and a KVConfigManager, a scan loop that
// drops silent brokers, and a connection-close hook that drops a broker the
// moment its connection goes.
type NameServer struct {
	log    logrus.FieldLogger
	routes *RouteInfoManager
	kv     *KVConfigManager
	srv    *remoting.Server
	pool   *remoting.Pool
	// requests count each request code served (stats.go); filled before
	// the server starts, read-only afterwards.
	requests []*requestCounter

	cfgMu sync.Mutex // guards cfg, which UPDATE_NAMESRV_CONFIG may change
	cfg   conf.NamesrvConfig

	stop     chan struct{}
	rescan   chan struct{} // wakes scanLoop to pick up a new interval
	wg       sync.WaitGroup
	startMu  sync.Mutex
	started  bool
	stopOnce sync.Once
	stopErr  error
}

// New returns a nameserver for cfg, not yet listening. cfg is validated.
func New(cfg conf.NamesrvConfig, log logrus.FieldLogger) (*NameServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		log = l
	}
	log = log.WithField("component", "namesrv")
	ns := &NameServer{
		log:    log,
		cfg:    cfg,
		routes: NewRouteInfoManager(log),
		kv:     NewKVConfigManager(cfg.KvConfigPath, log),
		stop:   make(chan struct{}),
		rescan: make(chan struct{}, 1),
	}
	tlsMode, serverTLS, err := cfg.ServerTLS()
	if err != nil {
		return nil, fmt.Errorf("nameserver: %w", err)
	}
	ns.srv = remoting.NewServer(remoting.ServerConfig{
		Addr:            cfg.ListenAddr(),
		Logger:          log,
		IdleTimeout:     time.Duration(cfg.ServerChannelMaxIdleTimeSeconds) * time.Second,
		NumEventLoops:   cfg.ServerSelectorThreads,
		TLSMode:         tlsMode,
		TLS:             serverTLS,
		MaxConns:        cfg.ServerMaxConnections,
		MaxConnsPerAddr: cfg.ServerMaxConnectionsPerAddress,
	})
	ns.pool = ns.srv.NewPool("namesrv", cfg.ServerWorkerThreads, cfg.DefaultThreadPoolQueueCapacity)
	ns.registerProcessors(ns.pool)
	// Runs on the event loop: a short write-locked removal, no I/O.
	ns.srv.OnConnClose(func(c *remoting.Conn) {
		if removed := ns.routes.RemoveByConn(c.ID()); len(removed) > 0 {
			ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "brokers": removed}).Info("broker connection closed; brokers removed")
		}
	})
	return ns, nil
}

// Start loads the KV config, listens, and starts the scan loop. It returns
// once the server accepts connections, or with the error that prevented it.
func (ns *NameServer) Start() error {
	ns.startMu.Lock()
	defer ns.startMu.Unlock()
	if ns.started {
		return ErrAlreadyStarted
	}
	ns.started = true
	if err := ns.kv.Load(); err != nil {
		return err
	}
	if err := ns.srv.Start(); err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	ns.wg.Add(1)
	go ns.scanLoop()
	cfg := ns.config()
	ns.log.WithFields(logrus.Fields{"addr": ns.srv.Addr(), "scanInterval": cfg.ScanInterval(), "brokerExpiry": cfg.BrokerExpiry()}).Info("nameserver started")
	return nil
}

// Addr is the address the nameserver listens on (the real port when
// listenPort was 0). Valid after Start.
func (ns *NameServer) Addr() string { return ns.srv.Addr() }

// Server is the remoting server, for processors of a controller run in
// this nameserver (enableControllerInNamesrv); route them before Start.
func (ns *NameServer) Server() *remoting.Server { return ns.srv }

// Routes is the route table, for in-process inspection.
func (ns *NameServer) Routes() *RouteInfoManager { return ns.routes }

// KVConfig is the KV config store.
func (ns *NameServer) KVConfig() *KVConfigManager { return ns.kv }

// Config returns a copy of the effective configuration.
func (ns *NameServer) Config() conf.NamesrvConfig { return ns.config() }

func (ns *NameServer) config() conf.NamesrvConfig {
	ns.cfgMu.Lock()
	defer ns.cfgMu.Unlock()
	return ns.cfg
}

// kickScan makes scanLoop re-read its interval now rather than after the old one.
func (ns *NameServer) kickScan() {
	select {
	case ns.rescan <- struct{}{}:
	default:
	}
}

// Shutdown stops the scan loop, then the server (new requests get
// SYSTEM_BUSY, running ones finish, connections close) within ctx. Safe to
// call twice, and before Start; later calls return the first result.
func (ns *NameServer) Shutdown(ctx context.Context) error {
	ns.stopOnce.Do(func() {
		close(ns.stop)
		ns.wg.Wait()
		if err := ns.srv.Shutdown(ctx); err != nil {
			ns.stopErr = fmt.Errorf("nameserver: shutdown: %w", err)
		}
		ns.log.Info("nameserver stopped")
	})
	return ns.stopErr
}

// scanLoop drops, every scanNotActiveBrokerInterval, the brokers that have
// not registered for brokerChannelExpiredTime, with their queue data. Both
// are re-read each pass so UPDATE_NAMESRV_CONFIG takes effect.
func (ns *NameServer) scanLoop() {
	defer ns.wg.Done()
	t := time.NewTimer(ns.config().ScanInterval())
	defer t.Stop()
	for {
		select {
		case <-ns.stop:
			return
		case <-ns.rescan:
			t.Reset(ns.config().ScanInterval())
		case <-t.C:
			cfg := ns.config()
			removed, conns := ns.routes.scanNotActiveBroker(time.Now().Add(-cfg.BrokerExpiry()))
			if len(removed) > 0 {
				ns.log.WithField("brokers", removed).Warn("expired brokers removed")
			}
			for _, id := range conns {
				ns.srv.CloseConn(id) // a silent broker's channel is as dead as its registration
			}
			t.Reset(cfg.ScanInterval())
		}
	}
}
