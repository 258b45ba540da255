package store

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// GetMessageStatus is the outcome of Store.GetMessage, named as RocketMQ's
// GetMessageStatus. The broker maps it to a pull response code.
type GetMessageStatus int

// The statuses of GetMessage (RocketMQ's names).
const (
	// Found: at least one message is returned.
	Found GetMessageStatus = iota // FOUND
	// NoMatchedMessage: entries were scanned but the filter matched none.
	NoMatchedMessage // NO_MATCHED_MESSAGE
	// MessageWasRemoving: the commitlog file of the first entry was deleted.
	MessageWasRemoving // MESSAGE_WAS_REMOVING
	// OffsetFoundNull: no consume-queue bytes at an offset inside [min, max).
	OffsetFoundNull // OFFSET_FOUND_NULL
	// OffsetOverflowBadly: the offset is beyond the queue's max offset.
	OffsetOverflowBadly // OFFSET_OVERFLOW_BADLY
	// OffsetOverflowOne: the offset equals the max offset (nothing new yet).
	OffsetOverflowOne // OFFSET_OVERFLOW_ONE
	// OffsetTooSmall: the offset is below the queue's min offset.
	OffsetTooSmall // OFFSET_TOO_SMALL
	// NoMatchedLogicQueue: the request names no valid queue (empty topic or
	// negative queue id).
	NoMatchedLogicQueue // NO_MATCHED_LOGIC_QUEUE
	// NoMessageInQueue: the queue is empty (max offset 0) or unknown.
	NoMessageInQueue // NO_MESSAGE_IN_QUEUE
)

var getMessageStatusNames = [...]string{
	"FOUND", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "OFFSET_FOUND_NULL", "OFFSET_OVERFLOW_BADLY",
	"OFFSET_OVERFLOW_ONE", "OFFSET_TOO_SMALL", "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE",
}

// String returns RocketMQ's spelling.
func (s GetMessageStatus) String() string {
	if s >= 0 && int(s) < len(getMessageStatusNames) {
		return getMessageStatusNames[s]
	}
	return "UNKNOWN"
}

// Pull limits (RocketMQ's maxTransferBytesOnMessageInMemory and the
// consume-queue scan bound).
const (
	// DefaultMaxTransferBytes bounds a pull's total size when the caller
	// passes 0.
	DefaultMaxTransferBytes = 256 * 1024
	// minFilterScanEntries is the least number of consume-queue entries one
	// GetMessage scans while filtering (RocketMQ: max(16000, maxMsgNums*20) bytes).
	minFilterScanEntries = 16000 / CQStoreUnitSize
)

// GetMessageResult is what GetMessage found. Messages hold slices of the
// mapped commitlog: call Release exactly once when done with them (after the
// response is written); the result is then reused.
type GetMessageResult struct {
	Status GetMessageStatus
	// NextBeginOffset is the queue offset the consumer should pull next.
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	// Messages are complete commitlog records, in queue order; concatenated
	// they form a pull response body.
	Messages []SelectResult
	// BufferTotalSize is the sum of the records' sizes.
	BufferTotalSize int
	// MaxPhyOffsetPulling is the commitlog offset of the last entry scanned.
	MaxPhyOffsetPulling int64
	// SuggestPullingFromSlave says the data read is far behind the
	// commitlog end, probably no longer cached (RocketMQ's
	// suggestPullingFromSlave; the broker decides what to do with it).
	SuggestPullingFromSlave bool
	// FromDisk says some returned record lies beyond the page-cache share
	// of the commitlog tail: copying it out may read from disk.
	FromDisk bool

	pool *sync.Pool
}

// MessageCount returns len(Messages).
func (r *GetMessageResult) MessageCount() int { return len(r.Messages) }

// AppendBody appends every record to dst (a pull response body).
func (r *GetMessageResult) AppendBody(dst []byte) []byte {
	for i := range r.Messages {
		dst = append(dst, r.Messages[i].Bytes...)
	}
	return dst
}

