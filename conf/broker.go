package conf

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/store"
	"github.com/gorocketmq/gorocketmq/store/ha"
)

// Broker roles as RocketMQ spells brokerRole.
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// defaultMappedFileSizeCommitLog is 1 GiB, RocketMQ's commitlog file size.
const defaultMappedFileSizeCommitLog = 1 << 30

// BrokerConfig is the broker's configuration: RocketMQ's BrokerConfig,
// NettyServerConfig and MessageStoreConfig keys in one flat struct, because
// one broker.conf feeds all of them. Keys accepted only so existing files load
// without warnings say so in their comments.
type BrokerConfig struct {
	// RocketmqHome is ROCKETMQ_HOME: a relative aclPlainFile is found under it.
	RocketmqHome string `mapstructure:"rocketmqHome"`
	// NamesrvAddr lists the nameservers, ';'-separated ip:port pairs.
	NamesrvAddr string `mapstructure:"namesrvAddr"`
	// BrokerIP1 is the address registered with the nameservers, handed to
	// clients and written into every record and offsetMsgId. Empty means the
	// first non-loopback IPv4 address of this host (127.0.0.1 if none).
	BrokerIP1 string `mapstructure:"brokerIP1"`
	// BrokerIP2 is the address advertised for HA; empty means BrokerIP1.
	BrokerIP2 string `mapstructure:"brokerIP2"`
	// BrokerName names the master/slave set.
	BrokerName string `mapstructure:"brokerName"`
	// BrokerClusterName names the cluster; stored in every message's CLUSTER property.
	BrokerClusterName string `mapstructure:"brokerClusterName"`
	// BrokerID is 0 for a master, >0 for a slave.
	BrokerID int64 `mapstructure:"brokerId"`
	// BrokerPermission is the broker's perm (6 = read|write); without the
	// write bit sends are refused with NO_PERMISSION.
	BrokerPermission int32 `mapstructure:"brokerPermission"`
	// DefaultTopicQueueNums is the queue count of TBW102 and so the most an
	// auto-created topic gets.
	DefaultTopicQueueNums int32 `mapstructure:"defaultTopicQueueNums"`
	// AutoCreateTopicEnable lets a send to an unknown topic create it from
	// TBW102. When false no send creates a topic, whatever defaultTopic the
	// client names (RocketMQ lets a client bypass it; we do not).
	AutoCreateTopicEnable bool `mapstructure:"autoCreateTopicEnable"`
	// ClusterTopicEnable registers the cluster name as a readable/writable topic.
	ClusterTopicEnable bool `mapstructure:"clusterTopicEnable"`
	// BrokerTopicEnable registers the broker name as a readable/writable topic.
	BrokerTopicEnable bool `mapstructure:"brokerTopicEnable"`
	// AutoCreateSubscriptionGroup creates a consumer group on first use.
	AutoCreateSubscriptionGroup bool `mapstructure:"autoCreateSubscriptionGroup"`
	// MsgTraceTopicName is the trace topic created when TraceTopicEnable.
	MsgTraceTopicName string `mapstructure:"msgTraceTopicName"`
	// TraceTopicEnable creates MsgTraceTopicName at start. On by default,
	// unlike RocketMQ: the official Go client's trace dispatcher sends only
	// to a topic the nameservers already route (it has no auto-create
	// fallback), so with it off WithTrace would lose every record.
	TraceTopicEnable bool `mapstructure:"traceTopicEnable"`
	// StoreReplyMessageEnable stores replies (SEND_REPLY_MESSAGE) in the
	// cluster's reply topic as well as pushing them to the requester.
	StoreReplyMessageEnable bool `mapstructure:"storeReplyMessageEnable"`
	// RegionID is returned in every send response as MSG_REGION.
	RegionID string `mapstructure:"regionId"`
	// TraceOn is returned in every send response as TRACE_ON.
	TraceOn bool `mapstructure:"traceOn"`
	// RejectTransactionMessage refuses half messages with NO_PERMISSION.
	RejectTransactionMessage bool `mapstructure:"rejectTransactionMessage"`
	// EnablePropertyFilter serves SQL92 subscriptions (filters on message
	// properties, evaluated on the broker). Off, as RocketMQ's default,
	// their pulls are refused with SYSTEM_ERROR saying so.
	EnablePropertyFilter bool `mapstructure:"enablePropertyFilter"`
	// EnableCalcFilterBitMap (with enablePropertyFilter; off, as RocketMQ's
	// default) evaluates every SQL92 subscription that consumer groups
	// registered by heartbeat on each new message of its topic when the
	// message is stored, and keeps the result as a bloom-filter bitmap
	// beside the consume queue (<storePathRootDir>/consumequeue_filter/,
	// the consume-queue files themselves are unchanged). A pull of a
	// registered subscription then skips messages that certainly do not
	// match without reading them: a stored backlog is consumed about as
	// fast as with a tag filter. It costs the evaluation of each
	// registered expression of a topic per message stored. Registrations
	// are kept in config/consumerFilter.json, those of groups gone for
	// filterDataCleanTimeSpan are dropped; messages stored before a group
	// registered are evaluated when pulled, as without bitmaps.
	EnableCalcFilterBitMap bool `mapstructure:"enableCalcFilterBitMap"`
	// ExpectConsumerNumUseFilter (32) and MaxErrorRateOfBloomFilter (20,
	// percent, 1-99) size the bloom filter: with that many SQL92 groups on
	// a topic, at most that share of non-matching messages is read anyway
	// (a false positive costs an evaluation, never a wrong answer). The
	// defaults give bitmaps of 112 bits; at most store.MaxFilterBitmapBits.
	// ExpectConsumerNumUseFilter is also the most groups of a topic that
	// get bitmaps; those beyond are evaluated as their pulls read.
	ExpectConsumerNumUseFilter int `mapstructure:"expectConsumerNumUseFilter"`
	MaxErrorRateOfBloomFilter  int `mapstructure:"maxErrorRateOfBloomFilter"`
	// BitMapLengthConsumeQueueExt (64) is accepted for compatibility: as in
	// RocketMQ, the bitmap length is the bloom filter's, derived from the
	// two keys above.
	BitMapLengthConsumeQueueExt int `mapstructure:"bitMapLengthConsumeQueueExt"`
	// FilterDataCleanTimeSpan is how long, in ms, the SQL92 registration of
	// a group that stopped subscribing is kept (24 h, RocketMQ's): its
	// bitmaps keep being computed meanwhile, so a group back from an
	// outage consumes its backlog at bitmap speed.
	FilterDataCleanTimeSpan int64 `mapstructure:"filterDataCleanTimeSpan"`

	// AclEnable checks every request against the accounts of AclPlainFile
	// (RocketMQ 4.x plain ACL).
	AclEnable bool `mapstructure:"aclEnable"`
	// AclPlainFile is the ACL file, absolute or relative to rocketmqHome
	// (default conf/plain_acl.yml, where RocketMQ looks; RocketMQ names
	// another with the system property rocketmq.acl.plain.file, relative to
	// rocketmqHome as well). It is re-read when it changes.
	AclPlainFile string `mapstructure:"aclPlainFile"`
	// InnerClientAuthenticationCredentials signs the requests this broker
	// sends itself (a slave's metadata sync with its master, registrations
	// with nameservers): {"accessKey":"...","secretKey":"..."}, RocketMQ 5's
	// key. RocketMQ 4.x signs none of them and instead needs the slaves'
	// addresses in the master's globalWhiteRemoteAddresses, which works too.
	// Shown as ****** by GET_BROKER_CONFIG and -p.
	InnerClientAuthenticationCredentials string `mapstructure:"innerClientAuthenticationCredentials" secret:"true"`

	// Worker pools: threads and queue lengths (a full queue answers SYSTEM_BUSY).
	SendMessageThreadPoolNums              int `mapstructure:"sendMessageThreadPoolNums"`
	PullMessageThreadPoolNums              int `mapstructure:"pullMessageThreadPoolNums"`
	QueryMessageThreadPoolNums             int `mapstructure:"queryMessageThreadPoolNums"`
	AdminBrokerThreadPoolNums              int `mapstructure:"adminBrokerThreadPoolNums"`
	ClientManageThreadPoolNums             int `mapstructure:"clientManageThreadPoolNums"`
	ConsumerManageThreadPoolNums           int `mapstructure:"consumerManageThreadPoolNums"`
	HeartbeatThreadPoolNums                int `mapstructure:"heartbeatThreadPoolNums"`
	EndTransactionThreadPoolNums           int `mapstructure:"endTransactionThreadPoolNums"`
	SendThreadPoolQueueCapacity            int `mapstructure:"sendThreadPoolQueueCapacity"`
	PullThreadPoolQueueCapacity            int `mapstructure:"pullThreadPoolQueueCapacity"`
	QueryThreadPoolQueueCapacity           int `mapstructure:"queryThreadPoolQueueCapacity"`
	ClientManagerThreadPoolQueueCapacity   int `mapstructure:"clientManagerThreadPoolQueueCapacity"`
	ConsumerManagerThreadPoolQueueCapacity int `mapstructure:"consumerManagerThreadPoolQueueCapacity"`
	HeartbeatThreadPoolQueueCapacity       int `mapstructure:"heartbeatThreadPoolQueueCapacity"`
	EndTransactionPoolQueueCapacity        int `mapstructure:"endTransactionPoolQueueCapacity"`

	// FlushConsumerOffsetInterval is how often, in ms, consumerOffset.json is written.
	FlushConsumerOffsetInterval int64 `mapstructure:"flushConsumerOffsetInterval"`
	// LongPollingEnable parks pulls with nothing new until a message arrives.
	LongPollingEnable bool `mapstructure:"longPollingEnable"`
	// ShortPollingTimeMills is how long, in ms, a pull is held when long polling is off.
	ShortPollingTimeMills int64 `mapstructure:"shortPollingTimeMills"`
	// RegisterNameServerPeriod is how often, in ms, the broker registers again.
	RegisterNameServerPeriod int64 `mapstructure:"registerNameServerPeriod"`
	// RegisterBrokerTimeoutMills bounds one REGISTER_BROKER call, in ms.
	RegisterBrokerTimeoutMills int64 `mapstructure:"registerBrokerTimeoutMills"`
	// CompressedRegister sends the zlib form of the registration body.
	CompressedRegister bool `mapstructure:"compressedRegister"`
	// ForceRegister is accepted for compatibility: we always register.
	ForceRegister bool `mapstructure:"forceRegister"`
	// TransactionTimeOut, TransactionCheckMax and TransactionCheckInterval
	// drive half-message check-back (ms, count, ms).
	TransactionTimeOut       int64 `mapstructure:"transactionTimeOut"`
	TransactionCheckMax      int   `mapstructure:"transactionCheckMax"`
	TransactionCheckInterval int64 `mapstructure:"transactionCheckInterval"`

	// BindAddress is the interface to listen on (RocketMQ 5's key).
	BindAddress string `mapstructure:"bindAddress"`
	// ListenPort is the port clients use; 0 picks a free one (tests).
	ListenPort int `mapstructure:"listenPort"`
	// ServerSelectorThreads is the number of network event loops (0: one per CPU).
	ServerSelectorThreads int `mapstructure:"serverSelectorThreads"`
	// ServerChannelMaxIdleTimeSeconds closes connections silent this long.
	ServerChannelMaxIdleTimeSeconds int `mapstructure:"serverChannelMaxIdleTimeSeconds"`
	// ServerWorkerThreads is accepted for compatibility; the pools above size the workers.
	ServerWorkerThreads int `mapstructure:"serverWorkerThreads"`
	// ServerCallbackExecutorThreads is accepted for compatibility; no effect.
	ServerCallbackExecutorThreads int `mapstructure:"serverCallbackExecutorThreads"`
	// ServerOnewaySemaphoreValue is accepted for compatibility; no effect.
	ServerOnewaySemaphoreValue int `mapstructure:"serverOnewaySemaphoreValue"`
	// ServerAsyncSemaphoreValue is accepted for compatibility; no effect.
	ServerAsyncSemaphoreValue int `mapstructure:"serverAsyncSemaphoreValue"`
	// ServerSocketSndBufSize is accepted for compatibility; no effect (OS default).
	ServerSocketSndBufSize int `mapstructure:"serverSocketSndBufSize"`
	// ServerSocketRcvBufSize is accepted for compatibility; no effect (OS default).
	ServerSocketRcvBufSize int `mapstructure:"serverSocketRcvBufSize"`
	// ServerPooledByteBufAllocatorEnable is accepted for compatibility; no effect.
	ServerPooledByteBufAllocatorEnable bool `mapstructure:"serverPooledByteBufAllocatorEnable"`
	// UseEpollNativeSelector is accepted for compatibility; no effect.
	UseEpollNativeSelector bool `mapstructure:"useEpollNativeSelector"`

	// StorePathRootDir is the store root (commitlog, consumequeue, index, config/).
	StorePathRootDir string `mapstructure:"storePathRootDir"`
	// StorePathCommitLog is the commitlog directory; empty means <root>/commitlog.
	StorePathCommitLog string `mapstructure:"storePathCommitLog"`
	// MappedFileSizeCommitLog is the size of one commitlog file in bytes.
	MappedFileSizeCommitLog int `mapstructure:"mappedFileSizeCommitLog"`
	// MapedFileSizeCommitLog is the old spelling of MappedFileSizeCommitLog,
	// still found in real files; it applies when the new key is not set.
	MapedFileSizeCommitLog int `mapstructure:"mapedFileSizeCommitLog"`
	// MappedFileSizeConsumeQueue is the size of one consume-queue file (a multiple of 20).
	MappedFileSizeConsumeQueue int `mapstructure:"mappedFileSizeConsumeQueue"`
	// MaxMessageSize is the largest body (or batch body) accepted, in bytes.
	MaxMessageSize int `mapstructure:"maxMessageSize"`
	// FlushDiskType is ASYNC_FLUSH or SYNC_FLUSH.
	FlushDiskType string `mapstructure:"flushDiskType"`
	// BrokerRole is ASYNC_MASTER, SYNC_MASTER or SLAVE.
	BrokerRole string `mapstructure:"brokerRole"`
	// FlushIntervalCommitLog is the async flush interval in ms.
	FlushIntervalCommitLog int `mapstructure:"flushIntervalCommitLog"`
	// FlushCommitLogLeastPages is the least number of dirty 4 KiB pages an async flush writes.
	FlushCommitLogLeastPages int `mapstructure:"flushCommitLogLeastPages"`
	// FlushCommitLogThoroughInterval is how often, in ms, everything is flushed regardless of pages.
	FlushCommitLogThoroughInterval int `mapstructure:"flushCommitLogThoroughInterval"`
	// SyncFlushTimeout is how long, in ms, a SYNC_FLUSH send waits before FLUSH_DISK_TIMEOUT.
	SyncFlushTimeout int64 `mapstructure:"syncFlushTimeout"`
	// FlushIntervalConsumeQueue is the consume-queue flush interval in ms.
	FlushIntervalConsumeQueue int `mapstructure:"flushIntervalConsumeQueue"`
	// FlushConsumeQueueLeastPages is the least number of dirty pages a consume-queue flush writes.
	FlushConsumeQueueLeastPages int `mapstructure:"flushConsumeQueueLeastPages"`
	// DeleteWhen lists the hours of the day (';'-separated, "04") when expired files are deleted.
	DeleteWhen string `mapstructure:"deleteWhen"`
	// FileReservedTime is how long, in hours, commitlog files are kept.
	FileReservedTime int `mapstructure:"fileReservedTime"`
	// DiskMaxUsedSpaceRatio (percent) starts deleting regardless of deleteWhen.
	DiskMaxUsedSpaceRatio int `mapstructure:"diskMaxUsedSpaceRatio"`
	// DiskSpaceWarningLevelRatio (percent, RocketMQ 5's key) refuses writes above it.
	DiskSpaceWarningLevelRatio int `mapstructure:"diskSpaceWarningLevelRatio"`
	// DiskSpaceCleanForciblyRatio (percent, RocketMQ 5's key) deletes files before they expire above it.
	DiskSpaceCleanForciblyRatio int `mapstructure:"diskSpaceCleanForciblyRatio"`
	// CleanFileForciblyEnable allows deleting unexpired files when the disk is above the force-clean
	// ratio; false keeps every message until fileReservedTime, refusing writes instead.
	CleanFileForciblyEnable bool `mapstructure:"cleanFileForciblyEnable"`
	// CleanResourceInterval is how often, in ms, retention runs.
	CleanResourceInterval int `mapstructure:"cleanResourceInterval"`
	// DeleteCommitLogFilesInterval is the pause, in ms, between two file deletions.
	DeleteCommitLogFilesInterval int `mapstructure:"deleteCommitLogFilesInterval"`
	// DestroyMapedFileIntervalForcibly is how long, in ms, a held file may delay its deletion.
	DestroyMapedFileIntervalForcibly int `mapstructure:"destroyMapedFileIntervalForcibly"`
	// MessageIndexEnable builds the index files (query by key).
	MessageIndexEnable bool `mapstructure:"messageIndexEnable"`
	// MaxHashSlotNum and MaxIndexNum size one index file.
	MaxHashSlotNum int `mapstructure:"maxHashSlotNum"`
	MaxIndexNum    int `mapstructure:"maxIndexNum"`
	// CheckCRCOnRecover checks body CRCs when recovering the commitlog.
	CheckCRCOnRecover bool `mapstructure:"checkCRCOnRecover"`
	// EnabledAppendPropCRC (RocketMQ 5) ends every stored record with a
	// __CRC32# property, a CRC of the whole record, which recovery checks:
	// without it no checksum covers a record's header fields, topic or
	// properties. It costs a CRC of each record under the commitlog's
	// writer lock. Change it only across a clean shutdown.
	EnabledAppendPropCRC bool `mapstructure:"enabledAppendPropCRC"`
	// MaxTransferBytesOnMessageInMemory and MaxTransferCountOnMessageInMemory bound one pull.
	MaxTransferBytesOnMessageInMemory int `mapstructure:"maxTransferBytesOnMessageInMemory"`
	MaxTransferCountOnMessageInMemory int `mapstructure:"maxTransferCountOnMessageInMemory"`
	// MaxTransferBytesOnMessageInDisk and MaxTransferCountOnMessageInDisk are accepted for compatibility.
	MaxTransferBytesOnMessageInDisk int `mapstructure:"maxTransferBytesOnMessageInDisk"`
	MaxTransferCountOnMessageInDisk int `mapstructure:"maxTransferCountOnMessageInDisk"`
	// MessageDelayLevel lists the delay levels (level N = N-th entry),
	// space-separated durations with unit s, m, h or d (RocketMQ's units) or
	// ms (ours, for tests). ParseDelayLevels reads it.
	MessageDelayLevel string `mapstructure:"messageDelayLevel"`
	// FlushDelayOffsetInterval is how often, in ms, delayOffset.json is written.
	FlushDelayOffsetInterval int64 `mapstructure:"flushDelayOffsetInterval"`
	// TimerWheelEnable accepts messages with an arbitrary delivery time
	// (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, __STARTDELIVERTIME);
	// when false they are refused as RocketMQ 5 refuses them.
	TimerWheelEnable bool `mapstructure:"timerWheelEnable"`
	// TimerMaxDelaySec is the longest arbitrary delay accepted, in seconds.
	// Our default is 7 days (RocketMQ 5's is 3); a later delivery time is
	// refused with a remark naming the limit.
	TimerMaxDelaySec int64 `mapstructure:"timerMaxDelaySec"`
	// HaListenPort is always listenPort+1, as in RocketMQ 4.9; accepted for compatibility.
	HaListenPort int `mapstructure:"haListenPort"`
	// Replication (store/ha). Durations in ms, sizes in bytes.
	// HaSendHeartbeatInterval: a slave reports its offset, and an idle
	// master sends a heartbeat frame, at least this often.
	HaSendHeartbeatInterval int64 `mapstructure:"haSendHeartbeatInterval"`
	// HaHousekeepingInterval drops a replication connection silent this long.
	HaHousekeepingInterval int64 `mapstructure:"haHousekeepingInterval"`
	// HaTransferBatchSize is the largest body of one replication frame.
	HaTransferBatchSize int `mapstructure:"haTransferBatchSize"`
	// HaSlaveFallbehindMax: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE at
	// once while its slaves are this many bytes behind.
	HaSlaveFallbehindMax int64 `mapstructure:"haSlaveFallbehindMax"`
	// HaMasterAddress is the master's HA address (ip:port) for a slave; empty,
	// the slave takes it from the nameservers' REGISTER_BROKER answers.
	HaMasterAddress string `mapstructure:"haMasterAddress"`
	// SlaveTimeout is how long a SYNC_MASTER send waits for a slave's ack
	// before FLUSH_SLAVE_TIMEOUT.
	SlaveTimeout int64 `mapstructure:"slaveTimeout"`
	// HaTransferCompress (ours) snappy-compresses replication frames, for a
	// slave far away; set it on master and slave alike. RocketMQ peers never
	// use it, so leave it off when one is involved.
	HaTransferCompress bool `mapstructure:"haTransferCompress"`
	// HaReconnectMinInterval and HaReconnectMaxInterval (ours) bound how
	// long a slave waits before it dials its master again, doubling while
	// it keeps failing (RocketMQ waits a fixed 5 s).
	HaReconnectMinInterval int64 `mapstructure:"haReconnectMinInterval"`
	HaReconnectMaxInterval int64 `mapstructure:"haReconnectMaxInterval"`
	// HaDialTimeout (ours) bounds a slave's connect to its master.
	HaDialTimeout int64 `mapstructure:"haDialTimeout"`
	// Controller mode (RocketMQ 5's keys; see the controller package).
	// EnableControllerMode makes the broker take its role from the
	// controller group at ControllerAddr instead of brokerRole/brokerId:
	// it registers and heartbeats there, and becomes master or slave as
	// the controller says. brokerId is then its fixed replica id (>= 1);
	// as master it registers with the nameservers as brokerId 0. brokerRole
	// says how it replicates when master: SYNC_MASTER or ASYNC_MASTER.
	EnableControllerMode bool `mapstructure:"enableControllerMode"`
	// ControllerAddr lists the controllers' remoting addresses,
	// ';'-separated: the nameservers' with enableControllerInNamesrv, or
	// each mqcontroller's listenPort (not the Raft peers' ports).
	ControllerAddr string `mapstructure:"controllerAddr"`
	// BrokerHeartbeatInterval is how often, in ms, the broker heartbeats to
	// the controller leader (and learns role changes from its answer).
	BrokerHeartbeatInterval int64 `mapstructure:"brokerHeartbeatInterval"`
	// BrokerNotActiveTimeoutMillis: a broker not heard from this long
	// counts as dead, and a dead master is replaced. It is also the
	// master's lease: a master that got no heartbeat answer for this long
	// (counted from when it sent the last answered one) refuses writes.
	// RocketMQ 5's default is 10 s; ours 3 s, for failover within 5 s.
	BrokerNotActiveTimeoutMillis int64 `mapstructure:"brokerNotActiveTimeoutMillis"`
	// SendHeartbeatTimeoutMillis bounds one call to a controller, in ms.
	SendHeartbeatTimeoutMillis int64 `mapstructure:"sendHeartbeatTimeoutMillis"`
	// AllAckInSyncStateSet: a SYNC_MASTER in controller mode answers a send
	// SEND_OK once every replica of the in-sync set has it, so whichever
	// in-sync replica takes over holds every acknowledged message. Ours
	// defaults to true (RocketMQ 5: false, one slave's ack). With false a
	// send waits for one slave, as outside controller mode.
	AllAckInSyncStateSet bool `mapstructure:"allAckInSyncStateSet"`
	// HaMaxTimeSlaveNotCatchup is how long, in ms, a slave may stay behind
	// its master (not once caught up) before the master drops it from the
	// in-sync set.
	HaMaxTimeSlaveNotCatchup int64 `mapstructure:"haMaxTimeSlaveNotCatchup"`

	// SlaveReadEnable lets pull answers send consumers to a slave: one that
	// lags (its data no longer in memory) to the group's
	// whichBrokerWhenConsumeSlowly, others to the group's brokerId. When
	// false every answer suggests the master. A slave serves pulls either
	// way, so consumers carry on from it while the master is down.
	SlaveReadEnable bool `mapstructure:"slaveReadEnable"`

	// TLS on the listening port (and the broker's own calls), and the caps
	// on connections: see TLSConfig and ConnLimitConfig.
	TLSConfig       `mapstructure:",squash"`
	ConnLimitConfig `mapstructure:",squash"`
	// MetricsConfig switches on /metrics (metricsExporterType=PROM).
	MetricsConfig `mapstructure:",squash"`
}

