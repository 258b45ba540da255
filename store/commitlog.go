package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
)

// PutStatus is the outcome of a put, named as RocketMQ's PutMessageStatus.
type PutStatus int

// Put statuses. FlushDiskTimeout still means the message is stored (in the
// page cache) and counts as a send with a warning, as in RocketMQ.
const (
	PutOK                  PutStatus = iota // PUT_OK
	FlushDiskTimeout                        // FLUSH_DISK_TIMEOUT
	FlushSlaveTimeout                       // FLUSH_SLAVE_TIMEOUT
	SlaveNotAvailable                       // SLAVE_NOT_AVAILABLE
	ServiceNotAvailable                     // SERVICE_NOT_AVAILABLE
	CreateMappedFileFailed                  // CREATE_MAPEDFILE_FAILED
	MessageIllegal                          // MESSAGE_ILLEGAL
	PropertiesSizeExceeded                  // PROPERTIES_SIZE_EXCEEDED
	OSPageCacheBusy                         // OS_PAGECACHE_BUSY
	UnknownError                            // UNKNOWN_ERROR
)

var putStatusNames = [...]string{
	"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE", "SERVICE_NOT_AVAILABLE",
	"CREATE_MAPEDFILE_FAILED", "MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "OS_PAGECACHE_BUSY", "UNKNOWN_ERROR",
}

// String returns RocketMQ's name of the status.
func (s PutStatus) String() string {
	if s >= 0 && int(s) < len(putStatusNames) {
		return putStatusNames[s]
	}
	return "PutStatus(" + strconv.Itoa(int(s)) + ")"
}

// Errors of the commitlog.
var (
	// ErrMessageTooLarge means a body (or batch body) exceeds MaxMessageSize,
	// or a record cannot fit in one commitlog file.
	ErrMessageTooLarge = errors.New("store: message too large")
	// ErrTopicTooLong means a topic is over 127 bytes.
	ErrTopicTooLong = errors.New("store: topic longer than 127 bytes")
	// ErrPropertiesTooLarge means the properties string is over 32767 bytes.
	ErrPropertiesTooLarge = errors.New("store: properties longer than 32767 bytes")
	// ErrIllegalBatch means a batch carries a transaction type or a delay
	// level, or its body is malformed.
	ErrIllegalBatch = errors.New("store: illegal batch")
	// ErrCreateMappedFile means the next commitlog file could not be created.
	ErrCreateMappedFile = errors.New("store: create commitlog file failed")
	// ErrFlushTimeout means a SYNC_FLUSH put waited SyncFlushTimeout; the
	// message is stored but not known to be on disk.
	ErrFlushTimeout = errors.New("store: flush to disk timed out")
	// ErrFlushFailed means persisting the commitlog failed. It is sticky: the
	// commitlog refuses further puts, because after a failed fsync the kernel
	// may have dropped the dirty pages and a later sync would lie.
	ErrFlushFailed = errors.New("store: flush to disk failed")
	// ErrCommitLogClosed means the commitlog is shut down.
	ErrCommitLogClosed = errors.New("store: commitlog is closed")
	// ErrCorruptRecord means bytes at a commitlog position are not a valid record.
	ErrCorruptRecord = errors.New("store: corrupt commitlog record")
)

// PutResult is what a put returns.
type PutResult struct {
	Status         PutStatus
	Err            error // nil for PutOK
	WroteOffset    int64 // commitlog offset of the (first) record
	WroteBytes     int32 // bytes written (all records of a batch)
	QueueOffset    int64 // consume queue offset of the (first) message
	MsgID          string
	StoreTimestamp int64
	MsgNum         int
}

// OK reports whether the message is stored (RocketMQ's isOk: appended):
// PutOK, or appended but not as durable as asked (FlushDiskTimeout,
// FlushSlaveTimeout, SlaveNotAvailable: the data is in the page cache).
// A caller that retries on !OK would store a second copy otherwise.
func (r PutResult) OK() bool {
	switch r.Status {
	case PutOK, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable:
		return true
	}
	return false
}

// DispatchRequest is what the dispatcher needs from one record.
type DispatchRequest struct {
	Topic                     string
	QueueID                   int32
	CommitLogOffset           int64
	MsgSize                   int32
	TagsCode                  int64
	StoreTimestamp            int64
	ConsumeQueueOffset        int64
	Keys                      string
	UniqKey                   string
	SysFlag                   int32
	PreparedTransactionOffset int64
	BlankRecord               bool // end-of-file marker: MsgSize 0, go to the next file
	// props are the record's encoded properties, a slice of the buffer
	// CheckRecord read (valid while it is held): filter bitmaps are
	// computed from them.
	props []byte
}

// topicQueueKey identifies a consume queue; a struct key avoids building the
// "topic-queueId" string on every put.
type topicQueueKey struct {
	topic   string
	queueID int32
}

