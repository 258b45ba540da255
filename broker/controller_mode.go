package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// Controller mode (enableControllerMode; RocketMQ 5's ReplicasManager): the
// broker takes its role from the controller group instead of brokerRole.
//
// controllerLoop heartbeats to the controller leader every
// brokerHeartbeatInterval; each answer carries the group's master, master
// epoch and in-sync set, and the controller also pushes elections at once
// (NOTIFY_BROKER_ROLE_CHANGED). The loop alone switches roles, so switches
// never overlap:
//
//   - master: refuse writes until ready; record the epoch in the epoch file
//     at the commitlog's end; serve slaves on the HA port; wait for every
//     in-sync replica under SYNC_MASTER (allAckInSyncStateSet); start the
//     delay, timer and transaction services; take writes; register with the
//     nameservers as brokerId 0.
//   - slave: refuse writes first; stop those services and the HA master
//     (sends still waiting for replicas get FLUSH_SLAVE_TIMEOUT, never
//     SEND_OK); ask the master for its epochs and cut the commitlog where
//     the two histories part (what is cut was never acknowledged under
//     sync replication); take the master's history; follow it; copy its
//     metadata; register under the own brokerId.
//   - none (the group has no master): refuse writes, follow nobody.
//
// Lease: a master takes writes only while its last answered heartbeat was
// sent less than brokerNotActiveTimeoutMillis ago. The controller deposes
// a master it has not heard from for that long, counted from when the
// heartbeat arrived, so a master cut off from the controller stops writing
// before another replica is elected.
//
// As master the loop also keeps the in-sync set: a slave that has not
// caught up for haMaxTimeSlaveNotCatchup leaves it, a caught-up one joins.
// Joining is two-phase, so the set never claims a replica that lacks an
// acknowledged message: sends start waiting for the candidate first, and
// the change is proposed only once the candidate holds everything written
// before that.

// ctlRole is a controller-mode broker's role.
type ctlRole int32

const (
	roleUnknown ctlRole = iota // the controller has not answered yet
	roleNone                   // the group has no master, or not this one and no other
	roleMaster
	roleSlave
)

func (r ctlRole) String() string {
	switch r {
	case roleNone:
		return "NONE"
	case roleMaster:
		return "MASTER"
	case roleSlave:
		return "SLAVE"
	}
	return "UNKNOWN"
}

// replicaInfo is what the controller says of the group.
type replicaInfo struct {
	protocol.ReplicaInfoHeader
	syncSet protocol.SyncStateSet
}

// ctlState is the controller-mode state. Fields without a comment are
// owned by controllerLoop.
type ctlState struct {
	role       ctlRole
	masterID   int64
	masterAddr string
	masterHa   string
	epoch      int32
	ssEpoch    int32
	syncSet    []int64 // the in-sync set, this master included
	slaveReady bool    // following: cut to the consistent point, HA slave running
	registered bool    // with the controller
	leader     int     // index in controllerAddrs of the last controller that answered
	leaderAddr string  // the leader's address from a NOT_LEADER answer
	// pending are replicas joining the in-sync set: sends wait for them
	// already; they join once their ack reaches mark.
	pending map[int64]pendingMember
	// seen is when each slave was last seen connected (as master).
	seen map[int64]time.Time
	// slaveStop ends the slave sync loop of the current slave role.
	slaveStop chan struct{}
	// since is when the current role began.
	since time.Time

	roleNow    atomic.Int32   // role, for other goroutines
	answers    atomic.Int64   // controller answers taken (registrations and heartbeats)
	leaseUntil atomic.Int64   // unix ns until which a master may take writes
	writableMu sync.Mutex     // serialises acceptWrites changes (loop and fence timer)
	fence      *time.Timer    // fires when the lease runs out
	notify     chan struct{}  // a pushed role change: ask the controller now
	slaveWG    sync.WaitGroup // the slave sync loops
}

// pendingMember is a replica joining the in-sync set.
type pendingMember struct {
	mark  int64     // the master's max offset when sends began to wait for it
	since time.Time // when that was
}