// Release drops the holds on the mapped files and recycles the result; r
// must not be used afterwards.
func (r *GetMessageResult) Release() {
	for i := range r.Messages {
		r.Messages[i].Release()
	}
	r.Messages = r.Messages[:0]
	if p := r.pool; p != nil {
		r.pool = nil
		p.Put(r)
	}
}

func (r *GetMessageResult) reset(p *sync.Pool) {
	msgs := r.Messages[:0]
	*r = GetMessageResult{Messages: msgs, pool: p}
}

// MessageFilter decides which messages a pull returns. The consume-queue
// stage sees only the tags code; the commitlog stage sees the raw record
// (for property filters) and runs only if the first accepted.
type MessageFilter interface {
	IsMatchedByConsumeQueue(tagsCode int64) bool
	IsMatchedByCommitLog(record []byte) bool
}

// PropertyFilter is a MessageFilter that decides by a message's properties
// (the broker's SQL92 filter). GetMessage calls MatchProperties instead of
// IsMatchedByCommitLog, with the record's encoded properties read straight
// from the mapped commitlog: the file is held once for a run of records
// rather than once per record, and a record is held on its own only when
// it matches. MatchProperties must not keep props.
type PropertyFilter interface {
	MessageFilter
	MatchProperties(props []byte) bool
}

// TagFilter is RocketMQ's tag subscription filter: "*" or "" match all,
// otherwise "tagA || tagB" matches entries whose tags code (the hash of the
// TAGS string) is one of the tags' hashes. A hash collision lets a message
// through; clients filter again by the exact tag.
type TagFilter struct {
	all   bool
	codes []int64
}

// NewTagFilter parses a subscription expression.
func NewTagFilter(expression string) *TagFilter {
	expression = strings.TrimSpace(expression)
	if expression == "" || expression == "*" {
		return &TagFilter{all: true}
	}
	f := &TagFilter{}
	for _, tag := range strings.Split(expression, "||") {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			continue
		}
		f.codes = append(f.codes, message.TagsHashCode(tag))
	}
	f.all = len(f.codes) == 0
	return f
}

// IsMatchedByConsumeQueue reports whether tagsCode is subscribed.
func (f *TagFilter) IsMatchedByConsumeQueue(tagsCode int64) bool {
	if f == nil || f.all {
		return true
	}
	for _, c := range f.codes {
		if c == tagsCode {
			return true
		}
	}
	return false
}

// IsMatchedByCommitLog accepts every record: tags are decided by code.
func (f *TagFilter) IsMatchedByCommitLog([]byte) bool { return true }

// Pull limits for messages that are probably no longer in the page cache
// (RocketMQ's maxTransferBytesOnMessageInDisk / CountOnMessageInDisk), and the
// share of RAM assumed to cache the commitlog's tail.
const (
	maxTransferBytesInDisk        = 64 * 1024
	maxTransferCountInDisk        = 8
	accessMessageInMemoryMaxRatio = 40
)

// physicalMemory returns the RAM size in bytes (1 GiB if unknown).
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// maxQueryMessages caps QueryMessage (RocketMQ's maxMsgsNumBatch).
const maxQueryMessages = 64

