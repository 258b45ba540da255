package store

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ErrDiskFull is the cause of a ServiceNotAvailable put for lack of disk
// space: the disk is used above DiskWarningRatio (writes resume once
// cleaning brings it under DiskForceCleanRatio), a file could not get its
// blocks, or dispatch waits for room for consume-queue or index entries.
var ErrDiskFull = errors.New("store: disk full, writes refused until space is freed")

// errDispatchNoSpace refuses puts while dispatch waits for disk space:
// stored messages would not reach their consume queues until it has some.
var errDispatchNoSpace = fmt.Errorf("%w (consume-queue or index entries cannot be written)", ErrDiskFull)

// Reasons for refusing writes (Store.refuse bits).
const (
	// refuseSpaceRatio: usage above DiskWarningRatio; the clean loop sets
	// and clears it.
	refuseSpaceRatio uint32 = 1 << iota
	// refuseSpaceDispatch: dispatch could not reserve blocks for a
	// consume-queue or index entry; dispatch clears it once it writes again.
	refuseSpaceDispatch
	// refuseSlave: a slave's store (SetSlave).
	refuseSlave

	refuseNoSpace = refuseSpaceRatio | refuseSpaceDispatch
)

// manualDeleteRounds is how many clean rounds a manual delete request forces
// (RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES).
const manualDeleteRounds = 20

// cleanState is the clean loop's memory between rounds.
type cleanState struct {
	manualRounds atomic.Int32
}

// statfsUsage returns the used fraction of the file system holding path, as
// df computes Use%: used / (used + available to unprivileged users).
func statfsUsage(path string) (float64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return -1, fmt.Errorf("store: statfs %s: %w", path, err)
	}
	used := float64(st.Blocks-st.Bfree) * float64(st.Bsize)
	avail := float64(st.Bavail) * float64(st.Bsize)
	if used+avail <= 0 {
		return -1, fmt.Errorf("store: statfs %s: empty file system", path)
	}
	return used / (used + avail), nil
}

// DiskFull reports whether writes are refused for lack of space.
func (s *Store) DiskFull() bool { return s.refuse.Load()&refuseNoSpace != 0 }

// ExecuteDeleteFilesManually makes the next rounds of the clean loop delete
// expired files regardless of deleteWhen (mqadmin deleteExpiredCommitLog).
func (s *Store) ExecuteDeleteFilesManually() {
	s.clean.manualRounds.Store(manualDeleteRounds)
}

// cleanLoop runs one clean round every CleanResourceInterval.
func (s *Store) cleanLoop() {
	defer s.wg.Done()
	interval := s.cfg.CleanResourceInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.RunCleanRound()
	}
}

// RunCleanRound checks disk usage and deletes expired commitlog files, then
// consume-queue and index files whose messages are gone. The clean loop
// calls it; tests call it directly.
func (s *Store) RunCleanRound() {
	s.cleanCommitLog()
	s.cleanConsumeQueues()
}

// diskRatio returns the highest used fraction of the commitlog and store
// root partitions (-1 when unknown).
func (s *Store) diskRatio() float64 {
	ratio := -1.0
	for _, p := range []string{s.commitLog.Files().Dir(), s.cfg.StorePathRootDir} {
		r, err := s.diskUsage(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no commitlog directory before the first message: nothing to clean there
		}
		if err != nil {
			s.log.WithError(err).Warn("disk usage unknown")
			continue
		}
		ratio = max(ratio, r)
	}
	return ratio
}

// isTimeToDelete reports whether the current hour is one of DeleteWhen's
// ';'-separated hours.
func (s *Store) isTimeToDelete() bool {
	hour := s.now().Hour()
	for _, h := range strings.Split(s.cfg.DeleteWhen, ";") {
		if v, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && v == hour {
			return true
		}
	}
	return false
}

// checkDiskSpace sets or clears the refusal of writes for disk usage (above
// DiskWarningRatio writes stop; they resume under DiskForceCleanRatio) and
// returns the usage and whether cleaning should ignore age (above
// DiskForceCleanRatio). Open calls it too, so a store opened on a full disk
// starts read-only instead of accepting writes until the first clean round.
func (s *Store) checkDiskSpace() (ratio float64, cleanImmediately bool) {
	ratio = s.diskRatio()
	switch {
	case ratio > float64(s.cfg.DiskWarningRatio)/100:
		if s.refuse.Or(refuseSpaceRatio)&refuseSpaceRatio == 0 {
			s.log.WithField("usage", ratio).Error("disk almost full: refusing writes until space is freed")
		}
		cleanImmediately = true
	case ratio > float64(s.cfg.DiskForceCleanRatio)/100:
		cleanImmediately = true
	default:
		if s.refuse.And(^refuseSpaceRatio)&refuseSpaceRatio != 0 {
			s.log.WithField("usage", ratio).Info("disk space available again: accepting writes")
		}
	}
	return ratio, cleanImmediately
}

// cleanCommitLog applies RocketMQ's CleanCommitLogService: above
// DiskWarningRatio writes stop and deletion ignores age, above
// DiskForceCleanRatio deletion ignores age, under it writes resume; files
// older than FileReservedTime go at DeleteWhen or above DiskMaxUsedSpaceRatio.
func (s *Store) cleanCommitLog() {
	ratio, cleanImmediately := s.checkDiskSpace()
	spaceToDelete := ratio < 0 || ratio > float64(s.cfg.DiskMaxUsedSpaceRatio)/100
	manual := s.clean.manualRounds.Load() > 0
	if manual {
		s.clean.manualRounds.Add(-1)
	}
	if !s.isTimeToDelete() && !spaceToDelete && !manual {
		return
	}
	cleanImmediately = cleanImmediately && s.cfg.CleanFileForcibly
	n := s.commitLog.DeleteExpiredFiles(s.now(), s.cfg.FileReservedTime, s.cfg.DeleteFilesInterval,
		s.cfg.DestroyMappedFileForce, cleanImmediately)
	if n > 0 {
		s.log.WithFields(logrus.Fields{"files": n, "usage": ratio, "forced": cleanImmediately, "minOffset": s.commitLog.MinOffset()}).
			Info("deleted commitlog files")
	}
}

// cleanConsumeQueues deletes consume-queue and index files pointing wholly
// below the commitlog's min offset and advances each queue's min offset.
func (s *Store) cleanConsumeQueues() {
	minPhy := s.commitLog.MinOffset()
	if minPhy <= s.cleanedUpTo.Load() {
		return
	}
	for _, cq := range s.consumeQueues() {
		cq.DeleteExpired(minPhy, s.cfg.DestroyMappedFileForce)
	}
	if s.index != nil {
		s.index.DeleteExpired(minPhy, s.cfg.DestroyMappedFileForce)
	}
	s.cleanedUpTo.Store(minPhy)
}
