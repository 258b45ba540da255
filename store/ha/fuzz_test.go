package ha

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

// frameBytes encodes a plain frame.
func frameBytes(off int64, body []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(off))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// FuzzSlaveStream feeds arbitrary bytes to a new slave as its master's
// stream: it must end the session with an error, never panic, and keep
// only whole valid records at the offsets they claim.
func FuzzSlaveStream(f *testing.F) {
	src, err := store.Open(storeConfig(f.TempDir()), nil)
	require.NoError(f, err)
	end := putN(f, src, 0, 30, 300)
	res, ok := src.CommitLog().GetMessage(0, int32(end))
	require.True(f, ok)
	data := append([]byte(nil), res.Bytes...)
	res.Release()
	require.NoError(f, src.Shutdown(context.Background()))

	rec := int(binary.BigEndian.Uint32(data))
	var whole []byte
	for pos := 0; pos < len(data); pos += 1000 {
		whole = append(whole, frameBytes(int64(pos), data[pos:min(len(data), pos+1000)])...)
	}
	ans := (&answer{masterMax: end}).encode(nil)
	f.Add(whole)
	f.Add(append(append([]byte(nil), ans...), whole...))
	f.Add(whole[:len(whole)/2])
	f.Add(frameBytes(0, data[:rec+10]))
	f.Add(append(frameBytes(0, data[:rec]), frameBytes(int64(rec)+1, data[rec:])...))
	f.Add(frameBytes(int64(storeConfig("").MappedFileSizeCommitLog), nil))
	f.Add([]byte{0xFF, 'H', 'A', 'K', 0, 0, 0, 0, 0, 0, 0, 24})
	// Lost range announcements: one the slave takes, then its bytes and
	// records after them; one that does not start at the slave's offset.
	lost := appendLost(append([]byte(nil), ans...), 0, int64(rec), false)
	f.Add(append(append(lost, frameBytes(0, data[:rec])...), frameBytes(int64(rec), data[rec:])...))
	f.Add(append(append(append([]byte(nil), ans...), frameBytes(0, data[:rec])...), appendLost(nil, 1, 2, false)...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))

	f.Fuzz(func(t *testing.T, stream []byte) {
		dst, err := store.Open(storeConfig(t.TempDir()), nil)
		require.NoError(t, err)
		defer dst.Shutdown(context.Background())
		cfg := haConfig()
		cfg.HousekeepingInterval = 2 * time.Second
		sl, err := NewSlave(dst, cfg, nil)
		require.NoError(t, err)
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer server.Close()
			if _, err := io.ReadFull(server, make([]byte, helloSize)); err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, server) }() // reports
			_, _ = server.Write(stream)
		}()
		ss := sl.newSession(client, "fuzz")
		err = ss.run()
		ss.close()
		<-done
		require.Error(t, err)
		checkWholeRecords(t, dst)
	})
}

// checkWholeRecords walks the commitlog: valid records at their offsets,
// blank markers closing files, up to exactly its max offset. Bytes the
// master announced as lost are copied unchecked; they are in the
// commitlog's lost ranges, never served, and skipped here.
func checkWholeRecords(t *testing.T, st *store.Store) {
	cl := st.CommitLog()
	for off := cl.MinOffset(); off < cl.MaxOffset(); {
		if r, ok := cl.LostRangeAfter(off); ok && r.From <= off {
			off = min(r.To, cl.MaxOffset())
			continue
		}
		res, ok := cl.GetData(off)
		require.True(t, ok, "data at %d", off)
		b := res.Bytes
		if r, ok := cl.LostRangeAfter(off); ok && r.From < off+int64(len(b)) {
			b = b[:r.From-off]
		}
		pos := 0
		for pos < len(b) {
			d, err := store.CheckRecord(b[pos:], true)
			require.NoError(t, err, "record at %d", off+int64(pos))
			if d.BlankRecord {
				pos = len(b)
				break
			}
			require.Equal(t, off+int64(pos), d.CommitLogOffset)
			pos += int(d.MsgSize)
		}
		res.Release()
		off += int64(pos)
	}
}
