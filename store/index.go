package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/sirupsen/logrus"
)

// Index file format (RocketMQ's IndexFile), part of the on-disk format.
const (
	indexHeaderSize = 40
	indexSlotSize   = 4
	indexEntrySize  = 20
	// indexInvalid is the "no entry" value of a slot or prevIndex; entry 0 is
	// never written, so indexCount starts at 1.
	indexInvalid = 0
	// indexKeySeparator joins topic and key in index keys ("topic#key").
	indexKeySeparator = "#"
	// indexFileTimeLayout names index files by creation time, yyyyMMddHHmmss
	// followed by three millisecond digits.
	indexFileTimeLayout = "20060102150405"
)

// ErrIndexFull is returned when a key cannot be added even to a new file.
var ErrIndexFull = errors.New("store: index file full")

// indexFile is one index file: a 40-byte header, hashSlotNum 4-byte slots
// holding the newest entry number of each hash bucket, and indexNum 20-byte
// entries chained through prevIndex. Fields mirror the header; the owning
// IndexService's lock guards them and the mapping's contents.
type indexFile struct {
	mf       *MappedFile
	slotNum  int
	indexNum int

	beginTimestamp int64
	endTimestamp   int64
	beginPhyOffset int64
	endPhyOffset   int64
	hashSlotCount  int32
	indexCount     int32
}

func indexFileSize(slotNum, indexNum int) int {
	return indexHeaderSize + slotNum*indexSlotSize + indexNum*indexEntrySize
}

func (f *indexFile) loadHeader() {
	b := f.mf.Buffer()
	f.beginTimestamp = int64(binary.BigEndian.Uint64(b[0:]))
	f.endTimestamp = int64(binary.BigEndian.Uint64(b[8:]))
	f.beginPhyOffset = int64(binary.BigEndian.Uint64(b[16:]))
	f.endPhyOffset = int64(binary.BigEndian.Uint64(b[24:]))
	f.hashSlotCount = int32(binary.BigEndian.Uint32(b[32:]))
	f.indexCount = int32(binary.BigEndian.Uint32(b[36:]))
	if f.indexCount <= 0 {
		f.indexCount = 1
	}
}

// validHeader reports whether the header's counts fit the file, so every
// entry number read later stays inside the mapping.
func (f *indexFile) validHeader() bool {
	return f.indexCount >= 1 && int(f.indexCount) <= f.indexNum
}

func (f *indexFile) storeHeader() {
	b := f.mf.Buffer()
	binary.BigEndian.PutUint64(b[0:], uint64(f.beginTimestamp))
	binary.BigEndian.PutUint64(b[8:], uint64(f.endTimestamp))
	binary.BigEndian.PutUint64(b[16:], uint64(f.beginPhyOffset))
	binary.BigEndian.PutUint64(b[24:], uint64(f.endPhyOffset))
	binary.BigEndian.PutUint32(b[32:], uint32(f.hashSlotCount))
	binary.BigEndian.PutUint32(b[36:], uint32(f.indexCount))
}

func (f *indexFile) full() bool { return int(f.indexCount) >= f.indexNum }

// indexKeyHash is RocketMQ's indexKeyHashMethod: abs(String.hashCode), 0 if
// still negative (MinInt32).
func indexKeyHash(key string) int32 {
	h := int32(message.TagsHashCode(key))
	if h < 0 {
		h = -h
	}
	if h < 0 {
		h = 0
	}
	return h
}

// indexReserveChunk is how much of an index file's entry area gets disk
// blocks at a time. Index files are mostly holes (420 MB at the default
// sizes, filled over hours), so reserving them whole would take disk space
// years early; the header and slots, written at random places, are reserved
// whole when the file is first written.
const indexReserveChunk = 256 << 10

