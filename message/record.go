package message

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"strings"
)

// Commitlog record layout (big-endian), as RocketMQ's CommitLog writes it:
//
//	off  size  field
//	  0     4  TOTALSIZE (whole record, this field included)
//	  4     4  MAGICCODE (MagicCodeV1; BlankMagicCode marks the end of a file)
//	  8     4  BODYCRC (crc32 IEEE of the stored body & 0x7FFFFFFF)
//	 12     4  QUEUEID
//	 16     4  FLAG (user flag)
//	 20     8  QUEUEOFFSET (consume queue index)
//	 28     8  PHYSICALOFFSET (this record's commitlog offset)
//	 36     4  SYSFLAG
//	 40     8  BORNTIMESTAMP (ms)
//	 48   8|20 BORNHOST (ip 4|16 bytes + port int32; 20 when SYSFLAG&FlagBornHostV6)
//	  .     8  STORETIMESTAMP (ms)
//	  .   8|20 STOREHOST (20 when SYSFLAG&FlagStoreHostV6)
//	  .     4  RECONSUMETIMES
//	  .     8  PREPARED TRANSACTION OFFSET
//	  .   4+n  BODYLENGTH + BODY
//	  .   1+t  TOPICLENGTH + TOPIC (2+t with MagicCodeV2, 5.x)
//	  .   2+p  PROPERTIESLENGTH (int16) + PROPERTIES
//
// The constants below are part of the on-disk format.
const (
	MagicCodeV1    int32 = -626843481 // 0xDAA320A7, MESSAGE_MAGIC_CODE
	MagicCodeV2    int32 = -626843477 // 0xDAA320AB, 5.x: 2-byte topic length (read only)
	BlankMagicCode int32 = -875286124 // 0xCBD43194, BLANK_MAGIC_CODE: end-of-file filler

	PosTotalSize      = 0
	PosMagicCode      = 4
	PosBodyCRC        = 8
	PosQueueID        = 12
	PosFlag           = 16
	PosQueueOffset    = 20 // patched by the commitlog under its lock
	PosPhysicalOffset = 28 // patched by the commitlog under its lock
	PosSysFlag        = 36
	PosBornTimestamp  = 40
	PosBornHost       = 48

	// BlankRecordLength is END_FILE_MIN_BLANK_LENGTH: the end-of-file marker
	// writes TOTALSIZE and MAGICCODE only, so a file always keeps 8 bytes for it.
	BlankRecordLength = 8
	// MinRecordLength is a record with IPv4 hosts, no body, topic or properties.
	MinRecordLength = 91
	// MaxTopicLength is the longest topic a v1 record carries (4.9.8 refuses longer).
	MaxTopicLength = 127
	// MaxPropertiesLength is the longest properties string (Short.MAX_VALUE).
	MaxPropertiesLength = 32767
)

// Errors returned by the record, batch and id codecs.
var (
	// ErrShortRecord means the buffer ends before the record does.
	ErrShortRecord = errors.New("message: record truncated")
	// ErrBlankRecord means the bytes hold the end-of-file blank marker, not a message.
	ErrBlankRecord = errors.New("message: blank end-of-file record")
	// ErrBadMagic means the magic code is neither a message nor a blank marker.
	ErrBadMagic = errors.New("message: bad magic code")
	// ErrCorruptRecord means the field lengths disagree with TOTALSIZE.
	ErrCorruptRecord = errors.New("message: corrupt record")
	// ErrBodyCRC means the stored body does not match BODYCRC.
	ErrBodyCRC = errors.New("message: body crc mismatch")
	// ErrTopicTooLong means the topic is over MaxTopicLength bytes.
	ErrTopicTooLong = errors.New("message: topic longer than 127 bytes")
	// ErrPropertiesTooLong means the properties string is over 32767 bytes.
	ErrPropertiesTooLong = errors.New("message: properties longer than 32767 bytes")
	// ErrPropertiesNUL means the properties hold a zero byte. Records refuse
	// it so that zeros in stored properties always mean damage: a power cut
	// leaves unwritten disk sectors reading as zeros, and no checksum covers
	// the properties.
	ErrPropertiesNUL = errors.New("message: properties hold a zero byte")
	// ErrRecordTooLarge means the record length does not fit in TOTALSIZE.
	ErrRecordTooLarge = errors.New("message: record too large")
	// ErrUnsupportedCompression means the body uses a compression this package cannot undo.
	ErrUnsupportedCompression = errors.New("message: unsupported compression type")
	// ErrBodyTooLarge means a compressed body inflates to more than
	// MaxUncompressedBody bytes.
	ErrBodyTooLarge = errors.New("message: uncompressed body too large")
)

