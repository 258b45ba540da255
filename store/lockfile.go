package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrStoreLocked means another process (or another open store in this
// process) holds the store directory's lock file.
var ErrStoreLocked = errors.New("store: store directory is locked by another broker")

// LockFile is an exclusive lock on <root>/lock, held for the life of a store,
// as RocketMQ's DefaultMessageStore takes it at start. The lock is an flock
// on an open descriptor, so it disappears with the process: a crash never
// leaves a stale lock behind.
type LockFile struct {
	path string
	f    *os.File
}

// LockDir creates <dir>/lock if needed and locks it without waiting. A second
// LockDir on the same directory, from this or another process, fails with
// ErrStoreLocked naming the directory.
func LockDir(dir string) (*LockFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create store dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file %s: %w", path, err)
	}
	// flock locks belong to the open file description, so a second open of
	// the same path in this process conflicts too (unlike fcntl locks).
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (is another broker running on it?)", ErrStoreLocked, dir)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	// RocketMQ writes "lock" into the file; kept for operators who look.
	if _, err := f.WriteAt([]byte("lock"), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: write lock file %s: %w", path, err)
	}
	return &LockFile{path: path, f: f}, nil
}

// Path returns the lock file's path.
func (l *LockFile) Path() string { return l.path }

// Unlock releases the lock. The file stays, as in RocketMQ. Safe to call twice.
func (l *LockFile) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: unlock %s: %w", l.path, err)
	}
	return nil
}
