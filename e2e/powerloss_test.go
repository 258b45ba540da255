package e2e

// Power-loss tests: after a kill -9 the test replaces the broker's store with
// what a machine that lost power at that moment could find on its disk, then
// starts the broker on it. A process kill alone cannot show that data was
// fsynced: the kernel's page cache outlives the process and the next start
// reads it back. The page cache is also the tests' witness of what no
// fsync covered (pagecache_test.go).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// sectorSize is the unit a disk writes atomically at worst: a write cut by
// a power failure leaves each sector old or new (torn tails).
const sectorSize = 512

// clImage is the commitlog as a stopped broker left it: each file's bytes
// by start offset. The simulation changes it and writes it back.
type clImage struct {
	fileSize int64
	paths    map[int64]string
	data     map[int64][]byte
	changed  map[int64]bool
}

func loadCommitlog(t *testing.T, c *binCluster) *clImage {
	t.Helper()
	im := &clImage{fileSize: c.commitlogFileSize(), paths: commitlogFiles(t, c), data: make(map[int64][]byte), changed: make(map[int64]bool)}
	for start, path := range im.paths {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Len(t, b, int(im.fileSize), "commitlog file %s", path)
		im.data[start] = b
	}
	return im
}

func (im *clImage) starts() []int64 {
	s := make([]int64, 0, len(im.data))
	for k := range im.data {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// fileOf returns the start of the file holding global offset off.
func (im *clImage) fileOf(off int64) int64 { return off - off%im.fileSize }

// record parses the record at global offset off; ok only when it parses and
// its physical offset field names off (what a recovery accepts, CRC aside).
func (im *clImage) record(off int64) (message.Record, bool) {
	b := im.data[im.fileOf(off)]
	if b == nil {
		return message.Record{}, false
	}
	r, err := message.ParseRecord(b[off%im.fileSize:])
	if err != nil || r.PhysicalOffset() != off {
		return message.Record{}, false
	}
	return r, true
}

// dataEnd walks the records from off, across blank end-of-file markers, and
// returns where they end.
func (im *clImage) dataEnd(off int64) int64 {
	for range 1 << 22 {
		b := im.data[im.fileOf(off)]
		pos := off % im.fileSize
		if b == nil || pos+8 > im.fileSize || binary.BigEndian.Uint64(b[pos:]) == 0 {
			return off
		}
		if _, err := message.ParseRecord(b[pos:]); errors.Is(err, message.ErrBlankRecord) {
			off = im.fileOf(off) + im.fileSize
			continue
		}
		r, ok := im.record(off)
		if !ok {
			return off
		}
		off += int64(r.Size())
	}
	return off
}

// firstRecordFrom returns the first record at or after the record boundary
// off and before to, across a blank end-of-file marker.
func (im *clImage) firstRecordFrom(off, to int64) (int64, bool) {
	if off >= to {
		return 0, false
	}
	if b := im.data[im.fileOf(off)]; b != nil && off%im.fileSize+8 <= im.fileSize {
		if _, err := message.ParseRecord(b[off%im.fileSize:]); errors.Is(err, message.ErrBlankRecord) {
			off = im.fileOf(off) + im.fileSize
		}
	}
	if _, ok := im.record(off); !ok || off >= to {
		return 0, false
	}
	return off, true
}

// span calls fn for each file piece of the global range [from, to) with
// the file's start and the piece's position in the file.
func (im *clImage) span(from, to int64, fn func(b []byte, start, pos int64)) {
	for from < to {
		start := im.fileOf(from)
		end := min(to, start+im.fileSize)
		if b := im.data[start]; b != nil {
			fn(b[from-start:end-start], start, from-start)
		}
		from = end
	}
}

// zero clears the global range [from, to).
func (im *clImage) zero(from, to int64) {
	im.span(from, to, func(b []byte, start, _ int64) {
		if !isZero(b) {
			clear(b)
			im.changed[start] = true
		}
	})
}

// zeroFrom clears everything from off to the end of the last file.
func (im *clImage) zeroFrom(off int64) {
	s := im.starts()
	if len(s) > 0 {
		im.zero(off, s[len(s)-1]+im.fileSize)
	}
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// save writes the changed files back.
func (im *clImage) save(t *testing.T) {
	t.Helper()
	for start := range im.changed {
		require.NoError(t, os.WriteFile(im.paths[start], im.data[start], 0o644))
	}
}

// ackedEnds returns, per commitlog file, the end of the newest acknowledged
// record in it, read from the page cache's bytes (an acknowledged record is
// intact there: the kill stopped no write of it), leaving out those an
// earlier round found lost.
func ackedEnds(t *testing.T, im *clImage, log *ackLog, gone map[string]bool) map[int64]int64 {
	t.Helper()
	newest := make(map[int64]int64)
	log.mu.Lock()
	for id, r := range log.acked {
		if gone[id] {
			continue
		}
		f := im.fileOf(r.CommitLogOffset)
		if cur, ok := newest[f]; !ok || r.CommitLogOffset > cur {
			newest[f] = r.CommitLogOffset
		}
	}
	log.mu.Unlock()
	ends := make(map[int64]int64, len(newest))
	for f, off := range newest {
		r, ok := im.record(off)
		require.True(t, ok, "acknowledged record at %d does not parse after the kill", off)
		ends[f] = off + int64(r.Size())
	}
	return ends
}

// tailMode is how the commitlog bytes after the durable end come back.
type tailMode int

const (
	// tailZero: none of them reached the disk.
	tailZero tailMode = iota
	// tailTorn: each 512-byte sector of the written tail holds its new
	// bytes or zeros, as a power cut during writeback leaves it.
	tailTorn
	// tailGarbled: the written tail reached the disk, but one random range
	// of it holds random bytes (a device that garbles a write it was
	// doing), and the UNIQ_KEY of the first record past the durable end,
	// if there is one, holds other printable bytes: damage that leaves the
	// record parsing, its body CRC right and no zeros behind.
	tailGarbled
	// tailUnflushed (ASYNC_FLUSH): everything written after the newest
	// record acknowledged a whole flushIntervalCommitLog before the power
	// failed is zeros: what a flush loop on time had synced at the latest.
	// (The page cache cannot tell: the warmer's read-ahead makes folios as
	// large as a file, and one write marks all of it dirty.)
	tailUnflushed
)

func (m tailMode) String() string {
	return [...]string{"zero", "torn", "garbled", "unflushed"}[m]
}

// cqMode is how the consume queues come back.
type cqMode int

const (
	// cqKeep: as the page cache held them (every write reached the disk).
	cqKeep cqMode = iota
	// cqCut: each queue keeps a random prefix at least as long as the
	// checkpoint vouches for, the rest is zeros.
	cqCut
	// cqDelete: each queue the checkpoint vouches nothing for is gone
	// (directory removed); the others are cut where the vouching ends.
	cqDelete
)

func (m cqMode) String() string { return [...]string{"keep", "cut", "delete"}[m] }

// indexMode is how the index files come back.
type indexMode int

const (
	indexKeep indexMode = iota
	// indexRevertNewer: each file newer than the checkpoint's index time
	// holds what the last graceful stop synced, zeros when it is younger.
	indexRevertNewer
	// indexDeleteNewer: the files newer than the checkpoint are gone.
	indexDeleteNewer
	// indexDeleteAll: every index file is gone (only with a zeroed
	// checkpoint, which vouches for none).
	indexDeleteAll
)

func (m indexMode) String() string {
	return [...]string{"keep", "revert-newer", "delete-newer", "delete-all"}[m]
}

// cpMode is which checkpoint the disk holds.
type cpMode int

const (
	// cpKeep: the last one written (the store fdatasyncs each write).
	cpKeep cpMode = iota
	// cpZero: none was ever written.
	cpZero
	// cpStale: the one before the last (the last write was lost).
	cpStale
)

func (m cpMode) String() string { return [...]string{"keep", "zero", "stale"}[m] }

// lossStep is one round of a power-loss test.
type lossStep struct {
	// graceful stops and starts the broker first: shutdown flushes
	// everything and writes the checkpoint, so the checkpoint then vouches
	// for every consume-queue entry before it.
	graceful bool
	// preKill kill -9s the broker at a commitlog file boundary and starts
	// it again first (before graceful): the start reads the killed
	// process's unflushed tail back from the page cache.
	preKill bool
	kill    killStep // when the power fails
	tail    tailMode
	cq      cqMode
	index   indexMode
	cp      cpMode
}

func (s lossStep) String() string {
	var b strings.Builder
	if s.preKill {
		b.WriteString("kill -9 at a file boundary, ")
	}
	if s.graceful {
		b.WriteString("graceful restart, ")
	}
	fmt.Fprintf(&b, "power loss at %v; commitlog tail %v, consume queues %v, index %v, checkpoint %v",
		s.kill, s.tail, s.cq, s.index, s.cp)
	return b.String()
}

// syncLossPlan is the SYNC_FLUSH schedule: every damage mode at least once,
// across fresh, gracefully restarted and killed-and-restarted brokers.
func syncLossPlan(rng *rand.Rand) []lossStep {
	acks := func() int64 { return 50 + rng.Int64N(700) }
	return []lossStep{
		{kill: killStep{kind: killAfterAcks, acks: 1200, senders: 8}, tail: tailZero, cq: cqCut, index: indexKeep, cp: cpKeep},
		{graceful: true, kill: killStep{kind: killAfterAcks, acks: acks(), senders: 8}, tail: tailTorn, cq: cqCut, index: indexRevertNewer, cp: cpKeep},
		{preKill: true, kill: killStep{kind: killAfterAcks, acks: acks(), senders: 8}, tail: tailGarbled, cq: cqDelete, index: indexDeleteNewer, cp: cpZero},
		{graceful: true, kill: killStep{kind: killAtBoundary, senders: 8}, tail: tailTorn, cq: cqCut, index: indexDeleteAll, cp: cpZero},
		{graceful: true, preKill: true, kill: killStep{kind: killInBurst, acks: 1 + rng.Int64N(30), senders: 16}, tail: tailGarbled, cq: cqCut, index: indexRevertNewer, cp: cpStale},
	}
}

// asyncLossPlan is the ASYNC_FLUSH schedule: the unflushed tail is lost.
func asyncLossPlan(rng *rand.Rand) []lossStep {
	// Sends are fast without the group commit: 1500-3000 SEND_OKs last
	// longer than a flush interval.
	acks := func() int64 { return 1500 + rng.Int64N(1500) }
	return []lossStep{
		{kill: killStep{kind: killAfterAcks, acks: 3000, senders: 8}, tail: tailUnflushed, cq: cqCut, index: indexKeep, cp: cpKeep},
		{graceful: true, kill: killStep{kind: killAfterAcks, acks: acks(), senders: 8}, tail: tailUnflushed, cq: cqCut, index: indexRevertNewer, cp: cpKeep},
		{preKill: true, kill: killStep{kind: killAfterAcks, acks: acks(), senders: 16}, tail: tailUnflushed, cq: cqDelete, index: indexDeleteNewer, cp: cpZero},
	}
}

// lossState is what the test knows is on the disk from earlier rounds.
type lossState struct {
	// floor is the commitlog end at the last graceful stop: shutdown
	// flushed everything below it.
	floor int64
	// checkpoints holds the checkpoint file after each graceful stop.
	checkpoints [][]byte
	// index holds each index file as the last graceful stop synced it.
	index map[string][]byte
}

// gracefulRestart stops the broker with SIGTERM (a clean shutdown flushes
// and syncs everything) and records what is then on the disk.
func (st *lossState) gracefulRestart(t *testing.T, c *binCluster, round int, pc bool) {
	t.Helper()
	c.stopBroker()
	require.Equal(t, 0, c.broker.exitCode(), "graceful stop exit code")
	if pc {
		requireStoreSynced(t, c, fmt.Sprintf("round %d graceful stop", round))
	}
	im := loadCommitlog(t, c)
	if s := im.starts(); len(s) > 0 {
		st.floor = im.dataEnd(s[0])
	}
	cp, err := os.ReadFile(filepath.Join(c.StoreDir, "checkpoint"))
	require.NoError(t, err)
	st.checkpoints = append(st.checkpoints, cp)
	st.index = make(map[string][]byte)
	for _, path := range indexFiles(t, c) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		st.index[filepath.Base(path)] = b
	}
	c.startBroker()
	assert.Contains(t, c.broker.lastRunLog(), "normal=true", "a cleanly stopped broker must recover normally")
}

func indexFiles(t *testing.T, c *binCluster) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(c.StoreDir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if len(e.Name()) == 17 && strings.Trim(e.Name(), "0123456789") == "" {
			out = append(out, filepath.Join(c.StoreDir, "index", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// powerLoss replaces the killed broker's store with what the disk could
// hold had the machine lost power at the kill, under the model of
// TestCrashPowerLossSyncFlush (or, for tailUnflushed, with the unflushed
// tail lost), syncs it and drops it from the page cache (a cold start). It
// returns what it did, for the log.
func powerLoss(t *testing.T, c *binCluster, st *lossState, step lossStep, log *ackLog, gone map[string]bool, killed time.Time, pc bool, rng *rand.Rand) string {
	t.Helper()
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }

	// Checkpoint first: it decides what the consume queues and index may lose.
	cpPath := filepath.Join(c.StoreDir, "checkpoint")
	cp, err := os.ReadFile(cpPath)
	require.NoError(t, err)
	switch step.cp {
	case cpZero:
		cp = make([]byte, len(cp))
	case cpStale:
		if n := len(st.checkpoints); n >= 2 {
			cp = slices.Clone(st.checkpoints[n-2])
		} else {
			cp = make([]byte, len(cp))
		}
	}
	require.GreaterOrEqual(t, len(cp), 24, "checkpoint file")
	require.NoError(t, os.WriteFile(cpPath, cp, 0o644))
	logicsTs, indexTs := int64(binary.BigEndian.Uint64(cp[8:])), int64(binary.BigEndian.Uint64(cp[16:]))
	note("checkpoint %v (physic %d, logics %d, index %d)", step.cp, binary.BigEndian.Uint64(cp[0:]), logicsTs, indexTs)

	im := loadCommitlog(t, c)
	starts := im.starts()
	require.NotEmpty(t, starts, "no commitlog")
	ends := ackedEnds(t, im, log, gone)
	durable := st.floor // acknowledged or flushed by a graceful stop
	for _, e := range ends {
		durable = max(durable, e)
	}
	// Walked from the durable end, not from the first file: a range an
	// earlier round's damage left lost stops a walk from the start, and
	// everything after it would be taken for the unwritten tail.
	written := im.dataEnd(max(durable, starts[0]))
	if step.tail == tailUnflushed {
		interval, err := time.ParseDuration(c.brokerConf["flushIntervalCommitLog"] + "ms")
		require.NoError(t, err, "flushIntervalCommitLog")
		durable = st.floor
		log.mu.Lock()
		for id, r := range log.acked {
			if gone[id] || log.ackedAt[id].After(killed.Add(-interval)) {
				continue
			}
			if rec, ok := im.record(r.CommitLogOffset); ok {
				durable = max(durable, r.CommitLogOffset+int64(rec.Size()))
			}
		}
		log.mu.Unlock()
	}
	note("commitlog written to %d, durable to %d", written, durable)

	// A file wholly below the durable end whose pages the kernel still
	// holds unsynced lost them: keep it only up to its newest acknowledged
	// record, synced before its acknowledgement (a graceful stop's claim
	// to have synced everything is what the unsynced pages disprove).
	if pc && durable > 0 {
		for _, s := range starts {
			if s >= im.fileOf(durable-1) {
				break
			}
			if u := unsyncedPages(t, im.paths[s], 0, im.fileSize); u > 0 {
				keep := max(s, ends[s])
				note("commitlog file %020d: %d pages unsynced below acknowledged records of later files, kept up to %d", s, u, keep)
				im.zero(keep, s+im.fileSize)
			}
		}
	}

	switch step.tail {
	case tailZero, tailUnflushed:
		im.zeroFrom(durable)
	case tailTorn:
		var kept, lost int
		im.span(durable, written, func(b []byte, start, pos int64) {
			for i := 0; i < len(b); {
				// Sectors are aligned in the file; the first piece may start inside one.
				n := min(sectorSize-int(pos+int64(i))%sectorSize, len(b)-i)
				if rng.IntN(2) == 0 {
					clear(b[i : i+n])
					lost++
				} else {
					kept++
				}
				i += n
			}
			im.changed[start] = true
		})
		im.zeroFrom(written)
		note("torn tail [%d,%d): %d sectors kept, %d zeroed", durable, written, kept, lost)
	case tailGarbled:
		if off, ok := im.firstRecordFrom(durable, written); ok {
			r, _ := im.record(off)
			key := []byte(message.PropUniqKey + "\x01")
			if i := bytes.Index(r.Properties(), key); i >= 0 && len(r.Properties()) >= i+len(key)+4 {
				at := off + int64(r.Size()-len(r.Properties())+i+len(key))
				b := im.data[im.fileOf(at)]
				copy(b[at%im.fileSize:], "#%!?")
				im.changed[im.fileOf(at)] = true
				note("garbled the UNIQ_KEY of the record at %d", off)
			}
		}
		if n := written - durable; n > 0 {
			from := durable + rng.Int64N(n)
			to := min(written, from+1+rng.Int64N(min(n, 2048)))
			im.span(from, to, func(b []byte, start, _ int64) {
				for i := range b {
					b[i] = byte(rng.UintN(256))
				}
				im.changed[start] = true
			})
			note("garbled [%d,%d) of the tail [%d,%d)", from, to, durable, written)
		}
		im.zeroFrom(written)
	}
	im.save(t)

	notes = append(notes, damageConsumeQueues(t, c, im, step.cq, logicsTs, rng)...)
	notes = append(notes, damageIndex(t, c, st, step.index, indexTs)...)
	coldStart(t, c.StoreDir)
	return strings.Join(notes, "; ")
}

// cqEntrySize is a consume-queue unit: commitlog offset (8), size (4),
// tags code (8).
const cqEntrySize = 20

// damageConsumeQueues applies mode to every consume queue. What the
// checkpoint vouches for is kept: the entries of records stored before its
// logics time, which the store flushed before writing that time.
func damageConsumeQueues(t *testing.T, c *binCluster, im *clImage, mode cqMode, logicsTs int64, rng *rand.Rand) []string {
	t.Helper()
	if mode == cqKeep {
		return []string{"consume queues kept"}
	}
	root := filepath.Join(c.StoreDir, "consumequeue")
	topics, err := os.ReadDir(root)
	require.NoError(t, err)
	var notes []string
	for _, tp := range topics {
		if !tp.IsDir() {
			continue
		}
		qs, err := os.ReadDir(filepath.Join(root, tp.Name()))
		require.NoError(t, err)
		for _, q := range qs {
			if !q.IsDir() {
				continue
			}
			dir := filepath.Join(root, tp.Name(), q.Name())
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			var files []string
			var data [][]byte
			for _, n := range names {
				if len(n.Name()) == 20 {
					b, err := os.ReadFile(filepath.Join(dir, n.Name()))
					require.NoError(t, err)
					files = append(files, filepath.Join(dir, n.Name()))
					data = append(data, b)
				}
			}
			all := bytes.Join(data, nil)
			valid, vouched := 0, 0
			vouching := logicsTs > 0
			for ; (valid+1)*cqEntrySize <= len(all); valid++ {
				e := all[valid*cqEntrySize:]
				off, size := int64(binary.BigEndian.Uint64(e)), int32(binary.BigEndian.Uint32(e[8:]))
				if off < 0 || size <= 0 {
					break
				}
				if vouching && size != math.MaxInt32 { // a blank entry follows its predecessor
					r, ok := im.record(off)
					vouching = ok && r.StoreTimestamp() < logicsTs
				}
				if vouching {
					vouched = valid + 1
				}
			}
			cut := vouched
			if mode == cqCut {
				cut = vouched + rng.IntN(valid-vouched+1)
			}
			name := tp.Name() + "/" + q.Name()
			if mode == cqDelete && vouched == 0 {
				require.NoError(t, os.RemoveAll(dir))
				notes = append(notes, fmt.Sprintf("cq %s deleted (%d entries)", name, valid))
				continue
			}
			clear(all[cut*cqEntrySize:]) // all is a copy of the files' bytes
			at := 0
			for i, path := range files {
				chunk := all[at : at+len(data[i])]
				if !bytes.Equal(chunk, data[i]) {
					require.NoError(t, os.WriteFile(path, chunk, 0o644))
				}
				at += len(data[i])
			}
			notes = append(notes, fmt.Sprintf("cq %s cut at %d of %d (vouched %d)", name, cut, valid, vouched))
		}
	}
	return notes
}

// damageIndex applies mode to the index files: a file whose end time is
// after the checkpoint's index time may hold any mix of what it held at
// its last sync (the last graceful stop) and later writes; the worst case
// is all of the former, or zeros for a file created since.
func damageIndex(t *testing.T, c *binCluster, st *lossState, mode indexMode, indexTs int64) []string {
	t.Helper()
	var n int
	for _, path := range indexFiles(t, c) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		newer := len(b) < 16 || int64(binary.BigEndian.Uint64(b[8:])) > indexTs
		switch {
		case mode == indexDeleteAll, mode == indexDeleteNewer && newer:
			require.NoError(t, os.Remove(path))
			n++
		case mode == indexRevertNewer && newer:
			old, ok := st.index[filepath.Base(path)]
			if !ok || len(old) != len(b) {
				old = make([]byte, len(b))
			}
			require.NoError(t, os.WriteFile(path, old, 0o644))
			n++
		}
	}
	return []string{fmt.Sprintf("index %v (%d files)", mode, n)}
}

// coldStart syncs every file of the store (the disk now holds exactly the
// simulated image) and drops it from the page cache, as a reboot would.
func coldStart(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}))
}

// commitOffsets commits offsets[q] for every queue of topic.
func commitOffsets(t *testing.T, c *binCluster, group, topic string, offsets []int64) {
	t.Helper()
	for q, off := range offsets {
		resp := c.mustInvoke(c.BrokerAddr, remoting.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: group, Topic: topic, QueueID: int32(q), CommitOffset: off,
		}, nil)
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	}
}

