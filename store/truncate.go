package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/message"
)

// ErrTruncate means the commitlog cannot be cut where asked: the store
// takes puts, or the offset is no record boundary or below the oldest file.
var ErrTruncate = errors.New("store: cannot truncate the commitlog")

// TruncateTo cuts the commitlog at offset, a record boundary, while the
// store runs (RocketMQ 5's truncateFiles): a master that came back as a
// slave drops the tail its new master does not hold before following it.
// Everything built from the records beyond goes too: their consume-queue
// entries, the next queue offsets they advanced, lost ranges there and the
// index files holding them (rebuilt by dispatch from the kept records).
// The cut bytes are zeroed and synced, so no recovery brings them back.
//
// Only a slave's store can be cut (SetSlave(true): puts are refused), and
// the caller stops replication into it first. Offsets at or beyond
// MaxOffset change nothing. Readers holding records beyond offset keep
// them valid until they release them.
func (s *Store) TruncateTo(offset int64) error {
	if !s.IsSlave() {
		return fmt.Errorf("%w: the store takes puts (only a slave's store is cut)", ErrTruncate)
	}
	if s.shutdown.Load() {
		return ErrShutdown
	}
	cl := s.commitLog
	// Lock order: dispatch, then appends (appenders dispatch only after
	// releasing putMu, so none holds putMu waiting for the dispatch lock).
	s.reput.mu.Lock()
	defer s.reput.mu.Unlock()
	if s.reput.closed {
		return ErrShutdown
	}
	cl.putMu.Lock()
	defer cl.putMu.Unlock()
	maxOff, minOff := cl.MaxOffset(), cl.MinOffset()
	if offset >= maxOff {
		return nil
	}
	if offset < minOff {
		return fmt.Errorf("%w: offset %d is below the oldest commitlog file (%d)", ErrTruncate, offset, minOff)
	}
	if err := s.checkBoundary(offset); err != nil {
		return err
	}
	log := s.log.WithFields(logrus.Fields{"offset": offset, "commitlogMax": maxOff})
	log.Warn("truncating the commitlog tail")

	for _, cq := range s.consumeQueues() {
		if err := cq.TruncateDirty(offset); err != nil {
			return fmt.Errorf("store: truncate consume queue %s-%d: %w", cq.Topic(), cq.QueueID(), err)
		}
	}
	if err := cl.mfq.TruncateDirtyFiles(offset); err != nil {
		return fmt.Errorf("store: truncate commitlog at %d: %w", offset, err)
	}
	if mf := cl.mfq.FindMappedFileByOffset(offset, false); mf != nil {
		if err := zeroTail(mf, int(offset-mf.FileFromOffset()), false); err != nil {
			return err
		}
	}
	var kept []LostRange
	for _, r := range cl.LostRanges() {
		if r.From < offset {
			kept = append(kept, LostRange{From: r.From, To: min(r.To, offset)})
		}
	}
	cl.setLostRanges(kept)
	reputFrom := min(s.reput.reputFrom.Load(), offset)
	if s.index != nil {
		from, err := s.index.DropBeyond(offset)
		if err != nil {
			return err
		}
		if from >= 0 {
			reputFrom = min(reputFrom, from)
		}
	}
	s.reput.reputFrom.Store(reputFrom)
	// Dispatch what is kept before the queue offsets are read back from the
	// consume queues: a record below offset not dispatched yet would leave
	// its queue's next offset behind, and a later put would reuse it.
	if st := s.reput.reputLocked(&reputPass{}); st != reputCaughtUp {
		log.WithField("dispatchFrom", s.reput.reputFrom.Load()).Warn("dispatch did not catch up after the truncation; queue offsets come from what it built")
	}
	table := make(map[topicQueueKey]int64)
	for _, cq := range s.consumeQueues() {
		table[topicQueueKey{cq.Topic(), cq.QueueID()}] = cq.MaxOffsetInQueue()
	}
	cl.topicQueue = table
	log.WithField("dispatchFrom", s.reput.reputFrom.Load()).Warn("commitlog truncated")
	return nil
}

// checkBoundary verifies that a record, a blank end-of-file marker or a
// file starts at offset. Caller holds putMu.
func (s *Store) checkBoundary(offset int64) error {
	cl := s.commitLog
	mf := cl.mfq.FindMappedFileByOffset(offset, false)
	if mf == nil {
		return fmt.Errorf("%w: no commitlog file holds offset %d", ErrTruncate, offset)
	}
	if offset == mf.FileFromOffset() {
		return nil
	}
	res, ok := cl.GetData(offset)
	if !ok {
		return fmt.Errorf("%w: cannot read the commitlog at %d", ErrTruncate, offset)
	}
	defer res.Release()
	b := res.Bytes
	if len(b) >= message.BlankRecordLength && int32(binary.BigEndian.Uint32(b[message.PosMagicCode:])) == message.BlankMagicCode {
		return nil
	}
	if r, err := message.ParseRecord(b); err != nil || r.PhysicalOffset() != offset {
		return fmt.Errorf("%w: no record starts at offset %d", ErrTruncate, offset)
	}
	return nil
}
