package broker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// mustStartSlave starts a SLAVE of master's group registered with ns, its
// sync rounds shortened for the test.
func mustStartSlave(t *testing.T, ns string, tweak func(*conf.BrokerConfig)) *Broker {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.NamesrvAddr = ns
	cfg.BrokerID = 1
	cfg.BrokerRole = conf.RoleSlave
	if tweak != nil {
		tweak(cfg)
	}
	b, err := New(cfg, baLogger())
	require.NoError(t, err)
	b.slaveSync.first, b.slaveSync.every = 10*time.Millisecond, 50*time.Millisecond
	require.NoError(t, b.Start())
	t.Cleanup(func() { mustShutdownBroker(t, b) })
	return b
}

// A slave learns its master from the nameserver's REGISTER_BROKER answer and
// copies the master's topics, consumer offsets, delay offsets and
// subscription groups, persisting them; later changes follow.
func TestSlaveSyncCopiesMetadata(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	mcfg := testBrokerConfig(t)
	mcfg.NamesrvAddr = ns.Addr()
	master := MustStartBroker(t, mcfg)
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("SyncTopic", 4, 4, 6)).ResponseCode())
	master.consume.offsets.Commit("G1", "SyncTopic", 2, 42)
	_, _ = master.consume.groups.Find("G1")
	master.schedule.setOffset(3, 7)

	slave := mustStartSlave(t, ns.Addr(), nil)
	assert.Equal(t, master.Addr(), slave.MasterAddr(), "the master's address comes with the registration answer")
	require.Eventually(t, func() bool { return slave.slaveSync.last.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "a sync completes")
	assert.NotNil(t, slave.topics.Get("SyncTopic"))
	assert.Equal(t, int64(42), slave.consume.offsets.Query("G1", "SyncTopic", 2))
	assert.NotNil(t, slave.consume.groups.Get("G1"))

	// What was copied is on the slave's disk, not only in memory.
	dir := filepath.Join(slave.cfg.StorePathRootDir, "config")
	for _, f := range []string{"topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"} {
		_, err := os.Stat(filepath.Join(dir, f))
		assert.NoError(t, err, f)
	}
	delay, err := os.ReadFile(filepath.Join(dir, "delayOffset.json"))
	require.NoError(t, err)
	assert.Contains(t, string(delay), `"3": 7`)

	// Later changes follow; an offset committed on the slave alone stays.
	master.consume.offsets.Commit("G1", "SyncTopic", 2, 50)
	require.Equal(t, remoting.Success, baInvoke(t, cl, master.Addr(), createTopicReq("LaterTopic", 2, 2, 6)).ResponseCode())
	slave.consume.offsets.Commit("G2", "SyncTopic", 0, 9)
	require.Eventually(t, func() bool {
		return slave.consume.offsets.Query("G1", "SyncTopic", 2) == 50 && slave.topics.Get("LaterTopic") != nil
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, int64(9), slave.consume.offsets.Query("G2", "SyncTopic", 0))
	assert.Equal(t, master.topics.DataVersion(), slave.topics.DataVersion())
}

// A slave takes no sends, and its store refuses puts whoever asks.
func TestSlaveRefusesWrites(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	slave := mustStartSlave(t, ns.Addr(), nil)
	cl := baClient(t)
	resp := baInvoke(t, cl, slave.Addr(), sendReq("AnyTopic", 0, []byte("x"), nil))
	assert.Equal(t, remoting.ServiceNotAvailable, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "SLAVE")
	assert.True(t, slave.Store().IsSlave())
	assert.Empty(t, slave.MasterAddr(), "no master registered yet")
}
