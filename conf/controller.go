package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/controller"
)

// ControllerKeys are the controller group's keys (RocketMQ 5's
// ControllerConfig): in mqcontroller's file, and in the nameserver's with
// enableControllerInNamesrv.
type ControllerKeys struct {
	// ControllerDLegerGroup names the controller group (shown by mqadmin
	// getControllerMetaData).
	ControllerDLegerGroup string `mapstructure:"controllerDLegerGroup"`
	// ControllerDLegerPeers lists every controller's Raft address,
	// "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858". Brokers do
	// not use these ports: they talk to the controllers' remoting ports
	// (controllerAddr).
	ControllerDLegerPeers string `mapstructure:"controllerDLegerPeers"`
	// ControllerDLegerSelfID is this controller's id in the peers.
	ControllerDLegerSelfID string `mapstructure:"controllerDLegerSelfId"`
	// ControllerStorePath holds the Raft log and snapshots.
	ControllerStorePath string `mapstructure:"controllerStorePath"`
	// EnableElectUncleanMaster lets a replica outside the in-sync set take
	// over when no in-sync replica lives: writes resume, and what only
	// the lost replicas held is lost.
	EnableElectUncleanMaster bool `mapstructure:"enableElectUncleanMaster"`
	// NotifyBrokerRoleChanged pushes an election's result to the group's
	// brokers at once; they also learn it from their next heartbeat.
	NotifyBrokerRoleChanged bool `mapstructure:"notifyBrokerRoleChanged"`
	// ControllerThreadPoolNums and ControllerRequestThreadPoolQueueCapacity
	// size the pool that serves brokers and tools.
	ControllerThreadPoolNums                 int `mapstructure:"controllerThreadPoolNums"`
	ControllerRequestThreadPoolQueueCapacity int `mapstructure:"controllerRequestThreadPoolQueueCapacity"`
}

// DefaultControllerKeys is a one-controller group on 127.0.0.1:9878, the
// development layout (RocketMQ's quick start).
func DefaultControllerKeys() ControllerKeys {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	return ControllerKeys{
		ControllerDLegerGroup:                    "group1",
		ControllerDLegerPeers:                    "n0-127.0.0.1:9878",
		ControllerDLegerSelfID:                   "n0",
		ControllerStorePath:                      filepath.Join(home, "controller"),
		NotifyBrokerRoleChanged:                  true,
		ControllerThreadPoolNums:                 16,
		ControllerRequestThreadPoolQueueCapacity: 50000,
	}
}

