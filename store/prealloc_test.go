package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Recovery of commitlog and consume queues stops at the first zero bytes,
// so a preallocated file must read back as zeros whichever way it was made.
func TestPreallocateReadsBackZeros(t *testing.T) {
	const size = 3<<20 + 4096
	for name, prep := range map[string]func(*os.File, int) error{
		"reserveBlocks": func(f *os.File, n int) error { return reserveBlocks(f, 0, n) },
		"zeros":         func(f *os.File, n int) error { return writeZeros(f, 0, n) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			f, err := os.Create(path)
			require.NoError(t, err)
			defer f.Close()
			// Leftover bytes must not survive: the file is created truncated.
			require.NoError(t, prep(f, size))
			st, err := f.Stat()
			require.NoError(t, err)
			assert.EqualValues(t, size, st.Size())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(make([]byte, size), got), "preallocated bytes are not all zero")
		})
	}
}

func TestCreateMappedFileIsZeroFilled(t *testing.T) {
	mf, err := CreateMappedFile(t.TempDir(), 0, 1<<20)
	require.NoError(t, err)
	defer mf.Close()
	assert.True(t, bytes.Equal(make([]byte, 1<<20), mf.Buffer()))
	assert.Equal(t, 1<<20, mf.FileSize())
}