// pendingTimeout bounds how long a joining replica may take to reach its
// mark before it is given up (and tried again later).
const pendingTimeout = 5 * time.Second

// caughtUpRecently is how recently a slave must have caught up to be
// offered a place in the in-sync set.
const caughtUpRecently = 3 * time.Second

func (b *Broker) ctlRoleNow() ctlRole { return ctlRole(b.ctl.roleNow.Load()) }

// registerControllerProcessors routes the requests of controller mode.
func (b *Broker) registerControllerProcessors() {
	b.server.Handle(remoting.GetBrokerEpochCache, b.pools.Admin, b.processGetBrokerEpochCache)
	b.server.Handle(remoting.NotifyBrokerRoleChanged, b.pools.Admin, b.processNotifyRoleChanged)
}

// processGetBrokerEpochCache answers GET_BROKER_EPOCH_CACHE: the epoch
// history (with end offsets) and the commitlog's max offset. A slave asks
// its new master for it to find where to cut; mqadmin getBrokerEpoch
// shows it.
func (b *Broker) processGetBrokerEpochCache(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	st := b.store
	maxOff := st.CommitLog().MaxOffset()
	entries := st.Epochs().Entries()
	out := protocol.EpochEntryCache{ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName, BrokerID: b.cfg.BrokerID,
		EpochList: make([]protocol.EpochEntry, len(entries)), MaxOffset: maxOff}
	for i, e := range entries {
		end := maxOff
		if i+1 < len(entries) {
			end = entries[i+1].StartOffset
		}
		out.EpochList[i] = protocol.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset, EndOffset: end}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// processNotifyRoleChanged takes the controller's push of an election as
// a reason for controllerLoop to ask the controller at once, not as the
// role itself: anyone who reaches the broker's port can send
// NOTIFY_BROKER_ROLE_CHANGED, and a forged one with a high epoch would
// otherwise make this broker a master beside the real one (the
// controller's later answers, at a lower epoch, would be ignored). A wake-up
// already pending covers this one.
func (b *Broker) processNotifyRoleChanged(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if !b.cfg.EnableControllerMode {
		return respond(req, remoting.SystemError, "this broker is not in controller mode (enableControllerMode=false)"), nil
	}
	var h protocol.ReplicaInfoHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return respond(req, remoting.SystemError, err.Error()), nil
	}
	if len(req.Body) > 0 {
		if _, err := protocol.DecodeSyncStateSet(req.Body); err != nil {
			return respond(req, remoting.SystemError, err.Error()), nil
		}
	}
	b.log.WithFields(logrus.Fields{"master": h.MasterBrokerID, "masterEpoch": h.MasterEpoch}).Info("a role change was announced; asking the controller")
	select {
	case b.ctl.notify <- struct{}{}:
	default:
	}
	return respond(req, remoting.Success, ""), nil
}

// controllerLoop is the controller-mode broker's one role owner: it
// registers with the controller, heartbeats, applies the role the answers
// (and the controller's pushes) name, and, as master, keeps the in-sync
// set. It runs until stop.
func (b *Broker) controllerLoop() {
	defer b.wg.Done()
	every := time.Duration(b.cfg.BrokerHeartbeatInterval) * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.ctl.notify: // a push: ask the controller leader now
		case <-t.C:
		}
		if info, ok := b.controllerHeartbeat(); ok {
			b.applyRole(info)
		}
		if b.ctl.role == roleMaster {
			b.keepSyncStateSet()
		}
		t.Reset(every)
	}
}

// controllerTimeout bounds one call to a controller.
func (b *Broker) controllerTimeout() time.Duration {
	return time.Duration(b.cfg.SendHeartbeatTimeoutMillis) * time.Millisecond
}