// DefaultBrokerConfig returns every default, as RocketMQ 4.9's BrokerStartup
// sets them, except defaultTopicQueueNums (4, what clients ask for) and
// BrokerIP1 (empty: resolved at start). namesrvAddr is empty: the command
// line fills it from -n or NAMESRV_ADDR. Paths default under the user's home
// directory, as Java's do.
func DefaultBrokerConfig() BrokerConfig {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	cpus := runtime.NumCPU()
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "DEFAULT_BROKER"
	}
	send := min(cpus, 4)
	return BrokerConfig{
		ExpectConsumerNumUseFilter:  32,
		MaxErrorRateOfBloomFilter:   20,
		BitMapLengthConsumeQueueExt: 64,
		FilterDataCleanTimeSpan:     24 * 3600 * 1000,
		RocketmqHome:                os.Getenv("ROCKETMQ_HOME"),
		AclPlainFile:                filepath.Join("conf", "plain_acl.yml"),
		BrokerName:                  host,
		BrokerClusterName:           "DefaultCluster",
		BrokerID:                    0,
		BrokerPermission:            6,
		DefaultTopicQueueNums:       4,
		AutoCreateTopicEnable:       true,
		ClusterTopicEnable:          true,
		BrokerTopicEnable:           true,
		AutoCreateSubscriptionGroup: true,
		MsgTraceTopicName:           "RMQ_SYS_TRACE_TOPIC",
		TraceTopicEnable:            true,
		StoreReplyMessageEnable:     true,
		RegionID:                    "DefaultRegion",
		TraceOn:                     true,

		SendMessageThreadPoolNums:              send,
		PullMessageThreadPoolNums:              16 + 2*cpus,
		QueryMessageThreadPoolNums:             8 + cpus,
		AdminBrokerThreadPoolNums:              16,
		ClientManageThreadPoolNums:             32,
		ConsumerManageThreadPoolNums:           32,
		HeartbeatThreadPoolNums:                min(32, cpus),
		EndTransactionThreadPoolNums:           max(8+2*cpus, 4*send),
		SendThreadPoolQueueCapacity:            10000,
		PullThreadPoolQueueCapacity:            100000,
		QueryThreadPoolQueueCapacity:           20000,
		ClientManagerThreadPoolQueueCapacity:   1000000,
		ConsumerManagerThreadPoolQueueCapacity: 1000000,
		HeartbeatThreadPoolQueueCapacity:       50000,
		EndTransactionPoolQueueCapacity:        100000,

		FlushConsumerOffsetInterval: 5000,
		LongPollingEnable:           true,
		ShortPollingTimeMills:       1000,
		RegisterNameServerPeriod:    30000,
		RegisterBrokerTimeoutMills:  6000,
		ForceRegister:               true,
		TransactionTimeOut:          6000,
		TransactionCheckMax:         15,
		TransactionCheckInterval:    60000,

		BindAddress:                        "0.0.0.0",
		ListenPort:                         10911,
		ServerSelectorThreads:              3,
		ServerChannelMaxIdleTimeSeconds:    120,
		ServerWorkerThreads:                8,
		ServerOnewaySemaphoreValue:         256,
		ServerAsyncSemaphoreValue:          64,
		ServerPooledByteBufAllocatorEnable: true,

		StorePathRootDir:                  filepath.Join(home, "store"),
		MappedFileSizeCommitLog:           defaultMappedFileSizeCommitLog,
		MappedFileSizeConsumeQueue:        300000 * 20,
		MaxMessageSize:                    4 << 20,
		FlushDiskType:                     "ASYNC_FLUSH",
		BrokerRole:                        RoleAsyncMaster,
		FlushIntervalCommitLog:            500,
		FlushCommitLogLeastPages:          4,
		FlushCommitLogThoroughInterval:    10000,
		SyncFlushTimeout:                  5000,
		FlushIntervalConsumeQueue:         1000,
		FlushConsumeQueueLeastPages:       2,
		DeleteWhen:                        "04",
		FileReservedTime:                  72,
		DiskMaxUsedSpaceRatio:             75,
		HaSendHeartbeatInterval:           5000,
		HaHousekeepingInterval:            20000,
		HaTransferBatchSize:               32 << 10,
		HaSlaveFallbehindMax:              256 << 20,
		SlaveTimeout:                      3000,
		HaReconnectMinInterval:            1000,
		HaReconnectMaxInterval:            30000,
		HaDialTimeout:                     3000,
		DiskSpaceWarningLevelRatio:        90,
		DiskSpaceCleanForciblyRatio:       85,
		CleanFileForciblyEnable:           true,
		CleanResourceInterval:             10000,
		DeleteCommitLogFilesInterval:      100,
		DestroyMapedFileIntervalForcibly:  120000,
		MessageIndexEnable:                true,
		MaxHashSlotNum:                    5000000,
		MaxIndexNum:                       20000000,
		CheckCRCOnRecover:                 true,
		EnabledAppendPropCRC:              false,
		MaxTransferBytesOnMessageInMemory: 256 * 1024,
		MaxTransferCountOnMessageInMemory: 32,
		MaxTransferBytesOnMessageInDisk:   64 * 1024,
		MaxTransferCountOnMessageInDisk:   8,
		MessageDelayLevel:                 "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
		FlushDelayOffsetInterval:          10000,
		TimerWheelEnable:                  true,
		TimerMaxDelaySec:                  7 * 86400,
		HaListenPort:                      10912,
		BrokerHeartbeatInterval:           1000,
		BrokerNotActiveTimeoutMillis:      3000,
		SendHeartbeatTimeoutMillis:        1000,
		AllAckInSyncStateSet:              true,
		HaMaxTimeSlaveNotCatchup:          15000,

		TLSConfig:       DefaultTLSConfig(),
		ConnLimitConfig: DefaultConnLimitConfig(),
		MetricsConfig:   DefaultMetricsConfig(),
	}
}

