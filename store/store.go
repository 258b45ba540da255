package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Errors of the store facade.
var (
	// ErrShutdown is returned when the store is used after Shutdown.
	ErrShutdown = errors.New("store: shut down")
	// ErrSlave is the cause of a ServiceNotAvailable put on a slave's store:
	// only replication (from the master) writes there.
	ErrSlave = errors.New("store: this is a slave's store, it takes writes only from its master")
	// ErrMessageNotFound is returned when no record starts at an offset.
	ErrMessageNotFound = errors.New("store: no message at offset")
)

// Paths under the store root, as RocketMQ lays them out.
const (
	consumeQueueDirName = "consumequeue"
	indexDirName        = "index"
	abortFileName       = "abort"
	// deletedMarkerName is written into consumequeue/<topic>/ by DeleteTopic:
	// it holds the commitlog end at deletion, so older records of the topic
	// are never queued again (recovery would otherwise resurrect them).
	deletedMarkerName  = ".deleted"
	checkpointFileName = "checkpoint"
)

// catchUpStall is how long Open waits for a dispatch that stopped moving.
const catchUpStall = 5 * time.Second

// consumeQueueThoroughFlush is how often every consume queue is flushed
// regardless of pages, and the checkpoint's logics time written
// (flushConsumeQueueThoroughInterval).
const consumeQueueThoroughFlush = 60 * time.Second

// Option changes how Open builds a Store (mostly for tests).
type Option func(*Store)

// WithClock replaces time.Now as the store's one clock: record store times,
// the times files are stamped with, retention decisions and index file names.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithDiskUsage replaces the disk usage probe: it returns the used fraction
// (0..1) of the file system holding path.
func WithDiskUsage(fn func(path string) (float64, error)) Option {
	return func(s *Store) { s.diskUsage = fn }
}

type queueKey struct {
	topic   string
	queueID int32
}

// Store is the message store (RocketMQ's DefaultMessageStore): one commitlog
// holding every message, a consume queue per topic-queue pointing into it,
// index files by key, and the loops that dispatch, flush and clean them.
//
// Writers call PutMessage/PutMessages and then dispatch what they appended:
// the consume-queue and index entries, then the arriving listener (the
// dispatch loop is the fallback; see reputService). Readers
// (GetMessage and friends) are safe from any goroutine. Open starts the
// loops; Shutdown stops them.
type Store struct {
	cfg       *Config
	log       logrus.FieldLogger
	now       func() time.Time
	diskUsage func(path string) (float64, error)

	lock       *LockFile
	checkpoint *StoreCheckpoint
	epochs     *EpochFile
	commitLog  *CommitLog
	index      *IndexService
	reput      *reputService

	cqRoot string
	cqMu   sync.RWMutex
	cqs    map[queueKey]*ConsumeQueue
	// deletedBefore maps a deleted topic to the commitlog offset below
	// which its records get no queue entries; guarded by cqMu.
	deletedBefore map[string]int64

	// logicsTs is the store time of the newest consume-queue entry, written
	// to the checkpoint after the consume queues are flushed.
	logicsTs atomic.Int64

	// refuse holds the reasons (refuse* bits) writes are refused besides
	// shutdown: one atomic load on the put path covers them all.
	refuse       atomic.Uint32
	shutdown     atomic.Bool
	shutdownOnce sync.Once
	stop         chan struct{}
	wg           sync.WaitGroup

	clean      cleanState
	resultPool sync.Pool
	// memoryLimit is accessMessageInMemoryMaxRatio (40%) of the RAM: data
	// further behind the commitlog end counts as on disk.
	memoryLimit int64
	lastExitOK  bool
	// indexRebuildFrom is where dispatch must start to rebuild index files
	// deleted after a crash (-1: none).
	indexRebuildFrom int64
	cleanedUpTo      atomic.Int64 // commitlog min offset the consume queues were cleaned for

	// unitRoot is the filter-bitmap sidecar root; unitLayout its units'
	// geometry (filterbitmap.go). filterCalc is the broker's calculator,
	// nil while filter bitmaps are off or nothing is registered: dispatch
	// pays one atomic load for it.
	unitRoot   string
	unitLayout filterUnitLayout
	filterCalc atomic.Pointer[calcHolder]
}

