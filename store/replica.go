package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gorocketmq/gorocketmq/message"
)

// Replication support: what the HA package (store/ha) needs from the store.
//
// A master's HA connections read the commitlog with GetData and learn of new
// records through an append listener. A slave's store receives the master's
// commitlog bytes through AppendReplica, which copies them to the same
// offsets (the slave's files become identical to the master's) and
// dispatches them like the master's own puts.

// Errors of replica appends.
var (
	// ErrReplicaOffset means replicated bytes do not continue the commitlog
	// at its end (or, for an empty commitlog, do not start at a file
	// boundary).
	ErrReplicaOffset = errors.New("store: replicated data does not continue the commitlog")
	// ErrReplicaData means replicated bytes are not valid commitlog records
	// where they claim to be: a bad magic code, sizes that disagree, a
	// PHYSICALOFFSET that is not the record's position, a body CRC mismatch,
	// a record larger than MaxRecordSize or not fitting its file, or a blank
	// end-of-file marker that does not fill the rest of its file.
	ErrReplicaData = errors.New("store: replicated data is not a valid commitlog record")
)

// recordOverhead is the largest record size beyond its body: the fixed
// fields with IPv6 hosts, a 127-byte topic and 32767 bytes of properties.
const recordOverhead = message.MinRecordLength + 2*12 + message.MaxTopicLength + message.MaxPropertiesLength

// SetAppendListener installs fn, called after every append (puts and
// replica appends) once the writer lock is released, after the append hook
// that dispatches. It runs on the appender's goroutine for every message, so
// it must be cheap and never block: an HA master uses it to wake writers
// that wait for data, with an atomic check when none waits. nil removes it.
// It may be set and cleared while puts run.
func (cl *CommitLog) SetAppendListener(fn func()) {
	if fn == nil {
		cl.appendListener.Store(nil)
		return
	}
	cl.appendListener.Store(&fn)
}

// notifyAppendListener calls the append listener, if any.
func (cl *CommitLog) notifyAppendListener() {
	if l := cl.appendListener.Load(); l != nil {
		(*l)()
	}
}

// SetAppendListener installs the commitlog's append listener (see
// CommitLog.SetAppendListener).
func (s *Store) SetAppendListener(fn func()) { s.commitLog.SetAppendListener(fn) }

// MaxRecordSize returns the largest record this commitlog can hold or
// accept from a master: the body limit (MaxMessageSize) plus the largest
// header, topic and properties. A slave's maxMessageSize must be at least
// its master's.
func (cl *CommitLog) MaxRecordSize() int {
	return min(cl.cfg.MaxMessageSize+recordOverhead, cl.mfq.FileSize()-message.BlankRecordLength)
}

// FileSize returns the size of one commitlog file.
func (cl *CommitLog) FileSize() int { return cl.mfq.FileSize() }

// AppendReplica appends commitlog bytes a master sent, at offset, which must
// be the commitlog's end (MaxOffset). A commitlog that holds nothing and
// ends at 0 (a new slave) accepts any offset at a file boundary instead: its
// first file then starts there, as the master starts a new slave at its own
// newest file.
//
// Only whole units are appended, each validated: records (magic, sizes,
// PHYSICALOFFSET equal to the position, body CRC, at most MaxRecordSize and
// leaving room for a blank marker in the file) and blank end-of-file
// markers (TOTALSIZE exactly the rest of the file). They land at the same
// offsets as on the master, and the append hook dispatches them to the
// consume queues and index as a put's records are.
//
// It returns how many bytes of data it consumed. That is every whole unit
// and, after a blank marker, the rest of data up to the end of that file:
// the filler after a marker is never read (recovery and dispatch move to the
// next file at a marker), so it is not copied and the slave's file keeps the
// zeros it was preallocated with, as the master's does. MaxOffset then
// moves to the next file while the master may still be sending that filler:
// the caller discards the bytes below MaxOffset. What is left unconsumed
// is the beginning of a record whose header checked out and whose rest has
// not arrived: the caller keeps it and calls again with the whole record.
//
// On an error, the whole units before the bad bytes are appended and
// counted in the result; nothing after them is.
func (cl *CommitLog) AppendReplica(offset int64, data []byte) (int, error) {
	n, appended, err := cl.appendReplica(offset, data)
	if appended {
		if cl.appendHook != nil {
			cl.appendHook()
		}
		cl.notifyAppendListener()
	}
	return n, err
}

