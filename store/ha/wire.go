package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"
)

// The wire format (see the package doc). These constants are part of it.
const (
	// reportSize is a slave's report: its max commitlog offset, int64.
	reportSize = 8
	// headerSize is a frame header: phyOffset int64, bodySize int32.
	headerSize = 12
	// compressedHeaderSize adds the snappy block's length, int32.
	compressedHeaderSize = 16

	// helloMagic starts a slave's hello; as the high half of an int64 it
	// is negative, so it can never be taken for an offset.
	helloMagic uint32 = 0xFF484131 // "\xffHA1"
	// helloSize is magic 4, flags 4, windowLen 4, windowCRC 4, offset 8.
	helloSize = 24
	// helloEndSize is a hello with helloWindowEnd: windowEnd 8 before the
	// offset, which stays the last 8-byte group.
	helloEndSize = 32
	// helloCompress in the hello's flags asks for compressed frames; in the
	// answer's flags it grants them.
	helloCompress uint32 = 1
	// helloWindowEnd in the hello's flags says the window ends at windowEnd,
	// not at the offset: a slave ending at a file boundary fingerprints the
	// bytes up to the blank marker closing the file before.
	helloWindowEnd uint32 = 2
	// helloReplicaID in the hello's flags (controller mode) says an 8-byte
	// replica id, the slave's brokerId, follows windowCRC (and windowEnd,
	// when sent), before the offset, which stays the last 8-byte group.
	helloReplicaID uint32 = 4
	// helloMaxSize is the longest hello: windowEnd and replica id both.
	helloMaxSize = helloSize + 16

	// answerOffset is the phyOffset of the master's answer to a hello: a
	// negative value no data frame can carry (and not helloMagic, which a
	// RocketMQ master could echo back in a heartbeat).
	answerOffset int64 = -0x00B7BEB500000000 // 0xFF48414B00000000: "\xffHAK\0\0\0\0"
	// answerOffsetBits is answerOffset as written.
	answerOffsetBits uint64 = 0xFF48414B00000000
	// answerSize is the answer's body: status 4, flags 4, masterMax 8,
	// startOffset 8.
	answerSize = 24

	// lostOffset is the phyOffset of a frame that announces a lost range
	// (see store.LostRange) to a slave that sent a hello: the data frames
	// after it, up to the range's end, carry the master's damaged bytes as
	// they are. Negative like answerOffset.
	lostOffset int64 = -0x00B7BEB400000000 // 0xFF48414C00000000: "\xffHAL\0\0\0\0"
	// lostOffsetBits is lostOffset as written.
	lostOffsetBits uint64 = 0xFF48414C00000000
	// lostSize is the announcement's body: from 8, to 8.
	lostSize = 16

	// maxFrameBody bounds the uncompressed body of a compressed frame (a
	// slave must hold it whole to decode it) and haTransferBatchSize.
	// Plain frames are applied as they stream in and need no bound beyond
	// their file.
	maxFrameBody = 16 << 20

	// windowMax is how many bytes before its offset a slave fingerprints in
	// its hello, so the master can tell a slave that holds other data than
	// its own at the same offsets.
	windowMax = 4096
)

// Statuses of the master's answer to a hello.
const (
	answerOK             uint32 = 0 // frames follow from startOffset
	answerSlaveAhead     uint32 = 1 // the slave's offset is beyond the master's max
	answerContentDiffers uint32 = 2 // the bytes before the slave's offset differ
	answerNoCompression  uint32 = 3 // compression asked, haTransferCompress is off at the master
	answerBehindMin      uint32 = 4 // the master deleted the files the slave needs next

	// answerNotASlave is never sent: the peer's first bytes were no
	// offset, so the master closes without a word.
	answerNotASlave uint32 = 0xFFFFFFFF
)

// crcTable fingerprints the bytes before a slave's offset.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// hello is what a slave of this package sends on connect.
type hello struct {
	flags     uint32
	windowLen uint32
	windowCRC uint32
	// windowEnd is where the window ends: offset, unless flags has
	// helloWindowEnd.
	windowEnd int64
	replicaID int64 // sent when not 0 (helloReplicaID)
	offset    int64
}

// encode appends the hello, with windowEnd only when it is not offset and
// the replica id only when it is not 0 (a RocketMQ master takes the last
// 8-byte group, the offset, either way).
func (h *hello) encode(b []byte) []byte {
	be := binary.BigEndian
	flags := h.flags &^ (helloWindowEnd | helloReplicaID)
	if h.windowEnd != h.offset {
		flags |= helloWindowEnd
	}
	if h.replicaID != 0 {
		flags |= helloReplicaID
	}
	b = be.AppendUint32(b, helloMagic)
	b = be.AppendUint32(b, flags)
	b = be.AppendUint32(b, h.windowLen)
	b = be.AppendUint32(b, h.windowCRC)
	if flags&helloWindowEnd != 0 {
		b = be.AppendUint64(b, uint64(h.windowEnd))
	}
	if flags&helloReplicaID != 0 {
		b = be.AppendUint64(b, uint64(h.replicaID))
	}
	return be.AppendUint64(b, uint64(h.offset))
}

