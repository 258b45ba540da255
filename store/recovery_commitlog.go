package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/message"
)

// recoverFromLastFiles is how many trailing files a normal recovery checks
// (CommitLog.recoverNormally starts at the 3rd-last file).
const recoverFromLastFiles = 3

// Stop reasons of the recovery walk that are not damage.
const (
	endOfData       = "end of data" // never-written zeros
	blankInLastFile = "blank end-of-file marker in the last file"
)

// Recover finds the end of the valid records and cuts the commitlog there;
// MaxOffset then returns that offset, and RecoverStartOffset the start of the
// file the walk began in. The caller drops consume queue entries at or beyond
// MaxOffset and re-dispatches from the consume queues' end.
//
// A normal recovery (clean shutdown: no abort file) walks the last 3 files.
// An abnormal one starts at the newest file whose first record was stored at
// or before the checkpoint's MinTimestamp (older data was flushed), or at the
// first file when none qualifies or there is no checkpoint.
// The walk checks magic, the record's sizes, its physical offset field
// against its position and, with CheckCRCOnRecover, the body CRC; a blank
// marker moves to the next file. At the first bad record the commitlog is
// truncated: later files are deleted, the write and flush positions are set
// there and, unless the stop was at never-written zeros after a clean
// shutdown, the rest of that file is zeroed and synced, so stale records
// behind the cut can never be taken for new ones later. One log line names the
// file, offset and reason.
func (cl *CommitLog) Recover(normal bool, cp *StoreCheckpoint) error {
	var minTimestamp int64
	if cp != nil {
		minTimestamp = cp.MinTimestamp()
	}
	_, err := cl.recoverAt(normal, minTimestamp)
	return err
}

// RecoverStartOffset returns the start of the file the last Recover walked
// from (the oldest file it validated).
func (cl *CommitLog) RecoverStartOffset() int64 { return cl.recoverStart.Load() }

func (cl *CommitLog) recoverAt(normal bool, minTimestamp int64) (int64, error) {
	files := cl.mfq.Files()
	if len(files) == 0 {
		cl.mfq.SetFlushedWhere(0)
		cl.recoverStart.Store(0)
		cl.log.Info("commitlog recovery: no files")
		return 0, nil
	}
	start := 0
	if normal {
		start = max(0, len(files)-recoverFromLastFiles)
	} else if minTimestamp > 0 {
		for i := len(files) - 1; i >= 0; i-- {
			if firstRecordStoredBefore(files[i], minTimestamp) {
				start = i
				break
			}
		}
	}
	cl.recoverStart.Store(files[start].FileFromOffset())
	fileSize := cl.mfq.FileSize()
	checkCRC := cl.cfg.CheckCRCOnRecover
	idx, pos := start, 0
	var lastTs int64
	var reason string
	for {
		mf := files[idx]
		buf := mf.Buffer()
		if pos+message.BlankRecordLength > fileSize {
			reason = "file ends without a blank marker"
			break
		}
		if binary.BigEndian.Uint64(buf[pos:]) == 0 {
			reason = endOfData
			break
		}
		r, err := message.ParseRecord(buf[pos:])
		if errors.Is(err, message.ErrBlankRecord) {
			if idx+1 >= len(files) {
				reason = blankInLastFile
				break
			}
			idx, pos = idx+1, 0
			continue
		}
		if err == nil && r.Size()+message.BlankRecordLength > fileSize-pos {
			err = fmt.Errorf("record of %d bytes leaves no room for the blank marker", r.Size())
		}
		if err == nil && r.PhysicalOffset() != mf.FileFromOffset()+int64(pos) {
			err = fmt.Errorf("physical offset field %d differs from its position", r.PhysicalOffset())
		}
		if err == nil && checkCRC {
			err = r.VerifyCRC()
		}
		if err != nil {
			reason = err.Error()
			break
		}
		pos += r.Size()
		lastTs = r.StoreTimestamp()
	}
	stopFile := files[idx]
	processOffset := stopFile.FileFromOffset() + int64(pos)
	fields := logrus.Fields{
		"file":      stopFile.Path(),
		"offset":    processOffset,
		"filePos":   pos,
		"reason":    reason,
		"normal":    normal,
		"fromFile":  files[start].Path(),
		"dropFiles": len(files) - 1 - idx,
	}
	// Stopping at never-written bytes (or at a blank marker with no next file)
	// with only empty files after it is an ordinary end of the log, such as a
	// next file preallocated just before the stop.
	clean := reason == endOfData || reason == blankInLastFile
	for _, mf := range files[idx+1:] {
		clean = clean && binary.BigEndian.Uint64(mf.Buffer()) == 0
	}
	if clean {
		cl.log.WithFields(fields).Info("commitlog recovered")
	} else {
		cl.log.WithFields(fields).Warn("commitlog recovery truncates the log at the last good record")
	}
	if clean {
		// Empty files after the end were preallocated ahead of the writer.
		for _, mf := range files[idx+1:] {
			cl.log.WithField("file", mf.Path()).Info("removing an unused preallocated commitlog file")
		}
		for range files[idx+1:] {
			if err := cl.mfq.DeleteLastMappedFile(); err != nil {
				return processOffset, err
			}
		}
	}
	if err := cl.mfq.TruncateDirtyFiles(processOffset); err != nil {
		return processOffset, fmt.Errorf("store: truncate commitlog at %d: %w", processOffset, err)
	}
	if !normal || !clean {
		if err := zeroTail(stopFile, pos, false); err != nil {
			return processOffset, err
		}
	}
	cl.lastStoreTimestamp.Store(lastTs)
	cl.mfq.SetStoreTimestamp(lastTs)
	return processOffset, nil
}