// callController sends a request to the controller leader, trying the
// others (and the leader a follower names) when it does not answer or does
// not lead. build makes a fresh request per try. It returns the answer and
// when the answered request was sent.
func (b *Broker) callController(build func() *remoting.Command) (*remoting.Command, time.Time, error) {
	addrs := b.cfg.ControllerAddrs()
	var lastErr error
	tries := len(addrs) + 1
	for i := 0; i < tries; i++ {
		addr := b.ctl.leaderAddr
		if addr == "" {
			addr = addrs[(b.ctl.leader+i)%len(addrs)]
		}
		b.ctl.leaderAddr = ""
		ctx, cancel := context.WithTimeout(b.stopCtx, b.controllerTimeout())
		sent := time.Now()
		resp, err := b.nsClient.InvokeSync(ctx, addr, build())
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("controller %s: %w", addr, err)
			continue
		}
		if resp.ResponseCode() == remoting.ControllerNotLeader {
			var md protocol.GetMetaDataResponseHeader
			if protocol.DecodeHeader(resp.ExtFields, &md) == nil && md.ControllerLeaderAddress != "" && md.ControllerLeaderAddress != addr {
				b.ctl.leaderAddr = md.ControllerLeaderAddress
			}
			lastErr = fmt.Errorf("controller %s does not lead: %s", addr, resp.Remark)
			continue
		}
		if j := slices.Index(addrs, addr); j >= 0 {
			b.ctl.leader = j
		}
		return resp, sent, nil
	}
	return nil, time.Time{}, lastErr
}

// controllerHeartbeat registers with the controller if needed, else
// heartbeats, renews the lease on success and returns what the controller
// said of the group.
func (b *Broker) controllerHeartbeat() (replicaInfo, bool) {
	log := b.log.WithField("controllerAddr", b.cfg.ControllerAddr)
	st := b.store
	for attempt := 0; attempt < 2; attempt++ {
		var build func() *remoting.Command
		if !b.ctl.registered {
			h := protocol.RegisterBrokerToControllerRequestHeader{
				ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName, BrokerID: b.cfg.BrokerID,
				BrokerAddress: b.Addr(), HaAddress: b.haServerAddr(), HeartbeatTimeoutMills: b.cfg.BrokerNotActiveTimeoutMillis,
				InvokeTime: time.Now().UnixMilli(),
			}
			build = func() *remoting.Command {
				return remoting.NewRequest(remoting.ControllerRegisterBroker, protocol.EncodeHeader(&h, nil), nil)
			}
		} else {
			h := protocol.BrokerHeartbeatRequestHeader{
				ClusterName: b.cfg.BrokerClusterName, BrokerAddr: b.Addr(), BrokerName: b.cfg.BrokerName, BrokerID: b.cfg.BrokerID,
				Epoch: st.Epochs().LastEpoch(), MaxOffset: st.CommitLog().MaxOffset(),
				HeartbeatTimeoutMills: b.cfg.BrokerNotActiveTimeoutMillis,
			}
			build = func() *remoting.Command {
				return remoting.NewRequest(remoting.BrokerHeartbeat, protocol.EncodeHeader(&h, nil), nil)
			}
		}
		resp, sent, err := b.callController(build)
		if err != nil {
			log.WithError(err).Warn("no controller answered")
			return replicaInfo{}, false
		}
		switch resp.ResponseCode() {
		case remoting.Success:
		case remoting.ControllerBrokerNeedToBeRegistered:
			b.ctl.registered = false
			continue
		default:
			log.WithFields(logrus.Fields{"code": resp.Code, "remark": resp.Remark}).Warn("the controller refused this broker")
			return replicaInfo{}, false
		}
		if !b.ctl.registered {
			b.ctl.registered = true
			log.WithField("brokerId", b.cfg.BrokerID).Info("registered with the controller")
		}
		var info replicaInfo
		if err := protocol.DecodeHeader(resp.ExtFields, &info.ReplicaInfoHeader); err != nil {
			log.WithError(err).Warn("cannot read the controller's answer")
			return replicaInfo{}, false
		}
		if len(resp.Body) > 0 {
			if info.syncSet, err = protocol.DecodeSyncStateSet(resp.Body); err != nil {
				log.WithError(err).Warn("cannot read the controller's answer")
				return replicaInfo{}, false
			}
		}
		b.renewLease(sent)
		b.ctl.answers.Add(1)
		return info, true
	}
	return replicaInfo{}, false
}

