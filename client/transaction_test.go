package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

type txListener struct {
	mu      sync.Mutex
	exec    map[string]LocalTransactionState // body -> verdict
	check   LocalTransactionState
	checked []*MessageExt
}

func (l *txListener) ExecuteLocalTransaction(_ context.Context, m *Message) LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exec[string(m.Body)]
}

func (l *txListener) CheckLocalTransaction(m *MessageExt) LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = append(l.checked, m)
	return l.check
}

func TestTransactionProducer(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("T", 2)
	l := &txListener{exec: map[string]LocalTransactionState{"commit": CommitMessageState, "rollback": RollbackMessageState,
		"unknown": UnknownState}, check: CommitMessageState}
	_, err := NewTransactionProducer(nil, WithNameServer(ns.Addr()))
	require.ErrorIs(t, err, ErrTransactionListener)
	tp, err := NewTransactionProducer(l, WithNameServer(ns.Addr()), WithGroupName("txg"), WithLogger(testLogger()))
	require.NoError(t, err)
	require.NoError(t, tp.Start())
	t.Cleanup(func() { require.NoError(t, tp.Shutdown()) })
	ctx := testCtx(t)

	res, err := tp.SendMessageInTransaction(ctx, NewMessage("T", []byte("commit")).WithTag("t"))
	require.NoError(t, err)
	assert.Equal(t, CommitMessageState, res.State)
	stored := fb.messages("T")
	require.Len(t, stored, 1)
	assert.Equal(t, []byte("commit"), stored[0].Body)
	assert.Equal(t, res.MsgID, stored[0].UniqKey())
	assert.Equal(t, "txg", stored[0].Property(message.PropProducerGroup))
	assert.Equal(t, message.TransactionCommitType, message.TransactionType(stored[0].SysFlag))

	res, err = tp.SendMessageInTransaction(ctx, NewMessage("T", []byte("rollback")))
	require.NoError(t, err)
	assert.Equal(t, RollbackMessageState, res.State)
	assert.Len(t, fb.messages("T"), 1, "rolled back: not visible")

	res, err = tp.SendMessageInTransaction(ctx, NewMessage("T", []byte("unknown")))
	require.NoError(t, err)
	assert.Equal(t, UnknownState, res.State)
	assert.Len(t, fb.messages("T"), 1, "unknown: still half")

	// The unknown verdict goes oneway (Java brokers do not answer it).
	var ends []protocolEnd
	require.Eventually(t, func() bool {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		ends = toEnds(fb)
		return len(ends) == 3
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []int32{message.TransactionCommitType, message.TransactionRollbackType, message.TransactionNotType},
		[]int32{ends[0].flag, ends[1].flag, ends[2].flag})
	for _, e := range ends {
		assert.Equal(t, "txg", e.group)
		assert.False(t, e.fromCheck)
	}

	// The broker asks about the pending one; the listener commits it.
	require.Equal(t, 1, fb.checkHalves())
	require.Eventually(t, func() bool { return len(fb.messages("T")) == 2 }, 5*time.Second, 10*time.Millisecond)
	l.mu.Lock()
	require.Len(t, l.checked, 1)
	assert.Equal(t, []byte("unknown"), l.checked[0].Body)
	assert.Equal(t, res.MsgID, l.checked[0].UniqKey())
	l.mu.Unlock()
	fb.mu.Lock()
	last := fb.endTx[len(fb.endTx)-1]
	fb.mu.Unlock()
	assert.True(t, last.FromTransactionCheck)
	assert.Equal(t, message.TransactionCommitType, last.CommitOrRollback)
	assert.Equal(t, res.MsgID, last.MsgID)
}

type protocolEnd struct {
	group     string
	flag      int32
	fromCheck bool
}

// toEnds summarises the END_TRANSACTION requests; fb.mu must be held.
func toEnds(fb *fakeBroker) []protocolEnd {
	var out []protocolEnd
	for _, e := range fb.endTx {
		out = append(out, protocolEnd{e.ProducerGroup, e.CommitOrRollback, e.FromTransactionCheck})
	}
	return out
}
