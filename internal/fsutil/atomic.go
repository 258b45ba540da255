// Package fsutil holds the file-system steps every server needs for its
// metadata files to survive a crash.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new content, never a mix: it writes a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory so the
// rename itself is durable. The directory must exist.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsutil: rename %s to %s: %w", tmp, path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a new temporary file next to path (named after
// it: .<name>.tmp<digits>), fsyncs it and returns its name.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("fsutil: create temp file for %s: %w", path, err)
	}
	tmp := f.Name()
	cleanup := func(err error) (string, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		return cleanup(fmt.Errorf("fsutil: write %s: %w", tmp, err))
	}
	if err := f.Chmod(perm); err != nil {
		return cleanup(fmt.Errorf("fsutil: chmod %s: %w", tmp, err))
	}
	if err := f.Sync(); err != nil {
		return cleanup(fmt.Errorf("fsutil: sync %s: %w", tmp, err))
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("fsutil: close %s: %w", tmp, err)
	}
	return tmp, nil
}

// SyncDir fsyncs a directory so a created, renamed or removed name in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsutil: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsutil: sync dir %s: %w", dir, err)
	}
	return nil
}