// renewLease extends the lease to sent+brokerNotActiveTimeoutMillis: the
// controller counts the same timeout from the heartbeat's arrival, which
// is later.
func (b *Broker) renewLease(sent time.Time) {
	until := sent.Add(time.Duration(b.cfg.BrokerNotActiveTimeoutMillis) * time.Millisecond)
	b.ctl.leaseUntil.Store(until.UnixNano())
	b.ctl.writableMu.Lock()
	if b.ctl.fence == nil {
		b.ctl.fence = time.AfterFunc(time.Until(until), b.leaseExpired)
	} else {
		b.ctl.fence.Reset(time.Until(until))
	}
	b.ctl.writableMu.Unlock()
	b.updateWritable()
}

// leaseExpired runs on the fence timer's goroutine.
func (b *Broker) leaseExpired() {
	if b.ctlRoleNow() == roleMaster && !b.leaseValid() {
		b.log.WithField("brokerNotActiveTimeoutMillis", b.cfg.BrokerNotActiveTimeoutMillis).
			Error("no controller answered within the lease: refusing writes (another replica may be master by now)")
	}
	b.updateWritable()
}

func (b *Broker) leaseValid() bool { return time.Now().UnixNano() < b.ctl.leaseUntil.Load() }

// updateWritable makes the store take writes exactly when this broker is
// master by the controller and within its lease.
func (b *Broker) updateWritable() {
	b.ctl.writableMu.Lock()
	defer b.ctl.writableMu.Unlock()
	w := b.ctlRoleNow() == roleMaster && b.leaseValid()
	if b.acceptWrites.Load() == w {
		return
	}
	if w {
		b.store.SetSlave(false)
		b.acceptWrites.Store(true)
	} else {
		// Refused at the processors first, then at the store.
		b.acceptWrites.Store(false)
		b.store.SetSlave(true)
	}
	// The brokerId registered with the nameservers follows (registerID).
	b.triggerRegister()
}

// applyRole switches to the role info names, when it is newer than the one
// held. Runs on controllerLoop.
func (b *Broker) applyRole(info replicaInfo) {
	c := &b.ctl
	if info.MasterEpoch < c.epoch {
		return // an older answer than what was applied
	}
	me := b.cfg.BrokerID
	switch {
	case info.MasterBrokerID == me:
		if c.role != roleMaster || c.epoch != info.MasterEpoch {
			b.becomeMaster(info)
		} else if info.SyncStateSetEpoch > c.ssEpoch {
			b.takeSyncStateSet(info.syncSet)
		}
	case info.MasterBrokerID == protocol.NoMaster:
		if c.role != roleNone || c.epoch != info.MasterEpoch {
			b.becomeNone(info)
		}
	default:
		if c.role != roleSlave || c.epoch != info.MasterEpoch || c.masterID != info.MasterBrokerID || !c.slaveReady {
			b.becomeSlave(info)
		}
	}
}

// setRole records the role for other goroutines and re-registers with the
// nameservers under the brokerId it implies.
func (b *Broker) setRole(r ctlRole) {
	if b.ctl.role != r {
		b.ctl.since = time.Now()
	}
	b.ctl.role = r
	b.ctl.roleNow.Store(int32(r))
	b.updateWritable()
	b.triggerRegister()
}

