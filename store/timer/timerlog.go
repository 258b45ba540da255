package timer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// Timerlog unit layout (part of the on-disk format, see the package doc).
const (
	UnitSize = 56

	unitMagic = 0x544D5231 // "TMR1"

	offMagic       = 0
	offFlags       = 4
	offDeliverMs   = 8
	offFireMs      = 16
	offCommitLog   = 24
	offQueueOffset = 32
	offPrevPos     = 40
	offSize        = 48

	flagDone   = 1
	flagRoll   = 2
	flagCancel = 4 // the unit is a cancel marker (Entry.Cancel)
)

// Errors of the timerlog.
var (
	// ErrBadFileSize means a timerlog file size is not a positive multiple of UnitSize.
	ErrBadFileSize = errors.New("timer: timerlog file size must be a positive multiple of 56")
	// ErrNoUnit means a position does not point at a unit of a live file.
	ErrNoUnit = errors.New("timer: no timerlog unit at position")
	// ErrClosed means the wheel was closed.
	ErrClosed = errors.New("timer: closed")
)

// segment is one memory-mapped timerlog file.
type segment struct {
	start   int64
	path    string
	data    []byte
	pending int  // units not done
	dirty   bool // written since the last sync
}

func segmentName(start int64) string { return fmt.Sprintf("%020d", start) }

// openSegment maps (creating when create) the file of start.
func openSegment(dir string, start int64, size int, create bool) (*segment, error) {
	path := filepath.Join(dir, segmentName(start))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("timer: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("timer: stat %s: %w", path, err)
	}
	if st.Size() != int64(size) {
		if !create && st.Size() > int64(size) {
			return nil, fmt.Errorf("timer: %s is %d bytes, want %d: %w", path, st.Size(), size, ErrBadFileSize)
		}
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("timer: size %s: %w", path, err)
		}
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("timer: map %s: %w", path, err)
	}
	return &segment{start: start, path: path, data: data}, nil
}

func (s *segment) sync() error {
	if !s.dirty {
		return nil
	}
	if err := unix.Msync(s.data, unix.MS_SYNC); err != nil {
		return fmt.Errorf("timer: sync %s: %w", s.path, err)
	}
	s.dirty = false
	return nil
}

func (s *segment) close() error {
	if s.data == nil {
		return nil
	}
	err := unix.Munmap(s.data)
	s.data = nil
	return err
}

// listSegments returns the start positions of the timerlog files in dir, sorted.
func listSegments(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("timer: list %s: %w", dir, err)
	}
	var out []int64
	for _, e := range ents {
		if e.IsDir() || len(e.Name()) != 20 {
			continue
		}
		n, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || n < 0 {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// unit is a decoded timerlog unit.
type unit struct {
	flags       uint32
	deliverMs   int64
	fireMs      int64
	commitLog   int64
	queueOffset int64
	prevPos     int64
	size        int32
}

var be = binary.BigEndian

func readUnit(b []byte) (unit, bool) {
	if be.Uint32(b[offMagic:]) != unitMagic {
		return unit{}, false
	}
	return unit{
		flags:       be.Uint32(b[offFlags:]),
		deliverMs:   int64(be.Uint64(b[offDeliverMs:])),
		fireMs:      int64(be.Uint64(b[offFireMs:])),
		commitLog:   int64(be.Uint64(b[offCommitLog:])),
		queueOffset: int64(be.Uint64(b[offQueueOffset:])),
		prevPos:     int64(be.Uint64(b[offPrevPos:])),
		size:        int32(be.Uint32(b[offSize:])),
	}, true
}

// writeUnit writes u; the magic goes last so a torn write reads as the end.
func writeUnit(b []byte, u unit) {
	be.PutUint32(b[offFlags:], u.flags)
	be.PutUint64(b[offDeliverMs:], uint64(u.deliverMs))
	be.PutUint64(b[offFireMs:], uint64(u.fireMs))
	be.PutUint64(b[offCommitLog:], uint64(u.commitLog))
	be.PutUint64(b[offQueueOffset:], uint64(u.queueOffset))
	be.PutUint64(b[offPrevPos:], uint64(u.prevPos))
	be.PutUint32(b[offSize:], uint32(u.size))
	be.PutUint32(b[offMagic:], unitMagic)
}
