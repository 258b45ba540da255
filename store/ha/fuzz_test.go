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
// blank markers closing files, up to exactly its max offset.
func checkWholeRecords(t *testing.T, st *store.Store) {
	cl := st.CommitLog()
	for off := cl.MinOffset(); off < cl.MaxOffset(); {
		res, ok := cl.GetData(off)
		require.True(t, ok, "data at %d", off)
		b := res.Bytes
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