// Holding topics whose consume-queue tags code is the delivery time
// (the broker package names them too).
const (
	scheduleTopic = "SCHEDULE_TOPIC_XXXX"
	timerTopic    = "rmq_sys_wheel_timer"
)

// blankMagicWord is message.BlankMagicCode as written to disk.
const blankMagicWord = 0xCBD43194

// encodeBufMax bounds the buffers kept in the pool so one 4 MiB message does
// not pin 4 MiB per pooled buffer forever.
const encodeBufMax = 256 << 10

// CommitLog is the append-only log of every message, in RocketMQ's layout.
//
// Appends are serialised by putMu (one writer): records are encoded outside
// the lock, and under it the commitlog assigns the physical offset, the
// consume queue offset and the store time by patching the encoded bytes, then
// copies them into the last mapped file. Waiting for the disk happens after
// the lock is released (see flushService).
type CommitLog struct {
	cfg       *Config
	log       logrus.FieldLogger
	mfq       *MappedFileQueue
	storeHost netip.AddrPort
	now       func() time.Time
	flush     *flushService
	alloc     *fileAllocator
	// writeThrough writes records with pwrite instead of a copy into the
	// mapping (SYNC_FLUSH; see writeAt).
	writeThrough bool
	// warm keeps the mapping ahead of the writer resident (nil under
	// SYNC_FLUSH, which writes with pwrite; see warm.go).
	warm *warmer
	// put copies bytes into a file at a position, by pwrite or into the
	// mapping; writeAt orders its calls (tests replace it to see them).
	put func(mf *MappedFile, b []byte, pos int) error

	putMu      sync.Mutex
	topicQueue map[topicQueueKey]int64 // next consume queue offset; guarded by putMu

	lastStoreTimestamp atomic.Int64                  // store time of the newest record
	recoverStart       atomic.Int64                  // first file offset the last Recover walked
	appendHook         func()                        // called after each append, outside the lock
	replica            atomic.Pointer[ReplicaWaiter] // SYNC_MASTER: puts also wait for a slave (nil: no)
	retentionFloor     func() int64                  // see SetRetentionFloor
	closed             atomic.Bool
	encodePool         sync.Pool // *[]byte

	// lost holds the sorted LostRanges; replaced whole under lostMu.
	lost   atomic.Pointer[[]LostRange]
	lostMu sync.Mutex
	// appendListener is a second hook after appendHook (HA push; replica.go).
	appendListener atomic.Pointer[func()]
	// metrics are the store's timings (metrics.go), shared with Store.
	metrics *Metrics
}

// NewCommitLog returns a commitlog over cfg's commitlog directory. Call Load,
// Recover and Start before putting.
func NewCommitLog(cfg *Config, log logrus.FieldLogger) (*CommitLog, error) {
	if log == nil {
		l := logrus.New()
		l.SetOutput(discardWriter{})
		log = l
	}
	host, err := netip.ParseAddrPort(cfg.StoreHost)
	if err != nil {
		return nil, fmt.Errorf("store: storeHost %q is not ip:port: %w", cfg.StoreHost, err)
	}
	if cfg.MappedFileSizeCommitLog < 64<<10 {
		return nil, fmt.Errorf("store: mappedFileSizeCommitLog %d is below 64 KiB", cfg.MappedFileSizeCommitLog)
	}
	dir := cfg.StorePathCommitLog
	if dir == "" {
		dir = filepath.Join(cfg.StorePathRootDir, "commitlog")
	}
	log = log.WithField("component", "commitlog")
	cl := &CommitLog{
		cfg:        cfg,
		log:        log,
		mfq:        NewMappedFileQueue(dir, cfg.MappedFileSizeCommitLog, log),
		storeHost:  host,
		now:        time.Now,
		topicQueue: make(map[topicQueueKey]int64, 64),

		writeThrough: cfg.FlushDiskType == SyncFlush,
		metrics:      newMetrics(),
	}
	cl.put = cl.putBytes
	cl.mfq.SetFlushMode(DefaultCommitLogFlushMode)
	cl.alloc = newFileAllocator(log)
	cl.mfq.SetAllocator(cl.alloc.allocate)
	cl.flush = newFlushService(cl)
	if !cl.writeThrough {
		cl.warm = newWarmer(cl)
	}
	return cl, nil
}

// Files returns the commitlog's mapped file queue.
func (cl *CommitLog) Files() *MappedFileQueue { return cl.mfq }

// SetCheckpoint lets the flush service record physicMsgTimestamp after each
// successful flush. Call before Start.
func (cl *CommitLog) SetCheckpoint(cp *StoreCheckpoint) { cl.flush.checkpoint = cp }

// SetAppendHook installs fn, called after every successful append once the
// writer lock is released and before any flush wait (the store dispatches
// the record there). fn must not block for long. Call before the first put.
func (cl *CommitLog) SetAppendHook(fn func()) { cl.appendHook = fn }