// putKey adds one entry; false when the file is full. An error (wrapping
// ErrDiskFull when the disk is full) means nothing was written.
func (f *indexFile) putKey(key string, phyOffset, storeTimestamp int64) (bool, error) {
	if f.full() {
		return false, nil
	}
	pos := indexHeaderSize + f.slotNum*indexSlotSize + int(f.indexCount)*indexEntrySize
	if err := f.mf.ensureBacked(pos+indexEntrySize, indexReserveChunk); err != nil {
		return false, err
	}
	b := f.mf.Buffer()
	hash := indexKeyHash(key)
	slotPos := indexHeaderSize + int(hash)%f.slotNum*indexSlotSize
	slotValue := int32(binary.BigEndian.Uint32(b[slotPos:]))
	if slotValue <= indexInvalid || slotValue >= f.indexCount {
		slotValue = indexInvalid
	}
	var timeDiff int64
	if f.beginTimestamp > 0 {
		timeDiff = (storeTimestamp - f.beginTimestamp) / 1000
		timeDiff = max(0, min(timeDiff, math.MaxInt32))
	}
	binary.BigEndian.PutUint32(b[pos:], uint32(hash))
	binary.BigEndian.PutUint64(b[pos+4:], uint64(phyOffset))
	binary.BigEndian.PutUint32(b[pos+12:], uint32(int32(timeDiff)))
	binary.BigEndian.PutUint32(b[pos+16:], uint32(slotValue))
	binary.BigEndian.PutUint32(b[slotPos:], uint32(f.indexCount))
	if f.indexCount <= 1 {
		f.beginPhyOffset = phyOffset
		f.beginTimestamp = storeTimestamp
	}
	f.hashSlotCount++ // RocketMQ counts every put, not distinct slots
	f.indexCount++
	f.endPhyOffset = phyOffset
	f.endTimestamp = storeTimestamp
	f.storeHeader()
	return true, nil
}

// timeMatched reports whether [begin, end] overlaps the file's time range.
func (f *indexFile) timeMatched(begin, end int64) bool {
	return begin < f.beginTimestamp && end > f.endTimestamp ||
		begin >= f.beginTimestamp && begin <= f.endTimestamp ||
		end >= f.beginTimestamp && end <= f.endTimestamp
}

// selectPhyOffsets appends to out the phy offsets of entries with the key's
// hash stored within [begin, end], newest first, until out has maxNum.
func (f *indexFile) selectPhyOffsets(out []int64, key string, maxNum int, begin, end int64) []int64 {
	b := f.mf.Buffer()
	hash := indexKeyHash(key)
	slotPos := indexHeaderSize + int(hash)%f.slotNum*indexSlotSize
	// Entries 1..indexCount-1 are written: a slot or prevIndex outside them
	// (a damaged file) ends the chain rather than reading beyond the file.
	next := int32(binary.BigEndian.Uint32(b[slotPos:]))
	if next <= indexInvalid || next >= f.indexCount || f.indexCount <= 1 {
		return out
	}
	// Each step follows prevIndex, which must decrease, so a damaged chain
	// ends too; the step bound is a second guard.
	for steps := 0; len(out) < maxNum && steps < f.indexNum; steps++ {
		pos := indexHeaderSize + f.slotNum*indexSlotSize + int(next)*indexEntrySize
		keyHash := int32(binary.BigEndian.Uint32(b[pos:]))
		phy := int64(binary.BigEndian.Uint64(b[pos+4:]))
		timeDiff := int64(int32(binary.BigEndian.Uint32(b[pos+12:])))
		prev := int32(binary.BigEndian.Uint32(b[pos+16:]))
		if timeDiff < 0 {
			break
		}
		timeRead := f.beginTimestamp + timeDiff*1000
		if keyHash == hash && timeRead >= begin && timeRead <= end {
			out = append(out, phy)
		}
		if prev <= indexInvalid || prev >= next || timeRead < begin {
			break
		}
		next = prev
	}
	return out
}

// IndexService keeps the index files in <root>/index and answers key
// queries. BuildIndex is called by one dispatcher at a time; queries run
// concurrently under the read lock.
type IndexService struct {
	dir      string
	slotNum  int
	indexNum int
	log      logrus.FieldLogger
	now      func() time.Time
	// onFullFlushed receives the endTimestamp of a full file once it has been
	// flushed (the checkpoint's indexMsgTimestamp).
	onFullFlushed func(endTimestamp int64)

	mu    sync.RWMutex
	files []*indexFile
}