// leaveRole stops what the current role runs: writes first, then the
// services that write, then replication. The store stays open.
func (b *Broker) leaveRole() {
	c := &b.ctl
	c.roleNow.Store(int32(roleNone))
	b.updateWritable()
	if c.role == roleMaster {
		b.stopDelayServices()
	}
	if c.slaveStop != nil {
		close(c.slaveStop)
		c.slaveStop = nil
		c.slaveWG.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.stopReplication(ctx); err != nil {
		b.log.WithError(err).Warn("stopping replication for a role change")
	}
	c.pending = nil
	c.seen = nil
	c.slaveReady = false
}

// becomeMaster makes this broker the group's master at info's epoch.
func (b *Broker) becomeMaster(info replicaInfo) {
	c := &b.ctl
	st := b.store
	log := b.log.WithFields(logrus.Fields{"masterEpoch": info.MasterEpoch, "from": c.role})
	b.leaveRole()
	start := st.CommitLog().MaxOffset()
	if last := st.Epochs().LastEpoch(); last == info.MasterEpoch {
		// Master at this epoch before a restart: the epoch goes on.
		log.Info("still the master at this epoch")
	} else if err := st.Epochs().Append(store.EpochEntry{Epoch: info.MasterEpoch, StartOffset: start}); err != nil {
		log.WithError(err).Error("cannot record the new epoch; staying without a role")
		b.setRole(roleNone)
		return
	}
	m, err := b.startHAMaster()
	if err != nil {
		log.WithError(err).Error("cannot serve slaves; staying without a role")
		b.setRole(roleNone)
		return
	}
	if b.cfg.BrokerRole == conf.RoleSyncMaster {
		// A new master waits for any one slave until takeSyncStateSet
		// below gives it the in-sync set (allAckInSyncStateSet).
		st.SetReplicaWaiter(m.WaitReplicated)
	}
	c.masterID, c.masterAddr, c.masterHa = b.cfg.BrokerID, b.Addr(), info.MasterHaAddress
	c.epoch = info.MasterEpoch
	c.ssEpoch = -1
	b.takeSyncStateSet(info.syncSet)
	b.masterAddr.Store(nil)
	// The services write: they run before writes are taken, never on a
	// slave. They start from what the slave sync copied from the old
	// master.
	if err := b.startDelayServices(); err != nil {
		log.WithError(err).Error("cannot start the delay, timer and transaction services")
	}
	b.setRole(roleMaster)
	log.WithFields(logrus.Fields{"epochStartOffset": start, "syncStateSet": c.syncSet, "haServerAddr": b.haServerAddr()}).
		Warn("this broker is the master now")
}

// takeSyncStateSet adopts the controller's in-sync set (as master).
func (b *Broker) takeSyncStateSet(set protocol.SyncStateSet) {
	c := &b.ctl
	if set.SyncStateSetEpoch <= c.ssEpoch {
		return
	}
	c.syncSet = protocol.SortedIDs(set.SyncStateSet)
	c.ssEpoch = set.SyncStateSetEpoch
	c.pending = nil
	b.applyAckSet()
}

// applyAckSet makes sends wait for the in-sync slaves and the joining
// ones (SYNC_MASTER with allAckInSyncStateSet).
func (b *Broker) applyAckSet() {
	c := &b.ctl
	m := b.ha.master.Load()
	if m == nil || b.cfg.BrokerRole != conf.RoleSyncMaster || !b.cfg.AllAckInSyncStateSet {
		return
	}
	ids := []int64{}
	for _, id := range c.syncSet {
		if id != b.cfg.BrokerID {
			ids = append(ids, id)
		}
	}
	for id := range c.pending {
		ids = append(ids, id)
	}
	m.SetAckSet(protocol.SortedIDs(ids))
}

// becomeNone stops acting as master or slave: the group has no master
// (none of the in-sync replicas lives), or this broker was deposed.
func (b *Broker) becomeNone(info replicaInfo) {
	b.leaveRole()
	c := &b.ctl
	c.epoch, c.masterID, c.masterAddr, c.masterHa = info.MasterEpoch, protocol.NoMaster, "", ""
	b.setRole(roleNone)
	b.log.WithField("masterEpoch", info.MasterEpoch).Warn("the group has no master: this broker takes no writes and follows nobody")
}

// becomeSlave follows the master info names: cut the commitlog where it
// parts from the master's, take the master's epoch history, replicate.
// When the master cannot be asked, it stays without a role and the next
// heartbeat tries again.
func (b *Broker) becomeSlave(info replicaInfo) {
	c := &b.ctl
	log := b.log.WithFields(logrus.Fields{"master": info.MasterBrokerID, "masterAddr": info.MasterAddress, "masterEpoch": info.MasterEpoch, "from": c.role})
	if c.role == roleSlave && c.epoch == info.MasterEpoch && c.masterID == info.MasterBrokerID && !c.slaveReady {
		// A retry: replication is stopped already.
	} else {
		b.leaveRole()
	}
	c.epoch, c.masterID, c.masterAddr, c.masterHa = info.MasterEpoch, info.MasterBrokerID, info.MasterAddress, info.MasterHaAddress
	b.setRole(roleSlave)
	if err := b.cutToMaster(info.MasterAddress, info.MasterEpoch, log); err != nil {
		log.WithError(err).Warn("cannot follow the new master yet; retrying with the next heartbeat")
		return
	}
	sl, err := b.startHASlave(b.cfg.BrokerID)
	if err != nil {
		log.WithError(err).Error("cannot start replication")
		return
	}
	sl.SetMasterAddress(info.MasterHaAddress)
	b.setMasterAddrs(info.MasterAddress, "")
	c.slaveStop = make(chan struct{})
	c.slaveWG.Add(1)
	go func(stop <-chan struct{}) {
		defer c.slaveWG.Done()
		b.slaveSyncLoop(stop)
	}(c.slaveStop)
	c.slaveReady = true
	log.Warn("this broker is a slave now")
}

// cutToMaster asks the master for its epoch history and cuts this
// commitlog where the two part, then takes the master's history. The
// master must have begun epoch (a slave may hear of an election before
// the new master acted on it): a history without it would be kept here
// for good, and a later cut would be computed from it.
func (b *Broker) cutToMaster(master string, epoch int32, log logrus.FieldLogger) error {
	ctx, cancel := context.WithTimeout(b.stopCtx, b.controllerTimeout()+slaveSyncTimeout)
	defer cancel()
	resp, err := b.nsClient.InvokeSync(ctx, master, remoting.NewRequest(remoting.GetBrokerEpochCache, nil, nil))
	if err != nil {
		return fmt.Errorf("ask %s for its epochs: %w", master, err)
	}
	if resp.ResponseCode() != remoting.Success {
		return fmt.Errorf("ask %s for its epochs: code %d: %s", master, resp.Code, resp.Remark)
	}
	var mc protocol.EpochEntryCache
	if err := json.Unmarshal(resp.Body, &mc); err != nil {
		return fmt.Errorf("epochs of %s: %w", master, err)
	}
	if n := len(mc.EpochList); n == 0 || mc.EpochList[n-1].Epoch < epoch {
		return fmt.Errorf("%w: %s has not begun epoch %d yet (its epochs: %v)", errMasterNotReady, master, epoch, mc.EpochList)
	}
	masterEpochs := make([]store.EpochEntry, len(mc.EpochList))
	for i, e := range mc.EpochList {
		masterEpochs[i] = store.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	// Checked before the cut, not only by Reset after it: a point computed
	// from a disordered history could cut what this broker holds for
	// nothing, and the history would be refused anyway.
	if err := store.CheckEpochOrder(masterEpochs); err != nil {
		return fmt.Errorf("epochs of %s: %w", master, err)
	}
	if mc.MaxOffset < masterEpochs[len(masterEpochs)-1].StartOffset {
		return fmt.Errorf("epochs of %s: %w: max offset %d before the last epoch's start %d", master, store.ErrEpochOrder,
			mc.MaxOffset, masterEpochs[len(masterEpochs)-1].StartOffset)
	}
	st := b.store
	local := st.Epochs().Entries()
	localMax := st.CommitLog().MaxOffset()
	point, ok := store.ConsistentPoint(local, localMax, masterEpochs, mc.MaxOffset)
	fields := logrus.Fields{"localEpochs": local, "localMaxOffset": localMax, "masterEpochs": masterEpochs, "masterMaxOffset": mc.MaxOffset, "consistentPoint": point}
	switch {
	case len(local) == 0:
		// Written before controller mode, or a new replica: replication
		// itself refuses a commitlog that differs from the master's.
		log.WithFields(fields).Info("no epoch history here: following without a cut")
	case !ok:
		log.WithFields(fields).Error("no epoch in common with the master (an unclean election?): cutting to where the histories begin")
	}
	if point < localMax && len(local) > 0 {
		log.WithFields(fields).Warn("cutting the commitlog tail the new master does not hold (never acknowledged under sync replication)")
		if err := st.TruncateTo(point); err != nil {
			return fmt.Errorf("cut the commitlog at %d: %w", point, err)
		}
		if err := st.Epochs().TruncateFrom(point); err != nil {
			return err
		}
	}
	if err := st.Epochs().Reset(masterEpochs); err != nil {
		return fmt.Errorf("take the master's epochs: %w", err)
	}
	return nil
}

// keepSyncStateSet shrinks and widens the in-sync set as the slaves keep
// up, through the controller. Runs on controllerLoop while master.
func (b *Broker) keepSyncStateSet() {
	c := &b.ctl
	m := b.ha.master.Load()
	if m == nil {
		return
	}
	st := m.Status()
	now := time.Now()
	maxLag := time.Duration(b.cfg.HaMaxTimeSlaveNotCatchup) * time.Millisecond
	type conn struct {
		ack      int64
		caughtUp time.Time
	}
	conns := map[int64]conn{}
	for _, s := range st.Slaves {
		if s.ReplicaID == 0 {
			continue
		}
		if old, ok := conns[s.ReplicaID]; !ok || s.AckOffset > old.ack {
			conns[s.ReplicaID] = conn{ack: s.AckOffset, caughtUp: s.LastCaughtUp}
		}
	}
	if c.seen == nil {
		c.seen = map[int64]time.Time{}
	}
	for id := range conns {
		c.seen[id] = now
	}
	// A replica gone from the HA port is out after the heartbeat timeout
	// (the controller's view of a dead broker), not haMaxTimeSlaveNotCatchup:
	// under allAckInSyncStateSet sends fail until it leaves the set.
	maxGone := time.Duration(b.cfg.BrokerNotActiveTimeoutMillis) * time.Millisecond
	me := b.cfg.BrokerID
	next := []int64{me}
	changed := false
	for _, id := range c.syncSet {
		if id == me {
			continue
		}
		cn, ok := conns[id]
		seen, ever := c.seen[id]
		switch {
		case ok && now.Sub(cn.caughtUp) <= maxLag:
			next = append(next, id)
		case !ok && ever && now.Sub(seen) <= maxGone:
			next = append(next, id) // a reconnect may be under way
		case !ok && !ever && now.Sub(c.since) <= maxGone:
			next = append(next, id) // this master just started: give it time to connect
		default:
			changed = true
			b.log.WithFields(logrus.Fields{"replica": id, "connected": ok, "haMaxTimeSlaveNotCatchup": maxLag}).
				Warn("an in-sync replica fell behind or left: removing it from the in-sync set")
		}
	}
	// Joining replicas that reached their mark join; others wait, or are
	// given up after pendingTimeout.
	for id, p := range c.pending {
		cn, ok := conns[id]
		switch {
		case ok && cn.ack >= p.mark:
			next = append(next, id)
			changed = true
		case now.Sub(p.since) > pendingTimeout || !ok:
			delete(c.pending, id)
			b.applyAckSet()
		}
	}
	// Caught-up replicas outside the set start joining: from now on
	// sends wait for them too.
	for id, cn := range conns {
		if _, joining := c.pending[id]; joining || slices.Contains(c.syncSet, id) {
			continue
		}
		if cn.ack >= st.MaxOffset || now.Sub(cn.caughtUp) <= caughtUpRecently {
			if c.pending == nil {
				c.pending = map[int64]pendingMember{}
			}
			c.pending[id] = pendingMember{since: now}
			b.applyAckSet()
			p := c.pending[id]
			p.mark = b.store.CommitLog().MaxOffset()
			c.pending[id] = p
		}
	}
	if !changed {
		return
	}
	set := protocol.SortedIDs(next)
	h := protocol.AlterSyncStateSetRequestHeader{BrokerName: b.cfg.BrokerName, MasterBrokerID: me, MasterEpoch: c.epoch, InvokeTime: now.UnixMilli()}
	body := protocol.SyncStateSet{SyncStateSet: set, SyncStateSetEpoch: c.ssEpoch}.Encode()
	resp, _, err := b.callController(func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerAlterSyncStateSet, protocol.EncodeHeader(&h, nil), body)
	})
	log := b.log.WithFields(logrus.Fields{"syncStateSet": c.syncSet, "proposed": set})
	switch {
	case err != nil:
		log.WithError(err).Warn("cannot change the in-sync set now")
		return
	case resp.ResponseCode() != remoting.Success:
		// A fenced epoch means the state moved on: the next heartbeat's
		// answer brings it.
		log.WithFields(logrus.Fields{"code": resp.Code, "remark": resp.Remark}).Warn("the controller refused the in-sync set change")
		return
	}
	ns, err := protocol.DecodeSyncStateSet(resp.Body)
	if err != nil {
		log.WithError(err).Warn("cannot read the controller's answer")
		return
	}
	for _, id := range ns.SyncStateSet {
		delete(c.pending, id)
	}
	c.ssEpoch = -1 // take it whatever its epoch: the controller just wrote it
	b.takeSyncStateSet(ns)
	log.WithField("syncStateSetEpoch", ns.SyncStateSetEpoch).Info("in-sync set changed")
}

