package broker

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestValidateTopic(t *testing.T) {
	cases := []struct {
		topic string
		ok    bool
	}{
		{"TopicTest", true},
		{"%RETRY%group_1", true},
		{"a|b-c_d", true},
		{strings.Repeat("a", 127), true},
		{strings.Repeat("a", 128), false},
		{"", false},
		{"   ", false},
		{"a.b", false},
		{"a/b", false},
		{"../etc", false},
		{"tópico", false},
		{"a\x00b", false},
	}
	for _, tc := range cases {
		err := ValidateTopic(tc.topic)
		if tc.ok {
			assert.NoError(t, err, tc.topic)
		} else {
			assert.ErrorIs(t, err, ErrTopicInvalid, tc.topic)
		}
	}
	assert.True(t, IsSystemTopic("rmq_sys_x"))
	assert.True(t, IsSystemTopic(AutoCreateTopicKey))
	assert.False(t, IsSystemTopic("TopicTest"))
	assert.False(t, IsNotAllowedSendTopic(TraceTopic), "trace data is sent by producers")
	assert.True(t, IsNotAllowedSendTopic(ScheduleTopic))
}

func newTestTopics(t *testing.T) (*TopicConfigManager, string) {
	cfg := testBrokerConfig(t)
	path := filepath.Join(cfg.StorePathRootDir, "config", "topics.json")
	m := NewTopicConfigManager(cfg, path, baLogger())
	require.NoError(t, m.Load())
	return m, path
}

func TestTopicConfigManagerSystemTopicsAndPersist(t *testing.T) {
	m, path := newTestTopics(t)
	for _, name := range []string{AutoCreateTopicKey, SelfTestTopic, BenchmarkTopic, "DefaultCluster", "broker-a", OffsetMovedEventTopic, ScheduleTopic, "DefaultCluster_REPLY_TOPIC"} {
		assert.NotNil(t, m.Get(name), name)
	}
	tbw := m.Get(AutoCreateTopicKey)
	assert.True(t, protocol.IsInherited(tbw.Perm))
	assert.Equal(t, int32(4), tbw.WriteQueueNums)

	changes := 0
	m.SetOnChange(func() { changes++ })
	v0 := m.DataVersion()
	require.NoError(t, m.Update(&protocol.TopicConfig{TopicName: "A", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: protocol.SingleTag}))
	assert.Greater(t, m.DataVersion().Counter, v0.Counter)
	assert.ErrorIs(t, m.Update(&protocol.TopicConfig{TopicName: ScheduleTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: protocol.SingleTag}), ErrTopicSystem)
	_, err := m.Delete(AutoCreateTopicKey)
	assert.ErrorIs(t, err, ErrTopicSystem)
	existed, err := m.Delete("missing")
	require.NoError(t, err)
	assert.False(t, existed)
	assert.Equal(t, 1, changes)

	// A new manager over the same file sees the topic, and a later version.
	m2 := NewTopicConfigManager(testBrokerConfig(t), path, baLogger())
	require.NoError(t, m2.Load())
	require.NotNil(t, m2.Get("A"))
	assert.Equal(t, int32(2), m2.Get("A").ReadQueueNums)
	assert.Greater(t, m2.DataVersion().Counter, m.DataVersion().Counter-1)

	// Turning auto-create off drops the persisted template.
	off := testBrokerConfig(t)
	off.AutoCreateTopicEnable = false
	m4 := NewTopicConfigManager(off, path, baLogger())
	require.NoError(t, m4.Load())
	assert.Nil(t, m4.Get(AutoCreateTopicKey))
	assert.NotNil(t, m4.Get("A"))

	// A corrupt file falls back to its .bak: the version before the last
	// write, which holds A once one more write happened.
	require.NoError(t, m.Persist())
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	m5 := NewTopicConfigManager(testBrokerConfig(t), path, baLogger())
	require.NoError(t, m5.Load())
	assert.NotNil(t, m5.Get("A"))

	// With its .bak corrupt too it stops the start instead of losing the
	// topics.
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	require.NoError(t, os.WriteFile(path+fsutil.BackupSuffix, []byte("null"), 0o644))
	m3 := NewTopicConfigManager(testBrokerConfig(t), path, baLogger())
	err = m3.Load()
	require.ErrorIs(t, err, fsutil.ErrNoValidCopy)
	assert.ErrorContains(t, err, "not a topic table")
	assert.ErrorContains(t, err, path+fsutil.BackupSuffix)
}

