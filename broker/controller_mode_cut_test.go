package broker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// TestControllerModeCutRefusesDisorderedMasterEpochs: a peer that answers
// GET_BROKER_EPOCH_CACHE with an epoch history out of order (garbage, or a
// damaged epoch file) is refused before anything is cut: this broker's
// commitlog and epochs stay as they were. (The store refuses to cut a
// master's commitlog; a slave's it would cut, to where the bad history
// pointed: here, inside its data.)
func TestControllerModeCutRefusesDisorderedMasterEpochs(t *testing.T) {
	baVerifyNoLeaks(t)
	ns := mustStartNameServer(t)
	ctl := startTestController(t)
	m := startCtlBroker(t, ctlBrokerConfig(t, ns.Addr(), ctl.addr(), 1))
	t.Cleanup(func() { mustShutdownBroker(t, m) })
	waitMaster(t, m)
	cl := baClient(t)
	require.Equal(t, remoting.Success, baInvoke(t, cl, m.Addr(), createTopicReq("CUT", 1, 1, 6)).ResponseCode())
	for range 3 {
		resp := haSend(t, cl, m.Addr(), "CUT", "kept")
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	}
	local := m.Store().Epochs().Entries()
	require.NotEmpty(t, local)
	maxOff := m.Store().CommitLog().MaxOffset()
	require.Positive(t, maxOff)

	// The peer's history shares this broker's last epoch, then goes on
	// out of order: epoch last+2 before last+1, each starting inside what
	// this broker holds.
	last := local[len(local)-1]
	require.Greater(t, maxOff, last.StartOffset+2)
	bad := protocol.EpochEntryCache{MaxOffset: maxOff, EpochList: []protocol.EpochEntry{
		{Epoch: last.Epoch, StartOffset: last.StartOffset},
		{Epoch: last.Epoch + 2, StartOffset: last.StartOffset + 2},
		{Epoch: last.Epoch + 1, StartOffset: last.StartOffset + 1},
	}}
	body, err := json.Marshal(bad)
	require.NoError(t, err)
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", Logger: baLogger(), NumEventLoops: 1})
	srv.Handle(remoting.GetBrokerEpochCache, srv.NewPool("fake", 1, 10), func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp, nil
	})
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
	})

	err = m.cutToMaster(srv.Addr(), last.Epoch, baLogger())
	require.ErrorIs(t, err, store.ErrEpochOrder)
	assert.Equal(t, maxOff, m.Store().CommitLog().MaxOffset(), "the commitlog was cut on a bad epoch history")
	assert.Equal(t, local, m.Store().Epochs().Entries())
}
