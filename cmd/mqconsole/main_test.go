package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/cmd/internal/daemon"
)

func noEnv(string) string { return "" }

// TestBadFlags: no nameserver, -ak without -sk and a bad -tls-verify are
// usage errors that say what to do.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no nameserver"},
		{[]string{"-n", "127.0.0.1:9876", "-ak", "a"}, "-ak and -sk go together"},
		{[]string{"-n", "127.0.0.1:9876", "-tls-verify", "maybe"}, "-tls-verify must be full, chain or none"},
		{[]string{"-no-such-flag"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		// Were the flags accepted, the console would stop at once on
		// this signal rather than hang the test.
		stopNow := make(chan os.Signal, 1)
		stopNow <- syscall.SIGTERM
		code := run(append(c.args, "-addr", "127.0.0.1:0"), noEnv, &stderr, stopNow, nil)
		assert.Equal(t, daemon.ExitUsage, code, "%v", c.args)
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}

// TestServesAndStops: the console listens where -addr says (the
// nameserver comes from NAMESRV_ADDR), serves its pages in read-only mode,
// and stops cleanly on a signal.
func TestServesAndStops(t *testing.T) {
	stop := make(chan os.Signal, 1)
	started := make(chan string, 1)
	done := make(chan int, 1)
	env := func(k string) string {
		if k == "NAMESRV_ADDR" {
			return "127.0.0.1:1" // nothing listens: pages say so
		}
		return ""
	}
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-read-only", "-log-level", "error"}, env, io.Discard, stop, started)
	}()
	var addr string
	select {
	case addr = <-started:
	case code := <-done:
		t.Fatalf("exited with %d before listening", code)
	case <-time.After(30 * time.Second):
		t.Fatal("not listening after 30 s")
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + addr + "/static/console.css")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = cl.Post("http://"+addr+"/topics", "application/x-www-form-urlencoded", strings.NewReader("topic=T"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(body), "read-only")

	stop <- syscall.SIGTERM
	select {
	case code := <-done:
		assert.Equal(t, daemon.ExitOK, code)
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after SIGTERM")
	}
}