// NewIndexService returns the service for dir; call Load before use.
func NewIndexService(dir string, slotNum, indexNum int, log logrus.FieldLogger, now func() time.Time) *IndexService {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = NewMappedFileQueue("", 0, nil).log
	}
	return &IndexService{dir: dir, slotNum: max(slotNum, 1), indexNum: max(indexNum, 2), log: log.WithField("dir", dir), now: now}
}

// SetFullFlushedHook sets the callback told the endTimestamp of every file
// that filled up and was flushed.
func (s *IndexService) SetFullFlushedHook(fn func(endTimestamp int64)) { s.onFullFlushed = fn }

// Load maps the index files. Files with a corrupt header, and after an
// abnormal exit files whose endTimestamp is newer than checkpointTs (the
// last index time known to be flushed), are deleted; Load returns the
// commitlog offset dispatch must start from to rebuild them (-1 when
// nothing was deleted).
func (s *IndexService) Load(lastExitOK bool, checkpointTs int64) (int64, error) {
	rebuildFrom := int64(-1)
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return rebuildFrom, nil
	}
	if err != nil {
		return rebuildFrom, fmt.Errorf("store: read dir %s: %w", s.dir, err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(s.dir, name))
			continue
		}
		if len(name) != 17 || strings.Trim(name, "0123456789") != "" {
			s.log.WithField("file", name).Warn("ignoring a file that is not an index file")
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	size := indexFileSize(s.slotNum, s.indexNum)
	var files []*indexFile
	for _, name := range names {
		path := filepath.Join(s.dir, name)
		mf, err := openMappedFile(path, 0, size)
		if err != nil {
			for _, f := range files {
				f.mf.Close()
			}
			return rebuildFrom, err
		}
		f := &indexFile{mf: mf, slotNum: s.slotNum, indexNum: s.indexNum}
		f.loadHeader()
		corrupt := !f.validHeader()
		if corrupt {
			s.log.WithFields(logrus.Fields{"file": path, "offset": 36, "indexCount": f.indexCount, "maxIndexNum": s.indexNum}).
				Error("deleting an index file with a corrupt header; dispatch rebuilds it")
		}
		if corrupt || !lastExitOK && f.endTimestamp > checkpointTs {
			s.log.WithFields(logrus.Fields{"file": path, "endTimestamp": f.endTimestamp, "checkpoint": checkpointTs}).
				Warn("deleting an index file newer than the checkpoint after an abnormal exit; dispatch rebuilds it")
			if err := mf.Destroy(time.Second); err != nil {
				return rebuildFrom, err
			}
			// The first deleted file holds the oldest entries to rebuild: they
			// follow the last kept file, or start at the file's own begin.
			if rebuildFrom < 0 {
				switch n := len(files); {
				case n > 0:
					rebuildFrom = files[n-1].endPhyOffset
				case !corrupt:
					rebuildFrom = max(f.beginPhyOffset, 0)
				default:
					rebuildFrom = 0
				}
			}
			continue
		}
		files = append(files, f)
	}
	s.mu.Lock()
	s.files = files
	s.mu.Unlock()
	return rebuildFrom, nil
}

// DropBeyond deletes the newest index files whose endPhyOffset lies beyond
// end, the recovered commitlog end: a damaged header (indexing would skip
// every record below a garbage endPhyOffset) or entries of records recovery
// cut. It returns the commitlog offset dispatch must start from to index
// those records again, -1 if nothing was dropped.
func (s *IndexService) DropBeyond(end int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rebuildFrom := int64(-1)
	for len(s.files) > 0 {
		f := s.files[len(s.files)-1]
		if f.endPhyOffset <= end {
			break
		}
		s.log.WithFields(logrus.Fields{"file": f.mf.Path(), "endPhyOffset": f.endPhyOffset, "commitlogEnd": end}).
			Warn("deleting an index file that ends beyond the commitlog; dispatch rebuilds it")
		if err := f.mf.Destroy(time.Second); err != nil {
			return rebuildFrom, err
		}
		s.files = s.files[:len(s.files)-1]
		rebuildFrom = 0
		if f.beginPhyOffset >= 0 && f.beginPhyOffset <= end {
			rebuildFrom = f.beginPhyOffset
		}
	}
	if n := len(s.files); rebuildFrom >= 0 && n > 0 {
		rebuildFrom = s.files[n-1].endPhyOffset
	}
	return rebuildFrom, nil
}