// Load maps the existing commitlog files (see MappedFileQueue.Load).
func (cl *CommitLog) Load() error { return cl.mfq.Load() }

// Start starts the flush loop for the configured FlushDiskType and the
// allocator that prepares the next commitlog file ahead of the writer.
func (cl *CommitLog) Start() {
	cl.alloc.start()
	if last := cl.mfq.LastMappedFile(); last != nil {
		size := cl.mfq.FileSize()
		cl.alloc.prepare(cl.mfq.Dir(), last.FileFromOffset()+int64(size), size)
	}
	cl.flush.start()
	if cl.warm != nil {
		cl.warm.start()
	}
}

// Shutdown stops the flush loop after a final full flush and unmaps the
// files. Safe to call twice; it returns the final flush error, if any.
func (cl *CommitLog) Shutdown() error {
	if !cl.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Take the writer lock so no put is half-way through its copy.
	cl.putMu.Lock()
	cl.putMu.Unlock()
	err := cl.flush.shutdown()
	if cl.warm != nil {
		cl.warm.shutdown()
	}
	cl.alloc.close()
	return errors.Join(err, cl.mfq.Close())
}

// Close is Shutdown.
func (cl *CommitLog) Close() error { return cl.Shutdown() }

// MinOffset returns the offset of the first byte still stored (0 when empty).
func (cl *CommitLog) MinOffset() int64 { return max(cl.mfq.MinOffset(), 0) }

// MaxOffset returns the offset just past the last written byte.
func (cl *CommitLog) MaxOffset() int64 { return cl.mfq.MaxOffset() }

// FlushedWhere returns the offset up to which the commitlog is on disk.
func (cl *CommitLog) FlushedWhere() int64 { return cl.mfq.FlushedWhere() }

// RollNextFile returns the start of the file after the one holding offset.
func (cl *CommitLog) RollNextFile(offset int64) int64 { return cl.mfq.RollNextFile(offset) }

// LastStoreTimestamp returns the store time of the newest record.
func (cl *CommitLog) LastStoreTimestamp() int64 { return cl.lastStoreTimestamp.Load() }

// SetQueueOffsets replaces the table of next consume queue offsets. Keys are
// "topic-queueId", as RocketMQ's topicQueueTable; bad keys are ignored.
func (cl *CommitLog) SetQueueOffsets(table map[string]int64) {
	m := make(map[topicQueueKey]int64, len(table))
	for k, v := range table {
		i := strings.LastIndexByte(k, '-')
		if i < 0 {
			continue
		}
		q, err := strconv.ParseInt(k[i+1:], 10, 32)
		if err != nil {
			continue
		}
		m[topicQueueKey{k[:i], int32(q)}] = v
	}
	cl.putMu.Lock()
	cl.topicQueue = m
	cl.putMu.Unlock()
}

// SetQueueOffset sets the next consume queue offset of one queue.
func (cl *CommitLog) SetQueueOffset(topic string, queueID int32, next int64) {
	cl.putMu.Lock()
	cl.topicQueue[topicQueueKey{topic, queueID}] = next
	cl.putMu.Unlock()
}

// SetClock replaces time.Now as the commitlog's clock: the store time of
// each record and the time its files are stamped with, which retention
// compares with its own clock. Call before use.
func (cl *CommitLog) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	cl.now = now
	cl.mfq.SetClock(now)
}

// QueueOffset returns the next consume queue offset of a queue (0 if unknown).
func (cl *CommitLog) QueueOffset(topic string, queueID int32) int64 {
	cl.putMu.Lock()
	defer cl.putMu.Unlock()
	return cl.topicQueue[topicQueueKey{topic, queueID}]
}

// RemoveQueue forgets a queue (topic deletion).
func (cl *CommitLog) RemoveQueue(topic string, queueID int32) {
	cl.putMu.Lock()
	delete(cl.topicQueue, topicQueueKey{topic, queueID})
	cl.putMu.Unlock()
}

func (cl *CommitLog) getBuf() *[]byte {
	if p, ok := cl.encodePool.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 4096)
	return &b
}

func (cl *CommitLog) putBuf(p *[]byte) {
	if cap(*p) <= encodeBufMax {
		*p = (*p)[:0]
		cl.encodePool.Put(p)
	}
}

func illegal(status PutStatus, err error) PutResult { return PutResult{Status: status, Err: err} }

// createFailed is the result of a put that found no file to write to. A
// full disk is SERVICE_NOT_AVAILABLE with ErrDiskFull in the chain, the same
// answer as when the space check refuses writes; anything else keeps
// RocketMQ's CREATE_MAPEDFILE_FAILED.
func createFailed(err error) PutResult {
	if errors.Is(err, ErrDiskFull) {
		return illegal(ServiceNotAvailable, err)
	}
	return illegal(CreateMappedFileFailed, fmt.Errorf("%w: %w", ErrCreateMappedFile, err))
}