// Open locks the store directory, loads and recovers the files, catches the
// dispatch up with the commitlog and starts the dispatch, flush and clean
// loops. A second Open of the same directory fails while the first runs.
func Open(cfg *Config, log logrus.FieldLogger, opts ...Option) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("store: nil config")
	}
	if log == nil {
		log = NewMappedFileQueue("", 0, nil).log
	}
	s := &Store{
		cfg:       cfg,
		log:       log.WithField("component", "store"),
		now:       time.Now,
		diskUsage: statfsUsage,
		cqRoot:    filepath.Join(cfg.StorePathRootDir, consumeQueueDirName),
		unitRoot:  filepath.Join(cfg.StorePathRootDir, filterUnitDirName),
		cqs:       make(map[queueKey]*ConsumeQueue),
		stop:      make(chan struct{}),

		deletedBefore: make(map[string]int64),
	}
	for _, o := range opts {
		o(s)
	}
	if cfg.FilterBitmapBits < 0 || cfg.FilterBitmapBits > MaxFilterBitmapBits {
		return nil, fmt.Errorf("store: filter bitmap of %d bits (at most %d)", cfg.FilterBitmapBits, MaxFilterBitmapBits)
	}
	if cfg.FilterBitmapBits > 0 {
		s.unitLayout = newFilterUnitLayout(cfg.FilterBitmapBits, cfg.FilterBitmapHashes)
	}
	s.memoryLimit = physicalMemory() * accessMessageInMemoryMaxRatio / 100
	s.resultPool.New = func() any { return &GetMessageResult{Messages: make([]SelectResult, 0, 32)} }
	if err := os.MkdirAll(cfg.StorePathRootDir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create root %s: %w", cfg.StorePathRootDir, err)
	}
	lock, err := LockDir(cfg.StorePathRootDir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.start()
	return s, nil
}

// load runs RocketMQ's load + recover sequence.
func (s *Store) load() error {
	abortPath := filepath.Join(s.cfg.StorePathRootDir, abortFileName)
	_, err := os.Stat(abortPath)
	s.lastExitOK = errors.Is(err, os.ErrNotExist)
	s.log.WithField("lastExitOK", s.lastExitOK).Info("loading store")

	if s.epochs, err = OpenEpochFile(filepath.Join(s.cfg.StorePathRootDir, epochFileName)); err != nil {
		return err
	}
	if s.commitLog, err = NewCommitLog(s.cfg, s.log); err != nil {
		return err
	}
	s.commitLog.SetClock(s.now)
	if err := s.commitLog.Load(); err != nil {
		return err
	}
	if s.cfg.FilterBitmapBits == 0 {
		// Units left by a run with filter bitmaps on were not kept up with
		// the queues since (cuts, deletions): a later run must not meet them.
		if err := os.RemoveAll(s.unitRoot); err != nil {
			return fmt.Errorf("store: remove %s: %w", s.unitRoot, err)
		}
	}
	if err := s.loadConsumeQueues(); err != nil {
		return err
	}
	s.removeOrphanUnits()
	if s.checkpoint, err = OpenCheckpoint(filepath.Join(s.cfg.StorePathRootDir, checkpointFileName),
		CheckpointOptions{Log: s.log, Now: s.now, Fresh: s.commitLog.Files().Len() == 0}); err != nil {
		return err
	}
	if s.cfg.MessageIndexEnable {
		s.index = NewIndexService(filepath.Join(s.cfg.StorePathRootDir, indexDirName),
			s.cfg.MaxHashSlotNum, s.cfg.MaxIndexNum, s.log, s.now)
		s.index.SetFullFlushedHook(func(ts int64) { s.checkpoint.SetIndexMsgTimestamp(ts) })
		if s.indexRebuildFrom, err = s.index.Load(s.lastExitOK, s.checkpoint.IndexMsgTimestamp()); err != nil {
			return err
		}
	}
	if err := s.recover(); err != nil {
		return err
	}
	if !s.lastExitOK {
		return s.syncAfterCrash()
	}
	return nil
}

