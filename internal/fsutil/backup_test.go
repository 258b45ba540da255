package fsutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// table is a small metadata file for the tests: {"n":N}.
type table struct {
	N int `json:"n"`
}

func parseTable(data []byte) (table, error) {
	var t table
	err := DecodeJSONObject(data, &t)
	return t, err
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestWriteFileWithBackup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topics.json")
	require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":1}`), 0o600))
	assert.Equal(t, []string{"topics.json"}, dirNames(t, dir), "the first write has nothing to back up")

	require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":2}`), 0o644))
	assert.Equal(t, `{"n":2}`, readString(t, path))
	assert.Equal(t, `{"n":1}`, readString(t, path+BackupSuffix))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":3}`), 0o644))
	assert.Equal(t, `{"n":3}`, readString(t, path))
	assert.Equal(t, `{"n":2}`, readString(t, path+BackupSuffix), "the backup is the version just replaced")
	assert.Equal(t, []string{"topics.json", "topics.json.bak"}, dirNames(t, dir), "no temporary file left behind")
	assertDistinct(t, path)

	assert.Error(t, WriteFileWithBackup(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o644))
}

func TestWriteFileWithBackupWithoutHardLinks(t *testing.T) {
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: errors.ErrUnsupported} }
	t.Cleanup(func() { linkFile = os.Link })
	dir := t.TempDir()
	path := filepath.Join(dir, "consumerOffset.json")
	require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":1}`), 0o644))
	require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":2}`), 0o644))
	assert.Equal(t, `{"n":2}`, readString(t, path))
	assert.Equal(t, `{"n":1}`, readString(t, path+BackupSuffix), "copied instead of linked")
	assert.Equal(t, []string{"consumerOffset.json", "consumerOffset.json.bak"}, dirNames(t, dir))

	// A fallback restores the file by a copy too.
	require.NoError(t, os.Remove(path))
	v, found, err := LoadWithBackup(path, nil, parseTable)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 1, v.N)
	assert.Equal(t, `{"n":1}`, readString(t, path))
	assert.Equal(t, []string{"consumerOffset.json", "consumerOffset.json.bak"}, dirNames(t, dir))
}

// TestWriteFileWithBackupCrashBetweenSteps performs the steps of a write up
// to each point a crash could stop it, and checks that what is left loads
// (the old or the new content), that the stray temporary files go, and that
// the next write works.
func TestWriteFileWithBackupCrashBetweenSteps(t *testing.T) {
	steps := []struct {
		name string
		want int // the value that loads afterwards
		do   func(t *testing.T, path string)
	}{
		{"temp file half written", 1, func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), ".t.json.tmp123"), []byte(`{"n":`), 0o644))
		}},
		{"temp file written", 1, func(t *testing.T, path string) {
			_, err := writeTemp(path, []byte(`{"n":2}`), 0o644)
			require.NoError(t, err)
		}},
		{"backup linked under its temporary name", 1, func(t *testing.T, path string) {
			_, err := writeTemp(path, []byte(`{"n":2}`), 0o644)
			require.NoError(t, err)
			require.NoError(t, os.Link(path, filepath.Join(filepath.Dir(path), ".t.json.bak.tmp42")))
		}},
		{"backup renamed", 1, func(t *testing.T, path string) {
			_, err := writeTemp(path, []byte(`{"n":2}`), 0o644)
			require.NoError(t, err)
			require.NoError(t, backup(path))
		}},
		{"new content renamed, directory not synced", 2, func(t *testing.T, path string) {
			tmp, err := writeTemp(path, []byte(`{"n":2}`), 0o644)
			require.NoError(t, err)
			require.NoError(t, backup(path))
			require.NoError(t, os.Rename(tmp, path))
		}},
		{"new content renamed, backup rename lost", 2, func(t *testing.T, path string) {
			// The directory was not synced between the two renames: the
			// disk may keep the second without the first.
			tmp, err := writeTemp(path, []byte(`{"n":2}`), 0o644)
			require.NoError(t, err)
			require.NoError(t, os.Rename(tmp, path))
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "t.json")
			require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":0}`), 0o644))
			require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":1}`), 0o644))
			st.do(t, path)

			v, found, err := LoadWithBackup(path, nil, parseTable)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, st.want, v.N)
			// The main file alone is whole, too: no fallback was needed.
			v, err = parseTable([]byte(readString(t, path)))
			require.NoError(t, err)
			assert.Equal(t, st.want, v.N)
			assert.Equal(t, []string{"t.json", "t.json.bak"}, dirNames(t, dir), "stray temporary files removed")
			assertDistinct(t, path)

			require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":7}`), 0o644))
			assert.Equal(t, `{"n":7}`, readString(t, path))
			assert.Equal(t, fmt.Sprintf(`{"n":%d}`, st.want), readString(t, path+BackupSuffix))
		})
	}
}