// lastFileLocked returns the newest file with room, creating one if needed.
// A new file starts at the previous file's end offset and time. Lock held.
func (s *IndexService) lastFileLocked() (*indexFile, error) {
	var prev *indexFile
	if n := len(s.files); n > 0 {
		prev = s.files[n-1]
		if !prev.full() {
			return prev, nil
		}
	}
	t := s.now()
	name := t.Format(indexFileTimeLayout) + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
	if prev != nil && name <= filepath.Base(prev.mf.Path()) {
		// Names must sort in creation order even within one millisecond.
		name = nextName(filepath.Base(prev.mf.Path()))
	}
	size := indexFileSize(s.slotNum, s.indexNum)
	reserve := min(indexHeaderSize+s.slotNum*indexSlotSize+indexReserveChunk, size)
	mf, err := createMappedFile(filepath.Join(s.dir, name), 0, size, reserve, false)
	if err != nil {
		return nil, err
	}
	mf.SetWrotePosition(mf.FileSize())
	f := &indexFile{mf: mf, slotNum: s.slotNum, indexNum: s.indexNum, indexCount: 1}
	if prev != nil {
		if prev.endPhyOffset > 0 {
			f.beginPhyOffset, f.endPhyOffset = prev.endPhyOffset, prev.endPhyOffset
		}
		if prev.endTimestamp > 0 {
			f.beginTimestamp, f.endTimestamp = prev.endTimestamp, prev.endTimestamp
		}
		// The full file is final: persist it now so the checkpoint can say so.
		if err := prev.mf.syncWhole(); err != nil {
			s.log.WithError(err).Error("flush full index file")
		} else if s.onFullFlushed != nil {
			s.onFullFlushed(prev.endTimestamp)
		}
	}
	f.storeHeader()
	s.files = append(s.files, f)
	return f, nil
}

// nextName increments a 17-digit decimal name by one.
func nextName(name string) string {
	b := []byte(name)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			break
		}
		b[i] = '0'
	}
	return string(b)
}

// BuildIndex indexes one dispatched message under topic#uniqKey and
// topic#key for each space-separated key. Rollback records are not indexed,
// and messages below the newest file's end offset are already indexed. An
// error wrapping ErrDiskFull may come after some keys of the message were
// added; dispatch then calls again, and a key can be in the index twice
// (QueryMessage answers each offset once).
func (s *IndexService) BuildIndex(topic, keys, uniqKey string, sysFlag int32, phyOffset, storeTimestamp int64) error {
	if message.TransactionType(sysFlag) == message.TransactionRollbackType {
		return nil
	}
	if keys == "" && uniqKey == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.lastFileLocked()
	if err != nil {
		return err
	}
	if phyOffset < f.endPhyOffset {
		return nil
	}
	put := func(key string) error {
		for try := 0; try < 2; try++ {
			if ok, err := f.putKey(topic+indexKeySeparator+key, phyOffset, storeTimestamp); ok || err != nil {
				return err
			}
			if f, err = s.lastFileLocked(); err != nil {
				return err
			}
		}
		return ErrIndexFull
	}
	if uniqKey != "" {
		if err := put(uniqKey); err != nil {
			return err
		}
	}
	for _, k := range strings.Split(keys, message.KeySeparator) {
		if k == "" {
			continue
		}
		if err := put(k); err != nil {
			return err
		}
	}
	return nil
}

