package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestSubscriptionData(t *testing.T) {
	for _, tc := range []struct {
		sel   MessageSelector
		sub   string
		tags  []string
		codes protocol.CodeSet
		typ   string
	}{
		{MessageSelector{}, "*", []string{}, protocol.CodeSet{}, "TAG"},
		{MessageSelector{Expression: " * "}, "*", []string{}, protocol.CodeSet{}, "TAG"},
		{MessageSelector{Expression: "a || b"}, "a || b", []string{"a", "b"}, protocol.CodeSet{97, 98}, "TAG"},
		{MessageSelector{Expression: "TagA||  ||TagB "}, "TagA||  ||TagB", []string{"TagA", "TagB"},
			protocol.CodeSet{int32(message.TagsHashCode("TagA")), int32(message.TagsHashCode("TagB"))}, "TAG"},
		{MessageSelector{Type: SQL92, Expression: "a > 5"}, "a > 5", []string{}, protocol.CodeSet{}, "SQL92"},
	} {
		sd := subscriptionData("T", tc.sel)
		assert.Equal(t, tc.sub, sd.SubString, tc.sel)
		assert.Equal(t, tc.tags, sd.TagsSet, tc.sel)
		assert.Equal(t, tc.codes, sd.CodeSet, tc.sel)
		assert.Equal(t, tc.typ, sd.ExpressionType, tc.sel)
	}
	sd := subscriptionData("T", MessageSelector{Expression: "a || b"})
	m := &MessageExt{Message: message.Message{Properties: map[string]string{message.PropTags: "b"}}}
	assert.True(t, matchTags(&sd, m))
	m.Properties[message.PropTags] = "c"
	assert.False(t, matchTags(&sd, m), "a hash collision at the broker is caught here")
	all := subscriptionData("T", MessageSelector{})
	assert.True(t, matchTags(&all, m))
	assert.True(t, matchTags(nil, m))
}

func ext(offsets ...int64) []*MessageExt {
	var out []*MessageExt
	for _, o := range offsets {
		out = append(out, &MessageExt{QueueOffset: o, Message: message.Message{Body: []byte("0123456789")}})
	}
	return out
}

func TestProcessQueueCommitOffset(t *testing.T) {
	pq := newProcessQueue(MessageQueue{Topic: "T"}, 10)
	msgs := ext(10, 11, 12, 13)
	assert.Equal(t, 4, pq.put(msgs))
	assert.Equal(t, 0, pq.put(msgs[:2]), "duplicates ignored")
	n, size := pq.cached()
	assert.Equal(t, 4, n)
	assert.Equal(t, int64(40), size)

	// Acknowledging out of order never commits past an unacknowledged one.
	assert.Equal(t, int64(10), pq.remove(msgs[2:3]))
	assert.Equal(t, int64(11), pq.remove(msgs[0:1]))
	assert.Equal(t, int64(11), pq.remove(msgs[3:4]))
	assert.Equal(t, int64(14), pq.remove(msgs[1:2]), "all done: one past the highest")

	// Orderly take/give back keeps them counted and ordered.
	pq.put(ext(16, 14, 15))
	got := pq.takeOrdered(2)
	require.Len(t, got, 2)
	assert.Equal(t, []int64{14, 15}, []int64{got[0].QueueOffset, got[1].QueueOffset})
	n, _ = pq.cached()
	assert.Equal(t, 3, n)
	pq.giveBack(got)
	got = pq.takeOrdered(10)
	assert.Len(t, got, 3)
	assert.Equal(t, int64(17), pq.remove(got))

	pq.reset(5)
	n, size = pq.cached()
	assert.Zero(t, n)
	assert.Zero(t, size)
	assert.Equal(t, int64(5), pq.nextOffset)
	pq.drop()
	pq.drop()
	assert.True(t, pq.dropped.Load())
}

func TestLocalOffsetStore(t *testing.T) {
	dir := t.TempDir()
	s := newLocalOffsetStore(dir, "g", "i1")
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}
	off, err := s.read(context.Background(), mq)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), off)
	s.update(mq, 7, true)
	s.update(mq, 5, true)
	assert.Equal(t, int64(7), s.current(mq), "increase-only")
	s.update(mq, 5, false)
	assert.Equal(t, int64(5), s.current(mq))
	s.persist(context.Background(), nil)
	b, err := os.ReadFile(filepath.Join(dir, "g", "i1", "offsets.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"offsetTable":[{"topic":"T","brokerName":"b","queueId":3,"offset":5}]}`, string(b))

	again := newLocalOffsetStore(dir, "g", "i1")
	off, err = again.read(context.Background(), mq)
	require.NoError(t, err)
	assert.Equal(t, int64(5), off)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "g", "i1", "offsets.json"), []byte("{bad"), 0o644))
	_, err = newLocalOffsetStore(dir, "g", "i1").read(context.Background(), mq)
	assert.Error(t, err, "a corrupt file is reported, not silently reset")
}
