package broker

import (
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResetOffsetByTimeStoresAndPushesToConsumers(t *testing.T) {
	baVerifyNoLeaks(t)
	b := bcStartBroker(t, nil)
	bcCreateTopic(t, b, "Reset", 2)
	cl := baClient(t)
	for i := range 6 {
		bcSend(t, cl, b.Addr(), "Reset", int32(i%2), "m", "", "")
	}
	bcWaitQueue(t, b, "Reset", 0, 3)
	bcWaitQueue(t, b, "Reset", 1, 3)
	b.consume.offsets.Commit("rg", "Reset", 0, 3)
	b.consume.offsets.Commit("rg", "Reset", 1, 2)

	// An online member of the group must be told to reset.
	member := baClient(t)
	pushed := make(chan *remoting.Command, 8) // one per reset below
	member.RegisterHandler(remoting.ResetConsumerClientOffset, func(_ string, req *remoting.Command) *remoting.Command {
		select {
		case pushed <- req:
		default:
		}
		return nil
	})
	bcHeartbeat(t, member, b.Addr(), "10.0.0.9@1", "rg", protocol.ConsumeFromLastOffset, bcTagSub("Reset", "*"))

	reset := func(ts int64, force bool) map[int32]int64 {
		t.Helper()
		h := protocol.ResetOffsetRequestHeader{Topic: "Reset", Group: "rg", Timestamp: ts, IsForce: force}
		resp := baInvoke(t, cl, b.Addr(), bcReq(remoting.InvokeBrokerToResetOffset, &h, nil))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		body, err := protocol.DecodeResetOffsetBody(resp.Body)
		require.NoError(t, err)
		out := map[int32]int64{}
		for mq, off := range body.OffsetTable {
			assert.Equal(t, "broker-a", mq.BrokerName)
			out[mq.QueueID] = off
		}
		return out
	}

	// Forced back to the beginning: stored at once and pushed to the member.
	assert.Equal(t, map[int32]int64{0: 0, 1: 0}, reset(0, true))
	assert.EqualValues(t, 0, b.consume.offsets.Query("rg", "Reset", 0))
	select {
	case req := <-pushed:
		assert.Equal(t, "rg", req.ExtFields["group"])
		body, err := protocol.DecodeResetOffsetBody(req.Body)
		require.NoError(t, err)
		assert.Len(t, body.OffsetTable, 2)
	case <-time.After(5 * time.Second):
		t.Fatal("the online consumer was not told to reset")
	}

	// Not forced, to the end (-1): offsets never move forward past what the
	// group has not consumed.
	b.consume.offsets.Commit("rg", "Reset", 1, 1)
	assert.Equal(t, map[int32]int64{0: 0, 1: 1}, reset(-1, false))
	// Forced to the end: skip everything.
	assert.Equal(t, map[int32]int64{0: 3, 1: 3}, reset(-1, true))

	h := protocol.ResetOffsetRequestHeader{Topic: "Missing", Group: "rg", Timestamp: 0, IsForce: true}
	resp := baInvoke(t, cl, b.Addr(), bcReq(remoting.InvokeBrokerToResetOffset, &h, nil))
	assert.Equal(t, remoting.TopicNotExist, resp.ResponseCode())
	h = protocol.ResetOffsetRequestHeader{Topic: "Reset", Group: "rg", Timestamp: -5, IsForce: true}
	resp = baInvoke(t, cl, b.Addr(), bcReq(remoting.InvokeBrokerToResetOffset, &h, nil))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
}