// helloRest returns how many bytes follow a hello's magic and flags.
func helloRest(flags uint32) int {
	n := helloSize - 8
	if flags&helloWindowEnd != 0 {
		n += 8
	}
	if flags&helloReplicaID != 0 {
		n += 8
	}
	return n
}

// decodeHello reads a hello from its magic and flags (first[:8]) and the
// helloRest bytes after them.
func decodeHello(first, rest []byte) hello {
	be := binary.BigEndian
	h := hello{
		flags:     be.Uint32(first[4:]),
		windowLen: be.Uint32(rest),
		windowCRC: be.Uint32(rest[4:]),
	}
	rest = rest[8:]
	if h.flags&helloWindowEnd != 0 {
		h.windowEnd = int64(be.Uint64(rest))
		rest = rest[8:]
	}
	if h.flags&helloReplicaID != 0 {
		h.replicaID = int64(be.Uint64(rest))
		rest = rest[8:]
	}
	h.offset = int64(be.Uint64(rest))
	if h.flags&helloWindowEnd == 0 {
		h.windowEnd = h.offset
	}
	return h
}

// answer is the master's reply to a hello, sent as a frame at answerOffset.
type answer struct {
	status      uint32
	flags       uint32
	masterMax   int64
	startOffset int64
}

func (a *answer) encode(b []byte) []byte {
	be := binary.BigEndian
	b = be.AppendUint64(b, answerOffsetBits)
	b = be.AppendUint32(b, answerSize)
	b = be.AppendUint32(b, a.status)
	b = be.AppendUint32(b, a.flags)
	b = be.AppendUint64(b, uint64(a.masterMax))
	return be.AppendUint64(b, uint64(a.startOffset))
}

func decodeAnswer(body []byte) answer {
	be := binary.BigEndian
	return answer{
		status:      be.Uint32(body),
		flags:       be.Uint32(body[4:]),
		masterMax:   int64(be.Uint64(body[8:])),
		startOffset: int64(be.Uint64(body[16:])),
	}
}

// appendLost appends a frame announcing the lost range [from, to); in a
// compressed session its header has the compressed layout, with
// compressedSize lostSize: the body is never compressed.
func appendLost(b []byte, from, to int64, compressed bool) []byte {
	be := binary.BigEndian
	b = be.AppendUint64(b, lostOffsetBits)
	b = be.AppendUint32(b, lostSize)
	if compressed {
		b = be.AppendUint32(b, lostSize)
	}
	b = be.AppendUint64(b, uint64(from))
	return be.AppendUint64(b, uint64(to))
}

// putHeader writes a plain frame header.
func putHeader(b []byte, offset int64, size int) {
	binary.BigEndian.PutUint64(b, uint64(offset))
	binary.BigEndian.PutUint32(b[8:], uint32(size))
}

// errIdle reports a connection dropped for silence.
var errIdle = errors.New("ha: nothing received for haHousekeepingInterval")

// connReader buffers a connection's input with a read deadline of the
// housekeeping interval renewed on every read, so a silent peer is dropped.
// It hands out slices of its buffer, valid until the next call.
type connReader struct {
	c       net.Conn
	buf     []byte
	r, w    int
	timeout time.Duration
}

func newConnReader(c net.Conn, size int, timeout time.Duration) *connReader {
	return &connReader{c: c, buf: make([]byte, size), timeout: timeout}
}

// fill reads once more into the buffer, moving unread bytes to its front
// when the end is reached.
func (cr *connReader) fill() error {
	if cr.r > 0 && (cr.w == len(cr.buf) || cr.r == cr.w) {
		cr.w = copy(cr.buf, cr.buf[cr.r:cr.w])
		cr.r = 0
	}
	if cr.w == len(cr.buf) {
		return fmt.Errorf("ha: read buffer full (%d bytes)", len(cr.buf))
	}
	if err := cr.c.SetReadDeadline(time.Now().Add(cr.timeout)); err != nil {
		return err
	}
	n, err := cr.c.Read(cr.buf[cr.w:])
	cr.w += n
	if n > 0 {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w (%v)", errIdle, cr.timeout)
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// buffered returns how many unread bytes are buffered.
func (cr *connReader) buffered() int { return cr.w - cr.r }

// need returns exactly n buffered bytes (n <= the buffer size), reading as
// needed, and consumes them.
func (cr *connReader) need(n int) ([]byte, error) {
	for cr.w-cr.r < n {
		if len(cr.buf)-cr.r < n {
			cr.w = copy(cr.buf, cr.buf[cr.r:cr.w])
			cr.r = 0
		}
		if err := cr.fill(); err != nil {
			return nil, err
		}
	}
	b := cr.buf[cr.r : cr.r+n]
	cr.r += n
	return b, nil
}

// some returns between 1 and max buffered bytes, reading once if none is
// buffered, and consumes them.
func (cr *connReader) some(max int) ([]byte, error) {
	if cr.r == cr.w {
		if err := cr.fill(); err != nil {
			return nil, err
		}
	}
	n := min(max, cr.w-cr.r)
	b := cr.buf[cr.r : cr.r+n]
	cr.r += n
	return b, nil
}

// readFull fills dst from the connection.
func (cr *connReader) readFull(dst []byte) error {
	for len(dst) > 0 {
		b, err := cr.some(len(dst))
		if err != nil {
			return err
		}
		dst = dst[copy(dst, b):]
	}
	return nil
}