func (cl *CommitLog) appendReplica(offset int64, data []byte) (consumed int, appended bool, err error) {
	fileSize := cl.mfq.FileSize()
	maxRecord := cl.MaxRecordSize()
	cl.putMu.Lock()
	defer cl.putMu.Unlock()
	if err := cl.replicaStartsAt(offset); err != nil {
		return 0, false, err
	}
	be := binary.BigEndian
	for consumed < len(data) {
		at := offset + int64(consumed)
		mf, filePos, err := cl.replicaFile(at)
		if err != nil {
			return consumed, appended, err
		}
		// Scan the whole records that follow in this file.
		i, blank := consumed, false
		var lastTs int64
		var scanErr error
		for i < len(data) {
			fp := filePos + i - consumed
			rest := data[i:]
			if len(rest) < message.BlankRecordLength {
				break // a unit's first 8 bytes say what it is
			}
			if int32(be.Uint32(rest[message.PosMagicCode:])) == message.BlankMagicCode {
				if got := int(int32(be.Uint32(rest))); got != fileSize-fp {
					scanErr = fmt.Errorf("%w: blank end-of-file marker at offset %d claims %d bytes, %d are left in the file "+
						"(is mappedFileSizeCommitLog the same on master and slave?)", ErrReplicaData, at+int64(i-consumed), got, fileSize-fp)
				}
				blank = scanErr == nil
				break
			}
			size, ts, err := checkReplicaRecord(rest, at+int64(i-consumed), fileSize-fp, maxRecord)
			if err != nil {
				scanErr = err
				break
			}
			if size == 0 {
				break // a record whose rest has not arrived
			}
			i += size
			lastTs = ts
		}
		if i > consumed {
			if err := cl.writeReplica(mf, data[consumed:i], filePos); err != nil {
				return consumed, appended, err
			}
			filePos += i - consumed
			mf.SetWrotePosition(filePos)
			cl.lastStoreTimestamp.Store(lastTs)
			cl.advanceQueueOffsets(data[consumed:i])
			consumed, appended = i, true
		}
		if scanErr != nil {
			return consumed, appended, scanErr
		}
		if !blank {
			return consumed, appended, nil
		}
		if err := cl.writeReplica(mf, data[consumed:consumed+message.BlankRecordLength], filePos); err != nil {
			return consumed, appended, err
		}
		mf.SetWrotePosition(fileSize)
		appended = true
		consumed += min(len(data)-consumed, fileSize-filePos)
	}
	return consumed, appended, nil
}

// replicaStartsAt checks that replicated bytes at offset continue the
// commitlog: offset is its end or, for a commitlog that holds nothing (a new
// slave), a file boundary, where the first file is then created. Caller
// holds putMu.
func (cl *CommitLog) replicaStartsAt(offset int64) error {
	if cl.closed.Load() {
		return ErrCommitLogClosed
	}
	if err := cl.flush.failed(); err != nil {
		return err
	}
	end := cl.mfq.MaxOffset()
	if offset == end {
		return nil
	}
	fileSize := cl.mfq.FileSize()
	if end != 0 || !cl.holdsNothing() {
		return fmt.Errorf("%w: data at offset %d, the commitlog ends at %d", ErrReplicaOffset, offset, end)
	}
	if offset < 0 || offset%int64(fileSize) != 0 {
		return fmt.Errorf("%w: an empty commitlog can start only at a file boundary, not at %d (file size %d)",
			ErrReplicaOffset, offset, fileSize)
	}
	// A new slave: drop the empty file a put or an earlier start left,
	// so the first file is created at the master's offset.
	for cl.mfq.Len() > 0 {
		if err := cl.mfq.DeleteLastMappedFile(); err != nil {
			return fmt.Errorf("store: drop empty commitlog file: %w", err)
		}
	}
	cl.log.WithField("offset", offset).Info("empty commitlog starts at the master's offset")
	return nil
}

// replicaFile returns the file replicated bytes at offset go to, created if
// needed, with its blocks reserved, and the position in it, which must be
// the file's written end. Caller holds putMu.
func (cl *CommitLog) replicaFile(at int64) (*MappedFile, int, error) {
	fileSize := cl.mfq.FileSize()
	mf := cl.mfq.LastMappedFile()
	if mf == nil || mf.IsFull() {
		var err error
		if mf, err = cl.mfq.LastMappedFileOrCreate(at); err != nil {
			if errors.Is(err, ErrDiskFull) {
				return nil, 0, err
			}
			return nil, 0, fmt.Errorf("%w: %w", ErrCreateMappedFile, err)
		}
	}
	if err := mf.ensureBacked(fileSize, 0); err != nil {
		return nil, 0, err
	}
	filePos := int(at - mf.FileFromOffset())
	if filePos != mf.WrotePosition() {
		return nil, 0, fmt.Errorf("%w: data at offset %d, file %s is written to %d",
			ErrReplicaOffset, at, mf.Path(), mf.FileFromOffset()+int64(mf.WrotePosition()))
	}
	return mf, filePos, nil
}

