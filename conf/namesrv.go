package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
)

// NamesrvConfig is the nameserver's configuration: RocketMQ's NamesrvConfig
// and NettyServerConfig keys in one flat struct. Some keys are accepted only
// so that existing files load without warnings; their comments say so.
type NamesrvConfig struct {
	// RocketmqHome is ROCKETMQ_HOME; kept for compatibility, nothing is read from it.
	RocketmqHome string `mapstructure:"rocketmqHome"`
	// KvConfigPath is the file the KV config is persisted to.
	KvConfigPath string `mapstructure:"kvConfigPath"`
	// ConfigStorePath is where Java persists runtime config updates. We never
	// write it (runtime updates stay in memory); accepted for compatibility.
	ConfigStorePath string `mapstructure:"configStorePath"`
	// ProductEnvName is informational.
	ProductEnvName string `mapstructure:"productEnvName"`
	// ClusterTest is accepted for compatibility; it has no effect.
	ClusterTest bool `mapstructure:"clusterTest"`
	// OrderMessageEnable makes routes carry orderTopicConf from the
	// ORDER_TOPIC_CONFIG KV namespace.
	OrderMessageEnable bool `mapstructure:"orderMessageEnable"`

	// BindAddress is the interface to listen on (RocketMQ 5's key).
	BindAddress string `mapstructure:"bindAddress"`
	// ListenPort is the port to listen on; 0 picks a free one.
	ListenPort int `mapstructure:"listenPort"`
	// ServerWorkerThreads is the number of request workers.
	ServerWorkerThreads int `mapstructure:"serverWorkerThreads"`
	// DefaultThreadPoolQueueCapacity bounds the requests waiting for a
	// worker; beyond it requests get SYSTEM_BUSY (RocketMQ 5's key).
	DefaultThreadPoolQueueCapacity int `mapstructure:"defaultThreadPoolQueueCapacity"`
	// ServerCallbackExecutorThreads is accepted for compatibility; no effect.
	ServerCallbackExecutorThreads int `mapstructure:"serverCallbackExecutorThreads"`
	// ServerSelectorThreads is the number of network event loops (0: one per CPU).
	ServerSelectorThreads int `mapstructure:"serverSelectorThreads"`
	// ServerOnewaySemaphoreValue is accepted for compatibility; no effect.
	ServerOnewaySemaphoreValue int `mapstructure:"serverOnewaySemaphoreValue"`
	// ServerAsyncSemaphoreValue is accepted for compatibility; no effect.
	ServerAsyncSemaphoreValue int `mapstructure:"serverAsyncSemaphoreValue"`
	// ServerChannelMaxIdleTimeSeconds closes connections silent this long.
	ServerChannelMaxIdleTimeSeconds int `mapstructure:"serverChannelMaxIdleTimeSeconds"`
	// ServerSocketSndBufSize is accepted for compatibility; no effect (OS default).
	ServerSocketSndBufSize int `mapstructure:"serverSocketSndBufSize"`
	// ServerSocketRcvBufSize is accepted for compatibility; no effect (OS default).
	ServerSocketRcvBufSize int `mapstructure:"serverSocketRcvBufSize"`
	// ServerPooledByteBufAllocatorEnable is accepted for compatibility; no effect.
	ServerPooledByteBufAllocatorEnable bool `mapstructure:"serverPooledByteBufAllocatorEnable"`
	// UseEpollNativeSelector is accepted for compatibility; no effect.
	UseEpollNativeSelector bool `mapstructure:"useEpollNativeSelector"`

	// ScanNotActiveBrokerInterval is how often, in ms, silent brokers are looked for.
	ScanNotActiveBrokerInterval int64 `mapstructure:"scanNotActiveBrokerInterval"`
	// BrokerChannelExpiredTime is how long, in ms, a broker may stay silent
	// before it is dropped with its queue data.
	BrokerChannelExpiredTime int64 `mapstructure:"brokerChannelExpiredTime"`

	// EnableControllerInNamesrv runs a member of the controller group in
	// this nameserver (RocketMQ 5's key): brokers in controller mode reach
	// it on the nameserver's port; the controller keys below configure it,
	// and scanNotActiveBrokerInterval applies to it too.
	EnableControllerInNamesrv bool `mapstructure:"enableControllerInNamesrv"`
	ControllerKeys            `mapstructure:",squash"`

	// TLS on the listening port (and the broker's own calls), and the caps
	// on connections: see TLSConfig and ConnLimitConfig.
	TLSConfig       `mapstructure:",squash"`
	ConnLimitConfig `mapstructure:",squash"`
	// MetricsConfig switches on /metrics (metricsExporterType=PROM).
	MetricsConfig `mapstructure:",squash"`
}

