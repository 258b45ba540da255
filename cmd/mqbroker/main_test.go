package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrintConfigPrecedence(t *testing.T) {
	p := filepath.Join(t.TempDir(), "broker.conf")
	require.NoError(t, os.WriteFile(p, []byte("brokerName=broker-x\nnamesrvAddr=10.0.0.1:9876\n"), 0o600))
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"env only", []string{"-p"}, map[string]string{"NAMESRV_ADDR": "10.0.0.9:9876"}, "namesrvAddr=10.0.0.9:9876"},
		{"file over env", []string{"-c", p, "-p"}, map[string]string{"NAMESRV_ADDR": "10.0.0.9:9876"}, "namesrvAddr=10.0.0.1:9876"},
		{"-n over file", []string{"-c", p, "-n", "127.0.0.1:9877;127.0.0.2:9877", "-p"}, nil, "namesrvAddr=127.0.0.1:9877;127.0.0.2:9877"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, 0, run(tc.args, env(tc.env), &out, &errOut, nil, nil), errOut.String())
			assert.Contains(t, strings.Split(out.String(), "\n"), tc.want)
		})
	}
}

func TestBadConfigExits(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"-n", "localhost:9876", "-p"}, env(nil), &out, &errOut, nil, nil))
	assert.Contains(t, errOut.String(), "namesrvAddr")
	assert.Equal(t, 2, run([]string{"-bogus"}, env(nil), &out, &errOut, nil, nil))
}

func TestRunAndStop(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(p, []byte("brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\nmappedFileSizeCommitLog=1048576\nstorePathRootDir="+filepath.Join(dir, "store")+"\n"), 0o600))
	stop := make(chan os.Signal, 1)
	started := make(chan string, 1)
	done := make(chan int, 1)
	var out, errOut bytes.Buffer
	go func() { done <- run([]string{"-c", p, "-log-level", "warn"}, env(nil), &out, &errOut, stop, started) }()
	select {
	case addr := <-started:
		assert.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	case rc := <-done:
		t.Fatalf("exited with %d: %s", rc, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("broker did not start")
	}
	stop <- syscall.SIGTERM
	select {
	case rc := <-done:
		assert.Equal(t, 0, rc)
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop")
	}
	_, err := os.Stat(filepath.Join(dir, "store", "abort"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a clean stop removes the abort file")
}
