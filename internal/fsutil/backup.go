package fsutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// BackupSuffix names the previous version of a metadata file: <path>.bak,
// as RocketMQ's ConfigManager names it.
const BackupSuffix = ".bak"

// ErrNoValidCopy is returned by LoadWithBackup when neither a file nor its
// backup loads (each is missing, unreadable, empty or does not parse, and
// at least one of them exists).
var ErrNoValidCopy = errors.New("fsutil: neither the file nor its backup loads (repair one, or move both aside to start without them)")

// errEmpty is the reason given for a file holding nothing but white space:
// our writes are atomic, so an empty metadata file is damage, not an empty
// table.
var errEmpty = errors.New("empty")

// errMissing is the reason given for a file that does not exist.
var errMissing = fmt.Errorf("missing: %w", fs.ErrNotExist)

// linkFile makes the backup's hard link; a variable so tests can take the
// copy path a file system without hard links takes.
var linkFile = os.Link

// WriteFileWithBackup replaces path with data, keeping the content it
// replaces as path+".bak". The steps:
//
//  1. data goes to a temporary file T in the same directory, fsynced;
//  2. when path exists, a hard link to it under a temporary name is renamed
//     over path.bak: the backup now is the current content (the same inode
//     until step 3 gives path a new one; path is only ever replaced, never
//     written in place);
//  3. T is renamed over path;
//  4. the directory is fsynced.
//
// path is never removed, so a crash at any instant leaves it holding the old
// or the new content (T was on disk before the rename), and path.bak the
// previous backup or the old content. The directory is not synced between
// steps 2 and 3: if the rename of step 3 reaches the disk and the one of step
// 2 does not, the backup is one version older, still a whole file. Without
// hard links (some file systems), step 2 copies path instead. The directory
// must exist.
func WriteFileWithBackup(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := backup(path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsutil: rename %s to %s: %w", tmp, path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// backup makes path.bak hold path's current content (step 2 of
// WriteFileWithBackup); nothing to do when path does not exist.
func backup(path string) error {
	tmp, err := cloneToTemp(path, "."+filepath.Base(path)+BackupSuffix+".tmp")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the first write: no previous content
	}
	if err != nil {
		return err
	}
	bak := path + BackupSuffix
	if err := os.Rename(tmp, bak); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsutil: rename %s to %s: %w", tmp, bak, err)
	}
	return nil
}

// cloneToTemp gives src's content a second name in its directory,
// prefix<digits>: a hard link, or a fsynced copy where the file system has
// no hard links. An error wraps fs.ErrNotExist when src does not exist.
func cloneToTemp(src, prefix string) (string, error) {
	dir := filepath.Dir(src)
	var tmp string
	var err error
	// A name no one else holds: like os.CreateTemp's, but for a link.
	for range 100 {
		tmp = filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		if err = linkFile(src, tmp); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return tmp, err
	}
	return copyToTemp(src, prefix+"*")
}

// copyToTemp copies src to a new, fsynced temporary file in its directory
// named by pattern (os.CreateTemp) and returns its name.
func copyToTemp(src, pattern string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("fsutil: open %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return "", fmt.Errorf("fsutil: stat %s: %w", src, err)
	}
	out, err := os.CreateTemp(filepath.Dir(src), pattern)
	if err != nil {
		return "", fmt.Errorf("fsutil: create copy of %s: %w", src, err)
	}
	tmp := out.Name()
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(st.Mode().Perm())
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("fsutil: copy %s to %s: %w", src, tmp, err)
	}
	return tmp, nil
}