// queryByKey is QUERY_MESSAGE for a UNIQ_KEY over all time; nil when the
// broker finds nothing.
func (c *binCluster) queryByKey(topic, key string) []*message.MessageExt {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.QueryMessage, &protocol.QueryMessageRequestHeader{
		Topic: topic, Key: key, MaxNum: 32, BeginTimestamp: 0, EndTimestamp: math.MaxInt64,
	}, nil)
	if resp.Code == int32(remoting.QueryNotFound) {
		return nil
	}
	require.Equal(c.t, int32(remoting.Success), resp.Code, resp.Remark)
	msgs, err := message.DecodeRecords(resp.Body)
	require.NoError(c.t, err, "QUERY_MESSAGE %s answered a record that does not decode", key)
	return msgs
}

// powerLossRounds runs plan against one broker, configured with extra
// broker.conf settings besides flushDiskType. Each round: optionally a
// graceful restart and a kill -9 at a file boundary with a restart;
// consumer offsets committed (some persisted, the newest maybe not); sends
// until the power fails; the store replaced by powerLoss; a start; then the
// promise (checkPromise) over every round so far, the consumer offsets,
// and a lookup by key of acknowledged messages. With strict, an
// acknowledged message lost fails the test; without, it is reported.
func powerLossRounds(t *testing.T, flush string, extra map[string]string, plan []lossStep, rng *rand.Rand, strict bool) {
	conf := map[string]string{"flushDiskType": flush, "flushConsumerOffsetInterval": "200", "flushIntervalCommitLog": "500"}
	maps.Copy(conf, extra)
	c := startBinCluster(t, conf)
	pc := pageCacheObservable(t)
	topic, group := uniq("PowerLoss"+strings.ReplaceAll(flush, "_", "")), uniq("GPowerLoss")
	const queues = 4
	c.createTopic(topic, queues)

	st := &lossState{}
	log := newAckLog()
	gone := make(map[string]bool) // acknowledged messages found lost in an earlier round
	var lines []string
	start := time.Now()
	for r, step := range plan {
		pre := ""
		if step.preKill {
			killRound(t, c, topic, queues, 2*r, killStep{kind: killAtBoundary, senders: 8}, log)
			if pc {
				pre = fmt.Sprintf(" (the boundary kill left %d pages unsynced in earlier files)", unsyncedTailPages(t, c))
			}
			c.startBroker()
		}
		if step.graceful {
			st.gracefulRestart(t, c, r, pc)
		}

		// Consumer offsets: one set persisted for sure, a newer one
		// committed just before the sends (persisted or not by the kill).
		acked := log.maxAckedOffsets(queues)
		persisted, latest := make([]int64, queues), make([]int64, queues)
		for q := range acked {
			persisted[q] = max(acked[q]/2, 0)
			latest[q] = acked[q] + 1
		}
		commitOffsets(t, c, group, topic, persisted)
		require.Eventually(t, func() bool {
			on := offsetsOnDisk(c, topic, group)
			for q := range persisted {
				if v, ok := on[strconv.Itoa(q)]; !ok || v != persisted[q] {
					return false
				}
			}
			return true
		}, 10*time.Second, 20*time.Millisecond, "offsets never persisted to consumerOffset.json")
		commitOffsets(t, c, group, topic, latest)

		killed := killRound(t, c, topic, queues, 2*r+1, step.kill, log)
		onDisk := offsetsOnDisk(c, topic, group)
		if pc {
			// Written to a temp file, fsynced, renamed: nothing of it may
			// wait in the page cache.
			path := filepath.Join(c.StoreDir, "config", "consumerOffset.json")
			assert.Zero(t, unsyncedPages(t, path, 0, 1<<20), "round %d: consumerOffset.json holds unsynced pages", r)
		}
		what := powerLoss(t, c, st, step, log, gone, killed, pc, rng)
		t.Logf("round %d: %v: %s", r, step, what)
		c.startBroker()
		assert.Contains(t, c.broker.lastRunLog(), "normal=false", "round %d: the abort file must survive the power loss", r)
		if n := strings.Count(c.broker.lastRunLog(), "crc mismatch"); n > 0 {
			what += fmt.Sprintf("; recovery found %d records with a __CRC32# mismatch", n)
		}

		p := checkPromise(t, c, topic, queues, log, true)
		if conf["enabledAppendPropCRC"] == "true" {
			for id, m := range p.served {
				require.Len(t, m.Properties[message.PropCRC32], 10, "round %d: served message %s has no __CRC32#", r, id)
			}
		}
		for q := range queues {
			got := c.consumerOffset(group, topic, int32(q))
			assert.GreaterOrEqual(t, got, onDisk[strconv.Itoa(q)], "round %d queue %d: consumer offset below the persisted one", r, q)
			assert.LessOrEqual(t, got, latest[q], "round %d queue %d: consumer offset beyond the last commit", r, q)
		}
		found, sampled := queryAcked(t, c, topic, log, p, rng, 24)

		var lost []string // by this power loss
		for _, id := range p.missing {
			if !gone[id] {
				gone[id] = true
				lost = append(lost, id)
			}
		}
		reps := roundReports(2*len(plan), log, p)
		rep := reps[2*r+1]
		if step.preKill {
			rep.acked += reps[2*r].acked
		}
		lines = append(lines, fmt.Sprintf("\n  round %d: %v%s\n    %s\n    round acknowledged %d, in flight at the power loss %d (kept %d), lost %d; all rounds: %d acknowledged, %d lost; %d/%d sampled found by key",
			r, step, pre, what, rep.acked, rep.inFlight, rep.kept, len(lost), len(log.acked), len(p.missing), found, sampled))
		if strict {
			assert.Empty(t, lost, "round %d: %d SEND_OK messages lost by the power loss (%s), the first: %v", r, len(lost), flush, firstN(lost, 10))
			assert.Equal(t, sampled, found, "round %d: acknowledged messages not found by their UNIQ_KEY", r)
		}
	}
	t.Logf("%s, %d power-loss rounds in %v:%s", flush, len(plan), time.Since(start).Round(time.Millisecond), strings.Join(lines, ""))
}