// firstRecordStoredBefore is isMappedFileMatchedRecover: the file's first
// record has the v1 magic, a store time, and was stored at or before ts.
func firstRecordStoredBefore(mf *MappedFile, ts int64) bool {
	b := mf.Buffer()
	if len(b) < message.MinRecordLength+12 {
		return false
	}
	if int32(binary.BigEndian.Uint32(b[message.PosMagicCode:])) != message.MagicCodeV1 {
		return false
	}
	sysFlag := int32(binary.BigEndian.Uint32(b[message.PosSysFlag:]))
	st := int64(binary.BigEndian.Uint64(b[message.StoreTimestampPos(sysFlag):]))
	return st != 0 && st <= ts
}

// zeroTail clears every non-zero page of mf from pos to the end of the file
// and syncs them. Only pages holding garbage are written, so a clean tail
// costs a read. With untilCleanPage it stops at the first whole page of
// zeros instead: for files written front to back without zero-filled
// units (consume queues), nothing old lies beyond one, and a queue's
// recovery then reads a page or two rather than the rest of the file.
func zeroTail(mf *MappedFile, pos int, untilCleanPage bool) error {
	b := mf.Buffer()
	var zero [osPageSize]byte
	dirtyFrom, dirtyTo := -1, -1
	for p := pos; p < len(b); {
		end := min((p/osPageSize+1)*osPageSize, len(b))
		if !bytes.Equal(b[p:end], zero[:end-p]) {
			clear(b[p:end])
			if dirtyFrom < 0 {
				dirtyFrom = p
			}
			dirtyTo = end
		} else if untilCleanPage && end-p == osPageSize {
			break
		}
		p = end
	}
	if dirtyFrom < 0 {
		return nil
	}
	from := dirtyFrom &^ (osPageSize - 1)
	if err := unix.Msync(b[from:dirtyTo], unix.MS_SYNC); err != nil {
		return fmt.Errorf("store: sync zeroed tail of %s [%d,%d): %w", mf.Path(), dirtyFrom, dirtyTo, err)
	}
	return nil
}