// TestTopicConfigManagerLoadSkipsDamagedEntries: entries with numbers no
// broker writes are skipped, never trusted (a loop over 2^31 queues).
func TestTopicConfigManagerLoadSkipsDamagedEntries(t *testing.T) {
	cfg := testBrokerConfig(t)
	path := filepath.Join(cfg.StorePathRootDir, "config", "topics.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`{"topicConfigTable":{
		"ok":{"readQueueNums":4,"writeQueueNums":4,"perm":6},
		"closed":{"readQueueNums":0,"writeQueueNums":0,"perm":6},
		"huge":{"readQueueNums":2147483647,"writeQueueNums":1,"perm":6},
		"negative":{"readQueueNums":1,"writeQueueNums":-1,"perm":6},
		"badperm":{"readQueueNums":1,"writeQueueNums":1,"perm":99},
		"nil":null},"dataVersion":{"timestamp":1,"counter":9223372036854775807}}`), 0o644))
	m := NewTopicConfigManager(cfg, path, baLogger())
	require.NoError(t, m.Load())
	assert.NotNil(t, m.Get("ok"))
	assert.NotNil(t, m.Get("closed"))
	for _, name := range []string{"huge", "negative", "badperm", "nil"} {
		assert.Nil(t, m.Get(name), name)
	}
}

func TestCreateTopicInSendMessageMethod(t *testing.T) {
	m, _ := newTestTopics(t)
	tc, err := m.CreateTopicInSendMessageMethod("New", AutoCreateTopicKey, 16, 0)
	require.NoError(t, err)
	assert.Equal(t, int32(4), tc.WriteQueueNums, "capped by the template's queues")
	assert.False(t, protocol.IsInherited(tc.Perm))

	tc, err = m.CreateTopicInSendMessageMethod("Small", AutoCreateTopicKey, 2, 0)
	require.NoError(t, err)
	assert.Equal(t, int32(2), tc.ReadQueueNums)

	_, err = m.CreateTopicInSendMessageMethod("Other", "New", 2, 0)
	assert.ErrorIs(t, err, ErrNoDefaultTopic, "a topic without inherit perm is no template")
	_, err = m.CreateTopicInSendMessageMethod("Other", "Missing", 2, 0)
	assert.ErrorIs(t, err, ErrNoDefaultTopic)
	_, err = m.CreateTopicInSendMessageMethod("bad name", AutoCreateTopicKey, 2, 0)
	assert.ErrorIs(t, err, ErrTopicInvalid)

	tc, err = m.CreateTopicInSendBackMethod("%RETRY%g", 1, protocol.PermRead|protocol.PermWrite, 0)
	require.NoError(t, err)
	assert.Equal(t, int32(1), tc.WriteQueueNums)
	again, err := m.CreateTopicInSendBackMethod("%RETRY%g", 3, protocol.PermRead, 0)
	require.NoError(t, err)
	assert.Same(t, tc, again, "an existing topic is returned as is")

	// Concurrent first sends create the topic once.
	var wg sync.WaitGroup
	got := make([]*protocol.TopicConfig, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = m.CreateTopicInSendMessageMethod("Race", AutoCreateTopicKey, 4, 0)
		}()
	}
	wg.Wait()
	for _, g := range got {
		assert.Same(t, got[0], g)
	}
}