// LoadWithBackup reads path and hands its content to parse; when path is
// missing, unreadable, empty or parse fails, it does the same with
// path.bak. It returns the value parsed and whether a file was found:
//
//   - path loads: its value;
//   - path does not, the backup does: the backup's value, with a warning
//     naming both files and why path was passed over. A damaged path is
//     renamed aside (path.corrupt-<unix seconds>) and path is given a copy
//     of the backup's content, so the next WriteFileWithBackup keeps a good
//     backup instead of backing up the damage, and the next start does not
//     warn again;
//   - neither exists: found is false and err nil (start from defaults);
//   - otherwise ErrNoValidCopy, naming both files and their faults.
//
// parse must build a fresh value from data and leave no state behind when
// it fails: it is called up to twice, and the caller applies the value only
// once one was returned. LoadWithBackup also removes the temporary files a
// crashed WriteFileAtomic or WriteFileWithBackup of path left behind, so call
// it before anything writes path. log may be nil.
func LoadWithBackup[T any](path string, log logrus.FieldLogger, parse func(data []byte) (T, error)) (v T, found bool, err error) {
	removeStaleTemps(path, log)
	bak := path + BackupSuffix
	v, mainErr := readAndParse(path, parse)
	if mainErr == nil {
		separate(path, bak, log)
		return v, true, nil
	}
	bv, bakErr := readAndParse(bak, parse)
	mainMissing := errors.Is(mainErr, fs.ErrNotExist)
	switch {
	case bakErr == nil:
		fields := logrus.Fields{"file": path, "backup": bak, "reason": mainErr.Error()}
		if !mainMissing {
			aside := path + ".corrupt-" + strconv.FormatInt(time.Now().Unix(), 10)
			if err := os.Rename(path, aside); err != nil {
				return v, false, fmt.Errorf("fsutil: %s does not load (%v) and cannot be moved aside for its backup %s: %w", path, mainErr, bak, err)
			}
			if err := SyncDir(filepath.Dir(path)); err != nil {
				return v, false, err
			}
			fields["movedTo"] = aside
		}
		if err := restore(path, bak); err != nil {
			return v, false, err
		}
		if log != nil {
			log.WithFields(fields).Warn("metadata file does not load; loaded its backup")
		}
		return bv, true, nil
	case mainMissing && errors.Is(bakErr, fs.ErrNotExist):
		return v, false, nil
	default:
		return v, false, fmt.Errorf("%w: %s: %w; %s: %w", ErrNoValidCopy, path, mainErr, bak, bakErr)
	}
}

// separate replaces bak by a copy of itself when it is the same file as
// path: a write that crashed between its backup and its rename leaves the
// two names on one inode, which one bad sector would damage together.
// Failing, it only warns: path loaded.
func separate(path, bak string, log logrus.FieldLogger) {
	a, err := os.Stat(path)
	if err != nil {
		return
	}
	b, err := os.Stat(bak)
	if err != nil || !os.SameFile(a, b) {
		return
	}
	tmp, err := copyToTemp(bak, "."+filepath.Base(bak)+".tmp*")
	if err == nil {
		if err = os.Rename(tmp, bak); err != nil {
			_ = os.Remove(tmp)
		}
	}
	if err == nil {
		err = SyncDir(filepath.Dir(bak))
	}
	if err != nil && log != nil {
		log.WithError(err).WithField("file", bak).Warn("cannot make the backup a file of its own")
	}
}

// restore gives the missing path a copy of bak's content (fsynced, renamed
// into place) and makes the name durable. A copy, not a link: the two must
// not share blocks that one bad sector or an in-place edit would damage
// together.
func restore(path, bak string) error {
	tmp, err := copyToTemp(bak, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("fsutil: restore %s from %s: %w", path, bak, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsutil: restore %s from %s: %w", path, bak, err)
	}
	return SyncDir(filepath.Dir(path))
}

// readAndParse reads path and parses it; its errors say what is wrong
// without repeating the path.
func readAndParse[T any](path string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return zero, errMissing
	case err != nil:
		return zero, err
	case len(bytes.TrimSpace(data)) == 0:
		return zero, errEmpty
	}
	return parse(data)
}

// removeStaleTemps removes the temporary files a crashed write of path
// left: .<name>.tmp<digits> (WriteFileAtomic, WriteFileWithBackup) and
// .<name>.bak.tmp<digits> (the backup's link or copy).
func removeStaleTemps(path string, log logrus.FieldLogger) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, "."+base)
		if !ok || e.IsDir() {
			continue
		}
		rest = strings.TrimPrefix(rest, BackupSuffix)
		digits, ok := strings.CutPrefix(rest, ".tmp")
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err == nil && log != nil {
			log.WithField("file", filepath.Join(dir, name)).Info("removed a temporary file a crashed write left")
		}
	}
}

// DecodeJSONObject is json.Unmarshal for a metadata file whose top level
// must be an object: a bare null, which json.Unmarshal takes without
// complaint and leaves the value empty, is damage, not an empty table.
func DecodeJSONObject(data []byte, v any) error {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(data, v)
}
