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
// marker moves to the next file. After a crash, records stored after the
// checkpoint's flush times (the tail no flush may have covered) must not
// hold zeros in their topic or properties (checkTorn). With
// EnabledAppendPropCRC, a record's __CRC32# property is checked too, in
// place of the body CRC it covers (see checkRecordCRC).
//
// A bad record is damage, not the end, when intact records follow it: the
// walk looks for the next record boundary (see resyncIn) and goes on from
// there, remembering the skipped bytes as a lost range (LostRanges) and
// logging it. The damaged bytes stay as they are, so every later recovery
// that walks them finds and skips the same range. Never-written zeros are
// taken for the end of the log unless something shows the log goes on
// (a later file holds data, or a consume queue has an entry beyond them,
// see RecoverWithQueueEnd): only then are they searched past, since the
// search reads the rest of the file.
//
// When nothing valid follows, the log ends at the first bad record (a torn
// tail): later files are deleted, the write and flush positions are set
// there and, unless the stop was at never-written zeros after a clean
// shutdown, the rest of that file is zeroed and synced, so stale records
// behind the cut can never be taken for new ones later. One log line names
// the file, offset and reason.
func (cl *CommitLog) Recover(normal bool, cp *StoreCheckpoint) error {
	return cl.RecoverWithQueueEnd(normal, cp, -1)
}

// RecoverWithQueueEnd is Recover told queueEnd, the highest commitlog end
// any consume-queue entry claims (-1 if unknown): zeros the walk meets
// below it are damage to search past, not the end of the log.
func (cl *CommitLog) RecoverWithQueueEnd(normal bool, cp *StoreCheckpoint, queueEnd int64) error {
	var minTimestamp int64
	if cp != nil {
		minTimestamp = cp.MinTimestamp()
	}
	_, err := cl.recoverAt(normal, minTimestamp, queueEnd)
	return err
}

// RecoverStartOffset returns the start of the file the last Recover walked
// from (the oldest file it validated).
func (cl *CommitLog) RecoverStartOffset() int64 { return cl.recoverStart.Load() }