// syncAfterCrash makes everything the crashed run wrote durable before this
// run trusts it. A killed process leaves its writes in the page cache, and
// recovery takes them for flushed: group commit syncs only from the
// recovered end on, so an unsynced tail of an older file stayed that way
// behind later acknowledged records, and a power cut then cut the log at it,
// taking the acknowledged records with it. One syncfs per file system of
// the store (commitlog and root; they may differ) covers the commitlog,
// consume queues, index files and checkpoint at once. It runs only after a
// crash, before the first put.
func (s *Store) syncAfterCrash() error {
	start := time.Now()
	for _, dir := range []string{s.commitLog.Files().Dir(), s.cfg.StorePathRootDir} {
		if err := syncFS(dir); err != nil {
			return err
		}
	}
	s.log.WithField("took", time.Since(start)).Info("synced what the crashed run wrote")
	return nil
}

// syncFS is syncfs(2) on the file system holding dir (a missing dir has
// nothing to sync).
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", dir, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("store: syncfs %s: %w", dir, err)
	}
	return nil
}

// loadConsumeQueues maps every consumequeue/<topic>/<queueId> directory.
func (s *Store) loadConsumeQueues() error {
	topics, err := os.ReadDir(s.cqRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: read dir %s: %w", s.cqRoot, err)
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		queues, err := os.ReadDir(filepath.Join(s.cqRoot, t.Name()))
		if err != nil {
			return fmt.Errorf("store: read dir %s: %w", t.Name(), err)
		}
		for _, q := range queues {
			if q.Name() == deletedMarkerName {
				if err := s.loadDeletedMarker(t.Name()); err != nil {
					return err
				}
				continue
			}
			id, err := strconv.ParseInt(q.Name(), 10, 32)
			if !q.IsDir() || err != nil {
				s.log.WithField("path", filepath.Join(s.cqRoot, t.Name(), q.Name())).Warn("ignoring a non-queue entry")
				continue
			}
			cq := s.newConsumeQueue(t.Name(), int32(id))
			if err := cq.Load(); err != nil {
				return err
			}
			s.cqs[queueKey{t.Name(), int32(id)}] = cq
		}
	}
	return nil
}

// removeOrphanUnits deletes sidecar directories of filter units whose
// consume queue is gone (removed by hand): a queue created again later
// must not meet them.
func (s *Store) removeOrphanUnits() {
	if s.cfg.FilterBitmapBits == 0 {
		return
	}
	topics, err := os.ReadDir(s.unitRoot)
	if err != nil {
		return // none yet
	}
	for _, t := range topics {
		dir := filepath.Join(s.unitRoot, t.Name())
		queues, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		kept := 0
		for _, q := range queues {
			id, err := strconv.ParseInt(q.Name(), 10, 32)
			if err == nil && s.cqs[queueKey{t.Name(), int32(id)}] != nil {
				kept++
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, q.Name())); err != nil {
				s.log.WithError(err).Warn("remove orphan filter bitmap files")
			}
		}
		if kept == 0 {
			_ = os.Remove(dir)
		}
	}
}

// loadDeletedMarker reads consumequeue/<topic>/.deleted.
func (s *Store) loadDeletedMarker(topic string) error {
	path := filepath.Join(s.cqRoot, topic, deletedMarkerName)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", path, err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("store: %s holds %q, not a commitlog offset: %w", path, b, err)
	}
	s.deletedBefore[topic] = v
	return nil
}

// wasDeleted reports whether the record of topic at phyOffset was written
// before the topic was deleted.
func (s *Store) wasDeleted(topic string, phyOffset int64) bool {
	s.cqMu.RLock()
	defer s.cqMu.RUnlock()
	if len(s.deletedBefore) == 0 {
		return false
	}
	before, ok := s.deletedBefore[topic]
	return ok && phyOffset < before
}