// validate checks the keys, naming a bad one.
func (k *ControllerKeys) validate() error {
	if _, err := k.Options(time.Second); err != nil {
		return fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	switch {
	case k.ControllerThreadPoolNums < 1 || k.ControllerThreadPoolNums > 1024:
		return fmt.Errorf("%w: controllerThreadPoolNums=%d must be 1-1024", ErrBadValue, k.ControllerThreadPoolNums)
	case k.ControllerRequestThreadPoolQueueCapacity < 1:
		return fmt.Errorf("%w: controllerRequestThreadPoolQueueCapacity=%d must be at least 1", ErrBadValue, k.ControllerRequestThreadPoolQueueCapacity)
	}
	return nil
}

// Options builds the controller's configuration; scan is the
// scanNotActiveBrokerInterval of the file the keys came from.
func (k *ControllerKeys) Options(scan time.Duration) (controller.Config, error) {
	peers, err := controller.ParsePeers(k.ControllerDLegerPeers)
	if err != nil {
		return controller.Config{}, err
	}
	cfg := controller.Config{
		Group:                    k.ControllerDLegerGroup,
		Peers:                    peers,
		SelfID:                   k.ControllerDLegerSelfID,
		StorePath:                k.ControllerStorePath,
		ScanInterval:             scan,
		EnableElectUncleanMaster: k.EnableElectUncleanMaster,
		NotifyBrokerRoleChanged:  k.NotifyBrokerRoleChanged,
	}
	return cfg, cfg.Validate()
}

// ControllerConfig is mqcontroller's configuration: the controller keys and
// the remoting server brokers and tools reach it on.
type ControllerConfig struct {
	// RocketmqHome is ROCKETMQ_HOME; kept for compatibility.
	RocketmqHome string `mapstructure:"rocketmqHome"`
	// BindAddress and ListenPort are where brokers and tools reach this
	// controller (controllerAddr); the Raft port is its peer address.
	BindAddress string `mapstructure:"bindAddress"`
	ListenPort  int    `mapstructure:"listenPort"`
	// ServerSelectorThreads is the number of network event loops (0: one per CPU).
	ServerSelectorThreads int `mapstructure:"serverSelectorThreads"`
	// ServerChannelMaxIdleTimeSeconds closes connections silent this long.
	ServerChannelMaxIdleTimeSeconds int `mapstructure:"serverChannelMaxIdleTimeSeconds"`
	// ScanNotActiveBrokerInterval is how often, in ms, the leader looks for
	// dead masters at the latest; it also wakes when a master's heartbeat
	// timeout runs out. RocketMQ 5's default is 5 s; ours 1 s.
	ScanNotActiveBrokerInterval int64 `mapstructure:"scanNotActiveBrokerInterval"`

	ControllerKeys `mapstructure:",squash"`
}

// DefaultControllerConfig returns every default: listenPort 19876 (RocketMQ
// 5's ControllerStartup), Raft on 127.0.0.1:9878.
func DefaultControllerConfig() ControllerConfig {
	return ControllerConfig{
		RocketmqHome:                    os.Getenv("ROCKETMQ_HOME"),
		BindAddress:                     "0.0.0.0",
		ListenPort:                      19876,
		ServerSelectorThreads:           3,
		ServerChannelMaxIdleTimeSeconds: 120,
		ScanNotActiveBrokerInterval:     1000,
		ControllerKeys:                  DefaultControllerKeys(),
	}
}

// LoadControllerConfig returns the defaults overlaid with the file at path
// (no file when path is empty), validated.
func LoadControllerConfig(path string, log logrus.FieldLogger) (ControllerConfig, error) {
	return loadOrDefault(DefaultControllerConfig(), path, log)
}

// Validate checks every value that could not work, naming the key and value.
func (c *ControllerConfig) Validate() error {
	switch {
	case c.ListenPort < 0 || c.ListenPort > 65535:
		return fmt.Errorf("%w: listenPort=%d is not a port (0-65535)", ErrBadValue, c.ListenPort)
	case c.ServerSelectorThreads < 0 || c.ServerSelectorThreads > 256:
		return fmt.Errorf("%w: serverSelectorThreads=%d must be 0-256", ErrBadValue, c.ServerSelectorThreads)
	case c.ServerChannelMaxIdleTimeSeconds < 1:
		return fmt.Errorf("%w: serverChannelMaxIdleTimeSeconds=%d must be at least 1", ErrBadValue, c.ServerChannelMaxIdleTimeSeconds)
	case c.ScanNotActiveBrokerInterval < 1 || c.ScanNotActiveBrokerInterval > maxConfigMillis:
		return fmt.Errorf("%w: scanNotActiveBrokerInterval=%d must be 1-%d ms", ErrBadValue, c.ScanNotActiveBrokerInterval, maxConfigMillis)
	}
	return c.ControllerKeys.validate()
}

// ListenAddr is bindAddress:listenPort.
func (c ControllerConfig) ListenAddr() string {
	return fmt.Sprintf("%s:%d", c.BindAddress, c.ListenPort)
}

// ScanInterval is ScanNotActiveBrokerInterval as a duration.
func (c ControllerConfig) ScanInterval() time.Duration {
	return time.Duration(c.ScanNotActiveBrokerInterval) * time.Millisecond
}