// AppendReplicaLost appends data, commitlog bytes at offset that the master
// announced as part of one of its lost ranges (records its recovery or
// dispatch found damaged and skipped, see LostRanges). offset must be where
// AppendReplica would take data (see there); data must not cross the end of
// its file.
//
// The bytes are written as they are, unvalidated, so the slave's file stays
// identical to the master's: its own recovery finds the same damage at the
// same offsets and skips the same range. [offset, offset+len(data)) is
// recorded as a lost range before the bytes are published, extending a
// range that ends at offset (a range arrives a frame at a time), so dispatch
// never parses them and reads never return them. No queue offset moves: the
// master's records after the range carry their own.
//
// It returns len(data), or 0 and an error with nothing appended.
func (cl *CommitLog) AppendReplicaLost(offset int64, data []byte) (int, error) {
	appended, err := cl.appendReplicaLost(offset, data)
	if !appended {
		return 0, err
	}
	if cl.appendHook != nil {
		cl.appendHook()
	}
	cl.notifyAppendListener()
	return len(data), nil
}

func (cl *CommitLog) appendReplicaLost(offset int64, data []byte) (bool, error) {
	if len(data) == 0 {
		return false, nil
	}
	fileSize := int64(cl.mfq.FileSize())
	cl.putMu.Lock()
	defer cl.putMu.Unlock()
	if err := cl.replicaStartsAt(offset); err != nil {
		return false, err
	}
	if offset%fileSize+int64(len(data)) > fileSize {
		return false, fmt.Errorf("%w: lost bytes [%d,%d) cross the end of their file (file size %d)",
			ErrReplicaData, offset, offset+int64(len(data)), fileSize)
	}
	mf, filePos, err := cl.replicaFile(offset)
	if err != nil {
		return false, err
	}
	if err := cl.writeReplica(mf, data, filePos); err != nil {
		return false, err
	}
	// The range before the write position: a reader that sees the bytes
	// sees the range too.
	cl.addReplicaLost(offset, offset+int64(len(data)))
	mf.SetWrotePosition(filePos + len(data))
	return true, nil
}

// writeReplica writes b, whole records (or a lost range's bytes), at pos of mf with pwrite, its first
// 8 bytes last as writeAt does (a killed process leaves zeros where
// recovery looks). Unlike a put's few hundred bytes, a slave writes up to a
// frame at once, and copying that into the mapping faults in every fresh
// page on the slave's one applying goroutine: measured on this project's VM
// (BenchmarkCatchUp), pwrite let the page cache take the bytes several
// times faster. Readers use the mapping; Linux keeps both views coherent.
// The warmer is not told: it readies the mapping for writes through it,
// and measured, populating pages pwrite fills anyway only cost CPU.
// Caller holds putMu.
func (cl *CommitLog) writeReplica(mf *MappedFile, b []byte, pos int) error {
	head := min(len(b), message.BlankRecordLength)
	if len(b) > head {
		if _, err := mf.file.WriteAt(b[head:], int64(pos+head)); err != nil {
			return fmt.Errorf("store: write commitlog %s at %d: %w", mf.Path(), pos+head, noSpace(err))
		}
	}
	if _, err := mf.file.WriteAt(b[:head], int64(pos)); err != nil {
		return fmt.Errorf("store: write commitlog %s at %d: %w", mf.Path(), pos, noSpace(err))
	}
	return nil
}

// advanceQueueOffsets moves the next consume-queue offset of every queue
// that has records in recs (whole, validated records) past them, as a put
// does, so a slave promoted to master (SetSlave(false)) goes on at the
// right offsets without a restart. The topic string is made only when it
// changes from one record to the next. Caller holds putMu.
func (cl *CommitLog) advanceQueueOffsets(recs []byte) {
	var topic string
	for len(recs) > 0 {
		r, err := message.ParseRecord(recs)
		if err != nil {
			return // validated before: cannot happen
		}
		if tt := message.TransactionType(r.SysFlag()); tt == message.TransactionNotType || tt == message.TransactionCommitType {
			if t := r.Topic(); string(t) != topic {
				topic = string(t)
			}
			cl.topicQueue[topicQueueKey{topic, r.QueueID()}] = r.QueueOffset() + 1
		}
		recs = recs[r.Size():]
	}
}