// recover recovers the commitlog, then the consume queues against it (the
// commitlog is the source of truth: an entry that does not match its record
// is cut and dispatched again), cuts consume-queue entries beyond the
// commitlog's valid end, rebuilds the topic-queue offset table and picks
// the dispatch start.
func (s *Store) recover() error {
	// Zeros in the commitlog below an end some consume queue claims are
	// damage, not the end of the log.
	queueEnd := int64(-1)
	for _, cq := range s.cqs {
		queueEnd = max(queueEnd, cq.claimedEnd())
	}
	if err := s.commitLog.RecoverWithQueueEnd(s.lastExitOK, s.checkpoint, queueEnd); err != nil {
		return err
	}
	clMin, clMax := s.commitLog.MinOffset(), s.commitLog.MaxOffset()
	rebuildFrom := int64(-1)
	maxPhyOfCQ := int64(0)
	for k, cq := range s.cqs {
		if s.commitLog.Files().Len() == 0 {
			// No commitlog at all: nothing a consume queue says can be read.
			if err := cq.Destroy(); err != nil {
				return err
			}
			delete(s.cqs, k)
			continue
		}
		from, err := cq.RecoverVerified(s.commitLog)
		if err != nil {
			return err
		}
		if from >= 0 && (rebuildFrom < 0 || from < rebuildFrom) {
			rebuildFrom = from
		}
		maxPhyOfCQ = max(maxPhyOfCQ, cq.MaxPhysicOffset())
		if cq.MaxPhysicOffset() > clMax {
			// Entries older than the scanned files point beyond the end.
			if err := cq.TruncateDirty(clMax); err != nil {
				return err
			}
		}
	}
	if err := s.blankLostEntries(); err != nil {
		return err
	}
	// Units beyond a queue's recovered end were written for entries that
	// are gone (a cut tail, entries never flushed): messages written at
	// those offsets later must not meet them.
	for _, cq := range s.cqs {
		cq.truncateUnits()
	}
	if s.index != nil {
		from, err := s.index.DropBeyond(clMax)
		if err != nil {
			return err
		}
		if from >= 0 && (s.indexRebuildFrom < 0 || from < s.indexRebuildFrom) {
			s.indexRebuildFrom = from
		}
	}
	reputFrom := int64(0)
	for _, cq := range s.cqs {
		cq.CorrectMinOffset(clMin)
		reputFrom = max(reputFrom, cq.MaxPhysicOffset())
	}
	s.rebuildQueueTable()
	// A queue that lost entries (or its directory) below the newest entry
	// of all queues is only noticed by reading the records the commitlog
	// recovery just walked (they are in the page cache).
	if gap, missingOld := s.findUndispatched(s.commitLog.RecoverStartOffset(), min(reputFrom, clMax)); gap >= 0 {
		s.log.WithFields(logrus.Fields{"offset": gap, "fullRebuild": missingOld}).
			Warn("consume queue entries missing below the dispatch point; dispatching again")
		reputFrom = gap
		if missingOld {
			reputFrom = clMin
		}
	}
	if !s.lastExitOK {
		// After a crash the newest consume-queue entries may not have
		// reached the disk: dispatch again from the first commitlog file
		// stored before the checkpoint's times (entries are idempotent).
		reputFrom = min(reputFrom, s.abnormalDispatchStart())
	}
	if s.indexRebuildFrom >= 0 {
		reputFrom = min(reputFrom, s.indexRebuildFrom)
	}
	if rebuildFrom >= 0 {
		s.log.WithField("offset", rebuildFrom).Warn("consume queues were cut at damaged entries; dispatching again to rebuild them")
		reputFrom = min(reputFrom, rebuildFrom)
	}
	reputFrom = max(min(reputFrom, clMax), clMin)
	s.reput = newReputService(s, s.log.WithField("component", "dispatch"))
	s.reput.reputFrom.Store(reputFrom)
	s.log.WithFields(logrus.Fields{
		"commitlogMin": clMin, "commitlogMax": clMax, "maxPhyOffsetOfConsumeQueue": maxPhyOfCQ,
		"dispatchFrom": reputFrom, "queues": len(s.cqs),
	}).Info("store recovered")
	return nil
}

// blankLostEntries rewrites the consume-queue entries of messages in the
// commitlog's lost ranges as blank entries, and logs which they were.
func (s *Store) blankLostEntries() error {
	for _, r := range s.commitLog.LostRanges() {
		found := false
		for _, cq := range s.cqs {
			first, last, n, err := cq.BlankLost(r)
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			found = true
			s.log.WithFields(logrus.Fields{
				"topic": cq.Topic(), "queueId": cq.QueueID(), "fromQueueOffset": first, "toQueueOffset": last,
				"messages": n, "lostFrom": r.From, "lostTo": r.To,
			}).Error("messages lost with a damaged commitlog range: their consume-queue entries are blanked, later offsets stay")
		}
		if !found {
			s.log.WithFields(logrus.Fields{"lostFrom": r.From, "lostTo": r.To}).
				Warn("no consume-queue entry points into the lost commitlog range")
		}
	}
	return nil
}

