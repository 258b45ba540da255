package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topics.json")
	require.NoError(t, WriteFileAtomic(path, []byte(`{"a":1}`), 0o600))
	require.NoError(t, WriteFileAtomic(path, []byte(`{"a":2}`), 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"a":2}`, string(got))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left behind")

	err = WriteFileAtomic(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o644)
	assert.Error(t, err)
	assert.Error(t, SyncDir(filepath.Join(dir, "missing")))
}
