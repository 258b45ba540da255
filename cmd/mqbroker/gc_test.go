package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTuneGCKeepsEnvironmentChoice(t *testing.T) {
	prev := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prev)
		debug.SetMemoryLimit(prevLimit)
	})
	tuneGC(func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[k] })
	assert.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: untouched")
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "GOMEMLIMIT set: untouched")
	tuneGC(func(string) string { return "" })
	assert.Equal(t, defaultGCPercent, debug.SetGCPercent(100))
	assert.Equal(t, int64(defaultMemoryLimit), debug.SetMemoryLimit(-1))
}
