package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Controller mode: the controller group's state (RocketMQ 5's
// getControllerMetaData, getSyncStateSet, electMaster) and a broker's
// epochs (getBrokerEpoch). controllerAddr lists controllers ("ip:port" or
// "ip:port;ip:port"): requests that only the leader answers go to the
// leader, found from whichever controller answers.

// ControllerMetaData returns the controller group, its leader and peers as
// the first controller of controllerAddr that answers sees them.
func (a *Admin) ControllerMetaData(ctx context.Context, controllerAddr string) (*protocol.GetMetaDataResponseHeader, error) {
	var lastErr error
	for _, addr := range splitAddrs(controllerAddr) {
		resp, err := a.call(ctx, addr, remoting.ControllerGetMetadataInfo, nil, nil)
		if err != nil {
			lastErr = err
			continue
		}
		var h protocol.GetMetaDataResponseHeader
		if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
			return nil, err
		}
		return &h, nil
	}
	return nil, noController(controllerAddr, lastErr)
}

// SyncStateData returns, per broker name (all groups when none is given),
// the master, master epoch and which replicas are in the in-sync set and
// alive, read from the controller leader.
func (a *Admin) SyncStateData(ctx context.Context, controllerAddr string, brokerNames ...string) (*protocol.BrokerReplicasInfo, error) {
	body, err := json.Marshal(append([]string{}, brokerNames...))
	if err != nil {
		return nil, err
	}
	resp, err := a.callControllerLeader(ctx, controllerAddr, remoting.ControllerGetSyncStateData, nil, body)
	if err != nil {
		return nil, err
	}
	var out protocol.BrokerReplicasInfo
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("client: not a BrokerReplicasInfo: %w", err)
	}
	return &out, nil
}

// ElectMaster asks the controller leader to hand brokerName over to the
// replica brokerID (it must be alive and in the in-sync set, unless the
// controller allows unclean elections), and returns the group's master
// and in-sync set after it.
func (a *Admin) ElectMaster(ctx context.Context, controllerAddr, clusterName, brokerName string, brokerID int64) (protocol.ReplicaInfoHeader, protocol.SyncStateSet, error) {
	h := protocol.ElectMasterRequestHeader{ClusterName: clusterName, BrokerName: brokerName, BrokerID: brokerID, DesignateElect: true,
		InvokeTime: time.Now().UnixMilli()}
	var ri protocol.ReplicaInfoHeader
	var set protocol.SyncStateSet
	resp, err := a.callControllerLeader(ctx, controllerAddr, remoting.ControllerElectMaster, &h, nil)
	if err != nil {
		return ri, set, err
	}
	if err := protocol.DecodeHeader(resp.ExtFields, &ri); err != nil {
		return ri, set, err
	}
	if len(resp.Body) > 0 {
		set, err = protocol.DecodeSyncStateSet(resp.Body)
	}
	return ri, set, err
}

// BrokerEpochCache returns a broker's epoch history and commitlog max
// offset (GET_BROKER_EPOCH_CACHE).
func (a *Admin) BrokerEpochCache(ctx context.Context, brokerAddr string) (*protocol.EpochEntryCache, error) {
	resp, err := a.call(ctx, brokerAddr, remoting.GetBrokerEpochCache, nil, nil)
	if err != nil {
		return nil, err
	}
	var out protocol.EpochEntryCache
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("client: not an EpochEntryCache: %w", err)
	}
	return &out, nil
}

// callControllerLeader sends a request to each controller of
// controllerAddr until the leader answers, following a follower's pointer
// to the leader.
func (a *Admin) callControllerLeader(ctx context.Context, controllerAddr string, code remoting.RequestCode, h any, body []byte) (*remoting.Command, error) {
	addrs := splitAddrs(controllerAddr)
	var lastErr error
	tried := map[string]bool{}
	for i := 0; i < len(addrs); i++ {
		addr := addrs[i]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		resp, err := a.call(ctx, addr, code, h, body)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		var be *BrokerError
		if errors.As(err, &be) && be.Code != remoting.ControllerNotLeader {
			return nil, err // the leader refused: no other controller will accept
		}
		if resp != nil {
			var md protocol.GetMetaDataResponseHeader
			if protocol.DecodeHeader(resp.ExtFields, &md) == nil && md.ControllerLeaderAddress != "" && !tried[md.ControllerLeaderAddress] {
				addrs = append(addrs[:i+1], append([]string{md.ControllerLeaderAddress}, addrs[i+1:]...)...)
			}
		}
	}
	return nil, noController(controllerAddr, lastErr)
}

func noController(addrs string, err error) error {
	if err == nil {
		return fmt.Errorf("client: no controller address in %q", addrs)
	}
	return fmt.Errorf("client: no controller of %s answered as leader: %w", addrs, err)
}
