package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Register routes the controller's requests on srv, run on pool. Requests
// that arrive before Start, or at a follower, are answered
// CONTROLLER_NOT_LEADER with the leader's address when known.
func (c *Controller) Register(srv *remoting.Server, pool *remoting.Pool) {
	srv.Handle(remoting.BrokerHeartbeat, pool, c.processHeartbeat)
	srv.Handle(remoting.ControllerRegisterBroker, pool, c.processRegister)
	srv.Handle(remoting.ControllerGetReplicaInfo, pool, c.processGetReplicaInfo)
	srv.Handle(remoting.ControllerGetMetadataInfo, pool, c.processGetMetadata)
	srv.Handle(remoting.ControllerGetSyncStateData, pool, c.processGetSyncStateData)
	srv.Handle(remoting.ControllerAlterSyncStateSet, pool, c.processAlterSyncStateSet)
	srv.Handle(remoting.ControllerElectMaster, pool, c.processElectMaster)
}

// answerErr maps an error to the controller's response codes: the one
// boundary where causes become codes.
func (c *Controller) answerErr(req *remoting.Command, err error) *remoting.Command {
	code := remoting.SystemError
	switch {
	case errors.Is(err, ErrNotLeader):
		code = remoting.ControllerNotLeader
	case errors.Is(err, ErrFencedMasterEpoch):
		code = remoting.ControllerFencedMasterEpoch
	case errors.Is(err, ErrFencedSyncStateSetEpoch):
		code = remoting.ControllerFencedSyncStateSetEpoch
	case errors.Is(err, ErrInvalidReplicas):
		code = remoting.ControllerInvalidReplicas
	case errors.Is(err, ErrUnknownGroup), errors.Is(err, ErrUnknownReplica):
		code = remoting.ControllerBrokerNeedToBeRegistered
	case errors.Is(err, ErrClusterMismatch), errors.Is(err, protocol.ErrBadHeader):
		code = remoting.ControllerInvalidRequest
	}
	resp := remoting.NewResponse(req, code, err.Error())
	if code == remoting.ControllerNotLeader {
		id, addr := c.leader()
		h := protocol.GetMetaDataResponseHeader{Group: c.cfg.Group, ControllerLeaderID: id, ControllerLeaderAddress: addr}
		resp.ExtFields = protocol.EncodeHeader(&h, resp.ExtFields)
	}
	return resp
}

// replicaAnswer is SUCCESS with the group's master in the header and its
// in-sync set as the body.
func replicaAnswer(req *remoting.Command, g *Group) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	h := g.ReplicaInfo()
	resp.ExtFields = protocol.EncodeHeader(&h, resp.ExtFields)
	resp.Body = g.SyncState().Encode()
	return resp
}

// processHeartbeat answers BROKER_HEARTBEAT: the leader confirms it still
// leads (the broker's lease is renewed only by the true leader), records
// the heartbeat and answers with the group's master, so a broker learns of
// an election within one heartbeat even without the push.
func (c *Controller) processHeartbeat(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.BrokerHeartbeatRequestHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return c.answerErr(req, err), nil
	}
	now := time.Now()
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	g := c.fsm.group(h.BrokerName)
	if g == nil || g.Replicas[h.BrokerID] == nil || g.Replicas[h.BrokerID].Addr != h.BrokerAddr {
		return c.answerErr(req, fmt.Errorf("%w: %s/%d at %s", ErrUnknownReplica, h.BrokerName, h.BrokerID, h.BrokerAddr)), nil
	}
	timeout := replicaTimeout(g.Replicas[h.BrokerID], c.cfg.DefaultBrokerTimeout)
	if h.HeartbeatTimeoutMills > 0 {
		timeout = millis(h.HeartbeatTimeoutMills)
	}
	c.live.touch(liveKey{h.BrokerName, h.BrokerID}, liveInfo{last: now, timeout: timeout,
		epoch: h.Epoch, maxOffset: h.MaxOffset, priority: h.ElectionPriority})
	if g.MasterID == protocol.NoMaster {
		c.kickScan() // a replica of a masterless group is back
	}
	return replicaAnswer(req, g), nil
}

