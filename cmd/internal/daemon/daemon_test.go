package daemon

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/controller"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// fakeServer records the lifecycle calls Run makes.
type fakeServer struct {
	startErr, shutdownErr error
	shutdowns             int
	hadDeadline           bool
}

func (s *fakeServer) Start() error { return s.startErr }
func (s *fakeServer) Addr() string { return "127.0.0.1:10911" }
func (s *fakeServer) Shutdown(ctx context.Context) error {
	s.shutdowns++
	_, s.hadDeadline = ctx.Deadline()
	return s.shutdownErr
}

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOK   bool
	}{
		{"ok", []string{"-c", "x"}, ExitOK, true},
		{"help", []string{"-h"}, ExitOK, false},
		{"unknown flag", []string{"-bogus"}, ExitUsage, false},
		{"missing value", []string{"-c"}, ExitUsage, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.String("c", "", "")
			code, ok := ParseFlags(fs, tc.args)
			assert.Equal(t, tc.wantCode, code)
			assert.Equal(t, tc.wantOK, ok)
		})
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "warn")
	require.NoError(t, err)
	log.Info("hidden")
	log.Warn("shown")
	assert.NotContains(t, buf.String(), "hidden")
	assert.Contains(t, buf.String(), "shown")
	_, err = NewLogger(&buf, "loud")
	assert.Error(t, err)
}

func TestRunServesUntilSignal(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "info")
	require.NoError(t, err)
	srv := &fakeServer{}
	stop := make(chan os.Signal, 1)
	started := make(chan string, 1)
	stop <- syscall.SIGTERM
	code := Run(srv, log, time.Second, "boot ok.", logrus.Fields{"brokerName": "b1"}, stop, started)
	assert.Equal(t, ExitOK, code)
	assert.Equal(t, "127.0.0.1:10911", <-started)
	assert.Equal(t, 1, srv.shutdowns)
	assert.True(t, srv.hadDeadline, "shutdown is bounded")
	// Fields print sorted, so addr joins the caller's fields in place.
	assert.Contains(t, buf.String(), `msg="boot ok." addr="127.0.0.1:10911" brokerName=b1`)
	assert.Contains(t, buf.String(), "shutting down")
}

func TestRunFailures(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)

	srv := &fakeServer{startErr: errors.New("port taken")}
	assert.Equal(t, ExitFail, Run(srv, log, time.Second, "boot", nil, nil, nil))
	assert.Equal(t, 1, srv.shutdowns, "a failed start still releases what started")

	srv = &fakeServer{shutdownErr: errors.New("flush failed")}
	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGINT
	assert.Equal(t, ExitFail, Run(srv, log, time.Second, "boot", nil, stop, nil))
}

// TestHostController: keys that cannot work are refused before anything
// is routed; good ones put a controller on the host's port, where it
// answers once the host listens, and stop with it.
func TestHostController(t *testing.T) {
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	keys := conf.DefaultControllerKeys()
	keys.ControllerDLegerPeers, keys.ControllerDLegerSelfID = "n0-127.0.0.1:0", "n7"
	_, err := HostController(srv, srv, &keys, time.Second, nil)
	require.ErrorIs(t, err, controller.ErrBadConfig)

	keys.ControllerDLegerSelfID, keys.ControllerStorePath = "n0", t.TempDir()
	hosted, err := HostController(srv, srv, &keys, time.Second, nil)
	require.NoError(t, err)
	require.NoError(t, hosted.Start())
	defer func() { assert.NoError(t, hosted.Shutdown(context.Background())) }()
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.InvokeSync(ctx, hosted.Addr(), remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		var md protocol.GetMetaDataResponseHeader
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &md))
		return md.IsLeader && md.Group == keys.ControllerDLegerGroup
	}, 30*time.Second, 20*time.Millisecond)
}
