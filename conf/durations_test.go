package conf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateRefusesDurationsThatCrashOrSpin covers the duration keys that
// become tickers and timers: 0 makes time.NewTicker panic at start, and a
// huge value overflows time.Duration into a negative one (a panic, or a
// timer firing in a busy loop). Each must be refused by Validate, naming
// the key.
func TestValidateRefusesDurationsThatCrashOrSpin(t *testing.T) {
	huge := int64(math.MaxInt64 / 100) // overflows once multiplied by time.Millisecond
	for name, mut := range map[string]func(*BrokerConfig){
		"flushIntervalCommitLog":          func(c *BrokerConfig) { c.FlushIntervalCommitLog = 0 },
		"flushIntervalConsumeQueue":       func(c *BrokerConfig) { c.FlushIntervalConsumeQueue = -5 },
		"cleanResourceInterval":           func(c *BrokerConfig) { c.CleanResourceInterval = 0 },
		"flushCommitLogThoroughInterval":  func(c *BrokerConfig) { c.FlushCommitLogThoroughInterval = -1 },
		"transactionCheckInterval":        func(c *BrokerConfig) { c.TransactionCheckInterval = huge },
		"flushConsumerOffsetInterval":     func(c *BrokerConfig) { c.FlushConsumerOffsetInterval = huge },
		"flushDelayOffsetInterval":        func(c *BrokerConfig) { c.FlushDelayOffsetInterval = huge },
		"registerNameServerPeriod":        func(c *BrokerConfig) { c.RegisterNameServerPeriod = huge },
		"syncFlushTimeout":                func(c *BrokerConfig) { c.SyncFlushTimeout = huge },
		"shortPollingTimeMills":           func(c *BrokerConfig) { c.ShortPollingTimeMills = -1 },
		"serverChannelMaxIdleTimeSeconds": func(c *BrokerConfig) { c.ServerChannelMaxIdleTimeSeconds = math.MaxInt32 * 8 },
		"timerMaxDelaySec":                func(c *BrokerConfig) { c.TimerMaxDelaySec = math.MaxInt64 / 10 },
		"fileReservedTime":                func(c *BrokerConfig) { c.FileReservedTime = 1 << 40 },
	} {
		c := DefaultBrokerConfig()
		mut(&c)
		err := c.Validate()
		require.ErrorIs(t, err, ErrBadValue, name)
		assert.Contains(t, err.Error(), name+"=")
	}
	c := DefaultBrokerConfig()
	c.DeleteCommitLogFilesInterval, c.DestroyMapedFileIntervalForcibly, c.ShortPollingTimeMills = 0, 0, 0
	assert.NoError(t, c.Validate(), "pauses may be 0")
}

// TestNamesrvValidateRefusesOverflowingDurations: UPDATE_NAMESRV_CONFIG
// may set these at runtime, so an overflowing value must not pass.
func TestNamesrvValidateRefusesOverflowingDurations(t *testing.T) {
	for name, mut := range map[string]func(*NamesrvConfig){
		"scanNotActiveBrokerInterval": func(c *NamesrvConfig) { c.ScanNotActiveBrokerInterval = math.MaxInt64 / 100 },
		"brokerChannelExpiredTime":    func(c *NamesrvConfig) { c.BrokerChannelExpiredTime = math.MaxInt64 },
	} {
		c := DefaultNamesrvConfig()
		mut(&c)
		err := c.Validate()
		require.ErrorIs(t, err, ErrBadValue, name)
		assert.Contains(t, err.Error(), name+"=")
	}
}

// TestValidateRefusesDelayLevelsBeyondRetention: a delayed message waits
// in the commitlog until due, and retention deletes commitlog files by age:
// a level as long as fileReservedTime would lose its messages.
func TestValidateRefusesDelayLevelsBeyondRetention(t *testing.T) {
	c := DefaultBrokerConfig()
	c.FileReservedTime = 48
	c.MessageDelayLevel = "1s 2d"
	err := c.Validate()
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), "messageDelayLevel=")
	assert.Contains(t, err.Error(), "fileReservedTime=48")
	c.MessageDelayLevel = "1s 47h"
	assert.NoError(t, c.Validate())
}