// QueryResult is the answer of an index query.
type QueryResult struct {
	// PhyOffsets are candidate commitlog offsets, newest first; a hash
	// collision can add offsets of other keys.
	PhyOffsets []int64
	// IndexLastUpdateTimestamp and IndexLastUpdatePhyOffset are the newest
	// file's end time and offset.
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// Query returns up to maxNum commitlog offsets indexed under topic#key with
// a store time in [begin, end] (ms), walking files newest first.
func (s *IndexService) Query(topic, key string, maxNum int, begin, end int64) QueryResult {
	var res QueryResult
	if maxNum <= 0 {
		return res
	}
	full := topic + indexKeySeparator + key
	// Only the newest file changes, and it is read under the read lock.
	// Older files are full and read without it: a query walking them may
	// read from disk, and BuildIndex, which takes the write lock, runs on
	// the broker's event loops.
	files := s.holdFiles()
	defer releaseFiles(files)
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		var stop bool
		read := func() {
			if i == len(files)-1 {
				res.IndexLastUpdateTimestamp = f.endTimestamp
				res.IndexLastUpdatePhyOffset = f.endPhyOffset
			}
			if f.timeMatched(begin, end) {
				res.PhyOffsets = f.selectPhyOffsets(res.PhyOffsets, full, maxNum, begin, end)
			}
			stop = f.beginTimestamp < begin || len(res.PhyOffsets) >= maxNum
		}
		if i == len(files)-1 {
			s.mu.RLock()
			read()
			s.mu.RUnlock()
		} else {
			read()
		}
		if stop {
			break
		}
	}
	return res
}

// holdFiles returns the index files, each held (MappedFile.Hold) so that
// DeleteExpired cannot unmap one in use; files being destroyed are left
// out. releaseFiles gives them back.
func (s *IndexService) holdFiles() []*indexFile {
	s.mu.RLock()
	defer s.mu.RUnlock()
	files := make([]*indexFile, 0, len(s.files))
	for _, f := range s.files {
		if f.mf.Hold() {
			files = append(files, f)
		}
	}
	return files
}

func releaseFiles(files []*indexFile) {
	for _, f := range files {
		f.mf.Release()
	}
}

// EndPhyOffset returns the newest file's end offset (0 without files): the
// dispatch can start there for the index.
func (s *IndexService) EndPhyOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.files) == 0 {
		return 0
	}
	return s.files[len(s.files)-1].endPhyOffset
}

// Len returns the number of index files.
func (s *IndexService) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// DeleteExpired deletes files whose endPhyOffset is below minPhyOffset,
// never the newest one, and returns how many it deleted.
func (s *IndexService) DeleteExpired(minPhyOffset int64, forceTimeout time.Duration) int {
	s.mu.Lock()
	var drop []*indexFile
	for len(s.files) > 1 && s.files[0].endPhyOffset < minPhyOffset {
		drop = append(drop, s.files[0])
		s.files = s.files[1:]
	}
	s.mu.Unlock()
	for _, f := range drop {
		if err := f.mf.Destroy(forceTimeout); err != nil {
			s.log.WithError(err).Warn("delete index file")
		} else {
			s.log.WithField("file", f.mf.Path()).Info("deleted expired index file")
		}
	}
	return len(drop)
}

// Flush persists every index file.
// The syncs run without the service's lock, so BuildIndex (on the broker's
// event loops) never waits for the disk.
func (s *IndexService) Flush() error {
	files := s.holdFiles()
	defer releaseFiles(files)
	var errs []error
	for _, f := range files {
		errs = append(errs, f.mf.syncWhole())
	}
	return errors.Join(errs...)
}

// Close unmaps the files.
func (s *IndexService) Close() error {
	s.mu.Lock()
	files := s.files
	s.files = nil
	s.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.mf.Close())
	}
	return errors.Join(errs...)
}

// Destroy deletes every index file.
func (s *IndexService) Destroy() error {
	s.mu.Lock()
	files := s.files
	s.files = nil
	s.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.mf.Destroy(time.Second))
	}
	return errors.Join(errs...)
}