// MaxUncompressedBody bounds what UncompressBody inflates a body to. Zlib
// inflates up to about a thousand times, so a body within the broker's 4 MiB
// limit could otherwise claim gigabytes of a consumer's memory (RocketMQ's
// clients set no bound). A producer compresses bodies over 4 KiB and keeps
// the result within the limit: 64 MiB leaves room for any body that
// compresses sixteen times.
const MaxUncompressedBody = 64 << 20

// magicV1 is MagicCodeV1 as the unsigned word written to disk.
const magicV1 = 0xDAA320A7

// HostLength returns the encoded length of a host (ip + port): 8, or 20 when v6.
func HostLength(v6 bool) int {
	if v6 {
		return 20
	}
	return 8
}

// BornHostLength returns the BORNHOST length selected by sysFlag.
func BornHostLength(sysFlag int32) int { return HostLength(sysFlag&FlagBornHostV6 != 0) }

// StoreHostLength returns the STOREHOST length selected by sysFlag.
func StoreHostLength(sysFlag int32) int { return HostLength(sysFlag&FlagStoreHostV6 != 0) }

// StoreTimestampPos returns the position of STORETIMESTAMP, which moves with
// the born host width.
func StoreTimestampPos(sysFlag int32) int { return PosBornHost + BornHostLength(sysFlag) }

// StoreHostPos returns the position of STOREHOST.
func StoreHostPos(sysFlag int32) int { return StoreTimestampPos(sysFlag) + 8 }

// RecordLength returns the length of a v1 record (CommitLog.calMsgLength).
func RecordLength(sysFlag int32, bodyLen, topicLen, propsLen int) int {
	return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + BornHostLength(sysFlag) + 8 + StoreHostLength(sysFlag) +
		4 + 8 + 4 + bodyLen + 1 + topicLen + 2 + propsLen
}

// BodyCRC returns RocketMQ's body checksum: crc32 IEEE masked to 31 bits (UtilAll.crc32).
func BodyCRC(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

// hostBytes returns the 4 or 16 address bytes of a host; v4-mapped v6 addresses
// are written as v4, as Java does. A zero AddrPort encodes as 0.0.0.0:0.
func hostBytes(ap netip.AddrPort) (ip [16]byte, n int) {
	a := ap.Addr().Unmap()
	if a.Is6() {
		return a.As16(), 16
	}
	if a.Is4() {
		v4 := a.As4()
		copy(ip[:], v4[:])
	}
	return ip, 4
}

func appendHost(dst []byte, ap netip.AddrPort) []byte {
	ip, n := hostBytes(ap)
	dst = append(dst, ip[:n]...)
	return binary.BigEndian.AppendUint32(dst, uint32(ap.Port()))
}

// hostFlags returns sysFlag with the two v6 bits set from the host addresses,
// as the broker does before encoding.
func hostFlags(sysFlag int32, born, store netip.AddrPort) int32 {
	sysFlag &^= FlagBornHostV6 | FlagStoreHostV6
	if _, n := hostBytes(born); n == 16 {
		sysFlag |= FlagBornHostV6
	}
	if _, n := hostBytes(store); n == 16 {
		sysFlag |= FlagStoreHostV6
	}
	return sysFlag
}

// appendRecordHead appends every field up to and including TOPIC and a zero
// PROPERTIESLENGTH; the caller appends the properties and calls finishRecord.
func appendRecordHead(dst []byte, m *MessageExt, sysFlag, flag int32, body []byte, prepOffset int64) ([]byte, error) {
	if len(m.Topic) > MaxTopicLength {
		return dst, fmt.Errorf("%w: %d", ErrTopicTooLong, len(m.Topic))
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, 0) // TOTALSIZE, patched by finishRecord
	dst = be.AppendUint32(dst, magicV1)
	dst = be.AppendUint32(dst, uint32(BodyCRC(body)))
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(prepOffset))
	dst = be.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	dst = be.AppendUint16(dst, 0) // PROPERTIESLENGTH, patched by finishRecord
	return dst, nil
}

