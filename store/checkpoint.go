package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Checkpoint file layout (RocketMQ StoreCheckpoint), one 4 KiB page, big-endian:
//
//	off size field
//	  0    8 physicMsgTimestamp: store time of the last flushed commitlog record
//	  8    8 logicsMsgTimestamp: store time of the last consume queue entry flushed
//	 16    8 indexMsgTimestamp:  end time of the last full, flushed index file
//
// 5.x adds masterFlushedOffset at 24 and confirmPhyOffset at 32; they are kept
// as zeros here.
const (
	checkpointFileSize = 4096
	checkpointDataSize = 24
)

// checkpointFutureSlack is how far past the store's clock a checkpoint time
// may lie and still be taken for a store time. Every time in the file was
// read from that clock before it was written, so a later one is damage or a
// clock set back; a day tolerates the corrections clocks get and catches the
// huge values of garbage bytes. Distrust is safe either way: it only costs a
// full recovery after a crash.
const checkpointFutureSlack = 24 * time.Hour

// StoreCheckpoint holds the three recovery timestamps and persists them to
// <root>/checkpoint. Setters are atomic and cheap; Flush writes the file.
type StoreCheckpoint struct {
	path   string
	f      *os.File
	physic atomic.Int64
	logics atomic.Int64
	index  atomic.Int64
	mu     sync.Mutex // serialises Flush and Close
}

// CheckpointOptions says how OpenCheckpoint judges the file it finds.
type CheckpointOptions struct {
	// Log receives the warning about a file that cannot be trusted; nil
	// discards it.
	Log logrus.FieldLogger
	// Now is the store's clock (nil: time.Now); a time later than Now plus
	// a day is not a store time.
	Now func() time.Time
	// Fresh says the store has no commitlog yet: a missing file is then
	// expected and created without a warning.
	Fresh bool
}

// OpenCheckpoint opens or creates the checkpoint file at path. One rule
// covers every file it cannot trust: missing, empty, shorter than its page,
// or holding a time that is not a store time (negative, or more than a day
// past o.Now). Each means "recover from the files": a warning names the file
// and what was wrong, every time reads as 0 (known flushed: nothing), so
// after a crash recovery walks the commitlog from its first file and
// rebuilds every index file, as with no checkpoint at all, and the file is
// rewritten as a zero page. None of them stops the store; only an I/O error
// does.
func OpenCheckpoint(path string, o CheckpointOptions) (*StoreCheckpoint, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open checkpoint %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: stat checkpoint %s: %w", path, err)
	}
	cp := &StoreCheckpoint{path: path, f: f}
	var problem string
	switch size := st.Size(); {
	case errors.Is(statErr, os.ErrNotExist):
		problem = "missing"
	case size == 0:
		problem = "empty"
	case size < checkpointFileSize:
		problem = fmt.Sprintf("%d bytes, short of its %d-byte page", size, checkpointFileSize)
	default:
		var b [checkpointDataSize]byte
		if _, err := io.ReadFull(io.NewSectionReader(f, 0, checkpointDataSize), b[:]); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("store: read checkpoint %s: %w", path, err)
		}
		latest := o.Now().Add(checkpointFutureSlack).UnixMilli()
		for i, name := range [...]string{"physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"} {
			if v := int64(binary.BigEndian.Uint64(b[8*i:])); v < 0 || v > latest {
				problem = fmt.Sprintf("%s %d is not a store time (clock %d)", name, v, o.Now().UnixMilli())
				break
			}
		}
		if problem == "" {
			cp.physic.Store(int64(binary.BigEndian.Uint64(b[0:])))
			cp.logics.Store(int64(binary.BigEndian.Uint64(b[8:])))
			cp.index.Store(int64(binary.BigEndian.Uint64(b[16:])))
			return cp, nil
		}
	}
	if o.Log != nil && (problem != "missing" || !o.Fresh) {
		o.Log.WithFields(logrus.Fields{"file": path, "reason": problem}).
			Warn("checkpoint not trusted: recovering from the files (after a crash the whole commitlog is walked and every index file rebuilt)")
	}
	// A zero page: a valid file again, saying nothing is known flushed.
	err = f.Truncate(0)
	if err == nil {
		err = f.Truncate(checkpointFileSize)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: rewrite checkpoint %s: %w", path, err)
	}
	return cp, nil
}

// PhysicMsgTimestamp returns the store time of the last flushed commitlog record.
func (cp *StoreCheckpoint) PhysicMsgTimestamp() int64 { return cp.physic.Load() }

// SetPhysicMsgTimestamp records the store time of the last flushed commitlog record.
func (cp *StoreCheckpoint) SetPhysicMsgTimestamp(ts int64) { cp.physic.Store(ts) }

// LogicsMsgTimestamp returns the store time of the last flushed consume queue entry.
func (cp *StoreCheckpoint) LogicsMsgTimestamp() int64 { return cp.logics.Load() }

// SetLogicsMsgTimestamp records the store time of the last flushed consume queue entry.
func (cp *StoreCheckpoint) SetLogicsMsgTimestamp(ts int64) { cp.logics.Store(ts) }

// IndexMsgTimestamp returns the end time of the last full, flushed index file.
func (cp *StoreCheckpoint) IndexMsgTimestamp() int64 { return cp.index.Load() }

// SetIndexMsgTimestamp records the end time of the last full, flushed index file.
func (cp *StoreCheckpoint) SetIndexMsgTimestamp(ts int64) { cp.index.Store(ts) }

// MinTimestamp is min(physic, logics) - 3 s, not below 0: records stored
// before it are flushed in both the commitlog and the consume queues
// (StoreCheckpoint.getMinTimestamp).
func (cp *StoreCheckpoint) MinTimestamp() int64 {
	return max(min(cp.PhysicMsgTimestamp(), cp.LogicsMsgTimestamp())-3000, 0)
}

// MinTimestampIndex is min(MinTimestamp, indexMsgTimestamp).
func (cp *StoreCheckpoint) MinTimestampIndex() int64 {
	return min(cp.MinTimestamp(), cp.IndexMsgTimestamp())
}

// Flush writes the three fields in place and fdatasyncs. The 24 bytes sit in
// one disk sector, so the write is atomic on the devices we target.
func (cp *StoreCheckpoint) Flush() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.f == nil {
		return fmt.Errorf("store: checkpoint %s is closed", cp.path)
	}
	var b [checkpointDataSize]byte
	binary.BigEndian.PutUint64(b[0:], uint64(cp.PhysicMsgTimestamp()))
	binary.BigEndian.PutUint64(b[8:], uint64(cp.LogicsMsgTimestamp()))
	binary.BigEndian.PutUint64(b[16:], uint64(cp.IndexMsgTimestamp()))
	if _, err := cp.f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("store: write checkpoint %s: %w", cp.path, err)
	}
	if err := unix.Fdatasync(int(cp.f.Fd())); err != nil {
		return fmt.Errorf("store: sync checkpoint %s: %w", cp.path, err)
	}
	return nil
}

// Close flushes and closes the file. Safe to call twice.
func (cp *StoreCheckpoint) Close() error {
	if err := cp.Flush(); err != nil && cp.f != nil {
		cp.mu.Lock()
		_ = cp.f.Close()
		cp.f = nil
		cp.mu.Unlock()
		return err
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.f == nil {
		return nil
	}
	err := cp.f.Close()
	cp.f = nil
	if err != nil {
		return fmt.Errorf("store: close checkpoint %s: %w", cp.path, err)
	}
	return nil
}
