package nameserver

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An expired broker's connection is closed, as Java's scanNotActiveBroker
// closes the channel: a broker that only went quiet learns it was dropped.
func TestExpiredBrokerConnectionIsClosed(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	cfg.ScanNotActiveBrokerInterval = 20
	cfg.BrokerChannelExpiredTime = 200
	ns := MustStartNameServer(t, cfg)

	conn, err := net.DialTimeout("tcp", ns.Addr(), 3*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	req := brokerA().registerRequest(t)
	req.Opaque = 1
	frame, err := remoting.EncodeFrame(req)
	require.NoError(t, err)
	_, err = conn.Write(frame)
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := remoting.ReadCommand(conn)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)

	// Silent from now on: the scan drops the broker and closes its connection.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	_, alive := ns.Routes().LiveBroker(brokerA().addr)
	assert.False(t, alive)
}