// writeFailed is the result of a put whose bytes could not be written.
func writeFailed(err error) PutResult {
	if errors.Is(err, ErrDiskFull) {
		return illegal(ServiceNotAvailable, err)
	}
	return illegal(UnknownError, err)
}

// check applies the limits shared by single and batch puts.
func (cl *CommitLog) check(m *message.MessageExt) (PutResult, bool) {
	if cl.closed.Load() {
		return illegal(ServiceNotAvailable, ErrCommitLogClosed), false
	}
	if err := cl.flush.failed(); err != nil {
		return illegal(ServiceNotAvailable, err), false
	}
	if len(m.Topic) > message.MaxTopicLength {
		return illegal(MessageIllegal, fmt.Errorf("%w: topic %q... is %d bytes", ErrTopicTooLong, m.Topic[:32], len(m.Topic))), false
	}
	if len(m.Topic) == 0 {
		return illegal(MessageIllegal, fmt.Errorf("%w: empty topic", ErrTopicTooLong)), false
	}
	if len(m.Body) > cl.cfg.MaxMessageSize {
		return illegal(MessageIllegal, fmt.Errorf("%w: body of %d bytes over maxMessageSize %d",
			ErrMessageTooLarge, len(m.Body), cl.cfg.MaxMessageSize)), false
	}
	if !m.StoreHost.IsValid() {
		m.StoreHost = cl.storeHost
	}
	return PutResult{}, true
}

// encodeError maps an encoder error to a put result.
func encodeError(err error) PutResult {
	switch {
	case errors.Is(err, message.ErrPropertiesTooLong):
		return illegal(PropertiesSizeExceeded, fmt.Errorf("%w: %w", ErrPropertiesTooLarge, err))
	case errors.Is(err, message.ErrTopicTooLong):
		return illegal(MessageIllegal, fmt.Errorf("%w: %w", ErrTopicTooLong, err))
	case errors.Is(err, message.ErrPropertiesNUL):
		return illegal(MessageIllegal, err)
	case errors.Is(err, message.ErrRecordTooLarge):
		return illegal(MessageIllegal, fmt.Errorf("%w: %w", ErrMessageTooLarge, err))
	default:
		return illegal(MessageIllegal, fmt.Errorf("%w: %w", ErrIllegalBatch, err))
	}
}

// PutMessage appends one message. The record is encoded outside the writer
// lock; under it the commitlog assigns offsets and the store time, and after
// it, under SYNC_FLUSH, the caller waits for the group commit (unless the
// message has WAIT=false). msg's QueueOffset, CommitLogOffset,
// StoreTimestamp, StoreSize, BodyCRC and (if unset) StoreHost are updated.
func (cl *CommitLog) PutMessage(ctx context.Context, msg *message.MessageExt) PutResult {
	res, mustWait := cl.AppendMessage(msg)
	if !mustWait {
		return res
	}
	return cl.waitFlushed(ctx, res)
}

// AppendMessage is PutMessage without the flush wait: it returns once the
// record is appended. mustWait reports that the record still has to reach
// the disk before it may be acknowledged (SYNC_FLUSH, WAIT not "false"); the
// caller then hands the result to OnDurable. A broker uses it so a send does
// not hold a worker while group commit gathers writers, and allocates
// nothing for that when there is nothing to wait for.
func (cl *CommitLog) AppendMessage(msg *message.MessageExt) (res PutResult, mustWait bool) {
	start := cl.metrics.PutLatency.Start()
	res, wait := cl.appendMessage(msg)
	cl.metrics.PutLatency.Since(start)
	return cl.appended(res, wait)
}

// appendMessage encodes and appends one message; wait reports whether the
// message asks to wait for the flush (WAIT is not "false").
func (cl *CommitLog) appendMessage(msg *message.MessageExt) (PutResult, bool) {
	if r, ok := cl.check(msg); !ok {
		return r, false
	}
	bp := cl.getBuf()
	defer cl.putBuf(bp)
	var rec []byte
	var err error
	if cl.cfg.EnabledAppendPropCRC {
		rec, err = message.EncodeRecordWithCRC((*bp)[:0], msg)
	} else {
		rec, err = message.EncodeRecord((*bp)[:0], msg)
	}
	*bp = rec
	if err != nil {
		return encodeError(err), false
	}
	tran := message.TransactionType(msg.SysFlag)
	res := cl.append(rec, 1, topicQueueKey{msg.Topic, msg.QueueID}, tran)
	if res.Status != PutOK {
		return res, false
	}
	msg.QueueOffset = res.QueueOffset
	msg.CommitLogOffset = res.WroteOffset
	msg.StoreTimestamp = res.StoreTimestamp
	msg.StoreSize = res.WroteBytes
	msg.BodyCRC = message.BodyCRC(msg.Body)
	res.MsgID = message.CreateOffsetMsgID(msg.StoreHost, res.WroteOffset)
	return res, msg.Property(message.PropWaitStoreMsgOK) != "false"
}

