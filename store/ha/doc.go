// Package ha replicates a master broker's commitlog to its slaves over
// RocketMQ 4.x's HA protocol (store/ha in RocketMQ: HAService, HAConnection,
// GroupTransferService), byte for byte, so a RocketMQ slave can follow a
// Master of this package and a Slave of this package a RocketMQ master.
//
// A Master listens on the HA port (the broker's listenPort+1, advertised
// as brokerIP2:port) and pushes its commitlog, read straight from the
// mapped files, to every connected slave. A Slave connects to its master's
// HA address, appends what it receives to its own store at the same
// offsets (the files become identical) and reports how far it got; the
// master's WaitReplicated answers SYNC_MASTER sends from those reports.
//
// # Wire protocol (RocketMQ 4.x)
//
// Plain TCP, big-endian, no RemotingCommand framing.
//
// Slave to master, on connect, every haSendHeartbeatInterval and after the
// slave applied data: its commitlog max offset.
//
//	+-----------------+
//	| maxOffset int64 |   8 bytes
//	+-----------------+
//
// The master takes the last complete 8-byte group of what it read. The
// first report is where the push starts (0: at the start of the master's
// newest commitlog file); every report is the slave's ack. A report beyond
// the master's max offset closes the connection.
//
// Master to slave: frames of commitlog bytes.
//
//	+-----------------+----------------+------------------------+
//	| phyOffset int64 | bodySize int32 | bodySize bytes of the  |
//	|                 |                | commitlog at phyOffset |
//	+-----------------+----------------+------------------------+
//	 0                 8                12
//
// A body is at most haTransferBatchSize (32 KiB) and never crosses a
// commitlog file; frames follow each other without gaps. It may cut a
// record anywhere. With nothing new for haSendHeartbeatInterval the master
// sends a heartbeat frame (nextOffset, 0). Either side drops a connection
// on which nothing arrived for haHousekeepingInterval.
//
// # Extensions (this package only)
//
// A Slave starts with a hello, in the same write as its first report:
//
//	+--------------+-------------+-----------------+-----------------+-----------------+
//	| magic uint32 | flags       | windowLen       | windowCRC       | maxOffset int64 |
//	| 0xFF484131   | uint32      | uint32          | uint32 (CRC-32C)|                 |
//	+--------------+-------------+-----------------+-----------------+-----------------+
//	 0              4             8                 12                16              24
//
// or, with flags bit 1 or bit 2, 32 bytes, or with both 40 (windowEnd, then
// replicaID, then maxOffset):
//
//	+--------------+-------------+-----------------+-----------------+-----------------+-----------------+
//	| magic uint32 | flags       | windowLen       | windowCRC       | windowEnd int64 | maxOffset int64 |
//	+--------------+-------------+-----------------+-----------------+-----------------+-----------------+
//	 0              4             8                 12                16                24              32
//
//	+--------------+-------------+-----------------+-----------------+-----------------+-----------------+
//	| magic uint32 | flags       | windowLen       | windowCRC       | replicaID int64 | maxOffset int64 |
//	+--------------+-------------+-----------------+-----------------+-----------------+-----------------+
//	 0              4             8                 12                16                24              32
//
// flags bit 2 (controller mode) says the slave's replica id (its brokerId)
// is there; the master counts acks per replica with it (SetAckSet).
// flags bit 0 asks for compressed frames. windowCRC fingerprints the
// windowLen (up to 4096) bytes just before windowEnd, within one file:
// windowEnd is maxOffset unless flags bit 1 is set, which a Slave does when
// maxOffset is at a file boundary: its window then ends at the blank
// end-of-file marker closing the file before (the filler after a marker is
// never copied, so it cannot be compared). Without it a slave that just
// took a marker, or whose recovery cut the first record of a new file,
// would have nothing to compare. A Slave starts its window after its own
// lost ranges, its damaged copy of those bytes; windowLen 0 means nothing
// to compare. maxOffset is always the
// last 8-byte group. A RocketMQ master takes that group, the offset, and
// never answers: the Slave sees an ordinary first frame and goes on with
// plain frames (a Slave set to compress refuses then). A Master answers
// with a frame at the negative offset 0xFF48414B00000000:
//
//	+--------------------+------------+---------------+--------------+-----------------+-------------------+
//	| 0xFF48414B00000000 | 24 (int32) | status uint32 | flags uint32 | masterMax int64 | startOffset int64 |
//	+--------------------+------------+---------------+--------------+-----------------+-------------------+
//	 0                    8            12              16             20                28                  36
//
// status: 0 ok (frames follow from startOffset; flags bit 0 grants
// compression), 1 the slave's offset is beyond masterMax, 2 the bytes
// before it differ from the master's, 3 compression asked while
// haTransferCompress is off at the master, 4 the master deleted the files
// the slave needs. For any status but 0 the master closes after the
// answer; a hello whose window cannot be (longer than 4096 bytes, across a
// file, windowEnd beyond maxOffset or outside the file before a boundary)
// is closed without one. The master does not compare a window that
// overlaps one of its own lost ranges: damage on the master is not
// divergence, and a slave that copied those bytes before the damage holds
// them intact. A RocketMQ slave never sends a hello; when it reports beyond the
// master's max, the master sends a heartbeat frame at its max before it
// closes, which a RocketMQ slave takes as an offset mismatch
// (HAClient.dispatchReadRequest: "master pushed offset not equal the max
// phy offset in slave") and closes on, so it learns nothing false.
//
// # Lost ranges
//
// A master's recovery (or dispatch) can leave a lost range in its
// commitlog: damaged records it skipped, their bytes left as they are
// (store.LostRange). The master's push ends a frame at a range's start.
// To a slave that sent a hello it then announces the range in a frame at
// the negative offset 0xFF48414C00000000:
//
//	+--------------------+------------+------------+----------+
//	| 0xFF48414C00000000 | 16 (int32) | from int64 | to int64 |
//	+--------------------+------------+------------+----------+
//	 0                    8            12           20         28
//
// (in a compressed session the header has the compressed layout with
// compressedSize 16, and the 16 bytes follow uncompressed). from is the
// slave's next offset (the push may start inside a range); the frames that
// follow carry the bytes up to to, damaged, ended there and at file ends,
// as ordinary frames. A Slave copies them as they are
// (store.Store.AppendReplicaLost) and records the range, so its files stay
// identical to the master's, its dispatch skips the range as the master's
// does, and its own recovery finds the same damage there. A RocketMQ slave
// never gets the announcement: it gets the bytes as a RocketMQ master
// would send them, copies them unchecked, and its recovery deals with them.
//
// # Compressed frames (haTransferCompress, off by default)
//
// For a slave in another data centre. Used only when the Slave asked in its
// hello and the Master granted it in its answer; from then on every frame,
// heartbeats included, has a 16-byte header:
//
//	+-----------------+----------------+--------------------+------------------------------+
//	| phyOffset int64 | bodySize int32 | compressedSize     | snappy block (golang/snappy) |
//	|                 | (uncompressed) | int32              | of the bodySize bytes        |
//	+-----------------+----------------+--------------------+------------------------------+
//	 0                 8                12                   16
//
// phyOffset and bodySize mean what they mean in a plain frame, so offsets
// are checked as before; the block must decode to exactly bodySize bytes
// (at most 16 MiB). A mismatch of the setting is an error with a log line
// naming haTransferCompress on the side that has it on: a Slave asking a
// Master that has it off is refused (status 3), and a Slave asking a
// RocketMQ master refuses it. A Master that has it on serves a slave that
// did not ask (this package's with it off, or a RocketMQ slave) plain
// frames, with a warning for a slave that sent no hello. Never
// negotiated, it is never sent: a RocketMQ peer cannot receive a
// compressed byte.
//
// Measured with BenchmarkCatchUp (1 GiB of 1 KiB JSON-like messages,
// loopback, a shared 2-core VM): plain frames caught up at 215-345 MB/s;
// compressed ones put 36% of the bytes on the wire but caught up at about
// 160 MB/s, as snappy's encoding on the master's push goroutine (about
// 430 MB/s of input per core) and decoding on the slave's apply add CPU.
// So compression pays only when the link carries less than about
// 160 MB/s (1.3 Gbit/s): over a 100 Mbit/s link between data centres it
// replicates about 2.7 times as fast; on a LAN it slows replication down.
//
// # What a Slave appends
//
// Only whole records continuing exactly at its own max offset (a new,
// empty store takes the master's first offset, at a file boundary: its
// commitlog then starts there). A record a frame cut is kept until the rest
// arrives, bounded by the largest record the slave's maxMessageSize allows;
// a header claiming more closes the connection. Each record is validated
// (magic, sizes, PHYSICALOFFSET equal to its position, body CRC); a blank
// end-of-file marker must fill the rest of its file, and the filler after
// it is not copied (never read, zero on both sides). The bytes of an
// announced lost range are the exception: copied unchecked (see Lost
// ranges). Anything else closes the connection with a log line naming the
// offsets; the slave keeps the whole records before it, reconnects with
// backoff and resumes from its own max offset, as it does after a restart
// or a kill -9 (the store's normal recovery finds that offset). The wait
// before a reconnect (haReconnectMinInterval) doubles up to
// haReconnectMaxInterval while sessions make no progress, and starts over
// only after a session that appended bytes or was caught up (a heartbeat
// frame at the slave's offset): a slave that fails to apply what it gets
// (a full disk, data it rejects) retries ever more slowly, not as a
// reconnect storm whose every session briefly counts as a connected slave
// at the master. Appended records are dispatched to the
// slave's consume queues and index by the store's dispatch loop, as the
// master's are, at the same queue offsets.
//
// # Divergence
//
// A slave whose commitlog holds data its master does not (a master that
// lost an unflushed tail and came back, or a slave pointed at another
// master) refuses to follow it: truncating the slave could delete the only
// copy of acknowledged messages. The Master detects it from the hello (the
// slave's offset beyond its max, or different bytes before it: that also
// catches a master that has since written past the slave's offset with
// other data) and answers status 1 or 2; the Slave logs both offsets, shows
// SlaveRefused and Diverged in Status, and retries with backoff (an
// operator moves its store aside, or cuts it at the master's offset, to
// follow this master). Following a RocketMQ master there is no hello
// answer: a frame below the slave's offset is taken as divergence too.
//
// # Sync double write
//
// Under SYNC_MASTER the broker calls st.SetReplicaWaiter(m.WaitReplicated)
// once; the store does the rest. For every put that waits (WAIT not
// "false"), the store's OnDurable (store/commitlog.go) starts the flush wait
// (under SYNC_FLUSH) and WaitReplicated(end of the put's records, done) at
// once, and answers the put once both are done: a failed flush wins
// (FLUSH_DISK_TIMEOUT), else the replica's status. done gets PutOK once a
// slave acked that offset, FlushSlaveTimeout after slaveTimeout, or
// SlaveNotAvailable at once when no slave is connected or the acks are
// haSlaveFallbehindMax or more behind (SlaveOK, RocketMQ's isSlaveOK on
// push2SlaveMaxOffset). All are stored sends (FLUSH_SLAVE_TIMEOUT = 12,
// SLAVE_NOT_AVAILABLE = 11). No goroutine or timer is spent per waiting
// send: waiters sit in a heap by offset and are answered in offset order by
// the goroutine that read the ack; one goroutine expires deadlines.
//
// # In-sync set (controller mode)
//
// Master.SetAckSet(ids) makes a send wait until every replica of ids (the
// in-sync set's slaves, by the ids of their hellos) acknowledged it, rather
// than any one slave: whichever in-sync replica a controller elects then
// holds every acknowledged message. A replica of the set with no connection
// answers sends SlaveNotAvailable at once; an empty set (the master alone
// in sync) releases them at once. Status shows each connection's replica id
// and when it last caught up (its ack reached the master's max offset as of
// a push), from which the broker shrinks and widens the set.
//
// # Wiring (for the broker)
//
//	master: m, err := ha.NewMaster(st, cfg, log)  // before the store takes puts
//	        err = m.Start(net.JoinHostPort(bindAddress, strconv.Itoa(listenPort+1)))
//	        ... m.WaitReplicated(end, done) / m.SlaveOK(end) / m.Status()
//	        m.Shutdown(ctx)                        // before st.Shutdown
//	slave:  sl, err := ha.NewSlave(st, cfg, log)
//	        sl.Start()
//	        sl.SetMasterAddress(haServerAddr)      // haMasterAddress if configured
//	                                               // (length >= 6), else each
//	                                               // REGISTER_BROKER answer's haServerAddr
//	        ... sl.Status()
//	        sl.Shutdown(ctx)                       // before st.Shutdown
//
// A slave's store must refuse sends (the broker's role check) and its
// maxMessageSize must be at least the master's. Master.Start installs the
// store's append listener (Store.SetAppendListener), which wakes waiting
// push goroutines; it leaves the store's own append hook (dispatch) alone.
package ha
