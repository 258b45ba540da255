package broker

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// triggerRegister asks registerLoop to register again now (after a topic
// change, so the new route reaches clients without waiting 30 s). It never
// blocks: a pending trigger already covers this one.
func (b *Broker) triggerRegister() {
	select {
	case b.registerNow <- struct{}{}:
	default:
	}
}

// registerLoop registers with every nameserver every
// registerNameServerPeriod and whenever the topic table changes, until stop.
func (b *Broker) registerLoop() {
	defer b.wg.Done()
	period := time.Duration(b.cfg.RegisterNameServerPeriod) * time.Millisecond
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.registerNow:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.registerTimeout())
		b.registerAll(ctx)
		cancel()
	}
}

// registerBody builds the REGISTER_BROKER body: the whole topic table with
// its version. A broker without read or write permission registers every
// topic with its own perm, as RocketMQ does, so clients stop using it.
func (b *Broker) registerBody() ([]byte, error) {
	w := b.topics.Wrapper()
	if perm := b.cfg.BrokerPermission; !protocol.IsWriteable(perm) || !protocol.IsReadable(perm) {
		for _, tc := range w.TopicConfigTable {
			tc.Perm = perm
		}
	}
	body := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: *w, FilterServerList: []string{}}
	return body.Encode(b.cfg.CompressedRegister)
}

// registerAll sends REGISTER_BROKER to every nameserver in parallel and
// waits for all of them (bounded by ctx). Failures are logged: the next
// round retries.
func (b *Broker) registerAll(ctx context.Context) {
	addrs := b.cfg.NamesrvAddrs()
	if len(addrs) == 0 {
		return
	}
	if b.cfg.EnableControllerMode && b.ctlRoleNow() == roleUnknown {
		return // no role from the controller yet: clients must not see this broker
	}
	body, err := b.registerBody()
	if err != nil {
		b.log.WithError(err).Error("cannot encode the registration body")
		return
	}
	id := b.registerID()
	b.registeredID.Store(id)
	hdr := protocol.RegisterBrokerRequestHeader{
		BrokerName:   b.cfg.BrokerName,
		BrokerAddr:   b.Addr(),
		ClusterName:  b.cfg.BrokerClusterName,
		HaServerAddr: b.haServerAddr(),
		BrokerID:     id,
		Compressed:   b.cfg.CompressedRegister,
		BodyCrc32:    protocol.BodyCRC32(body),
	}
	b.invokeAll(ctx, addrs, func() *remoting.Command {
		// ServerVersion (>= 37) makes the nameserver read a RegisterBrokerBody.
		return remoting.NewRequest(remoting.RegisterBroker, protocol.EncodeHeader(&hdr, nil), body)
	}, "register", b.onRegistered)
}

// onRegistered takes a nameserver's REGISTER_BROKER answer: a slave learns
// its master's address (for the metadata sync) and HA address (for
// replication) there. An answer without them (the master is gone from the
// nameserver) changes nothing: the slave keeps trying the last master.
func (b *Broker) onRegistered(resp *remoting.Command) {
	if !b.cfg.IsSlave() { // in controller mode the controller names the master
		return
	}
	var h protocol.RegisterBrokerResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		b.log.WithError(err).Warn("cannot read the nameserver's REGISTER_BROKER answer")
		return
	}
	b.setMasterAddrs(h.MasterAddr, h.HaServerAddr)
}

// setMasterAddrs records the master's broker and HA addresses ("" keeps
// the known one). A new master address triggers a metadata sync at once.
func (b *Broker) setMasterAddrs(master, ha string) {
	if master != "" {
		if old := b.masterAddr.Swap(&master); old == nil || *old != master {
			b.log.WithField("master", master).Info("following a new master")
			select {
			case b.slaveSync.now <- struct{}{}:
			default:
			}
		}
	}
	if ha != "" && b.onHAMaster != nil {
		b.onHAMaster(ha)
	}
}

// registerID is the brokerId registered with the nameservers: brokerId, or
// in controller mode 0 while this broker is the controller's master (and
// takes writes), so clients find the group's master where they look for it.
func (b *Broker) registerID() int64 {
	if b.cfg.EnableControllerMode && b.acceptWrites.Load() {
		return protocol.MasterID
	}
	return b.cfg.BrokerID
}

// MasterAddr returns the address of the master a slave follows ("" when not
// known yet, and on a master).
func (b *Broker) MasterAddr() string {
	if p := b.masterAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// unregisterAll sends UNREGISTER_BROKER to every nameserver, so clients stop
// routing here before the server closes.
func (b *Broker) unregisterAll(ctx context.Context) {
	addrs := b.cfg.NamesrvAddrs()
	if len(addrs) == 0 {
		return
	}
	hdr := protocol.UnRegisterBrokerRequestHeader{
		BrokerName:  b.cfg.BrokerName,
		BrokerAddr:  b.Addr(),
		ClusterName: b.cfg.BrokerClusterName,
		BrokerID:    b.registeredID.Load(), // as last registered (controller mode: 0 or its own)
	}
	ctx, cancel := context.WithTimeout(ctx, b.registerTimeout())
	defer cancel()
	b.invokeAll(ctx, addrs, func() *remoting.Command {
		return remoting.NewRequest(remoting.UnregisterBroker, protocol.EncodeHeader(&hdr, nil), nil)
	}, "unregister", nil)
}

// invokeAll sends a fresh request (the transport sets its opaque) to each
// address in parallel and waits for every answer; onOK (may be nil) gets
// each SUCCESS answer.
func (b *Broker) invokeAll(ctx context.Context, addrs []string, build func() *remoting.Command, what string, onOK func(*remoting.Command)) {
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := b.log.WithFields(logrus.Fields{"namesrv": addr, "op": what})
			resp, err := b.nsClient.InvokeSync(ctx, addr, build())
			switch {
			case err != nil:
				log.WithError(err).Warn("nameserver call failed")
			case resp.ResponseCode() != remoting.Success:
				log.WithFields(logrus.Fields{"code": resp.Code, "remark": resp.Remark}).Warn("nameserver refused")
			default:
				log.Debug("nameserver call done")
				if onOK != nil {
					onOK(resp)
				}
			}
		}()
	}
	wg.Wait()
}