// PutMessages appends a producer batch: every record lands in one file,
// with consecutive consume queue offsets. A batch may not carry a
// transaction type or a delay level (CommitLog.asyncPutMessages), and its
// whole body must be within MaxMessageSize.
func (cl *CommitLog) PutMessages(ctx context.Context, batch *message.MessageExtBatch) PutResult {
	res, mustWait := cl.AppendMessages(batch)
	if !mustWait {
		return res
	}
	return cl.waitFlushed(ctx, res)
}

// AppendMessages is PutMessages without the flush wait, as AppendMessage.
func (cl *CommitLog) AppendMessages(batch *message.MessageExtBatch) (res PutResult, mustWait bool) {
	start := cl.metrics.PutLatency.Start()
	res, wait := cl.appendBatch(batch)
	cl.metrics.PutLatency.Since(start)
	return cl.appended(res, wait)
}

// appended tells dispatch about a stored record and says whether its writer
// must wait for the flush.
func (cl *CommitLog) appended(res PutResult, wait bool) (PutResult, bool) {
	if res.Status != PutOK {
		return res, false
	}
	if cl.appendHook != nil {
		cl.appendHook()
	}
	cl.notifyAppendListener()
	return res, wait && (cl.cfg.FlushDiskType == SyncFlush || cl.replica.Load() != nil)
}

func (cl *CommitLog) appendBatch(batch *message.MessageExtBatch) (PutResult, bool) {
	m := &batch.MessageExt
	if r, ok := cl.check(m); !ok {
		return r, false
	}
	if message.TransactionType(m.SysFlag) != message.TransactionNotType {
		return illegal(MessageIllegal, fmt.Errorf("%w: transaction messages cannot be batched", ErrIllegalBatch)), false
	}
	if m.DelayTimeLevel() > 0 {
		return illegal(MessageIllegal, fmt.Errorf("%w: delay messages cannot be batched", ErrIllegalBatch)), false
	}
	bp := cl.getBuf()
	defer cl.putBuf(bp)
	var recs []byte
	var n int
	var err error
	if cl.cfg.EnabledAppendPropCRC {
		recs, n, err = message.EncodeBatchRecordsWithCRC((*bp)[:0], batch, cl.cfg.MaxMessageSize)
	} else {
		recs, n, err = message.EncodeBatchRecords((*bp)[:0], batch, cl.cfg.MaxMessageSize)
	}
	*bp = recs
	if err != nil {
		return encodeError(err), false
	}
	res := cl.append(recs, n, topicQueueKey{m.Topic, m.QueueID}, message.TransactionNotType)
	if res.Status != PutOK {
		return res, false
	}
	// RocketMQ answers a batch with the comma-joined offsetMsgIds.
	ids := make([]byte, 0, n*33)
	for off := 0; off < len(recs); {
		if off > 0 {
			ids = append(ids, ',')
		}
		ids = message.AppendOffsetMsgID(ids, m.StoreHost, res.WroteOffset+int64(off))
		off += int(binary.BigEndian.Uint32(recs[off:]))
	}
	res.MsgID = string(ids)
	m.QueueOffset = res.QueueOffset
	m.CommitLogOffset = res.WroteOffset
	m.StoreTimestamp = res.StoreTimestamp
	return res, m.Property(message.PropWaitStoreMsgOK) != "false"
}

