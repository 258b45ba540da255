package store

import (
	"fmt"
	"time"
)

// FlushDiskType says when an append counts as stored.
type FlushDiskType int

const (
	// AsyncFlush acknowledges once the record is in the page cache; a flush loop
	// persists it every FlushIntervalCommitLog.
	AsyncFlush FlushDiskType = iota
	// SyncFlush acknowledges only after the record is on disk (group commit).
	SyncFlush
)

// String returns the RocketMQ spelling (ASYNC_FLUSH, SYNC_FLUSH).
func (t FlushDiskType) String() string {
	if t == SyncFlush {
		return "SYNC_FLUSH"
	}
	return "ASYNC_FLUSH"
}

// ParseFlushDiskType reads RocketMQ's spelling of flushDiskType.
func ParseFlushDiskType(s string) (FlushDiskType, error) {
	switch s {
	case "ASYNC_FLUSH", "":
		return AsyncFlush, nil
	case "SYNC_FLUSH":
		return SyncFlush, nil
	}
	return AsyncFlush, fmt.Errorf("store: flushDiskType %q is neither ASYNC_FLUSH nor SYNC_FLUSH", s)
}

// Config holds the store's settings. Field comments give RocketMQ's key names;
// DefaultConfig holds every default.
type Config struct {
	StorePathRootDir         string        // storePathRootDir
	StorePathCommitLog       string        // storePathCommitLog; empty means <root>/commitlog
	MappedFileSizeCommitLog  int           // mappedFileSizeCommitLog (1 GiB; tests use 1 MiB)
	MappedFileSizeConsumeQ   int           // mappedFileSizeConsumeQueue (300,000 entries x 20 bytes)
	MaxMessageSize           int           // maxMessageSize: body limit (4 MiB)
	FlushDiskType            FlushDiskType // flushDiskType
	FlushIntervalCommitLog   time.Duration // flushIntervalCommitLog (500 ms)
	FlushCommitLogLeastPages int           // flushCommitLogLeastPages (4)
	FlushCommitLogThorough   time.Duration // flushCommitLogThoroughInterval (10 s): full flush regardless of pages
	SyncFlushTimeout         time.Duration // syncFlushTimeout (5 s): then FLUSH_DISK_TIMEOUT, message stays stored
	FlushIntervalConsumeQ    time.Duration // flushIntervalConsumeQueue (1 s)
	FlushConsumeQLeastPages  int           // flushConsumeQueueLeastPages (2)
	MaxHashSlotNum           int           // maxHashSlotNum (5,000,000)
	MaxIndexNum              int           // maxIndexNum (20,000,000)
	MessageIndexEnable       bool          // messageIndexEnable
	CheckCRCOnRecover        bool          // checkCRCOnRecover
	EnabledAppendPropCRC     bool          // enabledAppendPropCRC (5.x; false): records end with a __CRC32# of the whole record, checked by recovery
	DeleteWhen               string        // deleteWhen: hours of the day, ';'-separated ("04")
	FileReservedTime         time.Duration // fileReservedTime (72 h)
	DiskMaxUsedSpaceRatio    int           // diskMaxUsedSpaceRatio (75): start cleaning regardless of deleteWhen
	DiskForceCleanRatio      int           // diskSpaceCleanForciblyRatio (85): above it delete regardless of age
	DiskWarningRatio         int           // diskSpaceWarningLevelRatio (90): above it refuse writes
	CleanFileForcibly        bool          // cleanFileForciblyEnable (true): false keeps files until they expire, however full the disk
	DeleteFilesInterval      time.Duration // deleteCommitLogFilesInterval (100 ms between two deletions)
	DestroyMappedFileForce   time.Duration // destroyMapedFileIntervalForcibly (120 s): unmap even if held
	CleanResourceInterval    time.Duration // cleanResourceInterval (10 s)
	StoreHost                string        // brokerIP1:listenPort, written into every record and offsetMsgId
	Slave                    bool          // brokerRole=SLAVE: puts are refused, replication writes (Store.SetSlave)
	// FilterBitmapBits is the length in bits of a filter bitmap
	// (enableCalcFilterBitMap: the bloom filter's m, which RocketMQ also
	// writes into bitMapLengthConsumeQueueExt); 0 turns filter bitmaps off
	// and deletes any left by an earlier run. At most MaxFilterBitmapBits.
	FilterBitmapBits int
	// FilterBitmapHashes is the bloom filter's number of bits per filter
	// (k). With FilterBitmapBits it seeds every unit's checksum, so units
	// written under other bloom parameters are never trusted.
	FilterBitmapHashes int
}

// DefaultConfig returns RocketMQ 4.9's defaults, rooted at dir.
func DefaultConfig(dir string) *Config {
	return &Config{
		StorePathRootDir:         dir,
		MappedFileSizeCommitLog:  1 << 30,
		MappedFileSizeConsumeQ:   300000 * 20,
		MaxMessageSize:           4 << 20,
		FlushDiskType:            AsyncFlush,
		FlushIntervalCommitLog:   500 * time.Millisecond,
		FlushCommitLogLeastPages: 4,
		FlushCommitLogThorough:   10 * time.Second,
		SyncFlushTimeout:         5 * time.Second,
		FlushIntervalConsumeQ:    time.Second,
		FlushConsumeQLeastPages:  2,
		MaxHashSlotNum:           5000000,
		MaxIndexNum:              20000000,
		MessageIndexEnable:       true,
		CheckCRCOnRecover:        true,
		EnabledAppendPropCRC:     false,
		DeleteWhen:               "04",
		FileReservedTime:         72 * time.Hour,
		DiskMaxUsedSpaceRatio:    75,
		DiskForceCleanRatio:      85,
		DiskWarningRatio:         90,
		CleanFileForcibly:        true,
		DeleteFilesInterval:      100 * time.Millisecond,
		DestroyMappedFileForce:   120 * time.Second,
		CleanResourceInterval:    10 * time.Second,
		StoreHost:                "127.0.0.1:10911",
	}
}