func TestLoadWithBackup(t *testing.T) {
	const good, older = `{"n":2}`, `{"n":1}`
	cases := []struct {
		name       string
		main, bak  *string // nil: no such file
		want       int
		found      bool
		errParts   []string // the error names these; nil: no error
		warn       bool
		movedAside bool
	}{
		{name: "main loads", main: ptr(good), bak: ptr("garbage"), want: 2, found: true},
		{name: "neither exists", found: false},
		{name: "main garbled", main: ptr(`{"n":2`), bak: ptr(older), want: 1, found: true, warn: true, movedAside: true},
		{name: "main wrong type", main: ptr(`{"n":"x"}`), bak: ptr(older), want: 1, found: true, warn: true, movedAside: true},
		{name: "main huge number", main: ptr(`{"n":1e400}`), bak: ptr(older), want: 1, found: true, warn: true, movedAside: true},
		{name: "main null", main: ptr(`null`), bak: ptr(older), want: 1, found: true, warn: true, movedAside: true},
		{name: "main empty", main: ptr(" \n"), bak: ptr(older), want: 1, found: true, warn: true, movedAside: true},
		{name: "main missing", bak: ptr(older), want: 1, found: true, warn: true},
		{name: "main garbled, no backup", main: ptr(`{"n":`), errParts: []string{"t.json:", "t.json.bak: missing"}},
		{name: "main empty, no backup", main: ptr(""), errParts: []string{"t.json: empty", "t.json.bak: missing"}},
		{name: "both garbled", main: ptr(`{"n":`), bak: ptr(`[1]`), errParts: []string{"t.json:", "t.json.bak: not a JSON object"}},
		{name: "main missing, backup garbled", bak: ptr(`{`), errParts: []string{"t.json: missing", "t.json.bak:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "t.json")
			if tc.main != nil {
				require.NoError(t, os.WriteFile(path, []byte(*tc.main), 0o644))
			}
			if tc.bak != nil {
				require.NoError(t, os.WriteFile(path+BackupSuffix, []byte(*tc.bak), 0o644))
			}
			log, hook := test.NewNullLogger()
			v, found, err := LoadWithBackup(path, log, parseTable)
			if tc.errParts != nil {
				require.ErrorIs(t, err, ErrNoValidCopy)
				for _, p := range tc.errParts {
					assert.Contains(t, err.Error(), filepath.Join(dir, p))
				}
				assert.False(t, found)
				// Nothing is moved or changed when nothing loads.
				if tc.main != nil {
					assert.Equal(t, *tc.main, readString(t, path))
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.found, found)
			assert.Equal(t, tc.want, v.N)
			var warned *logrus.Entry
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel {
					warned = e
				}
			}
			if !tc.warn {
				assert.Nil(t, warned)
				return
			}
			require.NotNil(t, warned, "a warning names both files")
			assert.Equal(t, path, warned.Data["file"])
			assert.Equal(t, path+BackupSuffix, warned.Data["backup"])
			assert.NotEmpty(t, warned.Data["reason"])
			assert.Equal(t, *tc.bak, readString(t, path), "the file has the backup's content again")
			assertDistinct(t, path)
			hook.Reset()
			v, found, err = LoadWithBackup(path, log, parseTable)
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, tc.want, v.N)
			assert.Empty(t, hook.AllEntries(), "the next start has nothing to warn about")
			aside, _ := filepath.Glob(path + ".corrupt-*")
			if tc.movedAside {
				require.Len(t, aside, 1, "the damaged file is kept aside")
				assert.Equal(t, aside[0], warned.Data["movedTo"])
				assert.Equal(t, *tc.main, readString(t, aside[0]))
				// The next write keeps the good backup, not the damage.
				require.NoError(t, WriteFileWithBackup(path, []byte(`{"n":3}`), 0o644))
				assert.Equal(t, *tc.bak, readString(t, path+BackupSuffix))
			} else {
				assert.Empty(t, aside)
			}
		})
	}
}

// TestLoadWithBackupFreshValue: a parse that fails part-way through the
// main file leaves nothing in the value the backup's parse returns.
func TestLoadWithBackupFreshValue(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"a":1,"b":2,"c":"x"}`), 0o644))
	require.NoError(t, os.WriteFile(path+BackupSuffix, []byte(`{"d":4}`), 0o644))
	v, found, err := LoadWithBackup(path, nil, func(data []byte) (map[string]int, error) {
		m := map[string]int{}
		return m, json.Unmarshal(data, &m)
	})
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, map[string]int{"d": 4}, v)
}

func TestRemoveStaleTempsKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	keep := []string{"a.json", "a.json.bak", ".a.json.tmp", ".a.json.tmpx1", ".a.json2.tmp5", ".b.json.tmp7", "a.json.corrupt-1"}
	for _, n := range append([]string{".a.json.tmp12", ".a.json.bak.tmp3"}, keep...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(`{"n":1}`), 0o644))
	}
	_, _, err := LoadWithBackup(path, nil, parseTable)
	require.NoError(t, err)
	sort.Strings(keep)
	assert.Equal(t, keep, dirNames(t, dir))
}

func TestDecodeJSONObject(t *testing.T) {
	var v table
	for _, bad := range []string{"null", " 5", `"x"`, "[]", "", `{"n":1} x`} {
		assert.Error(t, DecodeJSONObject([]byte(bad), &v), bad)
	}
	require.NoError(t, DecodeJSONObject([]byte(" \n{\"n\":3}"), &v))
	assert.Equal(t, 3, v.N)
}

func ptr(s string) *string { return &s }

// assertDistinct checks that path and its backup are separate files, so
// damage to one (a bad sector, an edit in place) leaves the other whole.
func assertDistinct(t *testing.T, path string) {
	t.Helper()
	a, err := os.Stat(path)
	require.NoError(t, err)
	b, err := os.Stat(path + BackupSuffix)
	require.NoError(t, err)
	assert.False(t, os.SameFile(a, b), "%s and its backup share their blocks", path)
}