// append writes n encoded records (all of key's queue) under the writer lock.
// Records of transaction type PREPARED or ROLLBACK get queue offset 0 and do
// not advance the queue (they get no consume queue entry).
func (cl *CommitLog) append(recs []byte, n int, key topicQueueKey, tran int32) PutResult {
	fileSize := cl.mfq.FileSize()
	if len(recs)+message.BlankRecordLength > fileSize {
		return illegal(MessageIllegal, fmt.Errorf("%w: %d bytes of records do not fit a commitlog file of %d bytes",
			ErrMessageTooLarge, len(recs), fileSize))
	}
	advance := tran == message.TransactionNotType || tran == message.TransactionCommitType

	cl.putMu.Lock()
	defer cl.putMu.Unlock()
	if cl.closed.Load() {
		return illegal(ServiceNotAvailable, ErrCommitLogClosed)
	}
	mf := cl.mfq.LastMappedFile()
	if mf == nil || mf.IsFull() {
		var err error
		if mf, err = cl.mfq.LastMappedFileOrCreate(0); err != nil {
			return createFailed(err)
		}
	}
	// A file mapped at load may have holes (made by an older version, or
	// its reservation lost in a crash): reserve it before the first write.
	if err := mf.ensureBacked(fileSize, 0); err != nil {
		return createFailed(err)
	}
	pos := mf.WrotePosition()
	if rest := fileSize - pos; len(recs)+message.BlankRecordLength > rest {
		// End of file: write the 8-byte blank marker (TOTALSIZE = the rest of
		// the file, MAGIC = blank) and move on, so no record spans two files.
		var blank [message.BlankRecordLength]byte
		binary.BigEndian.PutUint32(blank[:], uint32(rest))
		binary.BigEndian.PutUint32(blank[4:], blankMagicWord)
		if err := cl.writeAt(mf, blank[:], pos); err != nil {
			return writeFailed(err)
		}
		mf.SetWrotePosition(fileSize)
		var err error
		if mf, err = cl.mfq.LastMappedFileOrCreate(0); err != nil {
			return createFailed(err)
		}
		pos = mf.WrotePosition()
	}
	storeTs := cl.now().UnixMilli()
	queueOffset := int64(0)
	if advance {
		queueOffset = cl.topicQueue[key]
	}
	base := mf.FileFromOffset() + int64(pos)
	be := binary.BigEndian
	propCRC := cl.cfg.EnabledAppendPropCRC
	for off, i := 0, int64(0); off < len(recs); i++ {
		r := recs[off:]
		size := int(be.Uint32(r))
		qo := int64(0)
		if advance {
			qo = queueOffset + i
		}
		be.PutUint64(r[message.PosQueueOffset:], uint64(qo))
		be.PutUint64(r[message.PosPhysicalOffset:], uint64(base+int64(off)))
		sysFlag := int32(be.Uint32(r[message.PosSysFlag:]))
		be.PutUint64(r[message.StoreTimestampPos(sysFlag):], uint64(storeTs))
		if propCRC {
			// The __CRC32# property covers the three fields just patched,
			// so it can only be computed here, under the lock, as
			// RocketMQ 5's doAppend does.
			message.PutPropCRC(r[:size])
		}
		off += size
	}
	if err := cl.writeAt(mf, recs, pos); err != nil {
		return writeFailed(err)
	}
	mf.SetWrotePosition(pos + len(recs))
	if cl.warm != nil {
		cl.warm.wrote(base + int64(len(recs)))
	}
	if advance {
		cl.topicQueue[key] = queueOffset + int64(n)
	}
	cl.lastStoreTimestamp.Store(storeTs)
	return PutResult{
		Status:         PutOK,
		WroteOffset:    base,
		WroteBytes:     int32(len(recs)),
		QueueOffset:    queueOffset,
		StoreTimestamp: storeTs,
		MsgNum:         n,
	}
}

// writeAt puts b, whole records (or a blank marker), at pos of mf, and
// writes b's first 8 bytes last. Those are the first record's TOTALSIZE and
// MAGIC, and recovery takes zeros there for the end of the log. A process
// killed in the middle of the write, whether inside the copy or between two
// pages of a pwrite, so leaves zeros where recovery begins to look, and never
// a record that checks out with its tail missing: the body CRC does not
// cover the properties, where UNIQ_KEY lives. This covers a process dying,
// not the machine: writeback may persist the first page of a record before
// the rest, and only a CRC over the whole record (EnabledAppendPropCRC)
// catches that.
// Caller holds putMu.
func (cl *CommitLog) writeAt(mf *MappedFile, b []byte, pos int) error {
	head := min(len(b), message.BlankRecordLength)
	if len(b) > head {
		if err := cl.put(mf, b[head:], pos+head); err != nil {
			return err
		}
	}
	return cl.put(mf, b[:head], pos)
}

// putBytes copies b to pos of mf. Under SYNC_FLUSH it uses pwrite on the
// file: followed by fdatasync that measured about twice as fast as copying
// into the mapping (BenchmarkSyncWritePath), because a page dirtied through a
// mapping is write-protected again by each writeback and faults on the next
// copy. Under ASYNC_FLUSH a copy into the mapping avoids a system call per
// put. Linux keeps the two views coherent, so readers use the mapping either
// way.
func (cl *CommitLog) putBytes(mf *MappedFile, b []byte, pos int) error {
	if !cl.writeThrough {
		copy(mf.Buffer()[pos:], b)
		return nil
	}
	if _, err := mf.file.WriteAt(b, int64(pos)); err != nil {
		return fmt.Errorf("store: write commitlog %s at %d: %w", mf.Path(), pos, noSpace(err))
	}
	return nil
}

// waitFlushed blocks until res's records are durable as OnDurable says, or
// ctx ends (then FLUSH_DISK_TIMEOUT with the cause).
func (cl *CommitLog) waitFlushed(ctx context.Context, res PutResult) PutResult {
	if cl.replica.Load() == nil {
		if cl.cfg.FlushDiskType != SyncFlush {
			return res // the waiter was removed since the append: nothing to wait for (as OnDurable)
		}
		if err := cl.flush.waitFlushed(ctx, res.WroteOffset+int64(res.WroteBytes)); err != nil {
			res.Status = FlushDiskTimeout
			res.Err = err
		}
		return res
	}
	done := make(chan PutResult, 1)
	cl.OnDurable(res, func(r PutResult) { done <- r })
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		res.Status, res.Err = FlushDiskTimeout, ctx.Err()
		return res
	}
}

