// Package testfs gives tests a real file system of a chosen size, so a full
// disk can be tested as the kernel reports it (ENOSPC, SIGBUS on a mapped
// hole) rather than as a mocked usage figure.
package testfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MustMountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it; the test's cleanup unmounts it. Mounting needs root (CI runs as root):
// elsewhere the test is skipped, with the reason.
func MustMountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; this test needs a real file system that fills up")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v); this test needs a real file system that fills up", dir, err)
	}
	t.Cleanup(func() {
		// Lazy: a store the test failed to close must not fail the cleanup.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a ballast file into dir until the file system holding it has
// at most leave bytes available, and returns the ballast's path; removing it
// frees the space again.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("create ballast: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 1 << 20 { // bounded: 64 GiB
		avail := Available(t, dir)
		if avail <= leave {
			return path
		}
		n := min(int64(len(chunk)), avail-leave)
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return path
			}
			t.Fatalf("write ballast: %v", err)
		}
	}
	t.Fatalf("ballast in %s never filled the file system", dir)
	return path
}

// Available returns the bytes an unprivileged writer can still use on the
// file system holding dir.
func Available(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