// DefaultNamesrvConfig returns every default, as RocketMQ 4.9's
// NamesrvStartup sets them (listenPort 9876, scan every 10 s, expiry 120 s).
// Paths default under the user's home directory, as Java's do.
func DefaultNamesrvConfig() NamesrvConfig {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	return NamesrvConfig{
		RocketmqHome:                       os.Getenv("ROCKETMQ_HOME"),
		KvConfigPath:                       filepath.Join(home, "namesrv", "kvConfig.json"),
		ConfigStorePath:                    filepath.Join(home, "namesrv", "namesrv.properties"),
		ProductEnvName:                     "center",
		ClusterTest:                        false,
		OrderMessageEnable:                 false,
		BindAddress:                        "0.0.0.0",
		ListenPort:                         9876,
		ServerWorkerThreads:                8,
		DefaultThreadPoolQueueCapacity:     10000,
		ServerCallbackExecutorThreads:      0,
		ServerSelectorThreads:              3,
		ServerOnewaySemaphoreValue:         256,
		ServerAsyncSemaphoreValue:          64,
		ServerChannelMaxIdleTimeSeconds:    120,
		ServerSocketSndBufSize:             0,
		ServerSocketRcvBufSize:             0,
		ServerPooledByteBufAllocatorEnable: true,
		UseEpollNativeSelector:             false,
		ScanNotActiveBrokerInterval:        10_000,
		BrokerChannelExpiredTime:           120_000,
		ControllerKeys:                     DefaultControllerKeys(),
		TLSConfig:                          DefaultTLSConfig(),
		ConnLimitConfig:                    DefaultConnLimitConfig(),
		MetricsConfig:                      DefaultMetricsConfig(),
	}
}

// LoadNamesrvConfig returns the defaults overlaid with the file at path (no
// file when path is empty), validated.
func LoadNamesrvConfig(path string, log logrus.FieldLogger) (NamesrvConfig, error) {
	return loadOrDefault(DefaultNamesrvConfig(), path, log)
}

// Validate checks every value that could not work, naming the key and value.
func (c *NamesrvConfig) Validate() error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("%w: %s=%v %s", ErrBadValue, key, v, why)
	}
	switch {
	case c.ListenPort < 0 || c.ListenPort > 65535:
		return bad("listenPort", c.ListenPort, "is not a port (0-65535)")
	case c.KvConfigPath == "":
		return bad("kvConfigPath", `""`, "must name a file")
	case c.ServerWorkerThreads < 1 || c.ServerWorkerThreads > 1024:
		return bad("serverWorkerThreads", c.ServerWorkerThreads, "must be 1-1024")
	case c.DefaultThreadPoolQueueCapacity < 1:
		return bad("defaultThreadPoolQueueCapacity", c.DefaultThreadPoolQueueCapacity, "must be at least 1")
	case c.ServerSelectorThreads < 0 || c.ServerSelectorThreads > 256:
		return bad("serverSelectorThreads", c.ServerSelectorThreads, "must be 0-256")
	case c.ServerChannelMaxIdleTimeSeconds < 1:
		return bad("serverChannelMaxIdleTimeSeconds", c.ServerChannelMaxIdleTimeSeconds, "must be at least 1")
	case c.ScanNotActiveBrokerInterval < 1 || c.ScanNotActiveBrokerInterval > maxConfigMillis:
		// UPDATE_NAMESRV_CONFIG sets it at runtime: beyond maxConfigMillis
		// the duration overflows negative and the scan timer would spin.
		return bad("scanNotActiveBrokerInterval", c.ScanNotActiveBrokerInterval, fmt.Sprintf("must be 1-%d ms", maxConfigMillis))
	case c.BrokerChannelExpiredTime < 1 || c.BrokerChannelExpiredTime > maxConfigMillis:
		return bad("brokerChannelExpiredTime", c.BrokerChannelExpiredTime, fmt.Sprintf("must be 1-%d ms", maxConfigMillis))
	}
	if c.EnableControllerInNamesrv {
		if err := c.ControllerKeys.validate(); err != nil {
			return err
		}
	}
	if err := c.TLSConfig.validate(); err != nil {
		return err
	}
	if err := c.ConnLimitConfig.validate(); err != nil {
		return err
	}
	return c.MetricsConfig.validate()
}

// ListenAddr is bindAddress:listenPort.
func (c NamesrvConfig) ListenAddr() string {
	return fmt.Sprintf("%s:%d", c.BindAddress, c.ListenPort)
}

// ScanInterval is ScanNotActiveBrokerInterval as a duration.
func (c NamesrvConfig) ScanInterval() time.Duration {
	return time.Duration(c.ScanNotActiveBrokerInterval) * time.Millisecond
}

// BrokerExpiry is BrokerChannelExpiredTime as a duration.
func (c NamesrvConfig) BrokerExpiry() time.Duration {
	return time.Duration(c.BrokerChannelExpiredTime) * time.Millisecond
}
