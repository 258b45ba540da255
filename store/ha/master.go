package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/store"
)

// Master serves its store's commitlog to slaves (RocketMQ's HAService
// with its AcceptSocketService, HAConnection and GroupTransferService).
//
// Each accepted connection has two goroutines: readLoop reads the slave's
// reports (its acks) and writeLoop pushes frames read straight from the
// mapped commitlog. The push takes no commitlog lock: it reads below the
// files' published write positions, so a slave catching up never slows the
// master's writers. Writers with nothing to send park until the store's
// append listener wakes them (see notifier).
type Master struct {
	st  *store.Store
	cl  *store.CommitLog
	cfg Config
	log logrus.FieldLogger

	notify   notifier
	transfer *transferService
	// push2Slave is the highest offset any slave acknowledged
	// (push2SlaveMaxOffset): only grows.
	push2Slave atomic.Int64
	// slaves counts connections past their handshake.
	slaves atomic.Int32

	mu      sync.Mutex
	ln      net.Listener
	conns   map[*masterConn]struct{} // guarded by mu
	started bool                     // guarded by mu
	closed  bool                     // guarded by mu: no new connection is tracked

	wg           sync.WaitGroup
	shutdownOnce sync.Once
}

// NewMaster returns a master for st; Start listens.
func NewMaster(st *store.Store, cfg Config, log logrus.FieldLogger) (*Master, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		log = l
	}
	m := &Master{
		st: st, cl: st.CommitLog(), cfg: cfg,
		log:   log.WithFields(logrus.Fields{"component": "ha", "role": "master"}),
		conns: make(map[*masterConn]struct{}),
	}
	m.transfer = newTransferService(&m.push2Slave, cfg.SlaveTimeout)
	return m, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Start listens on addr (the broker passes listenPort+1, advertised as
// brokerIP2:port) and returns once it does, or with the error.
func (m *Master) Start(addr string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.started {
		return errors.New("ha: master already started or shut down")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ha: listen on %s: %w", addr, err)
	}
	m.ln, m.started = ln, true
	m.st.SetAppendListener(m.notify.appended)
	m.transfer.start()
	m.wg.Add(1)
	go m.acceptLoop()
	m.log.WithField("addr", ln.Addr().String()).Info("HA master listening")
	return nil
}

// Addr returns the listening address (nil before Start).
func (m *Master) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

// Shutdown stops accepting, closes every slave connection, answers the
// sends still waiting with ErrShutdown and removes the append listener.
// Safe to call twice and before Start. Call it before the store's Shutdown.
func (m *Master) Shutdown(ctx context.Context) error {
	m.shutdownOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		started := m.started
		if m.ln != nil {
			m.ln.Close()
		}
		conns := make([]*masterConn, 0, len(m.conns))
		for c := range m.conns {
			conns = append(conns, c)
		}
		m.mu.Unlock()
		for _, c := range conns {
			c.close()
		}
		m.wg.Wait()
		if started {
			m.transfer.shutdown()
			m.st.SetAppendListener(nil)
		}
		m.log.Info("HA master stopped")
	})
	_ = ctx // nothing here blocks for long: connections close at once
	return nil
}

func (m *Master) acceptLoop() {
	defer m.wg.Done()
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little instead
			// of spinning, unless shutting down.
			m.log.WithError(err).Warn("HA accept failed")
			m.mu.Lock()
			closed := m.closed
			m.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c := newMasterConn(m, nc)
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			nc.Close()
			return
		}
		m.conns[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		m.log.WithField("slave", c.addr).Info("HA connection accepted")
		go c.readLoop()
	}
}

// countSlave counts a connection past its handshake as a slave, unless it
// was closed meanwhile.
func (m *Master) countSlave(c *masterConn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.conns[c]; !ok {
		return false
	}
	c.counted = true
	m.slaves.Add(1)
	return true
}

// removeConn forgets a closed connection.
func (m *Master) removeConn(c *masterConn) {
	m.mu.Lock()
	delete(m.conns, c)
	if c.counted {
		c.counted = false
		m.slaves.Add(-1)
	}
	m.mu.Unlock()
}

// acked records a slave's ack (notifyTransferSome).
func (m *Master) acked(offset int64) {
	for {
		cur := m.push2Slave.Load()
		if offset <= cur {
			return
		}
		if m.push2Slave.CompareAndSwap(cur, offset) {
			m.transfer.acknowledged()
			return
		}
	}
}

// SlaveOK reports whether a SYNC_MASTER send that ends at masterPutWhere
// should wait for a slave (isSlaveOK): a slave is connected and the acked
// offset is less than haSlaveFallbehindMax behind.
func (m *Master) SlaveOK(masterPutWhere int64) bool {
	return m.slaves.Load() > 0 && masterPutWhere-m.push2Slave.Load() < m.cfg.SlaveFallbehindMax
}

// WaitReplicated calls done once a slave acknowledged the commitlog up to
// nextOffset (the end of a send's records: WroteOffset + WroteBytes), with
// PutOK; with FlushSlaveTimeout after slaveTimeout; at once with
// SlaveNotAvailable when SlaveOK is false. done runs on the caller's
// goroutine when the answer is immediate, else on the master's transfer
// goroutine, and must not block. No goroutine or timer is spent per call.
func (m *Master) WaitReplicated(nextOffset int64, done func(Result)) {
	if m.push2Slave.Load() >= nextOffset {
		done(Result{Status: store.PutOK})
		return
	}
	if !m.SlaveOK(nextOffset) {
		done(Result{Status: store.SlaveNotAvailable, Err: fmt.Errorf("%w: %d connected, acked %d, send ends at %d",
			ErrSlaveNotAvailable, m.slaves.Load(), m.push2Slave.Load(), nextOffset)})
		return
	}
	m.transfer.wait(nextOffset, time.Now(), done)
}

// ConnStatus describes one slave connection.
type ConnStatus struct {
	Addr           string    // the slave's address as the master sees it
	ConnectedSince time.Time // when the connection was accepted
	AckOffset      int64     // the slave's last report: what it holds
	LagBytes       int64     // master's max offset minus AckOffset
	Compressed     bool      // frames are snappy-compressed
	SentBytes      int64     // bytes written to the slave, headers included
}

// MasterStatus is what tools show about a master (mqadmin haStatus).
type MasterStatus struct {
	Addr string // the HA listen address
	// MaxOffset is the master's commitlog max offset.
	MaxOffset int64
	// Push2SlaveMaxOffset is the highest offset any slave acknowledged.
	Push2SlaveMaxOffset int64
	// Slaves lists connections past their handshake, by address.
	Slaves []ConnStatus
}

// Status returns the master's replication state.
func (m *Master) Status() MasterStatus {
	st := MasterStatus{MaxOffset: m.cl.MaxOffset(), Push2SlaveMaxOffset: m.push2Slave.Load()}
	m.mu.Lock()
	if m.ln != nil {
		st.Addr = m.ln.Addr().String()
	}
	for c := range m.conns {
		ack := c.ack.Load()
		if ack < 0 {
			continue
		}
		st.Slaves = append(st.Slaves, ConnStatus{
			Addr: c.addr, ConnectedSince: c.since, AckOffset: ack,
			LagBytes: max(0, st.MaxOffset-ack), Compressed: c.compress, SentBytes: c.sent.Load(),
		})
	}
	m.mu.Unlock()
	sort.Slice(st.Slaves, func(i, j int) bool { return st.Slaves[i].Addr < st.Slaves[j].Addr })
	return st
}