// finishRecord patches PROPERTIESLENGTH and TOTALSIZE of the record starting
// at start whose properties start at propsStart.
func finishRecord(dst []byte, start, propsStart int) ([]byte, error) {
	propsLen := len(dst) - propsStart
	if propsLen > MaxPropertiesLength {
		return dst[:start], fmt.Errorf("%w: %d", ErrPropertiesTooLong, propsLen)
	}
	if i := bytes.IndexByte(dst[propsStart:], 0); i >= 0 {
		return dst[:start], fmt.Errorf("%w (at byte %d)", ErrPropertiesNUL, i)
	}
	total := len(dst) - start
	if total > 1<<31-1 {
		return dst[:start], ErrRecordTooLarge
	}
	binary.BigEndian.PutUint16(dst[propsStart-2:], uint16(propsLen))
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	return dst, nil
}

// EncodeRecord appends m as a v1 commitlog record to dst. BODYCRC is computed
// over m.Body as given (already compressed if FlagCompressed is set); the v6
// host bits of SysFlag are set from BornHost and StoreHost; QueueOffset,
// CommitLogOffset and StoreTimestamp are written as they are, so a commitlog
// can encode outside its lock and patch them later at PosQueueOffset,
// PosPhysicalOffset and StoreTimestampPos. The properties are stored as
// they are, except a __CRC32# entry ending them (see dropCRCTail). On
// error dst is returned unchanged.
func EncodeRecord(dst []byte, m *MessageExt) ([]byte, error) { return encodeRecord(dst, m, false) }

// EncodeRecordWithCRC is EncodeRecord for a store with enabledAppendPropCRC
// (RocketMQ 5): the properties lose any __CRC32# entry and end with the
// reserved one (see CRC32ReservedLength), whose digits PutPropCRC writes
// once the record's header fields are final.
func EncodeRecordWithCRC(dst []byte, m *MessageExt) ([]byte, error) {
	return encodeRecord(dst, m, true)
}

func encodeRecord(dst []byte, m *MessageExt, withCRC bool) ([]byte, error) {
	start := len(dst)
	sysFlag := hostFlags(m.SysFlag, m.BornHost, m.StoreHost)
	dst, err := appendRecordHead(dst, m, sysFlag, m.Flag, m.Body, m.PreparedTransactionOffset)
	if err != nil {
		return dst[:start], err
	}
	propsStart := len(dst)
	if m.Properties == nil {
		dst = append(dst, m.PropertiesString...)
	} else {
		dst = AppendProperties(dst, m.Properties)
	}
	if withCRC {
		dst = appendCRCEntry(dst, propsStart)
	} else {
		dst = dropCRCTail(dst, propsStart)
	}
	return finishRecord(dst, start, propsStart)
}

// Record is a parsed view of one commitlog record. It refers to the bytes it
// was parsed from and allocates nothing; copy what must outlive them.
type Record struct {
	b        []byte // exactly the record
	sysFlag  int32
	bodyPos  int
	bodyLen  int
	topicPos int
	topicLen int
	propsPos int
	propsLen int
}

// RecordProperties returns the properties of the record at the start of
// b (b may extend beyond it) without allocating: the broker's property
// filter reads them for every candidate of a pull. ok is false when b does
// not hold a well-formed message record (the checks of ParseRecord, whose
// errors allocate).
func RecordProperties(b []byte) (props []byte, ok bool) {
	if len(b) < MinRecordLength {
		return nil, false
	}
	be := binary.BigEndian
	size := int(int32(be.Uint32(b[PosTotalSize:])))
	magic := int32(be.Uint32(b[PosMagicCode:]))
	if magic != MagicCodeV1 && magic != MagicCodeV2 || size < MinRecordLength || size > len(b) {
		return nil, false
	}
	sysFlag := int32(be.Uint32(b[PosSysFlag:]))
	pos := StoreHostPos(sysFlag) + StoreHostLength(sysFlag) + 4 + 8
	if pos+4 > size {
		return nil, false
	}
	bodyLen := int(int32(be.Uint32(b[pos:])))
	pos += 4
	if bodyLen < 0 || bodyLen > size-pos {
		return nil, false
	}
	pos += bodyLen
	if magic == MagicCodeV2 {
		if pos+2 > size {
			return nil, false
		}
		pos += 2 + int(be.Uint16(b[pos:]))
	} else {
		if pos+1 > size {
			return nil, false
		}
		pos += 1 + int(b[pos])
	}
	if pos+2 > size {
		return nil, false
	}
	propsLen := int(int16(be.Uint16(b[pos:])))
	pos += 2
	if propsLen < 0 || pos+propsLen != size {
		return nil, false
	}
	return b[pos:size:size], true
}

