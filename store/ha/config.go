package ha

import (
	"fmt"
	"time"
)

// Config holds the replication settings of a master and of a slave. Field
// comments give the broker.conf keys (RocketMQ's where RocketMQ has one);
// DefaultConfig holds every default.
type Config struct {
	// HeartbeatInterval is haSendHeartbeatInterval (5 s): a slave reports
	// its offset at least this often, and a master with nothing new sends a
	// heartbeat frame after this long.
	HeartbeatInterval time.Duration
	// HousekeepingInterval is haHousekeepingInterval (20 s): either side
	// drops a connection on which nothing arrived for this long.
	HousekeepingInterval time.Duration
	// TransferBatchSize is haTransferBatchSize (32 KiB): the largest body of
	// one frame the master sends.
	TransferBatchSize int
	// SlaveFallbehindMax is haSlaveFallbehindMax (256 MiB): a SYNC_MASTER
	// answers SLAVE_NOT_AVAILABLE at once while its slaves are this far
	// behind.
	SlaveFallbehindMax int64
	// SlaveTimeout is slaveTimeout (3 s): how long a SYNC_MASTER send waits
	// for a slave's ack before FLUSH_SLAVE_TIMEOUT.
	SlaveTimeout time.Duration
	// Compress is haTransferCompress (ours, off): a slave asks its master
	// for snappy-compressed frames, and a master accepts to send them. Both
	// sides must agree (see the package doc); a RocketMQ peer never does.
	Compress bool
	// ReconnectMin and ReconnectMax are haReconnectMinInterval (1 s) and
	// haReconnectMaxInterval (30 s), ours: a slave whose connection failed
	// or was refused waits ReconnectMin, doubling up to ReconnectMax while
	// it keeps failing. (RocketMQ waits a fixed 5 s.)
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// DialTimeout is haDialTimeout (ours, 3 s): how long a slave's connect
	// to its master may take.
	DialTimeout time.Duration
	// ReplicaID (ours, controller mode) is the slave's brokerId, sent in
	// its hello so the master knows which replica acks; 0 sends none.
	ReplicaID int64
}

// DefaultConfig returns RocketMQ 4.9's defaults and ours.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval:    5 * time.Second,
		HousekeepingInterval: 20 * time.Second,
		TransferBatchSize:    32 << 10,
		SlaveFallbehindMax:   256 << 20,
		SlaveTimeout:         3 * time.Second,
		ReconnectMin:         time.Second,
		ReconnectMax:         30 * time.Second,
		DialTimeout:          3 * time.Second,
	}
}

// Validate names the first setting that cannot work.
func (c *Config) Validate() error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("ha: %s=%v %s", key, v, why)
	}
	switch {
	case c.HeartbeatInterval <= 0:
		return bad("haSendHeartbeatInterval", c.HeartbeatInterval, "must be positive")
	case c.HousekeepingInterval <= c.HeartbeatInterval:
		return bad("haHousekeepingInterval", c.HousekeepingInterval, "must exceed haSendHeartbeatInterval, or idle connections are dropped")
	case c.TransferBatchSize <= 0 || c.TransferBatchSize > maxFrameBody:
		return bad("haTransferBatchSize", c.TransferBatchSize, fmt.Sprintf("must be in (0, %d]", maxFrameBody))
	case c.SlaveFallbehindMax <= 0:
		return bad("haSlaveFallbehindMax", c.SlaveFallbehindMax, "must be positive")
	case c.SlaveTimeout <= 0:
		return bad("slaveTimeout", c.SlaveTimeout, "must be positive")
	case c.ReconnectMin <= 0:
		return bad("haReconnectMinInterval", c.ReconnectMin, "must be positive")
	case c.ReconnectMax < c.ReconnectMin:
		return bad("haReconnectMaxInterval", c.ReconnectMax, "must be at least haReconnectMinInterval")
	case c.DialTimeout <= 0:
		return bad("haDialTimeout", c.DialTimeout, "must be positive")
	}
	return nil
}
