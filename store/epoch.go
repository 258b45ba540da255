package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// epochFileName is the epoch file under the store root, RocketMQ 5's name.
const epochFileName = "epochFileCheckpoint"

// Errors of the epoch file.
var (
	// ErrEpochFile means the epoch file does not parse or its checksum
	// does not match: the store's epoch history is unknown.
	ErrEpochFile = errors.New("store: bad epoch file")
	// ErrEpochOrder means an epoch that is not newer than the last one, or
	// starts before it.
	ErrEpochOrder = errors.New("store: epoch out of order")
)

// EpochEntry says that master epoch Epoch wrote this commitlog from
// StartOffset on (until the next entry's StartOffset).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochFile is the commitlog's epoch history (RocketMQ 5's EpochFileCache
// and its epochFileCheckpoint): at which offset each master epoch began.
// In controller mode a broker appends an entry when it becomes master, and
// a slave takes its master's history; comparing two histories finds where
// two commitlogs stop agreeing (ConsistentPoint).
//
// # File format (RocketMQ 5's CheckpointFile)
//
// Text, '\n'-terminated lines: the number of entries, then a checksum, then
// one "epoch-startOffset" line per entry, oldest first.
//
//	2
//	1352618429
//	1-0
//	3-1048576
//
// The checksum is CRC-32 (IEEE) of the entry lines, '\n's included, masked
// to 31 bits (Java's UtilAll.crc32); 0 means not checked. The file is
// replaced atomically (temp file, fsync, rename, fsync of the directory).
type EpochFile struct {
	path string

	mu      sync.Mutex
	entries []EpochEntry // guarded by mu; epochs and offsets ascending
}

// OpenEpochFile reads the epoch file at path (none: an empty history).
func OpenEpochFile(path string) (*EpochFile, error) {
	f := &EpochFile{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", path, err)
	}
	if f.entries, err = parseEpochFile(b); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrEpochFile, path, err)
	}
	return f, nil
}

func parseEpochFile(b []byte) ([]EpochEntry, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return nil, errors.New("fewer than two lines")
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("entry count %q", lines[0])
	}
	sum, err := strconv.ParseInt(strings.TrimSpace(lines[1]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("checksum %q", lines[1])
	}
	var body strings.Builder
	var out []EpochEntry
	for _, l := range lines[2:] {
		if l == "" {
			continue
		}
		body.WriteString(l)
		body.WriteByte('\n')
		e, s, ok := strings.Cut(strings.TrimSpace(l), "-")
		epoch, err1 := strconv.ParseInt(e, 10, 32)
		start, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil || start < 0 {
			return nil, fmt.Errorf("entry %q is not epoch-startOffset", l)
		}
		out = append(out, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	if len(out) != n {
		return nil, fmt.Errorf("%d entries, the header says %d", len(out), n)
	}
	if sum != 0 && sum != int64(epochChecksum(body.String())) {
		return nil, fmt.Errorf("checksum %d does not match the entries", sum)
	}
	if err := CheckEpochOrder(out); err != nil {
		return nil, err
	}
	return out, nil
}

func epochChecksum(body string) int32 {
	return int32(crc32.ChecksumIEEE([]byte(body)) & 0x7FFFFFFF)
}

// Entries returns a copy of the history, oldest first.
func (f *EpochFile) Entries() []EpochEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

// LastEpoch returns the newest epoch, 0 when the history is empty.
func (f *EpochFile) LastEpoch() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return 0
	}
	return f.entries[len(f.entries)-1].Epoch
}

// Append records that epoch e begins at e.StartOffset, durably, after
// dropping every entry that starts at or beyond it (their epochs wrote
// nothing this commitlog still holds). It refuses an epoch not newer than
// the remaining last one.
func (f *EpochFile) Append(e EpochEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := truncateEpochs(f.entries, e.StartOffset)
	if n := len(entries); n > 0 && entries[n-1].Epoch >= e.Epoch {
		return fmt.Errorf("%w: epoch %d at %d after epoch %d at %d", ErrEpochOrder, e.Epoch, e.StartOffset, entries[n-1].Epoch, entries[n-1].StartOffset)
	}
	return f.writeLocked(append(entries, e))
}