// ReplicaResult is the outcome of waiting for a slave: PutOK,
// FlushSlaveTimeout or SlaveNotAvailable, and why when not PutOK.
type ReplicaResult struct {
	Status PutStatus
	Err    error
}

// ReplicaWaiter calls done once a slave holds the commitlog up to
// nextOffset, or with the reason it will not be waited for (no slave, or
// too far behind: SlaveNotAvailable) or was waited for in vain
// (FlushSlaveTimeout). done must not block. store/ha's master is one.
type ReplicaWaiter func(nextOffset int64, done func(ReplicaResult))

// SetReplicaWaiter makes every put that waits for durability (WAIT is not
// false) also wait for a slave: the SYNC_MASTER role. nil turns it off. Safe
// to call at any time (a role change); puts under way keep what they saw.
func (cl *CommitLog) SetReplicaWaiter(w ReplicaWaiter) {
	if w == nil {
		cl.replica.Store(nil)
		return
	}
	cl.replica.Store(&w)
}

// OnDurable calls done once with res when its records are as durable as the
// configuration promises: on disk under SYNC_FLUSH (else FLUSH_DISK_TIMEOUT
// with the cause, when the flush failed or SyncFlushTimeout passed), and held
// by a slave under a replica waiter (else FLUSH_SLAVE_TIMEOUT or
// SLAVE_NOT_AVAILABLE). Both waits run at once, as RocketMQ combines them;
// a failed flush wins over the slave's outcome. The records stay stored
// either way. done runs on the group commit goroutine, the replication
// goroutine or the caller's, and must not block.
func (cl *CommitLog) OnDurable(res PutResult, done func(PutResult)) {
	end := res.WroteOffset + int64(res.WroteBytes)
	replica := cl.replica.Load()
	flush := cl.cfg.FlushDiskType == SyncFlush
	switch {
	case replica == nil && !flush:
		done(res)
	case replica == nil:
		cl.flush.waitFlushedAsync(end, func(err error) {
			if err != nil {
				res.Status, res.Err = FlushDiskTimeout, err
			}
			done(res)
		})
	case !flush:
		(*replica)(end, func(r ReplicaResult) {
			res.Status, res.Err = r.Status, r.Err
			done(res)
		})
	default:
		w := &durableWait{res: res, done: done}
		w.pending.Store(2)
		cl.flush.waitFlushedAsync(end, w.flushed)
		(*replica)(end, w.replicated)
	}
}

// durableWait combines a flush wait and a replica wait run at once.
type durableWait struct {
	res      PutResult
	done     func(PutResult)
	pending  atomic.Int32 // waits not finished; the last one answers
	flushErr error        // set before its pending decrement
	replica  ReplicaResult
}

func (w *durableWait) flushed(err error) {
	w.flushErr = err
	w.finish()
}

func (w *durableWait) replicated(r ReplicaResult) {
	w.replica = r
	w.finish()
}

// finish answers once both waits are done (the atomic decrement orders
// each side's field write before the other side's read).
func (w *durableWait) finish() {
	if w.pending.Add(-1) != 0 {
		return
	}
	switch {
	case w.flushErr != nil:
		w.res.Status, w.res.Err = FlushDiskTimeout, w.flushErr
	case w.replica.Status != PutOK:
		w.res.Status, w.res.Err = w.replica.Status, w.replica.Err
	}
	w.done(w.res)
}

// GetData returns the written bytes from offset to the end of the written data
// in the file holding offset. The caller must Release the result.
func (cl *CommitLog) GetData(offset int64) (SelectResult, bool) {
	mf := cl.mfq.FindMappedFileByOffset(offset, offset == 0)
	if mf == nil {
		return SelectResult{}, false
	}
	pos := offset - mf.FileFromOffset()
	if pos < 0 || pos >= int64(mf.FileSize()) {
		return SelectResult{}, false
	}
	return mf.SelectFrom(int(pos))
}

// GetMessage returns exactly size bytes at offset (one record). The caller
// must Release the result.
func (cl *CommitLog) GetMessage(offset int64, size int32) (SelectResult, bool) {
	mf := cl.mfq.FindMappedFileByOffset(offset, offset == 0)
	if mf == nil || size <= 0 {
		return SelectResult{}, false
	}
	pos := offset - mf.FileFromOffset()
	if pos < 0 || pos+int64(size) > int64(mf.FileSize()) {
		return SelectResult{}, false
	}
	return mf.SelectBytes(int(pos), int(size))
}