// ParseRecord parses the record at the start of b (b may extend beyond it).
// It checks the magic code and that every field fits TOTALSIZE exactly, not the
// body CRC (see Record.VerifyCRC). The blank end-of-file marker returns
// ErrBlankRecord.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < 8 {
		return r, ErrShortRecord
	}
	be := binary.BigEndian
	size := int(int32(be.Uint32(b[PosTotalSize:])))
	magic := int32(be.Uint32(b[PosMagicCode:]))
	switch magic {
	case MagicCodeV1, MagicCodeV2:
	case BlankMagicCode:
		return r, ErrBlankRecord
	default:
		return r, fmt.Errorf("%w: 0x%08X", ErrBadMagic, uint32(magic))
	}
	if size < MinRecordLength {
		return r, fmt.Errorf("%w: total size %d", ErrCorruptRecord, size)
	}
	if size > len(b) {
		return r, fmt.Errorf("%w: total size %d, have %d bytes", ErrShortRecord, size, len(b))
	}
	b = b[:size]
	r.b = b
	r.sysFlag = int32(be.Uint32(b[PosSysFlag:]))
	pos := StoreHostPos(r.sysFlag) + StoreHostLength(r.sysFlag) + 4 + 8
	if pos+4 > size {
		return r, fmt.Errorf("%w: hosts overrun total size %d", ErrCorruptRecord, size)
	}
	r.bodyLen = int(int32(be.Uint32(b[pos:])))
	r.bodyPos = pos + 4
	if r.bodyLen < 0 || r.bodyLen > size-r.bodyPos {
		return r, fmt.Errorf("%w: body length %d, total size %d", ErrCorruptRecord, r.bodyLen, size)
	}
	pos = r.bodyPos + r.bodyLen
	if magic == MagicCodeV2 {
		if pos+2 > size {
			return r, fmt.Errorf("%w: topic length overruns total size %d", ErrCorruptRecord, size)
		}
		r.topicLen = int(be.Uint16(b[pos:]))
		pos += 2
	} else {
		if pos+1 > size {
			return r, fmt.Errorf("%w: topic length overruns total size %d", ErrCorruptRecord, size)
		}
		r.topicLen = int(b[pos])
		pos++
	}
	r.topicPos = pos
	pos += r.topicLen
	if pos+2 > size {
		return r, fmt.Errorf("%w: topic length %d, total size %d", ErrCorruptRecord, r.topicLen, size)
	}
	r.propsLen = int(int16(be.Uint16(b[pos:])))
	r.propsPos = pos + 2
	if r.propsLen < 0 || r.propsPos+r.propsLen != size {
		return r, fmt.Errorf("%w: properties length %d, total size %d", ErrCorruptRecord, r.propsLen, size)
	}
	return r, nil
}

func (r *Record) i32(pos int) int32 { return int32(binary.BigEndian.Uint32(r.b[pos:])) }
func (r *Record) i64(pos int) int64 { return int64(binary.BigEndian.Uint64(r.b[pos:])) }

func (r *Record) host(pos int, v6 bool) netip.AddrPort {
	var a netip.Addr
	if v6 {
		a = netip.AddrFrom16([16]byte(r.b[pos : pos+16]))
		pos += 16
	} else {
		a = netip.AddrFrom4([4]byte(r.b[pos : pos+4]))
		pos += 4
	}
	return netip.AddrPortFrom(a, uint16(binary.BigEndian.Uint32(r.b[pos:])))
}

// Bytes returns the whole record.
func (r *Record) Bytes() []byte { return r.b }

// Size returns TOTALSIZE.
func (r *Record) Size() int { return len(r.b) }

// Magic returns MAGICCODE.
func (r *Record) Magic() int32 { return r.i32(PosMagicCode) }

// BodyCRC returns the stored BODYCRC.
func (r *Record) BodyCRC() int32 { return r.i32(PosBodyCRC) }

// QueueID returns QUEUEID.
func (r *Record) QueueID() int32 { return r.i32(PosQueueID) }

// Flag returns the user FLAG.
func (r *Record) Flag() int32 { return r.i32(PosFlag) }