// LoadBrokerConfig returns the defaults overlaid with the file at path (no
// file when path is empty), the old key spellings applied, validated.
func LoadBrokerConfig(path string, log logrus.FieldLogger) (BrokerConfig, error) {
	return loadOrDefault(DefaultBrokerConfig(), path, log)
}

// Validate applies RocketMQ's start-up fix-ups (the old mapedFileSizeCommitLog
// spelling, a master's brokerId 0, haListenPort = listenPort+1) and checks
// every value that could not work, naming the key and value.
func (c *BrokerConfig) Validate() error {
	if c.MapedFileSizeCommitLog > 0 && c.MappedFileSizeCommitLog == defaultMappedFileSizeCommitLog {
		c.MappedFileSizeCommitLog = c.MapedFileSizeCommitLog
	}
	switch c.BrokerRole {
	case RoleAsyncMaster, RoleSyncMaster:
		if !c.EnableControllerMode { // there brokerId is the replica id
			c.BrokerID = 0
		}
	}
	if c.ListenPort > 0 {
		c.HaListenPort = c.ListenPort + 1
	}
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("%w: %s=%v %s", ErrBadValue, key, v, why)
	}
	if _, err := store.ParseFlushDiskType(c.FlushDiskType); err != nil {
		return bad("flushDiskType", c.FlushDiskType, "is neither ASYNC_FLUSH nor SYNC_FLUSH")
	}
	if c.EnableCalcFilterBitMap {
		switch b, err := c.FilterBloom(); {
		case c.MaxErrorRateOfBloomFilter < 1 || c.MaxErrorRateOfBloomFilter > 99:
			return bad("maxErrorRateOfBloomFilter", c.MaxErrorRateOfBloomFilter, "must be a percentage within 1-99")
		case c.ExpectConsumerNumUseFilter < 1:
			return bad("expectConsumerNumUseFilter", c.ExpectConsumerNumUseFilter, "must be at least 1")
		case err != nil:
			return bad("expectConsumerNumUseFilter", c.ExpectConsumerNumUseFilter, err.Error())
		case b.M > store.MaxFilterBitmapBits:
			return bad("expectConsumerNumUseFilter", c.ExpectConsumerNumUseFilter,
				fmt.Sprintf("with maxErrorRateOfBloomFilter=%d needs bitmaps of %d bits, more than %d", c.MaxErrorRateOfBloomFilter, b.M, store.MaxFilterBitmapBits))
		case c.FilterDataCleanTimeSpan <= 0:
			return bad("filterDataCleanTimeSpan", c.FilterDataCleanTimeSpan, "must be positive (ms)")
		}
	}
	if c.BrokerIP1 != "" {
		if _, err := netip.ParseAddr(c.BrokerIP1); err != nil {
			return bad("brokerIP1", c.BrokerIP1, "is not an IP address (clients need a literal IP, not a host name)")
		}
	}
	if c.AclEnable {
		if _, err := c.AclFilePath(); err != nil {
			return err
		}
	}
	if s := strings.TrimSpace(c.InnerClientAuthenticationCredentials); s != "" {
		var cred struct{ AccessKey, SecretKey string }
		if err := json.Unmarshal([]byte(s), &cred); err != nil || cred.AccessKey == "" || cred.SecretKey == "" {
			// The value holds a secret: not echoed.
			return fmt.Errorf("%w: innerClientAuthenticationCredentials is not {\"accessKey\":\"...\",\"secretKey\":\"...\"}", ErrBadValue)
		}
	}
	for _, a := range c.NamesrvAddrs() {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return bad("namesrvAddr", c.NamesrvAddr, "is not a ';'-separated list of ip:port, e.g. 127.0.0.1:9876;192.168.0.1:9876")
		}
	}
	for _, a := range c.ControllerAddrs() {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return bad("controllerAddr", c.ControllerAddr, "is not a ';'-separated list of ip:port, e.g. 127.0.0.1:9876;127.0.0.1:9877")
		}
	}
	switch {
	case c.BrokerRole != RoleAsyncMaster && c.BrokerRole != RoleSyncMaster && c.BrokerRole != RoleSlave:
		return bad("brokerRole", c.BrokerRole, "is not ASYNC_MASTER, SYNC_MASTER or SLAVE")
	case c.BrokerRole == RoleSlave && c.BrokerID <= 0 && !c.EnableControllerMode:
		return bad("brokerId", c.BrokerID, "must be > 0 for a SLAVE")
	case c.EnableControllerMode && c.BrokerID <= 0:
		return bad("brokerId", c.BrokerID, "must be >= 1 with enableControllerMode: it is the broker's replica id in its group (the master registers with the nameservers as 0)")
	case c.EnableControllerMode && c.BrokerRole == RoleSlave:
		return bad("brokerRole", c.BrokerRole, "with enableControllerMode the controller decides who is master; brokerRole says how a master replicates: SYNC_MASTER or ASYNC_MASTER")
	case c.EnableControllerMode && len(c.ControllerAddrs()) == 0:
		return bad("controllerAddr", `""`, "must list the controllers (ip:port;ip:port) with enableControllerMode")
	case c.BrokerID < 0:
		return bad("brokerId", c.BrokerID, "must be >= 0")
	case c.BrokerName == "" || !validName(c.BrokerName):
		return bad("brokerName", c.BrokerName, "must be non-empty and use only [%|a-zA-Z0-9_-]")
	case c.BrokerClusterName == "" || !validName(c.BrokerClusterName):
		return bad("brokerClusterName", c.BrokerClusterName, "must be non-empty and use only [%|a-zA-Z0-9_-]")
	case c.BrokerPermission < 0 || c.BrokerPermission > 15:
		return bad("brokerPermission", c.BrokerPermission, "must be 0-15 (2 write, 4 read, 6 both)")
	case c.DefaultTopicQueueNums < 1 || c.DefaultTopicQueueNums > 1024:
		return bad("defaultTopicQueueNums", c.DefaultTopicQueueNums, "must be 1-1024")
	case c.ListenPort < 0 || c.ListenPort > 65534:
		return bad("listenPort", c.ListenPort, "is not a port (0-65534; HA uses listenPort+1)")
	case c.StorePathRootDir == "":
		return bad("storePathRootDir", `""`, "must name a directory")
	case c.MappedFileSizeCommitLog < 64<<10:
		return bad("mappedFileSizeCommitLog", c.MappedFileSizeCommitLog, "must be at least 65536")
	case c.MappedFileSizeConsumeQueue < 20 || c.MappedFileSizeConsumeQueue%20 != 0:
		return bad("mappedFileSizeConsumeQueue", c.MappedFileSizeConsumeQueue, "must be a positive multiple of 20")
	case c.MaxMessageSize < 1:
		return bad("maxMessageSize", c.MaxMessageSize, "must be at least 1 byte")
	case c.DiskMaxUsedSpaceRatio < 10 || c.DiskMaxUsedSpaceRatio > 95:
		return bad("diskMaxUsedSpaceRatio", c.DiskMaxUsedSpaceRatio, "must be 10-95")
	case c.DiskSpaceWarningLevelRatio < 35 || c.DiskSpaceWarningLevelRatio > 99:
		return bad("diskSpaceWarningLevelRatio", c.DiskSpaceWarningLevelRatio, "must be 35-99")
	case c.DiskSpaceCleanForciblyRatio < 30 || c.DiskSpaceCleanForciblyRatio > 99:
		return bad("diskSpaceCleanForciblyRatio", c.DiskSpaceCleanForciblyRatio, "must be 30-99")
	case c.ServerSelectorThreads < 0 || c.ServerSelectorThreads > 256:
		return bad("serverSelectorThreads", c.ServerSelectorThreads, "must be 0-256")
	case c.TransactionCheckMax < 1:
		return bad("transactionCheckMax", c.TransactionCheckMax, "must be at least 1")
	}
	levels, err := ParseDelayLevels(c.MessageDelayLevel)
	if err != nil {
		return bad("messageDelayLevel", c.MessageDelayLevel, err.Error())
	}
	if err := c.validateDurations(bad); err != nil {
		return err
	}
	// A delayed message waits in the commitlog, which retention empties by
	// file age: a level as long as fileReservedTime would lose messages.
	// (Timers are stored anew every roll window and have no such bound.)
	if longest, reserved := slices.Max(levels), time.Duration(c.FileReservedTime)*time.Hour; longest >= reserved {
		return bad("messageDelayLevel", c.MessageDelayLevel,
			fmt.Sprintf("has a level of %v, not shorter than fileReservedTime=%d hours: retention would delete its messages before delivery", longest, c.FileReservedTime))
	}
	pools := []struct {
		key string
		n   int
	}{
		{"sendMessageThreadPoolNums", c.SendMessageThreadPoolNums},
		{"pullMessageThreadPoolNums", c.PullMessageThreadPoolNums},
		{"queryMessageThreadPoolNums", c.QueryMessageThreadPoolNums},
		{"adminBrokerThreadPoolNums", c.AdminBrokerThreadPoolNums},
		{"clientManageThreadPoolNums", c.ClientManageThreadPoolNums},
		{"consumerManageThreadPoolNums", c.ConsumerManageThreadPoolNums},
		{"heartbeatThreadPoolNums", c.HeartbeatThreadPoolNums},
		{"endTransactionThreadPoolNums", c.EndTransactionThreadPoolNums},
		{"sendThreadPoolQueueCapacity", c.SendThreadPoolQueueCapacity},
		{"pullThreadPoolQueueCapacity", c.PullThreadPoolQueueCapacity},
		{"queryThreadPoolQueueCapacity", c.QueryThreadPoolQueueCapacity},
		{"clientManagerThreadPoolQueueCapacity", c.ClientManagerThreadPoolQueueCapacity},
		{"consumerManagerThreadPoolQueueCapacity", c.ConsumerManagerThreadPoolQueueCapacity},
		{"heartbeatThreadPoolQueueCapacity", c.HeartbeatThreadPoolQueueCapacity},
		{"endTransactionPoolQueueCapacity", c.EndTransactionPoolQueueCapacity},
	}
	for _, p := range pools {
		if p.n < 1 || p.n > 10_000_000 {
			return bad(p.key, p.n, "must be 1-10000000")
		}
	}
	for _, h := range strings.Split(c.DeleteWhen, ";") {
		if n, err := strconv.Atoi(strings.TrimSpace(h)); err != nil || n < 0 || n > 23 {
			return bad("deleteWhen", c.DeleteWhen, "must list hours 00-23, ';'-separated")
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

// maxConfigMillis bounds every duration key given in ms (a year). The
// values become time.Duration (ns), where an int64 of ms overflows beyond
// about 292 years into a negative duration; a ticker of a zero or negative
// duration panics, and a timer of one fires in a busy loop.
const maxConfigMillis = int64(365 * 24 * time.Hour / time.Millisecond)

// maxFileReservedHours bounds fileReservedTime (ten years of hours).
const maxFileReservedHours = 10 * 365 * 24

// validateDurations checks the duration keys Validate's switch does not:
// intervals that drive a ticker must be at least 1 ms, pauses may be 0,
// and none may exceed maxConfigMillis, so no key can crash or spin a loop.
func (c *BrokerConfig) validateDurations(bad func(key string, v any, why string) error) error {
	const ms, sec = 1, 1000 // the key's unit, in ms
	keys := []struct {
		key      string
		v, least int64
		unit     int64
		unitName string
	}{
		{"flushIntervalCommitLog", int64(c.FlushIntervalCommitLog), 1, ms, "ms"},
		{"flushCommitLogThoroughInterval", int64(c.FlushCommitLogThoroughInterval), 0, ms, "ms"},
		{"flushIntervalConsumeQueue", int64(c.FlushIntervalConsumeQueue), 1, ms, "ms"},
		{"cleanResourceInterval", int64(c.CleanResourceInterval), 1, ms, "ms"},
		{"deleteCommitLogFilesInterval", int64(c.DeleteCommitLogFilesInterval), 0, ms, "ms"},
		{"destroyMapedFileIntervalForcibly", int64(c.DestroyMapedFileIntervalForcibly), 0, ms, "ms"},
		{"syncFlushTimeout", c.SyncFlushTimeout, 1, ms, "ms"},
		{"flushConsumerOffsetInterval", c.FlushConsumerOffsetInterval, 1, ms, "ms"},
		{"flushDelayOffsetInterval", c.FlushDelayOffsetInterval, 1, ms, "ms"},
		{"shortPollingTimeMills", c.ShortPollingTimeMills, 0, ms, "ms"},
		{"registerNameServerPeriod", c.RegisterNameServerPeriod, 1000, ms, "ms"},
		{"registerBrokerTimeoutMills", c.RegisterBrokerTimeoutMills, 1, ms, "ms"},
		{"transactionTimeOut", c.TransactionTimeOut, 1, ms, "ms"},
		{"transactionCheckInterval", c.TransactionCheckInterval, 1, ms, "ms"},
		{"serverChannelMaxIdleTimeSeconds", int64(c.ServerChannelMaxIdleTimeSeconds), 1, sec, "s"},
		{"timerMaxDelaySec", c.TimerMaxDelaySec, 1, sec, "s"},
		{"haSendHeartbeatInterval", c.HaSendHeartbeatInterval, 1, ms, "ms"},
		{"haHousekeepingInterval", c.HaHousekeepingInterval, 1, ms, "ms"},
		{"slaveTimeout", c.SlaveTimeout, 1, ms, "ms"},
		{"haReconnectMinInterval", c.HaReconnectMinInterval, 1, ms, "ms"},
		{"haReconnectMaxInterval", c.HaReconnectMaxInterval, 1, ms, "ms"},
		{"haDialTimeout", c.HaDialTimeout, 1, ms, "ms"},
		{"brokerHeartbeatInterval", c.BrokerHeartbeatInterval, 10, ms, "ms"},
		{"brokerNotActiveTimeoutMillis", c.BrokerNotActiveTimeoutMillis, 100, ms, "ms"},
		{"sendHeartbeatTimeoutMillis", c.SendHeartbeatTimeoutMillis, 1, ms, "ms"},
		{"haMaxTimeSlaveNotCatchup", c.HaMaxTimeSlaveNotCatchup, 1, ms, "ms"},
	}
	for _, k := range keys {
		if most := maxConfigMillis / k.unit; k.v < k.least || k.v > most {
			return bad(k.key, k.v, fmt.Sprintf("must be %d-%d (%s, at most a year)", k.least, most, k.unitName))
		}
	}
	if c.EnableControllerMode && c.BrokerNotActiveTimeoutMillis < 2*c.BrokerHeartbeatInterval {
		return bad("brokerNotActiveTimeoutMillis", c.BrokerNotActiveTimeoutMillis,
			fmt.Sprintf("must be at least twice brokerHeartbeatInterval (%d ms): one late heartbeat must not depose a master", c.BrokerHeartbeatInterval))
	}
	if c.FileReservedTime < 1 || c.FileReservedTime > maxFileReservedHours {
		return bad("fileReservedTime", c.FileReservedTime, fmt.Sprintf("must be 1-%d hours", maxFileReservedHours))
	}
	hc := c.HAConfig()
	if err := hc.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	if a := c.HaMasterAddress; a != "" {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return bad("haMasterAddress", a, "is not ip:port")
		}
	}
	return nil
}

// HAConfig returns the replication settings (store/ha) of the broker's keys.
func (c *BrokerConfig) HAConfig() ha.Config {
	hc := ha.DefaultConfig()
	hc.HeartbeatInterval = ms(c.HaSendHeartbeatInterval)
	hc.HousekeepingInterval = ms(c.HaHousekeepingInterval)
	hc.TransferBatchSize = c.HaTransferBatchSize
	hc.SlaveFallbehindMax = c.HaSlaveFallbehindMax
	hc.SlaveTimeout = ms(c.SlaveTimeout)
	hc.Compress = c.HaTransferCompress
	hc.ReconnectMin = ms(c.HaReconnectMinInterval)
	hc.ReconnectMax = ms(c.HaReconnectMaxInterval)
	hc.DialTimeout = ms(c.HaDialTimeout)
	return hc
}

// maxDelayLevels bounds messageDelayLevel: a level travels as a queue id of
// SCHEDULE_TOPIC_XXXX, and topics have at most 1024 queues here.
const maxDelayLevels = 1024

// ParseDelayLevels parses messageDelayLevel: space-separated durations, each
// a positive integer with unit ms, s, m, h or d ("1s 5s 10s 30s 1m ...").
// Level N is the N-th entry. It returns an error naming the bad entry.
func ParseDelayLevels(s string) ([]time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("lists no level")
	}
	if len(fields) > maxDelayLevels {
		return nil, fmt.Errorf("lists %d levels, at most %d are allowed", len(fields), maxDelayLevels)
	}
	out := make([]time.Duration, 0, len(fields))
	for _, f := range fields {
		num, unit := f, time.Duration(0)
		switch {
		case strings.HasSuffix(f, "ms"):
			num, unit = f[:len(f)-2], time.Millisecond
		case strings.HasSuffix(f, "s"):
			num, unit = f[:len(f)-1], time.Second
		case strings.HasSuffix(f, "m"):
			num, unit = f[:len(f)-1], time.Minute
		case strings.HasSuffix(f, "h"):
			num, unit = f[:len(f)-1], time.Hour
		case strings.HasSuffix(f, "d"):
			num, unit = f[:len(f)-1], 24*time.Hour
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if unit == 0 || err != nil || n <= 0 || n > int64(365*24*time.Hour/unit) {
			return nil, fmt.Errorf("has a bad level %q: want a positive number with unit ms, s, m, h or d, at most a year", f)
		}
		out = append(out, time.Duration(n)*unit)
	}
	return out, nil
}

// validName applies RocketMQ's topic/group character rule ([%|a-zA-Z0-9_-]).
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NamesrvAddrs splits NamesrvAddr on ';', dropping blanks.
func (c *BrokerConfig) NamesrvAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// ControllerAddrs splits ControllerAddr on ';', dropping blanks.
func (c *BrokerConfig) ControllerAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.ControllerAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// ListenAddr is bindAddress:listenPort.
func (c *BrokerConfig) ListenAddr() string {
	return fmt.Sprintf("%s:%d", c.BindAddress, c.ListenPort)
}

// AclFilePath is the ACL file: aclPlainFile, under rocketmqHome unless it
// is absolute.
func (c *BrokerConfig) AclFilePath() (string, error) {
	switch {
	case c.AclPlainFile == "":
		return "", fmt.Errorf("%w: aclEnable=true needs aclPlainFile", ErrBadValue)
	case filepath.IsAbs(c.AclPlainFile):
		return c.AclPlainFile, nil
	case c.RocketmqHome == "":
		return "", fmt.Errorf("%w: aclPlainFile=%s is relative, and rocketmqHome (ROCKETMQ_HOME) is not set", ErrBadValue, c.AclPlainFile)
	}
	return filepath.Join(c.RocketmqHome, c.AclPlainFile), nil
}

// IsSlave reports whether brokerRole is SLAVE. In controller mode the
// controller decides the role at runtime: this is always false there.
func (c *BrokerConfig) IsSlave() bool { return c.BrokerRole == RoleSlave && !c.EnableControllerMode }

// StoreConfig builds the store's configuration from the store keys.
// StoreHost is brokerIP1:listenPort (127.0.0.1 when brokerIP1 is unset); the
// broker overrides it once it knows its address.
func (c *BrokerConfig) StoreConfig() *store.Config {
	sc := store.DefaultConfig(c.StorePathRootDir)
	sc.StorePathCommitLog = c.StorePathCommitLog
	sc.MappedFileSizeCommitLog = c.MappedFileSizeCommitLog
	sc.MappedFileSizeConsumeQ = c.MappedFileSizeConsumeQueue
	sc.MaxMessageSize = c.MaxMessageSize
	sc.FlushDiskType, _ = store.ParseFlushDiskType(c.FlushDiskType)
	sc.FlushIntervalCommitLog = ms(int64(c.FlushIntervalCommitLog))
	sc.FlushCommitLogLeastPages = c.FlushCommitLogLeastPages
	sc.FlushCommitLogThorough = ms(int64(c.FlushCommitLogThoroughInterval))
	sc.SyncFlushTimeout = ms(c.SyncFlushTimeout)
	sc.FlushIntervalConsumeQ = ms(int64(c.FlushIntervalConsumeQueue))
	sc.FlushConsumeQLeastPages = c.FlushConsumeQueueLeastPages
	sc.MaxHashSlotNum = c.MaxHashSlotNum
	sc.MaxIndexNum = c.MaxIndexNum
	sc.MessageIndexEnable = c.MessageIndexEnable
	sc.CheckCRCOnRecover = c.CheckCRCOnRecover
	sc.EnabledAppendPropCRC = c.EnabledAppendPropCRC
	if c.EnableCalcFilterBitMap && c.EnablePropertyFilter {
		if b, err := c.FilterBloom(); err == nil { // Validate reports an error
			sc.FilterBitmapBits, sc.FilterBitmapHashes = b.M, b.K
		}
	}
	sc.DeleteWhen = c.DeleteWhen
	sc.FileReservedTime = time.Duration(c.FileReservedTime) * time.Hour
	sc.DiskMaxUsedSpaceRatio = c.DiskMaxUsedSpaceRatio
	sc.DiskWarningRatio = c.DiskSpaceWarningLevelRatio
	sc.DiskForceCleanRatio = c.DiskSpaceCleanForciblyRatio
	sc.CleanFileForcibly = c.CleanFileForciblyEnable
	sc.DeleteFilesInterval = ms(int64(c.DeleteCommitLogFilesInterval))
	sc.DestroyMappedFileForce = ms(int64(c.DestroyMapedFileIntervalForcibly))
	sc.CleanResourceInterval = ms(int64(c.CleanResourceInterval))
	// In controller mode the store refuses puts until the controller
	// makes this broker master.
	sc.Slave = c.IsSlave() || c.EnableControllerMode
	ip, err := netip.ParseAddr(c.BrokerIP1)
	if err != nil {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	sc.StoreHost = netip.AddrPortFrom(ip, uint16(c.ListenPort)).String()
	return sc
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// FilterBloom is the bloom filter of the filter bitmaps
// (maxErrorRateOfBloomFilter, expectConsumerNumUseFilter).
func (c *BrokerConfig) FilterBloom() (filter.Bloom, error) {
	return filter.NewBloom(c.MaxErrorRateOfBloomFilter, c.ExpectConsumerNumUseFilter)
}