// rebuildQueueTable sets the commitlog's next queue offsets from the
// consume queues' max offsets (recoverTopicQueueTable).
func (s *Store) rebuildQueueTable() {
	s.cqMu.RLock()
	table := make(map[string]int64, len(s.cqs))
	for k, cq := range s.cqs {
		table[k.topic+"-"+strconv.Itoa(int(k.queueID))] = cq.MaxOffsetInQueue()
	}
	s.cqMu.RUnlock()
	s.commitLog.SetQueueOffsets(table)
}

// findUndispatched walks the records in [from, to) and returns the offset of
// the first one whose consume-queue entry is missing (-1 if none), and
// whether some queue is missing entirely although its records there do not
// start at queue offset 0 (its older entries are gone too: everything must
// be dispatched again). It steps over the commitlog's lost ranges.
func (s *Store) findUndispatched(from, to int64) (int64, bool) {
	gap := int64(-1)
	for off := from; off < to; {
		res, ok := s.commitLog.GetData(off)
		if !ok {
			break
		}
		next := s.commitLog.RollNextFile(off)
		b := res.Bytes
		pos := 0
		for pos < len(b) && off+int64(pos) < to {
			if lr, lost := s.commitLog.lostRangeAt(off + int64(pos)); lost {
				if lr.To < next {
					pos = int(lr.To - off)
					continue
				}
				next = lr.To
				break // the lost range runs to the file's end or beyond
			}
			r, err := message.ParseRecord(b[pos:])
			if err != nil {
				break // blank marker or the end: next file
			}
			tt := message.TransactionType(r.SysFlag())
			if (tt == message.TransactionNotType || tt == message.TransactionCommitType) &&
				!s.wasDeleted(string(r.Topic()), off+int64(pos)) {
				cq := s.cqs[queueKey{string(r.Topic()), r.QueueID()}]
				if cq == nil && r.QueueOffset() > 0 {
					res.Release()
					if gap < 0 {
						gap = off + int64(pos)
					}
					return gap, true
				}
				if (cq == nil || r.QueueOffset() >= cq.MaxOffsetInQueue()) && gap < 0 {
					gap = off + int64(pos)
				}
			}
			pos += r.Size()
		}
		res.Release()
		off = next
	}
	return gap, false
}

// abnormalDispatchStart returns the start of the newest commitlog file whose
// first record was stored no later than the checkpoint's safe time.
func (s *Store) abnormalDispatchStart() int64 {
	safe := s.checkpoint.MinTimestamp()
	files := s.commitLog.Files().Files()
	for i := len(files) - 1; i >= 0; i-- {
		ts := s.pickupStoreTimestamp(files[i].FileFromOffset(), 0)
		if ts > 0 && ts <= safe {
			return files[i].FileFromOffset()
		}
	}
	if len(files) > 0 {
		return files[0].FileFromOffset()
	}
	return 0
}

// SetSlave makes the store refuse puts (ErrSlave) or take them again: a
// slave's store is written only by replication. Open starts it as
// Config.Slave says; a broker changes it when its role changes.
func (s *Store) SetSlave(slave bool) {
	if slave {
		s.refuse.Or(refuseSlave)
	} else {
		s.refuse.And(^refuseSlave)
	}
}

// IsSlave reports whether puts are refused because this is a slave's store.
func (s *Store) IsSlave() bool { return s.refuse.Load()&refuseSlave != 0 }

