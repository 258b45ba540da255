package ha

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// release is what waiting sends compare with: push2Slave, or with an
	// ack set the offset every replica of the set acknowledged.
	release atomic.Int64
	// setMode says an ack set is in force (SetAckSet); set guards it.
	setMode atomic.Bool
	set     ackSet
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
	m.transfer = newTransferService(&m.release, cfg.SlaveTimeout)
	m.set.acks = map[int64]int64{}
	m.set.conns = map[int64]int{}
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
	if c.replicaID != 0 {
		m.set.mu.Lock()
		m.set.conns[c.replicaID]++
		m.set.mu.Unlock()
	}
	return true
}

// removeConn forgets a closed connection.
func (m *Master) removeConn(c *masterConn) {
	m.mu.Lock()
	delete(m.conns, c)
	if c.counted {
		c.counted = false
		m.slaves.Add(-1)
		if c.replicaID != 0 {
			m.set.mu.Lock()
			if m.set.conns[c.replicaID]--; m.set.conns[c.replicaID] <= 0 {
				delete(m.set.conns, c.replicaID)
			}
			m.set.mu.Unlock()
		}
	}
	m.mu.Unlock()
}

// acked records a slave's ack (notifyTransferSome) and answers the sends
// it releases.
func (m *Master) acked(c *masterConn, offset int64) {
	if offset >= c.pushedMax.Load() {
		c.caughtUp.Store(c.pushedAt.Load())
	}
	grew := false
	for {
		cur := m.push2Slave.Load()
		if offset <= cur {
			break
		}
		if m.push2Slave.CompareAndSwap(cur, offset) {
			grew = true
			break
		}
	}
	if c.replicaID != 0 {
		m.set.mu.Lock()
		if offset > m.set.acks[c.replicaID] {
			m.set.acks[c.replicaID] = offset
		}
		m.set.mu.Unlock()
	}
	if m.setMode.Load() {
		if m.updateRelease() {
			m.transfer.acknowledged()
		}
		return
	}
	if grew {
		m.release.Store(m.push2Slave.Load())
		m.transfer.acknowledged()
	}
}

// ackSet is the replicas whose acks release sends in set mode.
type ackSet struct {
	mu    sync.Mutex
	ids   []int64         // guarded by mu: the replicas that must ack
	acks  map[int64]int64 // guarded by mu: each replica's highest ack, kept across reconnects
	conns map[int64]int   // guarded by mu: connections past their handshake, per replica
}

// updateRelease sets release to the offset every replica of the set
// acknowledged (everything when the set is empty) and reports whether it
// grew.
func (m *Master) updateRelease() bool {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	rel := int64(math.MaxInt64)
	for _, id := range m.set.ids {
		rel = min(rel, m.set.acks[id])
	}
	return m.release.Swap(rel) < rel
}

// SetAckSet makes sends wait until every replica of ids acknowledged them
// (controller mode's allAckInSyncStateSet: ids are the in-sync set's
// slaves, by the replica ids their hellos carry); an empty ids releases
// them at once (the master alone is in sync). nil returns to waiting for
// any one slave. Sends already waiting are judged by the new set.
func (m *Master) SetAckSet(ids []int64) {
	if ids == nil {
		m.setMode.Store(false)
		m.release.Store(m.push2Slave.Load())
	} else {
		m.set.mu.Lock()
		m.set.ids = append([]int64{}, ids...)
		m.set.mu.Unlock()
		m.setMode.Store(true)
		m.updateRelease()
	}
	m.transfer.acknowledged()
}

// setMissing returns a replica of the ack set with no connection, or 0.
func (m *Master) setMissing() int64 {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	for _, id := range m.set.ids {
		if m.set.conns[id] == 0 {
			return id
		}
	}
	return 0
}

// SlaveOK reports whether a SYNC_MASTER send that ends at masterPutWhere
// should wait for a slave (isSlaveOK): a slave is connected and the acked
// offset is less than haSlaveFallbehindMax behind. With an ack set, every
// replica of it must be connected.
func (m *Master) SlaveOK(masterPutWhere int64) bool {
	if m.setMode.Load() {
		return m.setMissing() == 0
	}
	return m.slaves.Load() > 0 && masterPutWhere-m.push2Slave.Load() < m.cfg.SlaveFallbehindMax
}

// WaitReplicated calls done once a slave (with an ack set: every replica of
// it) acknowledged the commitlog up to nextOffset (the end of a send's
// records: WroteOffset + WroteBytes), with PutOK; with FlushSlaveTimeout
// after slaveTimeout; at once with SlaveNotAvailable when SlaveOK is false.
// done runs on the caller's goroutine when the answer is immediate, else on
// the master's transfer goroutine, and must not block. No goroutine or
// timer is spent per call.
func (m *Master) WaitReplicated(nextOffset int64, done func(Result)) {
	if m.release.Load() >= nextOffset {
		done(Result{Status: store.PutOK})
		return
	}
	if !m.SlaveOK(nextOffset) {
		err := fmt.Errorf("%w: %d connected, acked %d, send ends at %d", ErrSlaveNotAvailable, m.slaves.Load(), m.push2Slave.Load(), nextOffset)
		if id := m.setMissing(); id != 0 {
			err = fmt.Errorf("%w: in-sync replica %d is not connected", ErrSlaveNotAvailable, id)
		}
		done(Result{Status: store.SlaveNotAvailable, Err: err})
		return
	}
	m.transfer.wait(nextOffset, time.Now(), done)
}

// ConnStatus describes one slave connection.
type ConnStatus struct {
	Addr           string    // the slave's address as the master sees it
	ReplicaID      int64     // the replica id its hello carried (0: none)
	LastCaughtUp   time.Time // when it last held everything the master had pushed
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
			Addr: c.addr, ReplicaID: c.replicaID, LastCaughtUp: time.Unix(0, c.caughtUp.Load()), ConnectedSince: c.since, AckOffset: ack,
			LagBytes: max(0, st.MaxOffset-ack), Compressed: c.compress, SentBytes: c.sent.Load(),
		})
	}
	m.mu.Unlock()
	sort.Slice(st.Slaves, func(i, j int) bool { return st.Slaves[i].Addr < st.Slaves[j].Addr })
	return st
}