// roleName is brokerRole as GET_BROKER_RUNTIME_INFO shows it: in
// controller mode the role the controller gave (SLAVE unless master).
func (b *Broker) roleName() string {
	if !b.cfg.EnableControllerMode || b.ctlRoleNow() == roleMaster {
		return b.cfg.BrokerRole
	}
	return conf.RoleSlave
}

// notWritable is the remark of a send this broker refuses.
func (b *Broker) notWritable() string {
	if !b.cfg.EnableControllerMode {
		return fmt.Sprintf("service not available now: the broker[%s] is a SLAVE and takes no writes; send to its master", b.ip)
	}
	switch r := b.ctlRoleNow(); {
	case r == roleMaster:
		return fmt.Sprintf("service not available now: the broker[%s] lost contact with the controller for longer than its lease "+
			"(brokerNotActiveTimeoutMillis): another replica may be master; refresh the route", b.ip)
	case r == roleSlave:
		return fmt.Sprintf("service not available now: the broker[%s] is a SLAVE (controller mode) and takes no writes; send to its master", b.ip)
	default:
		return fmt.Sprintf("service not available now: the broker[%s] has no role from the controller yet (its group may have no master)", b.ip)
	}
}

// errNotController is returned by controller-mode helpers on a broker
// outside controller mode.
var errNotController = errors.New("broker: not in controller mode (enableControllerMode=false)")

// errMasterNotReady is a slave asking a new master for its epochs before
// that master began the epoch it was elected at; the slave asks again at
// its next heartbeat.
var errMasterNotReady = errors.New("broker: the new master is not ready")

// ControllerAnswers counts the controller's answers a controller-mode
// broker has taken (each registration or heartbeat it applied).
func (b *Broker) ControllerAnswers() int64 { return b.ctl.answers.Load() }

// ControllerRole reports a controller-mode broker's role ("MASTER",
// "SLAVE", "NONE", "UNKNOWN") and master epoch; tests and tools read it.
func (b *Broker) ControllerRole() (string, int32, error) {
	if !b.cfg.EnableControllerMode {
		return "", 0, errNotController
	}
	return b.ctlRoleNow().String(), b.store.Epochs().LastEpoch(), nil
}
