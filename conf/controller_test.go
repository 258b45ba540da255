package conf

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestControllerLayoutConfigs loads the controller layout's samples: no
// unknown key, each valid, and the nameservers' controllers agree.
func TestControllerLayoutConfigs(t *testing.T) {
	brokers, err := filepath.Glob("controller/broker-*.properties")
	require.NoError(t, err)
	require.Len(t, brokers, 6)
	ids := map[string]map[int64]bool{}
	for _, f := range brokers {
		log, hook := test.NewNullLogger()
		cfg, err := LoadBrokerConfig(f, log)
		require.NoError(t, err, f)
		assert.Empty(t, warnedKeys(hook), f)
		assert.True(t, cfg.EnableControllerMode, f)
		assert.Len(t, cfg.ControllerAddrs(), 3, f)
		assert.GreaterOrEqual(t, cfg.BrokerID, int64(1), "%s: brokerId stays the replica id", f)
		if ids[cfg.BrokerName] == nil {
			ids[cfg.BrokerName] = map[int64]bool{}
		}
		assert.False(t, ids[cfg.BrokerName][cfg.BrokerID], "%s: replica id used twice", f)
		ids[cfg.BrokerName][cfg.BrokerID] = true
		assert.True(t, cfg.StoreConfig().Slave, "%s: the store refuses puts until the controller says master", f)
	}
	namesrvs, err := filepath.Glob("controller/namesrv-n*.conf")
	require.NoError(t, err)
	require.Len(t, namesrvs, 3)
	var peers string
	for _, f := range namesrvs {
		log, hook := test.NewNullLogger()
		cfg, err := LoadNamesrvConfig(f, log)
		require.NoError(t, err, f)
		assert.Empty(t, warnedKeys(hook), f)
		assert.True(t, cfg.EnableControllerInNamesrv, f)
		if peers == "" {
			peers = cfg.ControllerDLegerPeers
		}
		assert.Equal(t, peers, cfg.ControllerDLegerPeers, f)
		cc, err := cfg.ControllerKeys.Options(cfg.ScanInterval())
		require.NoError(t, err, f)
		assert.Len(t, cc.Peers, 3)
	}
	log, hook := test.NewNullLogger()
	cc, err := LoadControllerConfig("controller/controller.conf", log)
	require.NoError(t, err)
	assert.Empty(t, warnedKeys(hook))
	assert.Equal(t, 19876, cc.ListenPort)
	assert.Equal(t, time.Second, cc.ScanInterval())
}

func TestControllerModeBrokerValidation(t *testing.T) {
	base := func() BrokerConfig {
		c := DefaultBrokerConfig()
		c.EnableControllerMode = true
		c.ControllerAddr = "127.0.0.1:9876"
		c.BrokerID = 2
		c.BrokerRole = RoleSyncMaster
		return c
	}
	c := base()
	require.NoError(t, c.Validate())
	assert.Equal(t, int64(2), c.BrokerID, "a master role keeps the replica id in controller mode")
	assert.False(t, c.IsSlave())
	for name, mod := range map[string]func(*BrokerConfig){
		"brokerId 0":           func(c *BrokerConfig) { c.BrokerID = 0 },
		"SLAVE role":           func(c *BrokerConfig) { c.BrokerRole = RoleSlave },
		"no controller":        func(c *BrokerConfig) { c.ControllerAddr = "" },
		"bad controller":       func(c *BrokerConfig) { c.ControllerAddr = "ctl:9876" },
		"timeout <= 2 beats":   func(c *BrokerConfig) { c.BrokerNotActiveTimeoutMillis = 1500 },
		"no heartbeat":         func(c *BrokerConfig) { c.BrokerHeartbeatInterval = 0 },
		"catch-up time zero":   func(c *BrokerConfig) { c.HaMaxTimeSlaveNotCatchup = 0 },
		"send timeout zero ms": func(c *BrokerConfig) { c.SendHeartbeatTimeoutMillis = 0 },
	} {
		c := base()
		mod(&c)
		assert.ErrorIs(t, c.Validate(), ErrBadValue, name)
	}
}

func TestControllerKeysValidation(t *testing.T) {
	for name, mod := range map[string]func(*ControllerConfig){
		"no peers":         func(c *ControllerConfig) { c.ControllerDLegerPeers = "" },
		"self not a peer":  func(c *ControllerConfig) { c.ControllerDLegerSelfID = "n9" },
		"peer not ip:port": func(c *ControllerConfig) { c.ControllerDLegerPeers = "n0-localhost:9878" },
		"no store path":    func(c *ControllerConfig) { c.ControllerStorePath = "" },
		"scan zero":        func(c *ControllerConfig) { c.ScanNotActiveBrokerInterval = 0 },
		"no workers":       func(c *ControllerConfig) { c.ControllerThreadPoolNums = 0 },
	} {
		c := DefaultControllerConfig()
		mod(&c)
		assert.ErrorIs(t, c.Validate(), ErrBadValue, name)
	}
	ns := DefaultNamesrvConfig()
	ns.ControllerDLegerSelfID = "nope"
	require.NoError(t, ns.Validate(), "controller keys are checked only with enableControllerInNamesrv")
	ns.EnableControllerInNamesrv = true
	assert.ErrorIs(t, ns.Validate(), ErrBadValue)
}
