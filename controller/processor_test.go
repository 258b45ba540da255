package controller

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestControllerRefusesBadRequestsWithoutLogging: requests that can only
// be refused (a broker name registered in another cluster, a blank name,
// an in-sync set change for a group nobody registered) are answered with
// an error before they reach the Raft log, so a misconfigured broker that
// retries every heartbeat does not cost a replicated, fsynced log entry
// (and snapshot churn) each time.
func TestControllerRefusesBadRequestsWithoutLogging(t *testing.T) {
	tg := startGroup(t, 1, nil)
	c := tg.leader()
	require.Eventually(t, func() bool { return c.fsm.controllerAddr(c.cfg.SelfID) == c.Addr() }, wait, 10*time.Millisecond)
	long := int64(10 * time.Minute / time.Millisecond) // no failover while the test runs
	reg := func(cluster, name string, id int64, addr string) *remoting.Command {
		return call(c, remoting.ControllerRegisterBroker, &protocol.RegisterBrokerToControllerRequestHeader{
			ClusterName: cluster, BrokerName: name, BrokerID: id, BrokerAddress: addr, HeartbeatTimeoutMills: long}, nil)
	}
	resp := reg("c", "a", 1, addrOf(1))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	require.Equal(t, int64(1), replicaInfo(t, resp).MasterBrokerID)
	before := c.raft().LastIndex()

	for range 5 {
		resp = reg("other", "a", 2, addrOf(2))
		assert.Equal(t, remoting.ControllerInvalidRequest, resp.ResponseCode(), resp.Remark)
		resp = reg("c", " ", 1, addrOf(1))
		assert.Equal(t, remoting.ControllerInvalidRequest, resp.ResponseCode(), resp.Remark)
		resp = reg("c", "b", 1, "")
		assert.Equal(t, remoting.ControllerInvalidRequest, resp.ResponseCode(), resp.Remark)
		resp = alterSyncStateSet(c, "nope", 1, 1, 1, 1)
		assert.Equal(t, remoting.ControllerBrokerNeedToBeRegistered, resp.ResponseCode(), resp.Remark)
		resp = alterSyncStateSet(c, "a", 1, 0, 1, 1)
		assert.Equal(t, remoting.ControllerFencedMasterEpoch, resp.ResponseCode(), resp.Remark)
		resp = alterSyncStateSet(c, "a", 1, 1, 0, 1)
		assert.Equal(t, remoting.ControllerFencedSyncStateSetEpoch, resp.ResponseCode(), resp.Remark)
		resp = alterSyncStateSet(c, "a", 1, 1, 1)
		assert.Equal(t, remoting.ControllerInvalidReplicas, resp.ResponseCode(), resp.Remark)
	}
	assert.Equal(t, before, c.raft().LastIndex(), "refused requests were written to the Raft log")
	assert.Nil(t, c.fsm.group(" "))
	assert.Nil(t, c.fsm.group("b"))
}

// TestControllerHeartbeatTimeoutDoesNotOverflow: a heartbeat timeout in
// milliseconds too large for a time.Duration must not wrap to a negative
// one, which would count the master dead at once and depose it.
func TestControllerHeartbeatTimeoutDoesNotOverflow(t *testing.T) {
	tg := startGroup(t, 1, nil)
	c := tg.leader()
	resp := call(c, remoting.ControllerRegisterBroker, &protocol.RegisterBrokerToControllerRequestHeader{
		ClusterName: "c", BrokerName: "a", BrokerID: 1, BrokerAddress: addrOf(1), HeartbeatTimeoutMills: math.MaxInt64}, nil)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.True(t, c.live.alive(liveKey{"a", 1}, time.Now()), "registered with a huge timeout, counted dead")
	resp = call(c, remoting.BrokerHeartbeat, &protocol.BrokerHeartbeatRequestHeader{
		ClusterName: "c", BrokerAddr: addrOf(1), BrokerName: "a", BrokerID: 1, HeartbeatTimeoutMills: math.MaxInt64}, nil)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.True(t, c.live.alive(liveKey{"a", 1}, time.Now()), "heartbeat with a huge timeout, counted dead")
	g := c.fsm.group("a")
	require.NotNil(t, g)
	assert.Equal(t, int64(1), g.MasterID)
}

// TestControllerNoNotificationAfterShutdown: an election a processor
// finished just as Shutdown ran must not start a notification goroutine
// after Shutdown waited for its goroutines (a WaitGroup Add after Wait: a
// goroutine nobody owns, and a misuse -race reports).
func TestControllerNoNotificationAfterShutdown(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	c, err := New(Config{Group: "g", Peers: []Peer{{ID: "n0", Addr: "127.0.0.1:0"}}, SelfID: "n0", inmemStore: true, ScanInterval: time.Second,
		NotifyBrokerRoleChanged: true}, log)
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(context.Background()))
	hook.Reset()
	g := &Group{BrokerName: "a", MasterID: 1, MasterEpoch: 1, SyncStateSet: []int64{1},
		Replicas: map[int64]*Replica{1: {ID: 1, Addr: addrOf(1)}}}
	c.notifyGroup(g)
	c.wg.Wait()
	for _, e := range hook.AllEntries() {
		assert.NotContains(t, e.Message, "role change notification", "a notification went out after Shutdown")
	}
}
