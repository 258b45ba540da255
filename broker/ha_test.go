package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// mustStartMaster starts a master of role (ASYNC_MASTER or SYNC_MASTER)
// registered with ns.
func mustStartMaster(t *testing.T, ns, role string, tweak func(*conf.BrokerConfig)) *Broker {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = ns
	cfg.BrokerRole = role
	if tweak != nil {
		tweak(cfg)
	}
	return MustStartBroker(t, cfg)
}

// haSend sends body to queue 0 of topic and returns the answer.
func haSend(t *testing.T, cl *remoting.Client, addr, topic, body string) *remoting.Command {
	t.Helper()
	return baInvoke(t, cl, addr, sendReq(topic, 0, []byte(body), map[string]string{"WAIT": "true"}))
}

// A slave finds its master through the nameserver, copies every message at
// the same queue offsets, serves them, and refuses sends; the master
// reports it in GET_BROKER_HA_STATUS and GET_BROKER_RUNTIME_INFO.
func TestReplicationMasterToSlave(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	master := mustStartMaster(t, ns.Addr(), conf.RoleAsyncMaster, nil)
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("HA", 1, 1, 6)).ResponseCode())
	for i := range 50 {
		resp := haSend(t, cl, master.Addr(), "HA", fmt.Sprintf("m%d", i))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	}
	slave := mustStartSlave(t, ns.Addr(), nil)
	require.Eventually(t, func() bool {
		return slave.Store().CommitLog().MaxOffset() == master.Store().CommitLog().MaxOffset() &&
			slave.Store().MaxOffsetInQueue("HA", 0) == 50 && slave.topics.Get("HA") != nil
	}, 10*time.Second, 5*time.Millisecond, "the slave catches up")

	bcHeartbeat(t, cl, slave.Addr(), "c1", "G", protocol.ConsumeFromFirstOffset, bcTagSub("HA", "*"))
	r := bcPull(t, cl, slave.Addr(), bcPullHeader("G", "HA", 0, 0, protocol.PullFlagSubscription, 0))
	require.Equal(t, remoting.Success, r.code, r.remark)
	assert.Equal(t, "m0", r.bodies[0])
	assert.Equal(t, int64(0), r.offs[0])
	assert.EqualValues(t, 0, r.hdr.SuggestWhichBrokerID, "slaveReadEnable is off: back to the master")

	resp := haSend(t, cl, slave.Addr(), "HA", "x")
	assert.Equal(t, remoting.ServiceNotAvailable, resp.ResponseCode())

	var info protocol.HARuntimeInfo
	resp = baInvoke(t, cl, master.Addr(), remoting.NewRequest(remoting.GetBrokerHAStatus, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	require.NoError(t, json.Unmarshal(resp.Body, &info))
	assert.True(t, info.Master)
	require.Len(t, info.HAConnectionInfo, 1)
	assert.Equal(t, info.MasterCommitLogMaxOffset, info.HAConnectionInfo[0].SlaveAckOffset)
	assert.Equal(t, 1, info.InSyncSlaveNums)

	resp = baInvoke(t, cl, slave.Addr(), remoting.NewRequest(remoting.GetBrokerHAStatus, nil, nil))
	require.NoError(t, json.Unmarshal(resp.Body, &info))
	assert.False(t, info.Master)
	assert.Equal(t, master.haServerAddr(), info.HAClientRuntimeInfo.MasterAddr)
	assert.True(t, info.HAClientRuntimeInfo.IsActivated)

	resp = baInvoke(t, cl, master.Addr(), remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	kv, err := protocol.DecodeKVTable(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "1", kv.Table["slaveNum"])
	assert.Equal(t, master.haServerAddr(), kv.Table["haServerAddr"])
}

// Under SYNC_MASTER a send is SUCCESS once a slave holds it, and
// SLAVE_NOT_AVAILABLE at once without a slave; the official client maps
// both to send statuses.
func TestReplicationSyncMasterWaitsForSlave(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	master := mustStartMaster(t, ns.Addr(), conf.RoleSyncMaster, nil)
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("SYNC", 1, 1, 6)).ResponseCode())

	resp := haSend(t, cl, master.Addr(), "SYNC", "alone")
	assert.Equal(t, remoting.SlaveNotAvailable, resp.ResponseCode(), resp.Remark)
	var h protocol.SendMessageResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &h))
	assert.NotEmpty(t, h.MsgID, "stored on the master: the answer names the message")

	slave := mustStartSlave(t, ns.Addr(), nil)
	require.Eventually(t, func() bool { return len(master.ha.master.Load().Status().Slaves) == 1 }, 10*time.Second, 5*time.Millisecond)
	for i := range 20 {
		resp := haSend(t, cl, master.Addr(), "SYNC", fmt.Sprintf("s%d", i))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		// Acknowledged means the slave has it, not merely will have it.
		require.GreaterOrEqual(t, slave.Store().CommitLog().MaxOffset(), master.Store().CommitLog().MaxOffset()-int64(0))
	}
}

// A SYNC_MASTER whose only slave stops acknowledging answers
// FLUSH_SLAVE_TIMEOUT after slaveTimeout. The slave here is a raw peer that
// speaks RocketMQ's protocol: it reports the master's offset once and then
// reads without reporting.
func TestReplicationSyncMasterSlaveTimeout(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	master := mustStartMaster(t, ns.Addr(), conf.RoleSyncMaster, func(c *conf.BrokerConfig) {
		c.SlaveTimeout = 300
	})
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("SLOW", 1, 1, 6)).ResponseCode())

	conn, err := net.Dial("tcp", master.haServerAddr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	var report [8]byte
	binary.BigEndian.PutUint64(report[:], uint64(master.Store().CommitLog().MaxOffset()))
	_, err = conn.Write(report[:])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(master.ha.master.Load().Status().Slaves) == 1 }, 10*time.Second, 5*time.Millisecond)
	go func() { // drain the pushes so the master never blocks on the socket
		buf := make([]byte, 64<<10)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()

	start := time.Now()
	resp := haSend(t, cl, master.Addr(), "SLOW", "waits")
	assert.Equal(t, remoting.FlushSlaveTimeout, resp.ResponseCode(), resp.Remark)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "answered only after slaveTimeout")
}
