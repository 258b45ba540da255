package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchCommitLog opens a commitlog with fileSize files and creates the first
// file before the timer starts. File rolls inside the timed loop are part of
// the cost (a new file is preallocated with zeros under the put lock).
func benchCommitLog(b *testing.B, ft FlushDiskType, fileSize int, mode FlushMode) *CommitLog {
	return benchCommitLogCRC(b, ft, fileSize, mode, false)
}

// benchCommitLogCRC is benchCommitLog with EnabledAppendPropCRC set as given.
func benchCommitLogCRC(b *testing.B, ft FlushDiskType, fileSize int, mode FlushMode, propCRC bool) *CommitLog {
	cfg := DefaultConfig(b.TempDir())
	cfg.EnabledAppendPropCRC = propCRC
	cfg.FlushDiskType = ft
	cfg.MappedFileSizeCommitLog = fileSize
	cl := mustOpenCommitLog(b, cfg, nil, true, func(cl *CommitLog) { cl.Files().SetFlushMode(mode) })
	if r := cl.PutMessage(context.Background(), clMsg("Bench", 0, []byte("warm"), nil)); r.Status != PutOK {
		b.Fatal(r.Err)
	}
	// Start timing in the steady state: the next file already preallocated.
	deadline := time.Now().Add(time.Minute)
	for {
		cl.alloc.mu.Lock()
		ready := cl.alloc.ready != nil
		cl.alloc.mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("next file not preallocated in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cl
}

func runPuts(b *testing.B, cl *CommitLog, writers int) {
	body := make([]byte, 1024)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	if writers == 1 {
		m := clMsg("Bench", 0, body, map[string]string{"TAGS": "t"})
		for range b.N {
			if r := cl.PutMessage(context.Background(), m); r.Status != PutOK {
				b.Fatal(r.Status, r.Err)
			}
		}
	} else {
		b.SetParallelism((writers + 1) / 2) // GOMAXPROCS=2 on the target machine
		b.RunParallel(func(pb *testing.PB) {
			m := clMsg("Bench", 1, body, map[string]string{"TAGS": "t"})
			for pb.Next() {
				if r := cl.PutMessage(context.Background(), m); r.Status != PutOK {
					b.Error(r.Status, r.Err)
					return
				}
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPutMessage appends 1 KiB messages with 1 and 8 writers under each
// flush mode, 1 GiB files (the production size).
func BenchmarkPutMessage(b *testing.B) { benchPutMessage(b, false) }

// BenchmarkPutMessagePropCRC is BenchmarkPutMessage with
// enabledAppendPropCRC: a CRC of each record under the writer lock.
func BenchmarkPutMessagePropCRC(b *testing.B) { benchPutMessage(b, true) }

func benchPutMessage(b *testing.B, propCRC bool) {
	for _, ft := range []FlushDiskType{AsyncFlush, SyncFlush} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", ft, writers), func(b *testing.B) {
				cl := benchCommitLogCRC(b, ft, 1<<30, DefaultCommitLogFlushMode, propCRC)
				runPuts(b, cl, writers)
			})
		}
	}
}

// BenchmarkSyncFlush64Writers is the group-commit target (>= 30,000 msgs/s),
// with both flush system calls, to choose DefaultCommitLogFlushMode.
func BenchmarkSyncFlush64Writers(b *testing.B) {
	for _, mode := range []FlushMode{FlushMsync, FlushFdatasync} {
		b.Run(mode.String(), func(b *testing.B) {
			cl := benchCommitLog(b, SyncFlush, 1<<30, mode)
			runPuts(b, cl, 64)
			b.ReportMetric(float64(cl.flush.syncs.Load())/float64(b.N), "syncs/msg")
		})
	}
}

// BenchmarkSyncFlush1Writer compares the two flush system calls when every
// put waits for its own sync (no grouping possible).
func BenchmarkSyncFlush1Writer(b *testing.B) {
	for _, mode := range []FlushMode{FlushMsync, FlushFdatasync} {
		b.Run(mode.String(), func(b *testing.B) {
			cl := benchCommitLog(b, SyncFlush, 1<<30, mode)
			runPuts(b, cl, 1)
		})
	}
}

// BenchmarkSyncWritePath compares the ways to make an append durable, outside
// the commitlog: copy into a shared mapping then msync the dirty range, copy
// into the mapping then fdatasync, or pwrite then fdatasync. chunk is what one
// sync covers (one 1 KiB message, or a 32 KiB group commit).
func BenchmarkSyncWritePath(b *testing.B) {
	const fileSize = 64 << 20
	for _, chunk := range []int{1 << 10, 32 << 10} {
		for _, path := range []string{"mmap+msync", "mmap+fdatasync", "pwrite+fdatasync"} {
			b.Run(fmt.Sprintf("%s/chunk=%dKiB", path, chunk>>10), func(b *testing.B) {
				f, err := os.Create(filepath.Join(b.TempDir(), "f"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := reserveBlocks(f, 0, fileSize); err != nil {
					b.Fatal(err)
				}
				data, err := unix.Mmap(int(f.Fd()), 0, fileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Munmap(data)
				buf := bytes.Repeat([]byte{7}, chunk)
				fd := int(f.Fd())
				pos := 0
				b.SetBytes(int64(chunk))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if pos+chunk > fileSize {
						pos = 0
					}
					switch path {
					case "mmap+msync":
						copy(data[pos:], buf)
						start := pos &^ (osPageSize - 1)
						err = unix.Msync(data[start:pos+chunk], unix.MS_SYNC)
					case "mmap+fdatasync":
						copy(data[pos:], buf)
						err = unix.Fdatasync(fd)
					default:
						if _, err = unix.Pwrite(fd, buf, int64(pos)); err == nil {
							err = unix.Fdatasync(fd)
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					pos += chunk
				}
			})
		}
	}
}