// CheckRecord parses the record at the start of b (b may extend beyond it)
// into a DispatchRequest. The blank end-of-file marker gives BlankRecord with
// MsgSize 0. Anything else that is not a valid record (bad magic, sizes that
// disagree, a short buffer, or a CRC mismatch when checkCRC) returns an error
// wrapping ErrCorruptRecord and the message package's cause.
func CheckRecord(b []byte, checkCRC bool) (DispatchRequest, error) {
	r, err := message.ParseRecord(b)
	if errors.Is(err, message.ErrBlankRecord) {
		return DispatchRequest{BlankRecord: true}, nil
	}
	if err != nil {
		return DispatchRequest{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	if checkCRC {
		if err := r.VerifyCRC(); err != nil {
			return DispatchRequest{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
	}
	d := DispatchRequest{
		Topic:                     string(r.Topic()),
		QueueID:                   r.QueueID(),
		CommitLogOffset:           r.PhysicalOffset(),
		MsgSize:                   int32(r.Size()),
		StoreTimestamp:            r.StoreTimestamp(),
		ConsumeQueueOffset:        r.QueueOffset(),
		SysFlag:                   r.SysFlag(),
		PreparedTransactionOffset: r.PreparedTransactionOffset(),
	}
	// Dispatch runs for every stored message: pick the four properties it
	// needs out of the record in one pass instead of building a map.
	d.props = r.Properties()
	keys, uniqKey, tags, timerOut := dispatchProperties(d.props)
	if len(keys) > 0 {
		d.Keys = string(keys)
	}
	if len(uniqKey) > 0 {
		d.UniqKey = string(uniqKey)
	}
	d.TagsCode = queueTagsCode(d.Topic, tags, timerOut)
	return d, nil
}

// dispatchProperties picks the properties dispatch needs out of an encoded
// properties string in one pass, without allocating. As
// UnmarshalProperties, items with an empty key or value are skipped and a
// repeated key keeps its last value.
func dispatchProperties(props []byte) (keys, uniqKey, tags, timerOut []byte) {
	for len(props) > 0 {
		item := props
		if end := bytes.IndexByte(props, message.PropertySeparator); end >= 0 {
			item, props = props[:end], props[end+1:]
		} else {
			props = nil
		}
		kv := bytes.IndexByte(item, message.NameValueSeparator)
		if kv <= 0 || kv == len(item)-1 {
			continue
		}
		key, val := item[:kv], item[kv+1:]
		switch string(key) {
		case message.PropKeys:
			keys = val
		case message.PropUniqKey:
			uniqKey = val
		case message.PropTags:
			tags = val
		case message.PropTimerOutMS:
			timerOut = val
		}
	}
	return keys, uniqKey, tags, timerOut
}

// queueTagsCode is the tags code of a record's consume-queue entry: the hash
// of its TAGS (0 without). Messages parked until a delivery time (delay
// levels, timers) are queued with that time as tags code instead, as
// RocketMQ's checkMessageAndReturnSize does for SCHEDULE_TOPIC_XXXX; the
// broker writes the time as TIMER_OUT_MS. It does not allocate: the byte
// slices are viewed as strings only for the duration of the calls, which
// keep nothing (a ParseInt error, which would, is dropped).
func queueTagsCode(topic string, tags, timerOut []byte) int64 {
	var code int64
	if len(tags) > 0 {
		code = message.TagsHashCode(unsafe.String(unsafe.SliceData(tags), len(tags)))
	}
	if (topic == scheduleTopic || topic == timerTopic) && len(timerOut) > 0 {
		if ms, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(timerOut), len(timerOut)), 10, 64); err == nil {
			code = ms
		}
	}
	return code
}

// CheckRecord is the package function CheckRecord, for callers holding a CommitLog.
func (cl *CommitLog) CheckRecord(b []byte, checkCRC bool) (DispatchRequest, error) {
	return CheckRecord(b, checkCRC)
}

// DeleteExpiredFiles deletes commitlog files last written at least expire
// before now, oldest first, never the newest file, at most 10 per call with
// interval between deletions. A file still held by readers is waited for up
// to forceTimeout, then unlinked (its mapping is freed by the last reader).
// cleanImmediately deletes regardless of age (disk nearly full). It returns
// how many files were deleted.
//
// A file holding bytes at or above the retention floor (SetRetentionFloor)
// is never deleted.
func (cl *CommitLog) DeleteExpiredFiles(now time.Time, expire, interval, forceTimeout time.Duration, cleanImmediately bool) int {
	floor := int64(math.MaxInt64)
	if cl.retentionFloor != nil {
		floor = cl.retentionFloor()
	}
	return cl.mfq.DeleteExpiredByTime(now, expire, interval, forceTimeout, cleanImmediately, floor)
}

// SetRetentionFloor installs fn, which returns the lowest offset retention
// must keep (the store passes its dispatch position). Call before Start.
func (cl *CommitLog) SetRetentionFloor(fn func() int64) { cl.retentionFloor = fn }
