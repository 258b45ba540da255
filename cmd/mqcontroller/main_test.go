package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's process-wide goroutine pool (ants) is not ours to stop.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

func writeConf(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "controller.conf")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestPrintConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-c", writeConf(t, "controllerDLegerPeers=n0-127.0.0.1:9000\ncontrollerDLegerSelfId=n0\n"), "-p"}, &out, &errOut, nil, nil)
	assert.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), "controllerDLegerPeers=n0-127.0.0.1:9000\n")
	assert.Contains(t, out.String(), "listenPort=19876\n")
}

func TestBadConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"-c", writeConf(t, "controllerDLegerSelfId=n7\n")}, &out, &errOut, nil, nil))
	assert.Contains(t, errOut.String(), "controllerDLegerSelfId")
	assert.Equal(t, 2, run([]string{"-nope"}, &out, &errOut, nil, nil))
}

// TestRunServesUntilSignalled: a controller group of one on free ports
// becomes leader, answers CONTROLLER_GET_METADATA_INFO, and stops on
// SIGTERM; its Raft log is on disk.
func TestRunServesUntilSignalled(t *testing.T) {
	dir := t.TempDir()
	path := writeConf(t, "bindAddress=127.0.0.1\nlistenPort=0\ncontrollerDLegerPeers=n0-127.0.0.1:0\ncontrollerDLegerSelfId=n0\ncontrollerStorePath="+dir+"\n")
	stop := make(chan os.Signal, 1)
	started := make(chan string, 1)
	done := make(chan int, 1)
	var out, errOut bytes.Buffer
	go func() { done <- run([]string{"-c", path, "-log-level", "warn"}, &out, &errOut, stop, started) }()
	var addr string
	select {
	case addr = <-started:
	case code := <-done:
		t.Fatalf("exited with %d: %s", code, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("did not start")
	}
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	var md protocol.GetMetaDataResponseHeader
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.InvokeSync(ctx, addr, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.ResponseCode())
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &md))
		return md.IsLeader
	}, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, "n0", md.ControllerLeaderID)
	assert.Equal(t, addr, md.ControllerLeaderAddress)
	assert.Equal(t, "group1", md.Group)

	stop <- syscall.SIGTERM
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
	_, err := os.Stat(filepath.Join(dir, "raft.db"))
	assert.NoError(t, err, "the Raft log is on disk")
}
