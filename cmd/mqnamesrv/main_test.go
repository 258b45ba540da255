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
	p := filepath.Join(t.TempDir(), "namesrv.conf")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestPrintConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-c", writeConf(t, "listenPort=9999\nsomeDeadKey=1\n"), "-p"}, &out, &errOut, nil, nil)
	assert.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), "listenPort=9999\n")
	assert.Contains(t, out.String(), "scanNotActiveBrokerInterval=10000\n")
	assert.Contains(t, errOut.String(), "somedeadkey", "unknown keys are warned about")
}

func TestBadConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"-c", writeConf(t, "listenPort=abc\n")}, &out, &errOut, nil, nil))
	assert.Contains(t, errOut.String(), "listenPort")
	assert.Equal(t, 1, run([]string{"-c", filepath.Join(t.TempDir(), "missing.conf")}, &out, &errOut, nil, nil))
	assert.Equal(t, 2, run([]string{"-nope"}, &out, &errOut, nil, nil))
}

func TestRunServesUntilSignalled(t *testing.T) {
	kv := filepath.Join(t.TempDir(), "kvConfig.json")
	path := writeConf(t, "bindAddress=127.0.0.1\nlistenPort=0\nkvConfigPath="+kv+"\n")
	stop := make(chan os.Signal, 1)
	started := make(chan string, 1)
	done := make(chan int, 1)
	var out, errOut bytes.Buffer
	go func() { done <- run([]string{"-c", path}, &out, &errOut, stop, started) }()

	var addr string
	select {
	case addr = <-started:
	case code := <-done:
		t.Fatalf("exited with %d: %s", code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("did not start")
	}

	cl := remoting.NewClient(remoting.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := remoting.NewRequest(remoting.PutKVConfig, protocol.EncodeHeader(&protocol.PutKVConfigRequestHeader{Namespace: "n", Key: "k", Value: "v"}, nil), nil)
	resp, err := cl.InvokeSync(ctx, addr, req)
	require.NoError(t, err)
	assert.Equal(t, remoting.Success, resp.ResponseCode())
	require.NoError(t, cl.Close())

	stop <- syscall.SIGTERM
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
	_, err = os.Stat(kv)
	assert.NoError(t, err, "the KV file was written")
}

// TestRunWithControllerInNamesrv: enableControllerInNamesrv runs a
// controller (a group of one here) on the nameserver's own port.
func TestRunWithControllerInNamesrv(t *testing.T) {
	dir := t.TempDir()
	path := writeConf(t, "bindAddress=127.0.0.1\nlistenPort=0\nkvConfigPath="+filepath.Join(dir, "kv.json")+
		"\nenableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-127.0.0.1:0\ncontrollerDLegerSelfId=n0\ncontrollerStorePath="+dir+"\n")
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
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.InvokeSync(ctx, addr, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
		require.NoError(t, err)
		var md protocol.GetMetaDataResponseHeader
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &md))
		return md.IsLeader && md.ControllerLeaderAddress == addr
	}, 30*time.Second, 20*time.Millisecond)
	stop <- syscall.SIGTERM
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
}