func (cl *CommitLog) recoverAt(normal bool, minTimestamp, queueEnd int64) (int64, error) {
	cl.setLostRanges(nil)
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
	var lost []LostRange
	crcRun := false // the last record accepted carries a __CRC32# property
	for {
		mf := files[idx]
		buf := mf.Buffer()
		var err error
		zeros := false
		if pos+message.BlankRecordLength > fileSize {
			err = errors.New("file ends without a blank marker")
		} else if binary.BigEndian.Uint64(buf[pos:]) == 0 {
			if !laterData(files, idx, mf.FileFromOffset()+int64(pos), queueEnd) {
				reason = endOfData
				break
			}
			zeros, err = true, errors.New("zeros in the middle of the log")
		}
		var r message.Record
		if err == nil {
			r, err = message.ParseRecord(buf[pos:])
		}
		if errors.Is(err, message.ErrBlankRecord) {
			err = nil
			if rest := binary.BigEndian.Uint32(buf[pos:]); int(rest) != fileSize-pos {
				err = fmt.Errorf("blank marker of %d bytes %d bytes before the end of the file", rest, fileSize-pos)
			} else if idx+1 >= len(files) {
				reason = blankInLastFile
				break
			} else {
				idx, pos = idx+1, 0
				continue
			}
		}
		if err == nil && r.Size()+message.BlankRecordLength > fileSize-pos {
			err = fmt.Errorf("record of %d bytes leaves no room for the blank marker", r.Size())
		}
		if err == nil && r.PhysicalOffset() != mf.FileFromOffset()+int64(pos) {
			err = fmt.Errorf("physical offset field %d differs from its position", r.PhysicalOffset())
		}
		unflushed := err == nil && !normal && r.StoreTimestamp() >= minTimestamp
		if err == nil {
			next := mf.FileFromOffset() + int64(pos+r.Size())
			err = cl.checkRecordCRC(&r, checkCRC, unflushed, crcRun, buf[pos+r.Size():], next)
		}
		if err == nil && unflushed {
			err = checkTorn(r)
		}
		if err == nil {
			pos += r.Size()
			lastTs = r.StoreTimestamp()
			crcRun = r.HasPropCRC()
			continue
		}
		reason = err.Error()
		nidx, npos, ok := resync(files, idx, pos)
		if !ok {
			if zeros {
				reason = endOfData // nothing follows the zeros after all
			}
			break // a torn tail: the log ends here
		}
		lr := LostRange{From: mf.FileFromOffset() + int64(pos), To: files[nidx].FileFromOffset() + int64(npos)}
		lost = append(lost, lr)
		cl.log.WithFields(logrus.Fields{
			"file": mf.Path(), "from": lr.From, "to": lr.To, "lostBytes": lr.To - lr.From,
			"reason": reason, "resumeFile": files[nidx].Path(),
		}).Error("commitlog recovery: damaged records lost, the intact records after them are kept")
		idx, pos = nidx, npos
	}
	stopFile := files[idx]
	processOffset := stopFile.FileFromOffset() + int64(pos)
	fields := logrus.Fields{
		"file":       stopFile.Path(),
		"offset":     processOffset,
		"filePos":    pos,
		"reason":     reason,
		"normal":     normal,
		"fromFile":   files[start].Path(),
		"dropFiles":  len(files) - 1 - idx,
		"lostRanges": len(lost),
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
	cl.setLostRanges(lost)
	cl.lastStoreTimestamp.Store(lastTs)
	cl.mfq.SetStoreTimestamp(lastTs)
	return processOffset, nil
}

// laterData reports whether the log goes on after never-written zeros at
// global offset off of files[idx]: a later file holds data, or a consume
// queue claims a record ending beyond off.
func laterData(files []*MappedFile, idx int, off, queueEnd int64) bool {
	if queueEnd > off {
		return true
	}
	for _, mf := range files[idx+1:] {
		if binary.BigEndian.Uint64(mf.Buffer()) != 0 {
			return true
		}
	}
	return false
}

// resync finds the first record boundary after the bad record at pos of
// files[idx], in that file or a later one (see resyncIn).
func resync(files []*MappedFile, idx, pos int) (nidx, npos int, ok bool) {
	for i := idx; i < len(files); i++ {
		from := 0
		if i == idx {
			from = pos + 1
		}
		b := files[i].Buffer()
		if p := resyncIn(b, files[i].FileFromOffset(), from, len(b)); p >= 0 {
			return i, p, true
		}
	}
	return 0, 0, false
}

// The sync markers resyncIn looks for: the magic code of a record (V1
// 0xDAA320A7 and V2 0xDAA320AB share three bytes) and of the blank
// end-of-file marker, 4 bytes into what they mark.
var (
	recordMagicPrefix = []byte{0xDA, 0xA3, 0x20}
	blankMagicBytes   = []byte{0xCB, 0xD4, 0x31, 0x94}
)

// resyncIn returns the first position p >= from in b at which the commitlog
// can be trusted again, or -1. b holds bytes of one commitlog file starting
// at global offset base, and fileRest bytes remain in the file from b[0].
//
// p is either a blank end-of-file marker whose TOTALSIZE is exactly the
// rest of the file, or a record that checks out completely (see
// intactRecordAt: magic, a PHYSICALOFFSET field equal to its own position,
// sizes, body CRC whatever CheckCRCOnRecover says) and is followed by what
// a log holds after a record: another record with a matching PHYSICALOFFSET
// field and sizes, a blank marker of the right size, never-written zeros, or
// the end of b. The magic and the 8-byte offset field together make a false
// match in damaged or random bytes practically impossible; the markers are
// found with bytes.Index, so a search costs a read of the bytes searched.
func resyncIn(b []byte, base int64, from, fileRest int) int {
	nextRecord := func(p int) int { // first q >= p with a record magic at q+4
		for p+8 <= len(b) {
			i := bytes.Index(b[p+4:], recordMagicPrefix)
			if i < 0 || p+i+8 > len(b) {
				return -1
			}
			q := p + i
			if m := b[q+7]; m == 0xA7 || m == 0xAB {
				return q
			}
			p = q + 1
		}
		return -1
	}
	nextBlank := func(p int) int { // first q >= p with the blank magic at q+4
		if p+8 > len(b) {
			return -1
		}
		if i := bytes.Index(b[p+4:], blankMagicBytes); i >= 0 {
			return p + i
		}
		return -1
	}
	rec, blank := nextRecord(from), nextBlank(from)
	for rec >= 0 || blank >= 0 {
		if blank >= 0 && (rec < 0 || blank < rec) {
			if int(binary.BigEndian.Uint32(b[blank:])) == fileRest-blank {
				return blank
			}
			blank = nextBlank(blank + 1)
			continue
		}
		if n := intactRecordAt(b, base, rec, fileRest, true); n > 0 && followsRecord(b, base, rec+n, fileRest) {
			return rec
		}
		rec = nextRecord(rec + 1)
	}
	return -1
}

// intactRecordAt returns the size of the record at b[p:] if it has a record
// magic, its PHYSICALOFFSET field says base+p, its sizes agree, it leaves
// room for the blank marker before the end of the file and, when checkCRC,
// its body CRC matches; 0 otherwise.
func intactRecordAt(b []byte, base int64, p, fileRest int, checkCRC bool) int {
	if p < 0 || p+message.PosPhysicalOffset+8 > len(b) ||
		int64(binary.BigEndian.Uint64(b[p+message.PosPhysicalOffset:])) != base+int64(p) {
		return 0
	}
	r, err := message.ParseRecord(b[p:])
	if err != nil || r.Size()+message.BlankRecordLength > fileRest-p {
		return 0
	}
	if checkCRC && r.VerifyCRC() != nil {
		return 0
	}
	return r.Size()
}

// followsRecord reports whether b[q:] holds what may follow a record: the
// end of b, never-written zeros, a blank marker filling the file, or a
// record that parses at its own position (its CRC is the walk's business).
func followsRecord(b []byte, base int64, q, fileRest int) bool {
	if q+message.BlankRecordLength > len(b) {
		return true
	}
	head := b[q : q+message.BlankRecordLength]
	if binary.BigEndian.Uint64(head) == 0 {
		return true
	}
	if bytes.Equal(head[4:], blankMagicBytes) {
		return int(binary.BigEndian.Uint32(head)) == fileRest-q
	}
	return intactRecordAt(b, base, q, fileRest, false) > 0
}

// errNoPropCRC is the reason recovery rejects a record without a __CRC32#
// property among records that have one.
var errNoPropCRC = errors.New("no __CRC32# property between records that carry one, in the unflushed tail")

// checkRecordCRC applies the walk's checksums to r. Without
// EnabledAppendPropCRC that is the body CRC, with checkCRC
// (CheckCRCOnRecover).
//
// With it, a record whose properties end with a __CRC32# entry has that
// checked instead (it covers the body and its CRC field) wherever the
// walk checks CRCs, and always in the possibly unflushed tail after a
// crash (unflushed), where a power cut leaves records whose sectors are
// partly lost or garbled: this catches properties that are garbled rather
// than zeroed (checkTorn) and torn header fields. RocketMQ 5 checks it
// under checkCRCOnRecover with forceVerifyPropCRC; the option here is the
// one that writes it: records this store writes end with the entry only
// when it is their own (without the option, message.EncodeRecord drops
// one that a client's properties end with).
//
// Damage there can also take the entry itself, so in the unflushed tail a
// record without one is damage when the record before it (crcRun) has one
// and the one after it has one too or is not an intact record: a store
// writes the entry into every record or none, so records without it
// follow records with it only where the option was turned off at a
// restart, and then the next record lacks it too. What this misjudges is
// a run that stored a single record with the option off between runs with
// it on (or at the end of the log), found in the unflushed tail of a crash
// recovered with the option on: that record is taken for damage. Change
// the option only across a clean shutdown.
// next is what follows r in its file, at commitlog offset nextOff.
func (cl *CommitLog) checkRecordCRC(r *message.Record, checkCRC, unflushed, crcRun bool, next []byte, nextOff int64) error {
	if cl.cfg.EnabledAppendPropCRC {
		if r.HasPropCRC() {
			if checkCRC || unflushed {
				return r.VerifyPropCRC()
			}
			return nil
		}
		if unflushed && crcRun && !intactWithoutPropCRC(next, nextOff) {
			return errNoPropCRC
		}
	}
	if checkCRC {
		return r.VerifyCRC()
	}
	return nil
}

// intactWithoutPropCRC reports whether b starts with a record that parses
// at commitlog offset off and has no __CRC32# property.
func intactWithoutPropCRC(b []byte, off int64) bool {
	r, err := message.ParseRecord(b)
	return err == nil && r.PhysicalOffset() == off && !r.HasPropCRC()
}

// errTornRecord is the reason recovery rejects a record whose topic or
// properties hold zero bytes.
var errTornRecord = errors.New("zero bytes in the topic or properties: a torn write")

// checkTorn rejects a record that a power cut tore: disk sectors that were
// not written back read as zeros (the files are preallocated), and the body
// CRC covers neither the topic nor the properties, so a record can pass every
// other check with a sector of its properties gone (UNIQ_KEY cut, a value
// ending in NULs). No record is written with a zero byte there: topic names
// are checked, and properties holding one are refused (ErrPropertiesNUL).
// Recovery applies it only where a torn write is possible: after a crash, to
// records stored after the checkpoint's last known flush.
func checkTorn(r message.Record) error {
	if bytes.IndexByte(r.Topic(), 0) >= 0 || bytes.IndexByte(r.Properties(), 0) >= 0 {
		return errTornRecord
	}
	return nil
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
	return zeroRange(mf, pos, len(mf.Buffer()), untilCleanPage)
}

// zeroRange is zeroTail for bytes [from, to) of mf.
func zeroRange(mf *MappedFile, from, to int, untilCleanPage bool) error {
	b := mf.Buffer()
	var zero [osPageSize]byte
	dirtyFrom, dirtyTo := -1, -1
	for p := from; p < to; {
		end := min((p/osPageSize+1)*osPageSize, to)
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
	start := dirtyFrom &^ (osPageSize - 1)
	if err := unix.Msync(b[start:dirtyTo], unix.MS_SYNC); err != nil {
		return fmt.Errorf("store: sync zeroed bytes of %s [%d,%d): %w", mf.Path(), dirtyFrom, dirtyTo, err)
	}
	return nil
}