// processRegister answers CONTROLLER_REGISTER_BROKER: the replica's
// addresses go into the log (only when they changed), and a group without
// master gets one at once if this replica may take it.
func (c *Controller) processRegister(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.RegisterBrokerToControllerRequestHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return c.answerErr(req, err), nil
	}
	if h.BrokerID <= 0 {
		return c.answerErr(req, fmt.Errorf("%w: brokerId %d: a broker in controller mode needs brokerId >= 1", ErrInvalidReplicas, h.BrokerID)), nil
	}
	// What goes into the Raft log stays there: a blank name or address
	// would make a group no broker can use, for good.
	if protocol.IsBlank(h.ClusterName) || protocol.IsBlank(h.BrokerName) || protocol.IsBlank(h.BrokerAddress) {
		return c.answerErr(req, fmt.Errorf("%w: clusterName, brokerName and brokerAddress must not be blank", protocol.ErrBadHeader)), nil
	}
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	rep := Replica{ID: h.BrokerID, Addr: h.BrokerAddress, HaAddr: h.HaAddress, HeartbeatTimeoutMs: h.HeartbeatTimeoutMills}
	g := c.fsm.group(h.BrokerName)
	// Refused here rather than by Apply: a broker of the wrong cluster
	// registers again every heartbeat, and each refused proposal would be
	// one more Raft log entry.
	if g != nil {
		if err := g.checkCluster(h.ClusterName); err != nil {
			return c.answerErr(req, err), nil
		}
	}
	if g == nil || g.Replicas[h.BrokerID] == nil || *g.Replicas[h.BrokerID] != rep {
		res, err := c.propose(&event{Type: evRegister, Register: &registerEvent{ClusterName: h.ClusterName, BrokerName: h.BrokerName, Replica: rep}})
		if err != nil {
			return c.answerErr(req, err), nil
		}
		g = res.group
		c.log.WithFields(logrus.Fields{"brokerName": h.BrokerName, "brokerId": h.BrokerID, "addr": h.BrokerAddress, "haAddr": h.HaAddress}).
			Info("broker replica registered")
	}
	c.live.touchRegistered(liveKey{h.BrokerName, h.BrokerID}, time.Now(), replicaTimeout(&rep, c.cfg.DefaultBrokerTimeout))
	if g.MasterID == protocol.NoMaster {
		c.checkGroup(h.BrokerName)
		if ng := c.fsm.group(h.BrokerName); ng != nil {
			g = ng
		}
	}
	return replicaAnswer(req, g), nil
}

// processGetReplicaInfo answers CONTROLLER_GET_REPLICA_INFO, linearizably.
func (c *Controller) processGetReplicaInfo(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetReplicaInfoRequestHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return c.answerErr(req, err), nil
	}
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	g := c.fsm.group(h.BrokerName)
	if g == nil {
		return remoting.NewResponse(req, remoting.ControllerBrokerMetadataNotExist, "no broker group "+h.BrokerName+" in the controller"), nil
	}
	return replicaAnswer(req, g), nil
}

// processGetMetadata answers CONTROLLER_GET_METADATA_INFO from any member:
// the group, its leader as this member knows it, and the peers.
func (c *Controller) processGetMetadata(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	id, addr := c.leader()
	h := protocol.GetMetaDataResponseHeader{
		Group: c.cfg.Group, ControllerLeaderID: id, ControllerLeaderAddress: addr,
		IsLeader: c.ready.Load(), Peers: FormatPeers(c.cfg.Peers),
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = protocol.EncodeHeader(&h, resp.ExtFields)
	return resp, nil
}

// processGetSyncStateData answers CONTROLLER_GET_SYNC_STATE_DATA: for each
// broker name of the request body (a JSON array; empty: every group), the
// master, the in-sync and the other replicas, and which are alive.
func (c *Controller) processGetSyncStateData(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var names []string
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &names); err != nil {
			return remoting.NewResponse(req, remoting.ControllerInvalidRequest, "the body must be a JSON array of broker names: "+err.Error()), nil
		}
	}
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	var groups []*Group
	if len(names) == 0 {
		groups = c.fsm.groups()
	} else {
		for _, n := range names {
			if g := c.fsm.group(n); g != nil {
				groups = append(groups, g)
			}
		}
	}
	now := time.Now()
	out := protocol.BrokerReplicasInfo{ReplicasInfoTable: map[string]*protocol.ReplicasInfo{}}
	for _, g := range groups {
		h := g.ReplicaInfo()
		ri := &protocol.ReplicasInfo{MasterBrokerID: h.MasterBrokerID, MasterAddress: h.MasterAddress, MasterEpoch: h.MasterEpoch,
			SyncStateSetEpoch: h.SyncStateSetEpoch, InSyncReplicas: []protocol.ReplicaIdentity{}, NotInSyncReplicas: []protocol.ReplicaIdentity{}}
		for _, id := range g.ids() {
			r := g.Replicas[id]
			ident := protocol.ReplicaIdentity{BrokerName: g.BrokerName, BrokerID: id, BrokerAddress: r.Addr, Alive: c.live.alive(liveKey{g.BrokerName, id}, now)}
			if g.inSync(id) {
				ri.InSyncReplicas = append(ri.InSyncReplicas, ident)
			} else {
				ri.NotInSyncReplicas = append(ri.NotInSyncReplicas, ident)
			}
		}
		out.ReplicasInfoTable[g.BrokerName] = ri
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}

