package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store/ha"
)

// Replication wiring: a master serves its slaves on the HA port
// (listenPort+1) with store/ha's Master, and a SYNC_MASTER's durable puts
// wait for a slave; a slave follows its master with store/ha's Slave, fed
// the master's HA address by haMasterAddress or by the nameservers'
// REGISTER_BROKER answers (onRegistered).

// replication is a broker's side of replication: a master or a slave, or
// neither. Outside controller mode the role is fixed at start; in
// controller mode the role switch (controller_mode.go) replaces them at
// runtime, so readers load them atomically.
type replication struct {
	master atomic.Pointer[ha.Master] // nil unless master
	slave  atomic.Pointer[ha.Slave]  // nil unless following a master
	// port is the HA port a controller-mode broker listens on whenever it
	// is master, fixed at start so the address the controller hands to
	// slaves stays valid (0: listenPort+1).
	port int
}

// startReplication starts the HA master or slave for the broker's role.
// The store is open; the remoting server is not listening yet. In
// controller mode nothing starts here: the controller decides the role.
func (b *Broker) startReplication() error {
	if b.cfg.EnableControllerMode {
		return b.reserveHAPort()
	}
	if b.cfg.IsSlave() {
		sl, err := b.startHASlave(0)
		if err != nil {
			return err
		}
		if a := b.cfg.HaMasterAddress; a != "" {
			// A configured address wins over the nameservers' answers.
			sl.SetMasterAddress(a)
		} else {
			b.onHAMaster = sl.SetMasterAddress
		}
		return nil
	}
	m, err := b.startHAMaster()
	if err != nil {
		return err
	}
	if b.cfg.BrokerRole == conf.RoleSyncMaster {
		b.store.SetReplicaWaiter(m.WaitReplicated)
	}
	return nil
}

// startHASlave starts following (no master address yet), as replica id
// (0: none sent).
func (b *Broker) startHASlave(replicaID int64) (*ha.Slave, error) {
	hc := b.cfg.HAConfig()
	hc.ReplicaID = replicaID
	sl, err := ha.NewSlave(b.store, hc, b.log.WithField("component", "ha"))
	if err != nil {
		return nil, fmt.Errorf("broker: replication: %w", err)
	}
	b.ha.slave.Store(sl)
	sl.Start()
	return sl, nil
}

// startHAMaster listens for slaves on the HA port.
func (b *Broker) startHAMaster() (*ha.Master, error) {
	m, err := ha.NewMaster(b.store, b.cfg.HAConfig(), b.log.WithField("component", "ha"))
	if err != nil {
		return nil, fmt.Errorf("broker: replication: %w", err)
	}
	if err := m.Start(b.haListenAddr()); err != nil {
		return nil, fmt.Errorf("broker: replication: listen on %s (listenPort+1): %w", b.haListenAddr(), err)
	}
	b.ha.master.Store(m)
	return m, nil
}