// GetMessage reads up to maxMsgNums messages of topic/queueID from queue
// offset offset, at most maxTotalBytes in total (0: 256 KiB), keeping those
// filter accepts (nil: all). The status and next begin offset follow
// RocketMQ's getMessage; records are slices of the mapped commitlog, so
// the caller must Release the result. group is accepted for the broker's
// bookkeeping and does not change the result.
func (s *Store) GetMessage(group, topic string, queueID int32, offset int64, maxMsgNums, maxTotalBytes int, filter MessageFilter) (*GetMessageResult, error) {
	if s.shutdown.Load() {
		return nil, ErrShutdown
	}
	_ = group
	defer s.commitLog.metrics.GetLatency.Since(s.commitLog.metrics.GetLatency.Start())
	if maxTotalBytes <= 0 {
		maxTotalBytes = DefaultMaxTransferBytes
	}
	r := s.resultPool.Get().(*GetMessageResult)
	r.reset(&s.resultPool)
	r.NextBeginOffset = offset
	if topic == "" || queueID < 0 {
		r.Status = NoMatchedLogicQueue
		return r, nil
	}
	cq := s.consumeQueue(topic, queueID)
	if cq == nil {
		// RocketMQ creates the queue on read; an unknown queue is an empty one.
		r.Status = NoMessageInQueue
		r.NextBeginOffset = 0
		return r, nil
	}
	minOff, maxOff := cq.MinOffsetInQueue(), cq.MaxOffsetInQueue()
	r.MinOffset, r.MaxOffset = minOff, maxOff
	switch {
	case maxOff == 0:
		r.Status = NoMessageInQueue
		r.NextBeginOffset = 0
	case offset < minOff:
		r.Status = OffsetTooSmall
		r.NextBeginOffset = minOff
	case offset == maxOff:
		r.Status = OffsetOverflowOne
		r.NextBeginOffset = offset
	case offset > maxOff:
		r.Status = OffsetOverflowBadly
		if minOff == 0 {
			r.NextBeginOffset = minOff
		} else {
			r.NextBeginOffset = maxOff
		}
	default:
		s.readQueue(r, cq, offset, maxMsgNums, maxTotalBytes, filter)
	}
	return r, nil
}

// InMemory reports whether a pull of topic/queueID at queue offset offset
// would read only data that is probably in the page cache: the first
// record's commitlog offset lies within the tail of the commitlog that
// accessMessageInMemoryMaxRatio of the RAM covers (GetMessage's in-disk
// test), and its consume-queue entry is resident (mincore: checking must
// not read from disk either). A pull with nothing to read (unknown queue,
// offset outside the queue) counts as in memory. The broker answers such
// pulls on its event loop, where a read from disk would stall every
// connection of that loop.
func (s *Store) InMemory(topic string, queueID int32, offset int64) bool {
	cq := s.consumeQueue(topic, queueID)
	if cq == nil || offset < cq.MinOffsetInQueue() || offset >= cq.MaxOffsetInQueue() {
		return true
	}
	e, resident, ok := cq.residentEntry(offset)
	switch {
	case !ok:
		return true // not written yet: nothing to read
	case !resident:
		return false
	}
	return s.commitLog.MaxOffset()-e.CommitLogOffset <= s.memoryLimit
}