// start launches the loops, waits for the dispatch to catch up and marks the
// store as running (abort file) until a clean Shutdown.
func (s *Store) start() {
	s.SetSlave(s.cfg.Slave)
	s.checkDiskSpace()
	s.commitLog.SetCheckpoint(s.checkpoint)
	// Appenders dispatch their own records right after the append, before
	// a SYNC_FLUSH wait, instead of waking the dispatch loop (a thread wake
	// per message and a hop before a long poll sees it).
	s.commitLog.SetAppendHook(s.reput.dispatchNow)
	// Retention never deletes what dispatch has not reached (a disk so
	// full that dispatch waits for space is exactly when it cleans hardest).
	s.commitLog.SetRetentionFloor(s.reput.reputFrom.Load)
	s.commitLog.Start()
	s.reput.start(s.reput.reputFrom.Load())
	// RocketMQ's start blocks until dispatch caught up, so the first reads
	// after Open see every recovered message.
	last, lastMove := s.reput.reputFrom.Load(), time.Now()
	for s.reput.behind() > 0 {
		if s.refuse.Load()&refuseSpaceDispatch != 0 {
			s.log.WithField("dispatchFrom", s.reput.reputFrom.Load()).
				Error("disk full: opening read-only, dispatch goes on once there is space")
			break
		}
		time.Sleep(time.Millisecond)
		if cur := s.reput.reputFrom.Load(); cur != last {
			last, lastMove = cur, time.Now()
		} else if time.Since(lastMove) > catchUpStall {
			s.log.WithFields(logrus.Fields{"dispatchFrom": cur, "commitlogMax": s.commitLog.MaxOffset()}).
				Error("dispatch makes no progress; opening anyway")
			break
		}
	}
	// Entries rebuilt by the catch-up may extend queues: no put has run
	// yet, so the table can be taken from the consume queues again.
	s.rebuildQueueTable()
	abortPath := filepath.Join(s.cfg.StorePathRootDir, abortFileName)
	if f, err := os.OpenFile(abortPath, os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
		s.log.WithError(err).Error("cannot create the abort file")
	} else {
		f.Close()
		if err := fsutil.SyncDir(s.cfg.StorePathRootDir); err != nil {
			s.log.WithError(err).Warn("sync store root")
		}
	}
	s.wg.Add(2)
	go s.flushConsumeQueueLoop()
	go s.cleanLoop()
}

