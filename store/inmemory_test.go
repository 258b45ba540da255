package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInMemory(t *testing.T) {
	s := MustOpen(t, testConfig(t.TempDir(), AsyncFlush))
	for i := range 20 {
		mustPut(t, s, newTestMessage("T", 0, body(i, 100), "", ""))
	}
	waitDispatched(t, s)
	assert.True(t, s.InMemory("T", 0, 0), "the whole commitlog is within 40% of the RAM")
	assert.True(t, s.InMemory("Unknown", 0, 0), "nothing to read")
	assert.True(t, s.InMemory("T", 0, 20), "offset at the queue's end")
	assert.True(t, s.InMemory("T", 0, 99), "offset past the queue's end")

	// With a page-cache share of a few records, only the tail is in memory.
	rec := s.CommitLogMaxOffset() / 20
	s.memoryLimit = 3 * rec
	assert.False(t, s.InMemory("T", 0, 0))
	assert.False(t, s.InMemory("T", 0, 16))
	assert.True(t, s.InMemory("T", 0, 17))
	assert.True(t, s.InMemory("T", 0, 19))
}