// readQueue walks consume-queue entries from offset, file by file (the
// RocketMQ walk stops at the end of one consume-queue file; the next pull
// continues in the next one).
func (s *Store) readQueue(r *GetMessageResult, cq *ConsumeQueue, offset int64, maxMsgNums, maxTotalBytes int, filter MessageFilter) {
	buf, ok := cq.EntriesFrom(offset)
	if !ok {
		r.Status = OffsetFoundNull
		fs := int64(cq.Files().FileSize())
		r.NextBeginOffset = (offset*CQStoreUnitSize + fs - offset*CQStoreUnitSize%fs) / CQStoreUnitSize
		return
	}
	defer buf.Release()
	// One type check per pull, not per message: the tag and unfiltered
	// paths below are unchanged.
	pf, _ := filter.(PropertyFilter)
	var cur recordCursor
	defer cur.release()
	// A registered SQL92 filter checks each entry's filter unit first
	// (filterbitmap.go). Opened after the entries were fixed above: its
	// FilterBitmap answer must come after them for the units to be trusted.
	var units unitReader
	ahead := touchAhead * CQStoreUnitSize
	if pf != nil && cq.units != nil {
		if bf, ok := pf.(BitmapFilter); ok && units.open(cq, offset, bf) {
			defer units.release()
			// Most entries are skipped by their units: touch the records
			// of a few likely matches ahead, not a few entries ahead.
			ahead = touchAheadBitmap * CQStoreUnitSize
		}
	}
	r.Status = NoMatchedMessage
	maxMsgNums = max(maxMsgNums, 1)
	scanLimit := max(minFilterScanEntries, maxMsgNums) * CQStoreUnitSize
	nextPhyFileStart := int64(-1)
	maxPhy := s.commitLog.MaxOffset()
	b := buf.Bytes
	i := 0
	for ; i+CQStoreUnitSize <= len(b) && i < scanLimit; i += CQStoreUnitSize {
		e := decodeCQEntry(b[i:])
		if e.Blank() || !e.Valid() {
			continue
		}
		r.MaxPhyOffsetPulling = e.CommitLogOffset
		if nextPhyFileStart >= 0 && e.CommitLogOffset < nextPhyFileStart {
			continue
		}
		// RocketMQ's isTheBatchFull: tighter limits for data that has
		// probably left the page cache.
		inDisk := maxPhy-e.CommitLogOffset > s.memoryLimit
		maxN, maxBytes := maxMsgNums, maxTotalBytes
		if inDisk {
			maxN, maxBytes = min(maxN, maxTransferCountInDisk), min(maxBytes, maxTransferBytesInDisk)
		}
		if n := len(r.Messages); n > 0 && (n >= maxN || r.BufferTotalSize+int(e.Size) > maxBytes) {
			break
		}
		if filter != nil && !filter.IsMatchedByConsumeQueue(e.TagsCode) {
			continue
		}
		var rec SelectResult
		var ok, damaged bool
		if pf != nil {
			if units.mf != nil && units.rejects(offset+int64(i/CQStoreUnitSize), e) {
				continue // its unit says it does not match: the record is not read
			}
			if j := i + ahead; j+CQStoreUnitSize <= len(b) {
				if ej := decodeCQEntry(b[j:]); units.mf == nil || !units.likelyRejects(offset+int64(j/CQStoreUnitSize), ej) {
					cur.touch(ej)
				}
			}
			var read bool
			rec, read, damaged = s.matchProperties(&cur, pf, e)
			if read && !damaged && rec.mf == nil {
				continue // not matched
			}
			ok = read
		} else {
			rec, ok = s.commitLog.GetMessage(e.CommitLogOffset, e.Size)
			damaged = ok && !recordMatchesEntry(rec.Bytes, e)
		}
		if !ok {
			if len(r.Messages) == 0 {
				r.Status = MessageWasRemoving
			}
			nextPhyFileStart = s.commitLog.RollNextFile(e.CommitLogOffset)
			continue
		}
		if damaged {
			// A damaged entry must not serve bytes that are not its record.
			s.log.WithFields(logrus.Fields{"topic": cq.Topic(), "queueId": cq.QueueID(),
				"offset": offset + int64(i/CQStoreUnitSize), "phyOffset": e.CommitLogOffset}).
				Warn("consume queue entry does not point at a record of its size, skipped")
			rec.Release()
			continue
		}
		if filter != nil && pf == nil && !filter.IsMatchedByCommitLog(rec.Bytes) {
			rec.Release()
			continue
		}
		r.Messages = append(r.Messages, rec)
		r.BufferTotalSize += len(rec.Bytes)
		r.FromDisk = r.FromDisk || inDisk
		r.Status = Found
		nextPhyFileStart = -1
	}
	r.NextBeginOffset = offset + int64(i/CQStoreUnitSize)
	r.SuggestPullingFromSlave = maxPhy-r.MaxPhyOffsetPulling > s.memoryLimit
}

// matchProperties reads the record of entry e through cur and evaluates
// pf on its properties. read is false when the record cannot be read (as
// CommitLog.GetMessage fails); damaged means the entry does not point at
// a record of its size. A matching record is returned held; otherwise rec
// holds nothing.
func (s *Store) matchProperties(cur *recordCursor, pf PropertyFilter, e CQEntry) (rec SelectResult, read, damaged bool) {
	b, ok := cur.view(s.commitLog, e.CommitLogOffset, e.Size)
	if !ok {
		return SelectResult{}, false, false
	}
	if !recordMatchesEntry(b, e) {
		return SelectResult{}, true, true
	}
	// A record whose properties do not parse cannot match.
	if props, ok := message.RecordProperties(b); !ok || !pf.MatchProperties(props) {
		return SelectResult{}, true, false
	}
	if !cur.mf.Hold() {
		return SelectResult{}, false, false // the file is being deleted
	}
	return SelectResult{StartOffset: e.CommitLogOffset, Bytes: b, mf: cur.mf}, true, false
}