// TruncateFrom drops, durably, every entry that starts at or beyond offset
// (the commitlog was cut there).
func (f *EpochFile) TruncateFrom(offset int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := truncateEpochs(f.entries, offset)
	if len(entries) == len(f.entries) {
		return nil
	}
	return f.writeLocked(entries)
}

// CheckEpochOrder reports, as ErrEpochOrder, a history whose epochs do not
// grow or whose start offsets go back (or below 0): what Reset refuses. A
// slave checks its master's history with it before cutting anything.
func CheckEpochOrder(entries []EpochEntry) error {
	if len(entries) > 0 && entries[0].StartOffset < 0 {
		return fmt.Errorf("%w: epoch %d starts at %d", ErrEpochOrder, entries[0].Epoch, entries[0].StartOffset)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset < entries[i-1].StartOffset {
			return fmt.Errorf("%w: %d-%d after %d-%d", ErrEpochOrder, entries[i].Epoch, entries[i].StartOffset, entries[i-1].Epoch, entries[i-1].StartOffset)
		}
	}
	return nil
}

// Reset replaces the history, durably (a slave takes its master's).
func (f *EpochFile) Reset(entries []EpochEntry) error {
	if err := CheckEpochOrder(entries); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(entries, f.entries) {
		return nil
	}
	return f.writeLocked(slices.Clone(entries))
}

func truncateEpochs(entries []EpochEntry, offset int64) []EpochEntry {
	i := len(entries)
	for i > 0 && entries[i-1].StartOffset >= offset {
		i--
	}
	return slices.Clone(entries[:i])
}

// writeLocked replaces the file and the entries. Lock should be held.
func (f *EpochFile) writeLocked(entries []EpochEntry) error {
	var body strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&body, "%d-%d\n", e.Epoch, e.StartOffset)
	}
	content := fmt.Sprintf("%d\n%d\n%s", len(entries), epochChecksum(body.String()), body.String())
	if err := fsutil.WriteFileAtomic(f.path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("store: write %s: %w", f.path, err)
	}
	f.entries = entries
	return nil
}

// epochEnd is where entries[i] ends: the next entry's start, or max for
// the last one.
func epochEnd(entries []EpochEntry, i int, max int64) int64 {
	if i+1 < len(entries) {
		return min(entries[i+1].StartOffset, max)
	}
	return max
}

// ConsistentPoint returns the offset up to which a commitlog with history
// local and max offset localMax holds the same records as its master's
// (master, masterMax): the newest epoch both histories record at the same
// start offset, cut at whichever of the two ends that epoch first
// (RocketMQ 5's findConsistentPoint). Beyond it the local commitlog holds
// what the master does not. With no common epoch it returns the earliest
// start of either history (the two share nothing recorded from there) and
// ok false; with an empty local history, localMax and ok false.
func ConsistentPoint(local []EpochEntry, localMax int64, master []EpochEntry, masterMax int64) (point int64, ok bool) {
	if len(local) == 0 {
		return localMax, false
	}
	for i := len(local) - 1; i >= 0; i-- {
		for j := len(master) - 1; j >= 0; j-- {
			if master[j].Epoch == local[i].Epoch && master[j].StartOffset == local[i].StartOffset {
				return min(epochEnd(local, i, localMax), epochEnd(master, j, masterMax)), true
			}
		}
	}
	point = local[0].StartOffset
	if len(master) > 0 {
		point = min(point, master[0].StartOffset)
	}
	return min(point, localMax), false
}

// Epochs is the store's epoch history (epochFileCheckpoint under the root).
func (s *Store) Epochs() *EpochFile { return s.epochs }
