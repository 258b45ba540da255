package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under SYNC_FLUSH a send is answered by the store's group commit loop, not
// by the worker that took it: one send worker serves many concurrent
// senders, and every answer comes once the record is on disk.
func TestSyncFlushSendsAnsweredAfterFlushWithOneWorker(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.FlushDiskType = "SYNC_FLUSH"
	cfg.SendMessageThreadPoolNums = 1
	b := MustStartBroker(t, cfg)
	cl := baClient(t)

	const senders = 48
	var wg sync.WaitGroup
	resps := make([]*remoting.Command, senders)
	errs := make([]error, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := sendReq("SyncTopic", int32(i%4), []byte("durable"), nil)
			if i%2 == 1 {
				// Binary headers are read in place on the event loop: the
				// late answer must not lean on them.
				req.SerializeType = remoting.RocketMQSerialize
			}
			resps[i], errs[i] = cl.InvokeSync(ctx, b.Addr(), req)
		}()
	}
	wg.Wait()
	var maxEnd int64
	for i := range senders {
		require.NoError(t, errs[i])
		require.Equal(t, remoting.Success, resps[i].ResponseCode(), resps[i].Remark)
		_, off, err := message.ParseOffsetMsgID(resps[i].FieldMap()["msgId"])
		require.NoError(t, err)
		maxEnd = max(maxEnd, off)
	}
	assert.Greater(t, b.Store().CommitLog().FlushedWhere(), maxEnd, "every acknowledged send is flushed")

	// Batches and half messages take the same path.
	batch := sendReqV2(remoting.SendBatchMessage, "SyncTopic", 0, mustBatchBody(t, 3), nil)
	resp := baInvoke(t, cl, b.Addr(), batch)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Len(t, strings.Split(resp.FieldMap()["msgId"], ","), 3)

	half := sendReq("SyncTopic", 0, []byte("half"), map[string]string{
		message.PropTransactionPrepared: "true", message.PropProducerGroup: "txg",
	})
	resp = baInvoke(t, cl, b.Addr(), half)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
}

func mustBatchBody(t *testing.T, n int) []byte {
	t.Helper()
	var msgs []*message.Message
	for i := range n {
		msgs = append(msgs, &message.Message{Body: []byte{byte('a' + i)}})
	}
	body, err := message.AppendBatch(nil, msgs)
	require.NoError(t, err)
	return body
}

// Without replication a SYNC_MASTER cannot have a slave copy: it stores the
// message and answers SLAVE_NOT_AVAILABLE (a send status, not an error), as
// RocketMQ does while no slave is connected; WAIT=false skips the wait.
func TestSyncMasterWithoutSlaveAnswersSlaveNotAvailable(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := testBrokerConfig(t)
	cfg.BrokerRole = "SYNC_MASTER"
	b := MustStartBroker(t, cfg)
	cl := baClient(t)
	resp := baInvoke(t, cl, b.Addr(), sendReq("Repl", 0, []byte("x"), nil))
	require.Equal(t, remoting.SlaveNotAvailable, resp.ResponseCode(), resp.Remark)
	assert.NotEmpty(t, resp.FieldMap()["msgId"], "the message is stored and has an id")
	resp = baInvoke(t, cl, b.Addr(), sendReq("Repl", 0, []byte("y"), map[string]string{message.PropWaitStoreMsgOK: "false"}))
	assert.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue("Repl", 0) == 2 }, 5*time.Second, 5*time.Millisecond)
}