// recordCursor views commitlog records for a property filter. It holds the
// file of the last record viewed, so the records of a pull that lie in one
// file cost one hold (and no lookup of the file) in all; the views are
// valid until the next view or release.
type recordCursor struct {
	mf   *MappedFile
	from int64
	sink byte // what touch read, kept so the reads are not removed
}

// touchAhead is how many consume-queue entries ahead of the one evaluated
// a property filter touches its record (recordCursor.touch);
// touchAheadBitmap when filter units decide most entries without a read
// (only the records of entries they do not reject are touched).
const (
	touchAhead       = 4
	touchAheadBitmap = 32
)

// touch reads a byte of each cache line of the record of entry e that a
// property filter reads: the header and the last 192 bytes (the
// properties end the record). The records of a backlog lie a body apart,
// a stride the hardware prefetcher does not follow, so each costs cache
// misses; touched a few entries ahead, those misses overlap with the
// evaluation of the records before it (about 40% less scan time in
// BenchmarkConsumeBacklogSQL92VsTag's profile). Only records of the file
// held, and written, are touched.
func (c *recordCursor) touch(e CQEntry) {
	if c.mf == nil || e.Size <= 0 {
		return
	}
	pos := e.CommitLogOffset - c.from
	end := pos + int64(e.Size)
	if pos < 0 || end > int64(c.mf.WrotePosition()) {
		return
	}
	d := c.mf.data[pos:end]
	x := d[0] ^ d[len(d)-1]
	if len(d) > 128 {
		x ^= d[len(d)-65] ^ d[len(d)-129] ^ d[64]
	}
	c.sink ^= x
}

// view returns the size bytes at commitlog offset off, or false when they
// are not in a written part of a live file (as CommitLog.GetMessage).
func (c *recordCursor) view(cl *CommitLog, off int64, size int32) ([]byte, bool) {
	if size <= 0 {
		return nil, false
	}
	if c.mf == nil || off < c.from || off >= c.from+int64(c.mf.fileSize) {
		c.release()
		mf := cl.mfq.FindMappedFileByOffset(off, off == 0)
		if mf == nil || !mf.Hold() {
			return nil, false
		}
		c.mf, c.from = mf, mf.fileFromOffset
	}
	pos := off - c.from
	end := pos + int64(size)
	if pos < 0 || end > int64(c.mf.WrotePosition()) {
		return nil, false
	}
	return c.mf.data[pos:end:end], true
}

func (c *recordCursor) release() {
	if c.mf != nil {
		c.mf.Release()
		c.mf = nil
	}
}

// recordMatchesEntry checks that b starts with a message record of the
// entry's size: TOTALSIZE and a message magic (two words, no parsing).
func recordMatchesEntry(b []byte, e CQEntry) bool {
	if len(b) < 8 || int32(binary.BigEndian.Uint32(b)) != e.Size {
		return false
	}
	magic := int32(binary.BigEndian.Uint32(b[4:]))
	return magic == message.MagicCodeV1 || magic == message.MagicCodeV2
}

// MinOffsetInQueue returns the first readable queue offset (0 if unknown).
func (s *Store) MinOffsetInQueue(topic string, queueID int32) int64 {
	if cq := s.consumeQueue(topic, queueID); cq != nil {
		return cq.MinOffsetInQueue()
	}
	return 0
}

// MaxOffsetInQueue returns the offset the next message of the queue gets
// (0 if unknown).
func (s *Store) MaxOffsetInQueue(topic string, queueID int32) int64 {
	if cq := s.consumeQueue(topic, queueID); cq != nil {
		return cq.MaxOffsetInQueue()
	}
	return 0
}