// holdsNothing reports whether the commitlog has no written byte: no file,
// or one file with nothing written. Caller holds putMu.
func (cl *CommitLog) holdsNothing() bool {
	switch cl.mfq.Len() {
	case 0:
		return true
	case 1:
		return cl.mfq.LastMappedFile().WrotePosition() == 0
	}
	return false
}

// checkReplicaRecord validates the record at the start of b, which belongs
// at offset with room bytes left in its file. It returns the record's size
// and store time, or size 0 when b holds only the start of a record whose
// header is plausible (the caller waits for the rest).
func checkReplicaRecord(b []byte, offset int64, room, maxRecord int) (int, int64, error) {
	r, err := message.ParseRecord(b)
	if errors.Is(err, message.ErrShortRecord) {
		size := int(int32(binary.BigEndian.Uint32(b)))
		if size > maxRecord || size+message.BlankRecordLength > room {
			return 0, 0, fmt.Errorf("%w: record at offset %d claims %d bytes (largest accepted %d, %d left in the file)",
				ErrReplicaData, offset, size, maxRecord, room)
		}
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: at offset %d: %w", ErrReplicaData, offset, err)
	}
	switch {
	case r.Size() > maxRecord || r.Size()+message.BlankRecordLength > room:
		return 0, 0, fmt.Errorf("%w: record at offset %d has %d bytes (largest accepted %d, %d left in the file)",
			ErrReplicaData, offset, r.Size(), maxRecord, room)
	case r.PhysicalOffset() != offset:
		return 0, 0, fmt.Errorf("%w: record at offset %d says it is at %d", ErrReplicaData, offset, r.PhysicalOffset())
	}
	if err := r.VerifyCRC(); err != nil {
		return 0, 0, fmt.Errorf("%w: at offset %d: %w", ErrReplicaData, offset, err)
	}
	return r.Size(), r.StoreTimestamp(), nil
}

// AppendReplica appends a master's commitlog bytes (see
// CommitLog.AppendReplica) and wakes the dispatch loop for them. It refuses
// with ErrShutdown or ErrDiskFull as puts do, but not because the store is
// a slave's (SetSlave): replication is what writes there. When a new
// slave's commitlog starts at the master's offset, dispatch starts there too.
func (s *Store) AppendReplica(offset int64, data []byte) (int, error) {
	if err := s.replicaStart(offset); err != nil {
		return 0, err
	}
	n, appended, err := s.commitLog.appendReplica(offset, data)
	if appended {
		s.replicaAppended()
	}
	return n, err
}

// AppendReplicaLost appends bytes of a master's lost range (see
// CommitLog.AppendReplicaLost) and wakes the dispatch loop, which skips
// them. It refuses as AppendReplica does.
func (s *Store) AppendReplicaLost(offset int64, data []byte) (int, error) {
	if err := s.replicaStart(offset); err != nil {
		return 0, err
	}
	appended, err := s.commitLog.appendReplicaLost(offset, data)
	if !appended {
		return 0, err
	}
	s.replicaAppended()
	return len(data), nil
}

// replicaStart refuses replica appends as puts are refused (shut down,
// disk full) and, when a new slave's commitlog starts at the master's
// offset, moves dispatch there.
func (s *Store) replicaStart(offset int64) error {
	switch r := s.refuse.Load(); {
	case s.shutdown.Load():
		return ErrShutdown
	case r&refuseSpaceRatio != 0:
		return ErrDiskFull
	case r&refuseSpaceDispatch != 0:
		return errDispatchNoSpace
	}
	cl := s.commitLog
	if offset > 0 && cl.MaxOffset() == 0 && offset%int64(cl.FileSize()) == 0 {
		// Nothing below offset will ever be written here: move dispatch
		// there before the records arrive, instead of letting it find its
		// offset below the commitlog's first file.
		s.reput.mu.Lock()
		if cl.MaxOffset() == 0 {
			s.reput.reputFrom.Store(offset)
		}
		s.reput.mu.Unlock()
	}
	return nil
}

// replicaAppended hands appended replica bytes to the dispatch loop rather
// than dispatching them here as a put does: a slave appends a frame of
// records at a time on its one applying goroutine, and dispatching beside it
// on another core roughly doubled BenchmarkCatchUp. The ack the master waits
// for needs the append only.
func (s *Store) replicaAppended() {
	s.reput.pending.Store(true)
	s.reput.signal()
	s.commitLog.notifyAppendListener()
}
