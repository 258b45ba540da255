package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPprofListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:6060", "localhost:6060", "nonsense"} {
		_, _, err := startPprof(addr)
		assert.ErrorIs(t, err, errPprofNotLoopback, addr)
	}
	addr, stop, err := startPprof("127.0.0.1:0")
	require.NoError(t, err)
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
