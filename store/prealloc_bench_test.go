package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPreallocate measures what a new mapped file costs before its
// first write (prep) and then per group commit: a 32 KiB copy into the
// mapping followed by fdatasync, the SYNC_FLUSH path. It compares
// fallocate (reserveBlocks), writing zeros (writeZeros) and a sparse
// file (truncate only).
func BenchmarkPreallocate(b *testing.B) {
	const fileSize = 64 << 20
	const chunk = 32 << 10
	ways := []struct {
		name string
		prep func(f *os.File) error
	}{
		{"fallocate", func(f *os.File) error { return reserveBlocks(f, 0, fileSize) }},
		{"zeros", func(f *os.File) error { return writeZeros(f, 0, fileSize) }},
		{"sparse", func(f *os.File) error { return f.Truncate(fileSize) }},
	}
	for _, w := range ways {
		b.Run(fmt.Sprintf("prep/%s", w.name), func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(fileSize)
			b.ReportAllocs()
			for i := range b.N {
				f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				if err := w.prep(f); err != nil {
					b.Fatal(err)
				}
				f.Close()
				os.Remove(f.Name())
			}
		})
		b.Run(fmt.Sprintf("commit32KiB/%s", w.name), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "f"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := w.prep(f); err != nil {
				b.Fatal(err)
			}
			data, err := unix.Mmap(int(f.Fd()), 0, fileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Munmap(data)
			buf := make([]byte, chunk)
			pos := 0
			b.SetBytes(chunk)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if pos+chunk > fileSize {
					pos = 0
				}
				copy(data[pos:], buf)
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				pos += chunk
			}
		})
	}
}