// CommitLogOffsetInQueue returns the commitlog offset of the message at a
// queue offset, or -1.
func (s *Store) CommitLogOffsetInQueue(topic string, queueID int32, offset int64) int64 {
	if cq := s.consumeQueue(topic, queueID); cq != nil {
		if e, ok := cq.Entry(offset); ok && e.Valid() && !e.Blank() {
			return e.CommitLogOffset
		}
	}
	return -1
}

// pickupStoreTimestamp reads the store time of the record at a commitlog
// offset, -1 if it is gone or unreadable. size 0 means "read the size".
func (s *Store) pickupStoreTimestamp(phyOffset int64, size int32) int64 {
	if size <= 0 {
		head, ok := s.commitLog.GetMessage(phyOffset, 4)
		if !ok {
			return -1
		}
		size = int32(binary.BigEndian.Uint32(head.Bytes))
		head.Release()
		if size < message.MinRecordLength {
			return -1
		}
	}
	rec, ok := s.commitLog.GetMessage(phyOffset, size)
	if !ok {
		return -1
	}
	defer rec.Release()
	b := rec.Bytes
	if len(b) < message.PosSysFlag+4 {
		return -1
	}
	pos := message.StoreTimestampPos(int32(binary.BigEndian.Uint32(b[message.PosSysFlag:])))
	if pos+8 > len(b) {
		return -1
	}
	return int64(binary.BigEndian.Uint64(b[pos:]))
}

// OffsetByTime returns the first queue offset whose message was stored at or
// after ts (ms); the max offset if all are older; 0 for an unknown queue.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64) int64 {
	cq := s.consumeQueue(topic, queueID)
	if cq == nil {
		return 0
	}
	return cq.OffsetByTime(ts, s.pickupStoreTimestamp)
}

// EarliestStoreTime returns the store time of the queue's first readable
// message, -1 if there is none.
func (s *Store) EarliestStoreTime(topic string, queueID int32) int64 {
	cq := s.consumeQueue(topic, queueID)
	if cq == nil {
		return -1
	}
	// The first entry that points at a message: blank entries (messages
	// lost to damage, gaps) are passed, within the first file.
	r, ok := cq.EntriesFrom(cq.MinOffsetInQueue())
	if !ok {
		return -1
	}
	defer r.Release()
	for i := 0; i+CQStoreUnitSize <= len(r.Bytes); i += CQStoreUnitSize {
		if e := decodeCQEntry(r.Bytes[i:]); !e.Blank() {
			if !e.Valid() {
				return -1
			}
			return s.pickupStoreTimestamp(e.CommitLogOffset, e.Size)
		}
	}
	return -1
}

// MessageStoreTime returns the store time of the message at a queue offset,
// -1 if there is none.
func (s *Store) MessageStoreTime(topic string, queueID int32, offset int64) int64 {
	cq := s.consumeQueue(topic, queueID)
	if cq == nil {
		return -1
	}
	e, ok := cq.Entry(offset)
	if !ok || !e.Valid() || e.Blank() {
		return -1
	}
	return s.pickupStoreTimestamp(e.CommitLogOffset, e.Size)
}

// SelectOneMessageByOffset holds and returns the raw record starting at a
// commitlog offset; release it when done. The offset comes from outside the
// commitlog (a message id, an index file, a transaction or timer log), so
// the record is checked before it is returned: it parses, its
// PHYSICALOFFSET field names this offset (an offset into the middle of a
// record, or a garbage one, finds no record that says so), its body CRC
// holds (and, with enabledAppendPropCRC, its whole-record CRC when it has
// one), and it is not in a lost range.
func (s *Store) SelectOneMessageByOffset(commitLogOffset int64) (SelectResult, bool) {
	if _, lost := s.commitLog.lostRangeAt(commitLogOffset); lost {
		return SelectResult{}, false
	}
	head, ok := s.commitLog.GetMessage(commitLogOffset, 8)
	if !ok {
		return SelectResult{}, false
	}
	size := int32(binary.BigEndian.Uint32(head.Bytes))
	magic := int32(binary.BigEndian.Uint32(head.Bytes[4:]))
	head.Release()
	if size < message.MinRecordLength || (magic != message.MagicCodeV1 && magic != message.MagicCodeV2) {
		return SelectResult{}, false
	}
	rec, ok := s.commitLog.GetMessage(commitLogOffset, size)
	if !ok {
		return SelectResult{}, false
	}
	r, err := message.ParseRecord(rec.Bytes)
	if err == nil && r.PhysicalOffset() != commitLogOffset {
		err = ErrCorruptRecord
	}
	if err == nil {
		err = r.VerifyCRC()
	}
	if err == nil && s.cfg.EnabledAppendPropCRC && r.HasPropCRC() {
		err = r.VerifyPropCRC() // it also covers the header and properties
	}
	if err != nil {
		rec.Release()
		return SelectResult{}, false
	}
	return rec, true
}

