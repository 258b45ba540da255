package conf

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

func warnedKeys(hook *test.Hook) []string {
	var keys []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			keys = append(keys, e.Data["key"].(string))
		}
	}
	return keys
}

func TestDefaultBrokerConfigIsValid(t *testing.T) {
	cfg := DefaultBrokerConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 10911, cfg.ListenPort)
	assert.Equal(t, 10912, cfg.HaListenPort)
	assert.Equal(t, int32(4), cfg.DefaultTopicQueueNums)
	assert.True(t, cfg.AutoCreateTopicEnable)
	assert.Equal(t, "DefaultCluster", cfg.BrokerClusterName)
	assert.Empty(t, cfg.NamesrvAddr, "the command line reads NAMESRV_ADDR, not the defaults")
}

// TestSampleBrokerConfigs loads every shipped sample: none may carry a key
// we do not know, and each must validate.
func TestSampleBrokerConfigs(t *testing.T) {
	files, err := filepath.Glob("2m-*/*.properties")
	require.NoError(t, err)
	files = append(files, "broker.conf")
	require.GreaterOrEqual(t, len(files), 12)
	for _, f := range files {
		log, hook := test.NewNullLogger()
		cfg, err := LoadBrokerConfig(f, log)
		require.NoError(t, err, f)
		assert.Empty(t, warnedKeys(hook), f)
		if strings.HasSuffix(f, "-s.properties") {
			assert.Equal(t, RoleSlave, cfg.BrokerRole, f)
			assert.Equal(t, int64(1), cfg.BrokerID, f)
		} else {
			assert.Equal(t, int64(0), cfg.BrokerID, f)
		}
	}
}

func TestLoadBrokerConfigKeys(t *testing.T) {
	log, hook := test.NewNullLogger()
	p := writeFile(t, "broker.conf", `brokerClusterName = C1
brokerName = broker-b
brokerId = 3
namesrvAddr = 127.0.0.1:9876;10.0.0.2:9876
listenPort = 20911
brokerIP1 = 10.0.0.5
brokerRole = SYNC_MASTER
flushDiskType = SYNC_FLUSH
storePathRootDir = /tmp/st
storePathCommitLog = /tmp/cl
mapedFileSizeCommitLog = 2097152
deleteWhen = 01;13
fileReservedTime = 12
autoCreateTopicEnable = false
defaultTopicQueueNums = 8
maxMessageSize = 1024
enabledAppendPropCRC = true
storePathConsumeQueue = /tmp/old
`)
	cfg, err := LoadBrokerConfig(p, log)
	require.NoError(t, err)
	assert.Equal(t, []string{"storepathconsumequeue"}, warnedKeys(hook), "unknown keys are warned, not fatal")
	assert.Equal(t, "C1", cfg.BrokerClusterName)
	assert.Equal(t, "broker-b", cfg.BrokerName)
	assert.Equal(t, int64(0), cfg.BrokerID, "a master's brokerId is forced to 0, as RocketMQ does")
	assert.Equal(t, []string{"127.0.0.1:9876", "10.0.0.2:9876"}, cfg.NamesrvAddrs())
	assert.Equal(t, 20912, cfg.HaListenPort)
	assert.Equal(t, 2097152, cfg.MappedFileSizeCommitLog, "the old spelling applies")
	assert.False(t, cfg.AutoCreateTopicEnable)

	sc := cfg.StoreConfig()
	assert.Equal(t, "/tmp/st", sc.StorePathRootDir)
	assert.Equal(t, "/tmp/cl", sc.StorePathCommitLog)
	assert.Equal(t, 2097152, sc.MappedFileSizeCommitLog)
	assert.Equal(t, store.SyncFlush, sc.FlushDiskType)
	assert.Equal(t, 12*time.Hour, sc.FileReservedTime)
	assert.Equal(t, "01;13", sc.DeleteWhen)
	assert.Equal(t, 1024, sc.MaxMessageSize)
	assert.Equal(t, 5*time.Second, sc.SyncFlushTimeout)
	assert.Equal(t, "10.0.0.5:20911", sc.StoreHost)
	assert.True(t, sc.EnabledAppendPropCRC, "enabledAppendPropCRC reaches the store")
	def := DefaultBrokerConfig()
	assert.False(t, def.StoreConfig().EnabledAppendPropCRC, "off by default, as in RocketMQ 5")

	// The new spelling wins over the old one.
	p = writeFile(t, "both.conf", "mapedFileSizeCommitLog=2097152\nmappedFileSizeCommitLog=4194304\n")
	cfg, err = LoadBrokerConfig(p, log)
	require.NoError(t, err)
	assert.Equal(t, 4194304, cfg.MappedFileSizeCommitLog)

	// -p output loads back to the same configuration.
	p = writeFile(t, "printed.conf", Format(&cfg))
	again, err := LoadBrokerConfig(p, log)
	require.NoError(t, err)
	assert.Equal(t, cfg, again)
}