// Shutdown stops the loops, dispatches and flushes everything, writes the
// checkpoint, removes the abort file (a clean exit) and unlocks. It is safe
// to call twice; ctx bounds nothing that can block forever but is accepted
// for the broker's shutdown sequence.
func (s *Store) Shutdown(ctx context.Context) error {
	var err error
	s.shutdownOnce.Do(func() {
		s.shutdown.Store(true)
		close(s.stop)
		s.wg.Wait()
		var errs []error
		s.reput.shutdown()
		caughtUp := s.reput.behind() <= 0
		errs = append(errs, s.commitLog.Shutdown())
		errs = append(errs, s.flushConsumeQueues(0))
		if s.index != nil {
			errs = append(errs, s.index.Flush())
		}
		if ts := s.logicsTs.Load(); ts > 0 {
			s.checkpoint.SetLogicsMsgTimestamp(ts)
		}
		errs = append(errs, s.checkpoint.Flush())
		err = errors.Join(errs...)
		if err == nil && caughtUp {
			if rerr := os.Remove(filepath.Join(s.cfg.StorePathRootDir, abortFileName)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = fmt.Errorf("store: remove abort file: %w", rerr)
			}
		} else {
			s.log.WithError(err).WithField("caughtUp", caughtUp).Warn("unclean shutdown: the abort file stays")
		}
		if cerr := s.closeFiles(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		_ = ctx
	})
	return err
}

// closeFiles unmaps everything and releases the lock.
func (s *Store) closeFiles() error {
	var errs []error
	s.cqMu.Lock()
	for _, cq := range s.cqs {
		errs = append(errs, cq.Close())
	}
	s.cqMu.Unlock()
	if s.index != nil {
		errs = append(errs, s.index.Close())
	}
	if s.commitLog != nil {
		errs = append(errs, s.commitLog.Close())
	}
	if s.checkpoint != nil {
		errs = append(errs, s.checkpoint.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Unlock())
	}
	return errors.Join(errs...)
}

// Config returns the store's configuration (do not modify).
func (s *Store) Config() *Config { return s.cfg }

// CommitLog exposes the commitlog (HA replication reads and appends).
func (s *Store) CommitLog() *CommitLog { return s.commitLog }

// LastExitOK reports whether the previous run shut down cleanly.
func (s *Store) LastExitOK() bool { return s.lastExitOK }

// SetArrivingListener sets the function told of each dispatched message
// (long polling). nil removes it.
func (s *Store) SetArrivingListener(fn ArrivingListener) {
	if fn == nil {
		s.reput.listener.Store(nil)
		return
	}
	s.reput.listener.Store(&fn)
}

// DispatchBehindBytes returns how many commitlog bytes await dispatch.
func (s *Store) DispatchBehindBytes() int64 { return max(0, s.reput.behind()) }

// PutMessage stores one message. It refuses with ServiceNotAvailable when
// the store is shut down, a slave's, or short of disk space (Err is then
// ErrShutdown, ErrSlave or wraps ErrDiskFull).
func (s *Store) PutMessage(ctx context.Context, msg *message.MessageExt) PutResult {
	if r, refused := s.checkWritable(); refused {
		return r
	}
	return s.commitLog.PutMessage(ctx, msg)
}

// PutMessages stores a batch in one commitlog file with consecutive queue
// offsets; refusals as PutMessage.
func (s *Store) PutMessages(ctx context.Context, batch *message.MessageExtBatch) PutResult {
	if r, refused := s.checkWritable(); refused {
		return r
	}
	return s.commitLog.PutMessages(ctx, batch)
}

// AppendMessage is PutMessage without the flush wait; when mustWait, the
// caller acknowledges only through OnDurable (see CommitLog.AppendMessage).
func (s *Store) AppendMessage(msg *message.MessageExt) (res PutResult, mustWait bool) {
	if r, refused := s.checkWritable(); refused {
		return r, false
	}
	return s.commitLog.AppendMessage(msg)
}

// AppendMessages is PutMessages without the flush wait, as AppendMessage.
func (s *Store) AppendMessages(batch *message.MessageExtBatch) (res PutResult, mustWait bool) {
	if r, refused := s.checkWritable(); refused {
		return r, false
	}
	return s.commitLog.AppendMessages(batch)
}

// OnDurable reports through done once an appended result is as durable as
// promised: flushed under SYNC_FLUSH, held by a slave under a replica waiter
// (see CommitLog.OnDurable).
func (s *Store) OnDurable(res PutResult, done func(PutResult)) { s.commitLog.OnDurable(res, done) }

// SetReplicaWaiter makes puts wait for a slave too (SYNC_MASTER); nil stops
// it. See CommitLog.SetReplicaWaiter.
func (s *Store) SetReplicaWaiter(w ReplicaWaiter) { s.commitLog.SetReplicaWaiter(w) }

func (s *Store) checkWritable() (PutResult, bool) {
	switch {
	case s.shutdown.Load():
		return PutResult{Status: ServiceNotAvailable, Err: ErrShutdown}, true
	}
	if r := s.refuse.Load(); r != 0 {
		err := ErrDiskFull
		switch {
		case r&refuseSlave != 0:
			err = ErrSlave
		case r&refuseSpaceRatio == 0:
			err = errDispatchNoSpace
		}
		return PutResult{Status: ServiceNotAvailable, Err: err}, true
	}
	return PutResult{}, false
}

// consumeQueue returns the queue or nil.
func (s *Store) consumeQueue(topic string, queueID int32) *ConsumeQueue {
	s.cqMu.RLock()
	defer s.cqMu.RUnlock()
	return s.cqs[queueKey{topic, queueID}]
}

// consumeQueueOrCreate returns the queue, creating it on first dispatch.
func (s *Store) consumeQueueOrCreate(topic string, queueID int32) (*ConsumeQueue, error) {
	if cq := s.consumeQueue(topic, queueID); cq != nil {
		return cq, nil
	}
	if topic == "" || strings.ContainsAny(topic, `/\`) || topic == "." || topic == ".." {
		return nil, fmt.Errorf("store: topic %q cannot name a consume queue directory", topic)
	}
	s.cqMu.Lock()
	defer s.cqMu.Unlock()
	k := queueKey{topic, queueID}
	if cq := s.cqs[k]; cq != nil {
		return cq, nil
	}
	cq := s.newConsumeQueue(topic, queueID)
	if cq.units != nil {
		// A new queue has no units: files left in its sidecar directory
		// (its queue directory removed by hand) would block new ones.
		if err := os.RemoveAll(cq.units.q.Dir()); err != nil {
			s.log.WithError(err).Warn("remove stale filter bitmap files")
		}
	}
	s.cqs[k] = cq
	return cq, nil
}

// newConsumeQueue builds a queue with its filter-bitmap sidecar when
// filter bitmaps are on.
func (s *Store) newConsumeQueue(topic string, queueID int32) *ConsumeQueue {
	cq := NewConsumeQueue(s.cqRoot, topic, queueID, s.cfg.MappedFileSizeConsumeQ, s.log)
	if s.cfg.FilterBitmapBits > 0 {
		cq.units = newFilterUnits(s.unitRoot, topic, queueID, s.cfg.MappedFileSizeConsumeQ, s.unitLayout, cq.log)
	}
	return cq
}

// consumeQueues returns a snapshot of all queues.
func (s *Store) consumeQueues() []*ConsumeQueue {
	s.cqMu.RLock()
	defer s.cqMu.RUnlock()
	out := make([]*ConsumeQueue, 0, len(s.cqs))
	for _, cq := range s.cqs {
		out = append(out, cq)
	}
	return out
}

// Topics returns the topics that have consume queues, sorted.
func (s *Store) Topics() []string {
	s.cqMu.RLock()
	seen := map[string]bool{}
	for k := range s.cqs {
		seen[k.topic] = true
	}
	s.cqMu.RUnlock()
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (s *Store) setLogicsMsgTimestamp(ts int64) { s.logicsTs.Store(ts) }

// DeleteTopic removes the consume queues of topic and forgets their next
// offsets (DELETE_TOPIC_IN_BROKER). The records stay in the commitlog until
// retention removes them, but never get queue entries again: a marker file
// keeps recovery from rebuilding them. A later message re-creates the topic.
func (s *Store) DeleteTopic(topic string) error {
	if topic == "" || strings.ContainsAny(topic, `/\`) || topic == "." || topic == ".." {
		return fmt.Errorf("store: topic %q cannot name a consume queue directory", topic)
	}
	// Records up to the current end belong to the deleted topic; marking
	// them first keeps dispatch from re-creating the queues.
	end := s.commitLog.MaxOffset()
	s.cqMu.Lock()
	s.deletedBefore[topic] = end
	var drop []*ConsumeQueue
	for k, cq := range s.cqs {
		if k.topic == topic {
			drop = append(drop, cq)
			delete(s.cqs, k)
		}
	}
	s.cqMu.Unlock()
	var errs []error
	for _, cq := range drop {
		s.commitLog.RemoveQueue(topic, cq.QueueID())
		errs = append(errs, cq.Destroy())
	}
	dir := filepath.Join(s.cqRoot, topic)
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("store: remove consume queues of %s: %w", topic, err))
	}
	if err := os.RemoveAll(filepath.Join(s.unitRoot, topic)); err != nil {
		errs = append(errs, fmt.Errorf("store: remove filter bitmaps of %s: %w", topic, err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		errs = append(errs, fmt.Errorf("store: create %s: %w", dir, err))
	} else if err := fsutil.WriteFileAtomic(filepath.Join(dir, deletedMarkerName), []byte(strconv.FormatInt(end, 10)), 0o644); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flushConsumeQueueLoop flushes consume queues every FlushIntervalConsumeQ
// (least FlushConsumeQLeastPages pages) and thoroughly every minute, then
// writes the checkpoint.
func (s *Store) flushConsumeQueueLoop() {
	defer s.wg.Done()
	interval := s.cfg.FlushIntervalConsumeQ
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	lastThorough := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		pages := s.cfg.FlushConsumeQLeastPages
		if time.Since(lastThorough) >= consumeQueueThoroughFlush {
			pages = 0
			lastThorough = time.Now()
		}
		ts := s.logicsTs.Load()
		if err := s.flushConsumeQueues(pages); err != nil {
			s.log.WithError(err).Error("flush consume queues")
			continue
		}
		if pages == 0 {
			if ts > 0 {
				s.checkpoint.SetLogicsMsgTimestamp(ts)
			}
			if err := s.checkpoint.Flush(); err != nil {
				s.log.WithError(err).Error("flush checkpoint")
			}
		}
	}
}

func (s *Store) flushConsumeQueues(leastPages int) error {
	var errs []error
	for _, cq := range s.consumeQueues() {
		var err error
		if leastPages == 0 {
			err = cq.FlushAll()
		} else {
			err = cq.Flush(leastPages)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