// QueueOffset returns QUEUEOFFSET.
func (r *Record) QueueOffset() int64 { return r.i64(PosQueueOffset) }

// PhysicalOffset returns PHYSICALOFFSET.
func (r *Record) PhysicalOffset() int64 { return r.i64(PosPhysicalOffset) }

// SysFlag returns SYSFLAG.
func (r *Record) SysFlag() int32 { return r.sysFlag }

// BornTimestamp returns BORNTIMESTAMP.
func (r *Record) BornTimestamp() int64 { return r.i64(PosBornTimestamp) }

// BornHost returns BORNHOST.
func (r *Record) BornHost() netip.AddrPort {
	return r.host(PosBornHost, r.sysFlag&FlagBornHostV6 != 0)
}

// StoreTimestamp returns STORETIMESTAMP.
func (r *Record) StoreTimestamp() int64 { return r.i64(StoreTimestampPos(r.sysFlag)) }

// StoreHost returns STOREHOST.
func (r *Record) StoreHost() netip.AddrPort {
	return r.host(StoreHostPos(r.sysFlag), r.sysFlag&FlagStoreHostV6 != 0)
}

// ReconsumeTimes returns RECONSUMETIMES.
func (r *Record) ReconsumeTimes() int32 {
	return r.i32(StoreHostPos(r.sysFlag) + StoreHostLength(r.sysFlag))
}

// PreparedTransactionOffset returns PREPARED TRANSACTION OFFSET.
func (r *Record) PreparedTransactionOffset() int64 {
	return r.i64(StoreHostPos(r.sysFlag) + StoreHostLength(r.sysFlag) + 4)
}

// Body returns the stored body (compressed if the sysflag says so).
func (r *Record) Body() []byte { return r.b[r.bodyPos : r.bodyPos+r.bodyLen : r.bodyPos+r.bodyLen] }

// Topic returns the topic bytes.
func (r *Record) Topic() []byte { return r.b[r.topicPos : r.topicPos+r.topicLen] }

// Properties returns the encoded properties string.
func (r *Record) Properties() []byte { return r.b[r.propsPos : r.propsPos+r.propsLen] }

// Property looks key up in the properties without allocating.
func (r *Record) Property(key string) ([]byte, bool) { return PropertyValue(r.Properties(), key) }

// VerifyCRC checks BODYCRC against the stored body.
func (r *Record) VerifyCRC() error {
	if got, want := BodyCRC(r.Body()), r.BodyCRC(); got != want {
		return fmt.Errorf("%w: stored 0x%08X, computed 0x%08X", ErrBodyCRC, uint32(want), uint32(got))
	}
	return nil
}

