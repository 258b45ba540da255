// Package store is the broker's message store, in Apache RocketMQ 4.x's
// on-disk format byte for byte, so a pull response is a slice of the
// commitlog and a RocketMQ operator recognises every file.
//
// # Layout
//
// Under Config.StorePathRootDir:
//
//	commitlog/00000000000000000000     every message, appended; files of
//	commitlog/00000000001073741824     MappedFileSizeCommitLog bytes named
//	                                   by the 20-digit offset of byte 0
//	consumequeue/<topic>/<queueId>/00000000000000000000
//	                                   one consume queue per topic-queue,
//	                                   files of 300,000 20-byte entries
//	                                   named by the byte offset of entry 0
//	consumequeue/<topic>/.deleted      commitlog end when the topic was
//	                                   deleted (not in RocketMQ)
//	consumequeue_filter/<topic>/<queueId>/00000000000000000000
//	                                   filter bitmaps (FilterBitmapBits > 0,
//	                                   not in RocketMQ, which uses
//	                                   consumequeue_ext): one unit per
//	                                   consume-queue entry, see filterbitmap.go
//	index/20261129101530123            key index files named by creation
//	                                   time (yyyyMMddHHmmssSSS)
//	checkpoint                         flush times (one 4 KiB page)
//	abort                              present while running: its presence
//	                                   at Open means the last exit crashed
//	lock                               flock'ed by the running store
//
// All integers are big-endian. Every mapped file is preallocated to its
// full size (commitlog and consume-queue files with zeros; index and
// filter-bitmap files sparse), so a file's length never says how much of it is written.
//
// # Commitlog record
//
//	 0   TOTALSIZE        int32   whole record, this field included
//	 4   MAGICCODE        int32   0xDAA320A7 (blank end-of-file: 0xCBD43194)
//	 8   BODYCRC          int32   crc32(body) & 0x7FFFFFFF
//	12   QUEUEID          int32
//	16   FLAG             int32
//	20   QUEUEOFFSET      int64   consume-queue offset (entry number)
//	28   PHYSICALOFFSET   int64   this record's commitlog offset
//	36   SYSFLAG          int32
//	40   BORNTIMESTAMP    int64
//	48   BORNHOST         8|20    ip(4|16) + port(4)
//	 .   STORETIMESTAMP   int64
//	 .   STOREHOST        8|20
//	 .   RECONSUMETIMES   int32
//	 .   PREPARED TX OFF  int64
//	 .   BODY             int32 length + bytes
//	 .   TOPIC            int8 length + bytes
//	 .   PROPERTIES       int16 length + name\x01value\x02...
//
// With EnabledAppendPropCRC (RocketMQ 5's enabledAppendPropCRC) the
// properties end with one more entry, always 20 bytes and always last:
// "__CRC32#" 0x01, ten ASCII digits, 0x02 (after a 0x02 when the properties
// before do not end with one). The digits are crc32(the record's first
// TOTALSIZE-20 bytes) & 0x7FFFFFFF, least significant first, taken after
// the commitlog patched QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP
// (message.EncodeRecordWithCRC, PutPropCRC).
//
// A record never spans two files: when it does not fit with 8 bytes to
// spare, an 8-byte blank record (TOTALSIZE = rest of file, MAGICCODE =
// 0xCBD43194) closes the file and the record starts the next one.
//
// # Consume-queue entry (20 bytes)
//
//	+------------------+-----------+------------------+
//	| commitlog offset | size      | tags code        |
//	| int64            | int32     | int64            |
//	+------------------+-----------+------------------+
//	 0                  8           12                20
//
// Entry n of a queue is the message with queue offset n, at byte n*20 of
// the queue. An entry is valid iff offset >= 0 && size > 0 (zeroed space is
// not). The tags code is Java's String.hashCode of the TAGS property (0
// without tags). A queue whose first file starts at a non-zero offset is
// padded with blank entries (0, MaxInt32, 0) before its first entry; blank
// entries also stand for messages lost to damage (see Recovery). Reads skip
// them.
//
// # Index file
//
//	+--------------------------- header, 40 bytes ---------------------------+
//	| beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8  |
//	| hashSlotCount 4  | indexCount 4 (starts at 1: entry 0 is never used)  |
//	+------------------------------------------------------------------------+
//	| MaxHashSlotNum slots x 4 bytes: newest entry number of the bucket     |
//	+------------------------------------------------------------------------+
//	| MaxIndexNum entries x 20 bytes:                                        |
//	|   keyHash int32 | phyOffset int64 | timeDiff int32 (s) | prevIndex 4 |
//	+------------------------------------------------------------------------+
//
// Keys are "topic#key" for each space-separated KEYS value and
// "topic#UNIQ_KEY"; keyHash = abs(String.hashCode) (0 if MinInt32); bucket
// = keyHash % slots; prevIndex chains entries of one bucket (0 ends it);
// timeDiff is seconds since beginTimestamp. A full file starts a new one.
//
// # Write, dispatch, read
//
// CommitLog appends under one lock and hands durability to its flush
// service (ASYNC_FLUSH interval flush, or SYNC_FLUSH group commit).
// Dispatch writes consume-queue and index entries (not for PREPARED or
// ROLLBACK transaction records), in commitlog order, then tells the
// ArrivingListener, so held pulls wake. It is combining: the appender
// dispatches its own record, and those of appenders that found the dispatch
// lock taken, right after its append; a dispatch loop is the fallback
// (recovery catch-up, retried consume-queue writes, a long backlog).
// GetMessage walks consume-queue entries, filters tags codes, and returns
// held slices of the commitlog files: no copy. A file being deleted stays
// mapped until its last reader releases it.
//
// # Recovery
//
// Open finds the abort file to tell a clean exit from a crash. The
// commitlog is recovered first, as the source of truth (see
// recovery_commitlog.go): the walk checks each record's magic, sizes,
// physical offset field and CRC. A bad record followed by intact ones is
// damage: the walk resumes at the next record boundary, and the skipped
// bytes become a lost range, logged with the queue offsets of the messages
// it held. Only a bad record with nothing valid after it (a torn tail) ends
// the log, which is cut and zeroed there. Never-written zeros end the log
// unless a later file holds data or a consume queue claims more.
//
// Consume queues are then recovered to their last valid entry, every entry
// recovery scans (the last three files of a queue) checked against the
// record it points at: size, order, offset range, and the record's magic,
// TOTALSIZE, PHYSICALOFFSET, QUEUEID, QUEUEOFFSET, topic and tags code. At
// the first entry that does not match, the queue is cut (and zeroed) there
// and dispatched again from the end of the previous entry's message, so the
// rebuilt entries get their original queue offsets. Entries of messages in
// lost ranges become blank entries: reads skip them, and later messages keep
// their offsets. Dispatch starts from the newest consume-queue entry, or
// earlier when:
//
//   - a queue was cut at a damaged entry: from where its rebuild starts;
//   - the commitlog files recovery walked hold a record without its queue
//     entry (a queue lost its tail or its directory: if its older entries are
//     gone too, everything is dispatched again from the commitlog start);
//   - the last exit crashed: from the newest commitlog file stored before the
//     checkpoint's flush times;
//   - index files were dropped (corrupt header, or newer than the checkpoint
//     after a crash): from where they began.
//
// The checkpoint is trusted only as a whole page of store times: a missing,
// empty or short file, or a time that is negative or more than a day past
// the store's clock, is warned about and rewritten as zeros (OpenCheckpoint),
// so after a crash the whole commitlog is walked and every index file
// rebuilt; it never stops the store.
//
// Entries are idempotent, so dispatching again only fills gaps. Dispatch
// skips lost ranges, and damage recovery did not walk (older files) from
// the bad record to the next record boundary; a gap it then sees in a
// queue's offsets is filled with blank entries, one per lost message.
// Reads of a record by offset (by key, by message id) check it: a record
// in a lost range, at an offset its PHYSICALOFFSET field does not name, or
// with a bad body CRC is not returned. Open returns once dispatch has
// caught up, and the topic-queue offset table is then taken from the
// queues' max offsets. Deleting the whole consumequeue directory rebuilds
// every queue. DeleteTopic leaves a .deleted marker with the commitlog end
// in the topic's directory, so older records of the topic never get queue
// entries again.
//
// The properties of a record carry no checksum in this format: damage
// there that still parses goes unnoticed, except that a consume-queue entry
// whose tags code no longer matches is rebuilt from the record, and that
// after a crash zeros in the unflushed tail's properties are taken for a
// torn write. EnabledAppendPropCRC closes that gap: recovery then checks
// the __CRC32# entry of each record it walks that carries one (with
// CheckCRCOnRecover; in the unflushed tail after a crash always), and there
// takes a record without it among records with it for damage too
// (CommitLog.checkRecordCRC). Change it only across a clean shutdown.
//
// # Retention
//
// The clean loop deletes commitlog files older than FileReservedTime at
// the DeleteWhen hours, or as soon as disk usage passes
// DiskMaxUsedSpaceRatio; above DiskForceCleanRatio regardless of age; above
// DiskWarningRatio it also refuses writes (ServiceNotAvailable, ErrDiskFull)
// until usage is back under DiskForceCleanRatio. Consume-queue and index
// files whose messages are gone follow, and queue min offsets advance.
package store