// processAlterSyncStateSet answers CONTROLLER_ALTER_SYNC_STATE_SET from a
// group's master: the new set is written when the master and both epochs
// are still current and every member it adds is alive.
func (c *Controller) processAlterSyncStateSet(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.AlterSyncStateSetRequestHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return c.answerErr(req, err), nil
	}
	set, err := protocol.DecodeSyncStateSet(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.ControllerInvalidRequest, err.Error()), nil
	}
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	c.electMu.Lock() // not interleaved with an election of the same group
	defer c.electMu.Unlock()
	g := c.fsm.group(h.BrokerName)
	if g == nil {
		// Refused before the log: Apply would refuse it too, after
		// writing an entry per request.
		return c.answerErr(req, fmt.Errorf("%w: %s", ErrUnknownGroup, h.BrokerName)), nil
	}
	now := time.Now()
	for _, id := range set.SyncStateSet {
		if id != h.MasterBrokerID && !g.inSync(id) && !c.live.alive(liveKey{h.BrokerName, id}, now) {
			return remoting.NewResponse(req, remoting.ControllerBrokerNotAlive,
				fmt.Sprintf("replica %d of %s is not alive: not added to the sync state set", id, h.BrokerName)), nil
		}
	}
	alter := &alterEvent{BrokerName: h.BrokerName, MasterID: h.MasterBrokerID,
		MasterEpoch: h.MasterEpoch, ExpectSyncStateSetEpoch: set.SyncStateSetEpoch, NewSet: set.SyncStateSet}
	// Apply's own checks first (electMu keeps the group as read): a change
	// it would refuse (a deposed master, a stale epoch, an unknown replica)
	// is answered without a replicated, fsynced log entry.
	if _, err := g.checkAlter(alter); err != nil {
		return c.answerErr(req, err), nil
	}
	res, err := c.propose(&event{Type: evAlterSyncState, Alter: alter})
	if err != nil {
		return c.answerErr(req, err), nil
	}
	c.log.WithFields(logrus.Fields{"brokerName": h.BrokerName, "syncStateSet": res.group.SyncStateSet,
		"syncStateSetEpoch": res.group.SyncStateSetEpoch}).Info("sync state set changed")
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := protocol.AlterSyncStateSetResponseHeader{NewSyncStateSetEpoch: res.group.SyncStateSetEpoch}
	resp.ExtFields = protocol.EncodeHeader(&rh, resp.ExtFields)
	resp.Body = res.group.SyncState().Encode()
	return resp, nil
}

// processElectMaster answers CONTROLLER_ELECT_MASTER (mqadmin
// electMaster): with designateElect, hand the group over to brokerId if it
// is alive and in sync (any live replica with enableElectUncleanMaster);
// without, elect only when the master is dead.
func (c *Controller) processElectMaster(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.ElectMasterRequestHeader
	if err := protocol.DecodeHeader(req.FieldMap(), &h); err != nil {
		return c.answerErr(req, err), nil
	}
	if err := c.verifyLeader(); err != nil {
		return c.answerErr(req, err), nil
	}
	c.electMu.Lock()
	defer c.electMu.Unlock()
	g := c.fsm.group(h.BrokerName)
	if g == nil {
		return remoting.NewResponse(req, remoting.ControllerBrokerMetadataNotExist, "no broker group "+h.BrokerName+" in the controller"), nil
	}
	live := c.live.candidates(h.BrokerName, time.Now())
	designated := protocol.NoMaster
	if h.DesignateElect {
		designated = h.BrokerID
		if g.Replicas[designated] == nil {
			return remoting.NewResponse(req, remoting.ControllerElectMasterFailed,
				fmt.Sprintf("%s has no replica %d", h.BrokerName, designated)), nil
		}
	}
	_, masterAlive := live[g.MasterID]
	if g.MasterID != protocol.NoMaster && masterAlive && (designated == protocol.NoMaster || designated == g.MasterID) {
		resp := replicaAnswer(req, g)
		resp.Code = int32(remoting.ControllerMasterStillExist)
		resp.Remark = fmt.Sprintf("replica %d is still the master of %s", g.MasterID, h.BrokerName)
		return resp, nil
	}
	newMaster := chooseMaster(g, live, c.cfg.EnableElectUncleanMaster, designated)
	if newMaster == protocol.NoMaster {
		why := "no in-sync replica is alive"
		if designated != protocol.NoMaster {
			why = fmt.Sprintf("replica %d is not alive or not in the sync state set %v", designated, g.SyncStateSet)
		}
		return remoting.NewResponse(req, remoting.ControllerElectMasterFailed, "cannot elect a master for "+h.BrokerName+": "+why), nil
	}
	log := c.log.WithFields(logrus.Fields{"brokerName": h.BrokerName, "oldMaster": g.MasterID, "newMaster": newMaster, "trigger": "admin"})
	ng, err := c.elect(g, newMaster, log)
	if err != nil {
		return c.answerErr(req, err), nil
	}
	return replicaAnswer(req, ng), nil
}