// LookMessageByOffset decodes the message starting at a commitlog offset
// (the offset inside an offsetMsgId) into a copy.
func (s *Store) LookMessageByOffset(commitLogOffset int64) (*message.MessageExt, error) {
	rec, ok := s.SelectOneMessageByOffset(commitLogOffset)
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrMessageNotFound, commitLogOffset)
	}
	defer rec.Release()
	m, _, err := message.DecodeRecord(rec.Bytes)
	if err != nil {
		return nil, fmt.Errorf("store: decode message at %d: %w", commitLogOffset, err)
	}
	return m, nil
}

// QueryMessageResult holds the records QueryMessage found; Release them.
type QueryMessageResult struct {
	Messages                 []SelectResult
	BufferTotalSize          int
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// Release drops the holds on the mapped files.
func (r *QueryMessageResult) Release() {
	for i := range r.Messages {
		r.Messages[i].Release()
	}
	r.Messages = nil
}

// QueryMessage returns up to maxNum (at most 64) messages of topic stored in
// [begin, end] (ms) whose KEYS contain key or whose UNIQ_KEY is key, newest
// first. Unlike RocketMQ, hash collisions are filtered out here.
func (s *Store) QueryMessage(topic, key string, maxNum int, begin, end int64) *QueryMessageResult {
	res := &QueryMessageResult{}
	if s.index == nil {
		return res
	}
	maxNum = min(max(maxNum, 0), maxQueryMessages)
	q := s.index.Query(topic, key, maxNum, begin, end)
	res.IndexLastUpdateTimestamp, res.IndexLastUpdatePhyOffset = q.IndexLastUpdateTimestamp, q.IndexLastUpdatePhyOffset
	seen := make(map[int64]bool, len(q.PhyOffsets))
	for _, off := range q.PhyOffsets {
		if seen[off] {
			continue
		}
		seen[off] = true
		rec, ok := s.SelectOneMessageByOffset(off)
		if !ok {
			continue
		}
		if !recordHasKey(rec.Bytes, topic, key) {
			rec.Release()
			continue
		}
		res.Messages = append(res.Messages, rec)
		res.BufferTotalSize += len(rec.Bytes)
	}
	return res
}

// recordHasKey reports whether the record is of topic and carries key in
// KEYS or as UNIQ_KEY.
func recordHasKey(b []byte, topic, key string) bool {
	r, err := message.ParseRecord(b)
	if err != nil || string(r.Topic()) != topic {
		return false
	}
	if v, ok := r.Property(message.PropUniqKey); ok && string(v) == key {
		return true
	}
	if v, ok := r.Property(message.PropKeys); ok {
		for _, k := range strings.Split(string(v), message.KeySeparator) {
			if k == key {
				return true
			}
		}
	}
	return false
}

// CommitLogMinOffset returns the first commitlog offset still stored.
func (s *Store) CommitLogMinOffset() int64 { return max(0, s.commitLog.MinOffset()) }

// CommitLogMaxOffset returns the end of the written commitlog.
func (s *Store) CommitLogMaxOffset() int64 { return s.commitLog.MaxOffset() }

// CommitLogData holds and returns the commitlog bytes from offset to the end
// of the written data in that file (HA replication).
func (s *Store) CommitLogData(offset int64) (SelectResult, bool) { return s.commitLog.GetData(offset) }
