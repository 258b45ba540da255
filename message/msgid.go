package message

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
	"unicode/utf16"
)

// ErrBadMsgID means an offsetMsgId is not 32 or 56 hex characters.
var ErrBadMsgID = errors.New("message: malformed offset message id")

const upperHex = "0123456789ABCDEF"

func appendUpperHex(dst, src []byte) []byte {
	for _, c := range src {
		dst = append(dst, upperHex[c>>4], upperHex[c&0xF])
	}
	return dst
}

// AppendOffsetMsgID appends the offsetMsgId of a record stored at offset on
// storeHost: ip (4 or 16 bytes) + port (int32) + offset (int64), upper-case
// hex (32 characters for IPv4, 56 for IPv6).
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, offset int64) []byte {
	var raw [28]byte
	ip, n := hostBytes(storeHost)
	copy(raw[:], ip[:n])
	binary.BigEndian.PutUint32(raw[n:], uint32(storeHost.Port()))
	binary.BigEndian.PutUint64(raw[n+4:], uint64(offset))
	return appendUpperHex(dst, raw[:n+12])
}

// CreateOffsetMsgID returns the offsetMsgId of a record (see AppendOffsetMsgID).
func CreateOffsetMsgID(storeHost netip.AddrPort, offset int64) string {
	var buf [56]byte
	return string(AppendOffsetMsgID(buf[:0], storeHost, offset))
}

// ParseOffsetMsgID decodes an offsetMsgId (either hex case) into its store
// host and commitlog offset.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	var raw [28]byte
	var ipLen int
	switch len(id) {
	case 32:
		ipLen = 4
	case 56:
		ipLen = 16
	default:
		return netip.AddrPort{}, 0, fmt.Errorf("%w: length %d", ErrBadMsgID, len(id))
	}
	n, err := hex.Decode(raw[:], []byte(id))
	if err != nil || n != ipLen+12 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q", ErrBadMsgID, id)
	}
	var a netip.Addr
	if ipLen == 4 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16([16]byte(raw[:16]))
	}
	port := binary.BigEndian.Uint32(raw[ipLen:])
	if port > 65535 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: port %d", ErrBadMsgID, port)
	}
	off := int64(binary.BigEndian.Uint64(raw[ipLen+4:]))
	return netip.AddrPortFrom(a, uint16(port)), off, nil
}

// TagsHashCode returns Java's String.hashCode of tags (over UTF-16 code
// units, int32 arithmetic) widened to int64: the tagsCode of a consume queue
// entry. An empty string hashes to 0.
func TagsHashCode(tags string) int64 {
	var h int32
	for i := 0; i < len(tags); i++ {
		c := tags[i]
		if c < 0x80 { // ASCII fast path: one byte is one UTF-16 unit
			h = 31*h + int32(c)
			continue
		}
		for _, r := range tags[i:] {
			if r >= 0x10000 {
				r1, r2 := utf16.EncodeRune(r)
				h = 31*h + r1
				h = 31*h + r2
			} else {
				h = 31*h + r
			}
		}
		break
	}
	return int64(h)
}

// UniqIDGenerator makes UNIQ_KEY message ids in the Java/Go layout:
// a fixed prefix ip (4 or 16 bytes) + pid (int16) + class-loader id (int32, 0
// here), then the milliseconds since the start of the current month (int32) and
// a counter (int16); all upper-case hex (32 characters with an IPv4 address).
//
// Ids from one generator are unique: the (time, counter) pair comes from one
// atomic word that only moves forward; when 65,536 ids are taken within one
// millisecond the time borrows the next millisecond. It is safe for concurrent
// use and does not lock.
type UniqIDGenerator struct {
	prefix []byte        // upper-case hex of ip + pid + class-loader id
	state  atomic.Uint64 // unix ms << 16 | counter
	month  atomic.Pointer[monthWindow]
	now    func() time.Time
}

type monthWindow struct{ start, end int64 } // unix ms, [start, end)

// NewUniqIDGenerator returns a generator for a client at ip, with this process' pid.
func NewUniqIDGenerator(ip netip.Addr) *UniqIDGenerator {
	return newUniqIDGenerator(ip, os.Getpid(), time.Now)
}

func newUniqIDGenerator(ip netip.Addr, pid int, now func() time.Time) *UniqIDGenerator {
	var raw [22]byte
	a, n := hostBytes(netip.AddrPortFrom(ip, 0))
	copy(raw[:], a[:n])
	binary.BigEndian.PutUint16(raw[n:], uint16(int16(pid)))
	// class-loader id: 4 zero bytes, as the Go client writes.
	g := &UniqIDGenerator{prefix: appendUpperHex(nil, raw[:n+6]), now: now}
	return g
}

func (g *UniqIDGenerator) window(ms int64) *monthWindow {
	w := g.month.Load()
	if w != nil && ms >= w.start && ms < w.end {
		return w
	}
	t := time.UnixMilli(ms)
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	w = &monthWindow{start: start.UnixMilli(), end: start.AddDate(0, 1, 0).UnixMilli()}
	g.month.Store(w)
	return w
}

// AppendNext appends a new id to dst.
func (g *UniqIDGenerator) AppendNext(dst []byte) []byte {
	now := uint64(g.now().UnixMilli())
	var next uint64
	for {
		old := g.state.Load()
		if oldMs := old >> 16; now > oldMs {
			next = now << 16
		} else {
			next = old + 1 // counter overflow carries into the ms: borrow the next one
		}
		if g.state.CompareAndSwap(old, next) {
			break
		}
	}
	ms := int64(next >> 16)
	w := g.window(ms)
	var tail [6]byte
	binary.BigEndian.PutUint32(tail[:], uint32(int32(ms-w.start)))
	binary.BigEndian.PutUint16(tail[4:], uint16(next))
	dst = append(dst, g.prefix...)
	return appendUpperHex(dst, tail[:])
}

// Next returns a new id.
func (g *UniqIDGenerator) Next() string {
	var buf [64]byte
	return string(g.AppendNext(buf[:0]))
}