func TestBrokerConfigValidate(t *testing.T) {
	cases := []struct {
		key, value, want string
	}{
		{"flushDiskType", "SOMETIMES", "flushDiskType"},
		{"brokerRole", "LEADER", "brokerRole"},
		{"brokerIP1", "my-host", "brokerIP1"},
		{"namesrvAddr", "localhost:9876", "namesrvAddr"},
		{"namesrvAddr", "127.0.0.1", "namesrvAddr"},
		{"listenPort", "70000", "listenPort"},
		{"brokerName", "a b", "brokerName"},
		{"brokerClusterName", "", "brokerClusterName"},
		{"defaultTopicQueueNums", "0", "defaultTopicQueueNums"},
		{"mappedFileSizeCommitLog", "100", "mappedFileSizeCommitLog"},
		{"mappedFileSizeConsumeQueue", "30", "mappedFileSizeConsumeQueue"},
		{"maxMessageSize", "0", "maxMessageSize"},
		{"deleteWhen", "25", "deleteWhen"},
		{"diskMaxUsedSpaceRatio", "99", "diskMaxUsedSpaceRatio"},
		{"sendMessageThreadPoolNums", "0", "sendMessageThreadPoolNums"},
		{"storePathRootDir", "", "storePathRootDir"},
		{"brokerPermission", "16", "brokerPermission"},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			cfg := DefaultBrokerConfig()
			require.NoError(t, Set(&cfg, tc.key, tc.value))
			err := cfg.Validate()
			assert.ErrorIs(t, err, ErrBadValue)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	slave := DefaultBrokerConfig()
	slave.BrokerRole = RoleSlave
	assert.ErrorContains(t, slave.Validate(), "brokerId", "a SLAVE needs brokerId > 0")
	slave.BrokerID = 1
	require.NoError(t, slave.Validate())
	assert.True(t, slave.IsSlave())

	p := writeFile(t, "bad.conf", "listenPort=abc\n")
	_, err := LoadBrokerConfig(p, nil)
	assert.ErrorIs(t, err, ErrBadValue)
}

// The filter-bitmap keys load from broker.conf in RocketMQ's names, size
// the store's bitmaps only with enablePropertyFilter too, and refuse a bloom
// filter too large for a unit.
func TestBrokerConfigFilterBitmapKeys(t *testing.T) {
	log, _ := test.NewNullLogger()
	def := DefaultBrokerConfig()
	assert.False(t, def.EnableCalcFilterBitMap, "off by default, as in RocketMQ")
	assert.Equal(t, 32, def.ExpectConsumerNumUseFilter)
	assert.Equal(t, 20, def.MaxErrorRateOfBloomFilter)
	assert.Equal(t, 64, def.BitMapLengthConsumeQueueExt)
	assert.Equal(t, int64(24*3600*1000), def.FilterDataCleanTimeSpan)
	assert.Zero(t, def.StoreConfig().FilterBitmapBits)

	p := writeFile(t, "broker.conf", `enableCalcFilterBitMap = true
expectConsumerNumUseFilter = 64
maxErrorRateOfBloomFilter = 10
bitMapLengthConsumeQueueExt = 128
filterDataCleanTimeSpan = 60000
`)
	cfg, err := LoadBrokerConfig(p, log)
	require.NoError(t, err)
	assert.True(t, cfg.EnableCalcFilterBitMap)
	assert.Equal(t, 64, cfg.ExpectConsumerNumUseFilter)
	assert.Equal(t, 10, cfg.MaxErrorRateOfBloomFilter)
	assert.Equal(t, int64(60000), cfg.FilterDataCleanTimeSpan)
	assert.Zero(t, cfg.StoreConfig().FilterBitmapBits, "no SQL92 without enablePropertyFilter: no bitmaps")
	cfg.EnablePropertyFilter = true
	sc := cfg.StoreConfig()
	assert.Equal(t, 312, sc.FilterBitmapBits, "64 filters at 10%%: ceil(64*log2(10)*log2(e)) bits, whole bytes")
	assert.Equal(t, 4, sc.FilterBitmapHashes)

	for _, tc := range []struct{ key, value string }{
		{"maxErrorRateOfBloomFilter", "0"},
		{"maxErrorRateOfBloomFilter", "100"},
		{"expectConsumerNumUseFilter", "0"},
		{"expectConsumerNumUseFilter", "1000"}, // 3351 bits
		{"filterDataCleanTimeSpan", "0"},
	} {
		c := DefaultBrokerConfig()
		c.EnableCalcFilterBitMap = true
		require.NoError(t, Set(&c, tc.key, tc.value))
		err := c.Validate()
		assert.ErrorIs(t, err, ErrBadValue, tc.key)
		assert.ErrorContains(t, err, tc.key)
	}
}