// stopReplication stops the HA master or slave; the store stays open.
func (b *Broker) stopReplication(ctx context.Context) error {
	var errs []error
	if m := b.ha.master.Swap(nil); m != nil {
		b.store.SetReplicaWaiter(nil)
		errs = append(errs, m.Shutdown(ctx))
	}
	if sl := b.ha.slave.Swap(nil); sl != nil {
		errs = append(errs, sl.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// reserveHAPort fixes the HA port of a controller-mode broker started on
// listenPort 0 (tests): a free port now, listened on whenever it is master.
func (b *Broker) reserveHAPort() error {
	if b.cfg.ListenPort > 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(b.cfg.BindAddress, "0"))
	if err != nil {
		return fmt.Errorf("broker: reserve an HA port: %w", err)
	}
	b.ha.port = l.Addr().(*net.TCPAddr).Port
	return l.Close()
}

// haListenAddr is where the master listens for slaves: the bind address
// and listenPort+1, or any free port when listenPort is 0 (tests).
func (b *Broker) haListenAddr() string {
	port := b.ha.port
	if b.cfg.ListenPort > 0 {
		port = b.cfg.ListenPort + 1
	}
	return net.JoinHostPort(b.cfg.BindAddress, strconv.Itoa(port))
}

// haServerAddr is brokerIP2 (brokerIP1 when unset) and the HA port, the
// address slaves dial, as registered with the nameservers.
func (b *Broker) haServerAddr() string {
	ip := b.ip
	if b.cfg.BrokerIP2 != "" {
		if a, err := netip.ParseAddr(b.cfg.BrokerIP2); err == nil {
			ip = a
		}
	}
	port := b.StoreHost().Port() + 1
	if b.ha.port > 0 {
		port = uint16(b.ha.port)
	}
	if m := b.ha.master.Load(); m != nil {
		if ta, ok := m.Addr().(*net.TCPAddr); ok {
			port = uint16(ta.Port)
		}
	}
	return netip.AddrPortFrom(ip, port).String()
}

// haStatus builds the replication figures of this broker.
func (b *Broker) haStatus() protocol.HARuntimeInfo {
	var info protocol.HARuntimeInfo
	master, slave := b.ha.master.Load(), b.ha.slave.Load()
	switch {
	case master != nil:
		st := master.Status()
		info.Master = true
		info.MasterCommitLogMaxOffset = st.MaxOffset
		info.HAConnectionInfo = []protocol.HAConnectionRuntimeInfo{}
		for _, c := range st.Slaves {
			inSync := c.LagBytes < b.cfg.HaSlaveFallbehindMax
			if inSync {
				info.InSyncSlaveNums++
			}
			info.HAConnectionInfo = append(info.HAConnectionInfo, protocol.HAConnectionRuntimeInfo{
				Addr: c.Addr, SlaveAckOffset: c.AckOffset, Diff: c.LagBytes, InSync: inSync,
				TransferFromWhere: c.AckOffset, ConnectedSince: c.ConnectedSince.UnixMilli(), Compressed: c.Compressed,
			})
		}
	case slave != nil:
		st := slave.Status()
		info.MasterCommitLogMaxOffset = st.MasterMaxOffset
		info.HAClientRuntimeInfo = protocol.HAClientRuntimeInfo{
			MasterAddr: st.MasterAddr, MaxOffset: st.MaxOffset, IsActivated: st.State == ha.SlaveFollowing,
			State: string(st.State), LastError: st.LastError,
		}
	}
	return info
}

// processGetHAStatus answers GET_BROKER_HA_STATUS (RocketMQ 5's code 907).
func (b *Broker) processGetHAStatus(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := json.Marshal(b.haStatus())
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// haRuntimeFields are the replication entries of GET_BROKER_RUNTIME_INFO,
// under RocketMQ's names where it has them.
func (b *Broker) haRuntimeFields(kv map[string]string) {
	master, slave := b.ha.master.Load(), b.ha.slave.Load()
	switch {
	case master != nil:
		st := master.Status()
		kv["haServerAddr"] = b.haServerAddr()
		kv["slaveNum"] = strconv.Itoa(len(st.Slaves))
		kv["push2SlaveMaxOffset"] = strconv.FormatInt(st.Push2SlaveMaxOffset, 10)
		behind := int64(0)
		if len(st.Slaves) > 0 {
			behind = max(0, st.MaxOffset-st.Push2SlaveMaxOffset)
		}
		kv["slaveFallBehindMuch"] = strconv.FormatInt(behind, 10)
	case slave != nil:
		st := slave.Status()
		kv["masterAddr"] = b.MasterAddr()
		kv["haMasterAddr"] = st.MasterAddr
		kv["haState"] = string(st.State)
		kv["masterCommitLogMaxOffset"] = strconv.FormatInt(st.MasterMaxOffset, 10)
		if st.MasterMaxOffset >= 0 {
			kv["slaveFallBehindMuch"] = strconv.FormatInt(max(0, st.MasterMaxOffset-st.MaxOffset), 10)
		}
	}
}

// logRole says at start what this broker replicates.
func (b *Broker) logRole() {
	log := b.log.WithField("role", b.cfg.BrokerRole)
	switch {
	case b.cfg.EnableControllerMode:
		log.WithField("controllerAddr", b.cfg.ControllerAddr).Info("controller mode: the controller decides whether this broker is master or slave")
	case b.ha.master.Load() != nil:
		log.WithFields(logrus.Fields{"haServerAddr": b.haServerAddr(), "syncDoubleWrite": b.cfg.BrokerRole == conf.RoleSyncMaster}).
			Info("serving slaves")
	case b.ha.slave.Load() != nil:
		log.WithField("haMasterAddress", b.cfg.HaMasterAddress).Info("following a master (address from haMasterAddress or the nameservers)")
	}
}