// DecodeRecord decodes the record at the start of b into a new MessageExt with
// its own copy of the body. It returns the record size. The body is left as
// stored (see UncompressBody).
func DecodeRecord(b []byte) (*MessageExt, int, error) {
	m := new(MessageExt)
	n, err := DecodeRecordInto(m, b, true)
	if err != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// DecodeRecordInto decodes the record at the start of b into m. With copyBody
// false, m.Body aliases b (no copy), so m must not outlive b.
func DecodeRecordInto(m *MessageExt, b []byte, copyBody bool) (int, error) {
	r, err := ParseRecord(b)
	if err != nil {
		return 0, err
	}
	r.fill(m, copyBody)
	return r.Size(), nil
}

func (r *Record) fill(m *MessageExt, copyBody bool) {
	m.Topic = string(r.Topic())
	if copyBody {
		m.Body = bytes.Clone(r.Body())
		if m.Body == nil {
			m.Body = []byte{}
		}
	} else {
		m.Body = r.Body()
	}
	r.fillMeta(m)
}

// fillMeta sets everything but Topic and Body.
func (r *Record) fillMeta(m *MessageExt) {
	r.fillHeader(m)
	m.Properties = UnmarshalProperties(r.Properties())
}

// fillHeader sets the fixed-width fields: everything but Topic, Body and
// Properties.
func (r *Record) fillHeader(m *MessageExt) {
	m.Flag = r.Flag()
	m.QueueID = r.QueueID()
	m.StoreSize = int32(r.Size())
	m.QueueOffset = r.QueueOffset()
	m.SysFlag = r.sysFlag
	m.BornTimestamp = r.BornTimestamp()
	m.BornHost = r.BornHost()
	m.StoreTimestamp = r.StoreTimestamp()
	m.StoreHost = r.StoreHost()
	m.CommitLogOffset = r.PhysicalOffset()
	m.BodyCRC = r.BodyCRC()
	m.ReconsumeTimes = r.ReconsumeTimes()
	m.PreparedTransactionOffset = r.PreparedTransactionOffset()
}

// DecodeRecords decodes a run of concatenated records, such as a pull
// response body. Blank markers and trailing bytes are errors; the messages
// before the bad record are returned with the error.
//
// Bodies are copied, as DecodeRecord does, but into one buffer for the whole
// run, and the messages are one array: a 32-record pull costs a handful of
// allocations for them instead of 64. Each body keeps its own capacity, so
// appending to one never touches its neighbour. The property names and
// values of the whole run are substrings of one string, and records of one
// topic (the usual pull) share one topic string, so what is left per message
// is its Properties map.
func DecodeRecords(b []byte) ([]*MessageExt, error) { return decodeRecords(b, true) }

// DecodeRecordsAliased is DecodeRecords without the body copy: each Body is
// a slice of b (capacity-limited, so an append reallocates instead of
// overwriting the next record). It is for a caller that owns b and hands it
// over, such as a consumer with a freshly read pull response; b must not be
// changed or reused while any of the messages is in use. Everything else
// (topic, properties) is copied out of b as DecodeRecords does.
func DecodeRecordsAliased(b []byte) ([]*MessageExt, error) { return decodeRecords(b, false) }

func decodeRecords(b []byte, copyBodies bool) ([]*MessageExt, error) {
	// First pass: validate and size the body and properties buffers. The
	// parsed records are kept for the passes below, on the stack for a
	// pull of the usual size.
	var (
		stack              [64]Record
		recs               = stack[:0]
		bodyBytes, propLen int
		bad                error
	)
	for rest := b; len(rest) > 0; {
		r, err := ParseRecord(rest)
		if err != nil {
			bad = err
			break
		}
		recs = append(recs, r)
		bodyBytes += r.bodyLen
		propLen += r.propsLen
		rest = rest[r.Size():]
	}
	if len(recs) == 0 {
		return nil, bad
	}
	// Every properties string into one allocation. A message that outlives
	// its neighbours keeps the run's properties alive with its own, a few
	// hundred bytes per record, as a shared body buffer keeps the bodies.
	var props string
	if propLen > 0 {
		var sb strings.Builder
		sb.Grow(propLen)
		for i := range recs {
			sb.Write(recs[i].Properties())
		}
		props = sb.String()
	}
	msgs := make([]MessageExt, len(recs))
	out := make([]*MessageExt, len(recs))
	var bodies []byte
	if copyBodies {
		bodies = make([]byte, 0, bodyBytes)
	}
	var topic string
	for i := range recs {
		r, m := &recs[i], &msgs[i]
		if t := r.Topic(); string(t) != topic {
			topic = string(t)
		}
		m.Topic = topic
		if copyBodies {
			start := len(bodies)
			bodies = append(bodies, r.Body()...)
			m.Body = bodies[start:len(bodies):len(bodies)]
		} else {
			m.Body = r.Body()
		}
		r.fillHeader(m)
		m.Properties = ParseProperties(props[:r.propsLen])
		props = props[r.propsLen:]
		out[i] = m
	}
	return out, bad
}

// UncompressBody returns body uncompressed when sysFlag says it is compressed,
// else body itself. Only zlib (type bits 0x000 or 0x300) is supported, which is
// what the official Go client writes and reads.
func UncompressBody(sysFlag int32, body []byte) ([]byte, error) {
	return uncompressBody(sysFlag, body, MaxUncompressedBody)
}

// uncompressBody is UncompressBody inflating to at most limit bytes.
func uncompressBody(sysFlag int32, body []byte, limit int) ([]byte, error) {
	if sysFlag&FlagCompressed == 0 {
		return body, nil
	}
	switch CompressionType(sysFlag) {
	case CompressionZlibDefault, CompressionZlib:
	default:
		return nil, fmt.Errorf("%w: 0x%X", ErrUnsupportedCompression, CompressionType(sysFlag))
	}
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("message: uncompress body: %w", err)
	}
	defer func() { _ = zr.Close() }()
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("message: uncompress body: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes from %d", ErrBodyTooLarge, limit, len(body))
	}
	return out, nil
}
