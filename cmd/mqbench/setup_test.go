package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetupRun(t *testing.T) {
	var f consumerFlags
	var errOut bytes.Buffer
	log, stop, err := setupRun("consumer", &f, []string{"-t", "T1", "--from", "first", "--log-level", "error"}, &errOut)
	require.NoError(t, err)
	stop()
	assert.NotNil(t, log)
	assert.Equal(t, "T1", f.topic, "common flags land in the embedded commonFlags")
	assert.Equal(t, "first", f.from, "the command's own flags are registered too")

	// The flag package names the command in its complaints.
	errOut.Reset()
	_, _, err = setupRun("consumer", &consumerFlags{}, []string{"-bogus"}, &errOut)
	assert.ErrorIs(t, err, errUsage)
	assert.Contains(t, errOut.String(), "mqbench consumer")

	_, _, err = setupRun("latency", &latencyFlags{}, []string{"--rate", "0"}, io.Discard)
	assert.ErrorIs(t, err, errBadFlag)
}

// A run that fails after the profile started must stop it, or the next
// StartCPUProfile in the process would fail.
func TestSetupRunStopsProfileOnFailure(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.out")
	_, _, err := setupRun("producer", &producerFlags{}, []string{"--cpuprofile", prof, "--log-level", "loud"}, io.Discard)
	require.Error(t, err)
	_, statErr := os.Stat(prof)
	require.NoError(t, statErr, "the profile had started")
	require.NoError(t, pprof.StartCPUProfile(io.Discard), "the failed run stopped its profile")
	pprof.StopCPUProfile()
}