// queryAcked looks up to n acknowledged and served messages up by their
// UNIQ_KEY (the index after recovery) and returns how many were found
// with their body at their acknowledged place.
func queryAcked(t *testing.T, c *binCluster, topic string, log *ackLog, p promise, rng *rand.Rand, n int) (found, sampled int) {
	t.Helper()
	log.mu.Lock()
	var ids []string
	for id := range log.acked {
		if _, ok := p.served[id]; ok {
			ids = append(ids, id)
		}
	}
	log.mu.Unlock()
	sort.Strings(ids)
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids[:min(n, len(ids))] {
		sampled++
		want := p.served[id]
		for _, m := range c.queryByKey(topic, id) {
			if m.UniqKey() == id && bytes.Equal(m.Body, crashBody(id)) && m.CommitLogOffset == want.CommitLogOffset {
				found++
				break
			}
		}
	}
	return found, sampled
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// TestCrashPowerLossSyncFlush simulates a power loss after a kill -9 under
// SYNC_FLUSH with concurrent sync sends, 5 rounds on one store (syncLossPlan:
// fresh, after a graceful restart, after a kill -9 at a file boundary and a
// restart; kills after SEND_OKs, at a file boundary and in a burst), and
// requires after each that no SEND_OK message is lost (reliability.md
// §1.3: SYNC_FLUSH survives an OS crash or power loss), that every served
// record is intact and was sent, that acknowledged messages are found by
// key, and that each queue's consumer offset comes back between what
// consumerOffset.json held at the kill and the last commit: the broker
// persists offsets every flushConsumerOffsetInterval (200 ms here) and
// promises nothing newer.
//
// What the simulation assumes durable, and why that is the weakest the
// store's fsyncs give:
//   - Commitlog: every byte below the end of the newest acknowledged
//     record, and below the commitlog end at the last graceful stop. The
//     group commit (store/flush.go) answers a writer only when
//     FlushedWhere passed its record's end; FlushedWhere advances file by
//     file, each by fdatasync after the bytes were written with pwrite
//     (commitlog.go putBytes), so SEND_OK means everything before the
//     record's end was synced, and nothing further; shutdown flushes
//     what is left. The bytes after it come back as zeros, torn (each
//     512-byte sector old or new), or written with a random range garbled
//     and the UNIQ_KEY of the first record garbled.
//   - Except: a commitlog file wholly below the newest acknowledged
//     record's file in which the kernel still holds unsynced pages
//     (cachestat) lost them, from its own newest acknowledged record on,
//     whatever a graceful stop claimed. No fsync covered those bytes since
//     they were written: they are what a killed process wrote and the next
//     start read back from the page cache.
//   - Consume queues (flushed by a timer, without the group commit): only
//     the entries of records stored before the checkpoint's logics time,
//     which the store writes after flushing every queue (store.go
//     flushConsumeQueueLoop, Shutdown); each queue is cut at a random
//     point above that, or removed when nothing is vouched for.
//   - Index files: only those whose end time is not after the
//     checkpoint's index time (set when a full file was synced). Newer
//     files come back as the last graceful stop synced them (zeros if
//     created since), or are gone.
//   - Checkpoint (written in place and fdatasynced, checkpoint.go): the
//     last one written, none, or the one before (a lost write); the
//     consume queues and index may then lose what only the newer vouched for.
//   - Metadata JSON files are written to a temp file, fsynced, renamed and
//     the directory fsynced: kept as the kill left them, once the page
//     cache shows no unsynced page in consumerOffset.json.
//   - Files and names themselves survive: every mapped file is created
//     preallocated, synced, renamed and its directory synced.
//
// Each graceful stop also requires that no file of the store is left with
// unsynced pages (requireStoreSynced): the next start trusts them. Without
// cachestat (before Linux 6.5, or tmpfs) the page-cache parts are not run
// and the test says so.
//
// The broker runs with enabledAppendPropCRC (RocketMQ 5's whole-record CRC,
// off by default), because of the garbled tails: a record whose
// properties were garbled into other bytes while its header and body still
// check out cannot be told from an intact one without it. RocketMQ's record
// format has no checksum over a record's header fields, topic or
// properties, only over its body; zeros there (a lost sector) are caught
// after a crash, other bytes are not, and such a record would be served
// with a garbled UNIQ_KEY or CLUSTER. That is the format's limit, which
// only the option lifts: each record then ends with a CRC of all of it,
// and recovery drops the garbled ones (never acknowledged: they lie past
// the durable end) as damage.
func TestCrashPowerLossSyncFlush(t *testing.T) {
	t.Parallel()
	rng := crashSeed(t, 18)
	powerLossRounds(t, "SYNC_FLUSH", map[string]string{"enabledAppendPropCRC": "true"}, syncLossPlan(rng), rng, true)
}

// TestCrashPowerLossAsyncFlushReport: ASYNC_FLUSH promises nothing on power
// loss; this reports how many acknowledged messages survive when the
// commitlog loses everything written after the newest record acknowledged
// a whole flushIntervalCommitLog (500 ms) before the power failed, with
// the same consume-queue, index and checkpoint damage as the SYNC_FLUSH
// test. Lost messages are only logged; it still fails on a served record
// that is not intact or was never sent, and on an acknowledged message
// served elsewhere than its acknowledgement said.
func TestCrashPowerLossAsyncFlushReport(t *testing.T) {
	t.Parallel()
	rng := crashSeed(t, 18)
	powerLossRounds(t, "ASYNC_FLUSH", nil, asyncLossPlan(rng), rng, false)
}

// TestCrashPowerLossTornRecordNotServed: a power cut while the commitlog
// tail was being written back can leave a record whose header and body
// reached the disk and whose properties did not: a disk writes a sector
// (512 bytes) atomically, and a record spans several. Such a record was
// never acknowledged under SYNC_FLUSH (its flush had not finished), so
// losing it is allowed; serving it is not (reliability.md §7 test 3: no
// half-record served): a consumer would get a message without its
// UNIQ_KEY, keys or tags. The broker runs without enabledAppendPropCRC:
// the zeros a lost sector reads back as are what recovery must see.
//
// The situation is built, not waited for. Every message carries a property
// longer than a sector, so every record's properties hold a sector
// boundary. After a kill -9 following some SEND_OKs, the test tears the
// last record of the log (stored last, so no checkpoint time vouches for
// it): it keeps the sectors before the first boundary in its properties
// and zeros the rest. When that record was acknowledged
// (nothing was in flight at the kill), the power is taken to have failed
// just before the group commit that acknowledged it finished: its
// SEND_OK is taken back and its outcome counts as unknown, which is what
// the client would have seen. The other records stay whole. Then the test
// requires the promise of checkPromise (every served record intact and
// sent, every acknowledged one served) and that the torn one is not served.
func TestCrashPowerLossTornRecordNotServed(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, map[string]string{"flushDiskType": "SYNC_FLUSH"})
	topic := uniq("PowerLossTorn")
	const queues = 4
	c.createTopic(topic, queues)
	log := newAckLog()
	pad := map[string]string{"PAD": strings.Repeat("p", sectorSize+64)}
	killRound(t, c, topic, queues, 0, killStep{kind: killAfterAcks, acks: 20, senders: 8, props: pad}, log)

	im := loadCommitlog(t, c)
	newest := int64(-1) // the start of the newest acknowledged record: a record boundary
	log.mu.Lock()
	for _, r := range log.acked {
		newest = max(newest, r.CommitLogOffset)
	}
	log.mu.Unlock()
	require.GreaterOrEqual(t, newest, int64(0), "no SEND_OK before the kill")
	last := im.lastRecord(newest)
	r, ok := im.record(last)
	require.True(t, ok, "no record at %d", last)
	id, ok := r.Property(message.PropUniqKey)
	require.True(t, ok, "the last record has no UNIQ_KEY before the tear")
	end := last + int64(r.Size())
	props := end - int64(len(r.Properties()))
	cut := (props + sectorSize - 1) / sectorSize * sectorSize
	require.Less(t, cut, end, "properties of %d bytes at [%d,%d) hold no sector boundary", len(r.Properties()), props, end)

	log.mu.Lock()
	_, acked := log.acked[string(id)]
	log.mu.Unlock()
	if acked {
		log.retract(string(id))
	}
	t.Logf("newest acknowledged record at %d; the last record, %s at %d (%d bytes, acknowledged %v), loses its properties from %d on",
		newest, id, last, r.Size(), acked, cut)
	im.zeroFrom(cut)
	im.save(t)
	coldStart(t, c.StoreDir)
	c.startBroker()
	p := checkPromise(t, c, topic, queues, log, true)
	assert.Empty(t, p.missing, "SEND_OK messages lost")
	assert.NotContains(t, p.served, string(id), "the torn record is served")
}

// lastRecord walks the records from the record boundary off, across blank
// end-of-file markers, and returns the start of the last one.
func (im *clImage) lastRecord(off int64) int64 {
	last := off
	for range 1 << 22 {
		b := im.data[im.fileOf(off)]
		pos := off % im.fileSize
		if b == nil || pos+8 > im.fileSize || binary.BigEndian.Uint64(b[pos:]) == 0 {
			return last
		}
		if _, err := message.ParseRecord(b[pos:]); errors.Is(err, message.ErrBlankRecord) {
			off = im.fileOf(off) + im.fileSize
			continue
		}
		r, ok := im.record(off)
		if !ok {
			return last
		}
		last = off
		off += int64(r.Size())
	}
	return last
}

// retract takes back the SEND_OK of uniq: the power failed before it was
// answered, so its outcome is unknown.
func (a *ackLog) retract(uniq string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.acked, uniq)
	delete(a.ackedAt, uniq)
	a.unknown[uniq] = true
}
