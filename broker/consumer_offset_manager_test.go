package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

func TestConsumerOffsetManagerCommitQueryPersistLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "consumerOffset.json")
	m := NewConsumerOffsetManager(path, baLogger())
	require.NoError(t, m.Load(), "a missing file is an empty table")
	assert.Equal(t, int64(-1), m.Query("cg", "TopicTest", 0))

	m.Commit("cg", "TopicTest", 0, 12)
	m.Commit("cg", "TopicTest", 1, 7)
	m.Commit("cg", "TopicTest", 0, 10) // last commit wins, even backwards (resets)
	m.Commit("other", "%RETRY%other", 0, 3)
	assert.Equal(t, int64(10), m.Query("cg", "TopicTest", 0))
	assert.Equal(t, int64(-1), m.Query("cg", "TopicTest", 2))
	assert.Equal(t, map[int32]int64{0: 10, 1: 7}, m.QueryAll("cg", "TopicTest"))
	assert.Equal(t, []string{"TopicTest"}, m.TopicsOfGroup("cg"))

	require.NoError(t, m.Persist())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, `{"offsetTable":{"%RETRY%other@other":{"0":3},"TopicTest@cg":{"0":10,"1":7}}}`, string(data))

	m2 := NewConsumerOffsetManager(path, baLogger())
	require.NoError(t, m2.Load())
	assert.Equal(t, int64(10), m2.Query("cg", "TopicTest", 0))
	assert.Equal(t, int64(7), m2.Query("cg", "TopicTest", 1))
	assert.Equal(t, int64(3), m2.Query("other", "%RETRY%other", 0))

	m2.RemoveGroup("cg")
	assert.Equal(t, int64(-1), m2.Query("cg", "TopicTest", 0))
	m2.RemoveTopic("%RETRY%other")
	assert.Nil(t, m2.QueryAll("other", "%RETRY%other"))
}

func TestConsumerOffsetManagerPersistSkipsUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumerOffset.json")
	m := NewConsumerOffsetManager(path, baLogger())
	m.Commit("g", "t", 0, 1)
	require.NoError(t, m.Persist())
	// Replace the file behind the manager's back: an unchanged table must
	// not rewrite it, a change must.
	require.NoError(t, os.WriteFile(path, []byte(`{"offsetTable":{}}`), 0o644))
	require.NoError(t, m.Persist())
	data, _ := os.ReadFile(path)
	assert.Equal(t, `{"offsetTable":{}}`, string(data))
	m.Commit("g", "t", 0, 1) // same value: no change
	require.NoError(t, m.Persist())
	data, _ = os.ReadFile(path)
	assert.Equal(t, `{"offsetTable":{}}`, string(data))
	m.Commit("g", "t", 0, 2)
	require.NoError(t, m.Persist())
	data, _ = os.ReadFile(path)
	assert.JSONEq(t, `{"offsetTable":{"t@g":{"0":2}}}`, string(data))
}

func TestConsumerOffsetManagerLoadForms(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[int32]int64
		wantErr bool
	}{
		{"standard json", `{"offsetTable":{"T@g":{"0":5,"3":9}}}`, map[int32]int64{0: 5, 3: 9}, false},
		{"fastjson integer keys", "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:5,3:9}\n\t}\n}", map[int32]int64{0: 5, 3: 9}, false},
		{"null entry", `{"offsetTable":{"T@g":null}}`, map[int32]int64{}, false},
		{"empty file", "", nil, true},
		{"garbage", `{"offsetTable":`, nil, true},
		{"null", `null`, nil, true},
		{"wrong type", `{"offsetTable":{"T@g":{"0":"5"}}}`, nil, true},
		{"huge offset", `{"offsetTable":{"T@g":{"0":1e30}}}`, nil, true},
		{"bad key", `{"offsetTable":{"nogroup":{"0":1}}}`, nil, true},
		{"bad queue id", `{"offsetTable":{"T@g":{"x":1}}}`, nil, true},
		{"huge queue id", `{"offsetTable":{"T@g":{"4294967296":1}}}`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "consumerOffset.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			m := NewConsumerOffsetManager(path, baLogger())
			err := m.Load()
			if tc.wantErr {
				// No .bak to fall back to: the error names both files.
				require.ErrorIs(t, err, fsutil.ErrNoValidCopy)
				assert.ErrorContains(t, err, path+fsutil.BackupSuffix)
				if tc.content != "" {
					require.ErrorIs(t, err, ErrBadOffsetFile)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.QueryAll("g", "T"))
		})
	}
}

func TestSubscriptionGroupManager(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "subscriptionGroup.json")
	m := NewSubscriptionGroupManager(path, true, baLogger())
	require.NoError(t, m.Load())
	require.NotNil(t, m.Get("TOOLS_CONSUMER"), "system groups exist from the start")
	assert.Nil(t, m.Get("cg"))

	v0 := m.DataVersion()
	c, created := m.Find("cg")
	require.NotNil(t, c)
	assert.True(t, created)
	assert.True(t, c.ConsumeEnable)
	assert.Equal(t, int32(1), c.RetryQueueNums)
	assert.Equal(t, int32(16), c.RetryMaxTimes)
	assert.Greater(t, m.DataVersion().Counter, v0.Counter)
	_, created = m.Find("cg")
	assert.False(t, created)
	empty, _ := m.Find("")
	assert.Nil(t, empty, "an empty name is never created")

	upd := *c
	upd.ConsumeEnable = false
	upd.RetryMaxTimes = 3
	require.NoError(t, m.Update(&upd))
	require.NoError(t, m.Persist())

	m2 := NewSubscriptionGroupManager(path, false, baLogger())
	require.NoError(t, m2.Load())
	got := m2.Get("cg")
	require.NotNil(t, got)
	assert.False(t, got.ConsumeEnable)
	assert.Equal(t, int32(3), got.RetryMaxTimes)
	assert.Equal(t, m.DataVersion(), m2.DataVersion())
	c, created = m2.Find("unknown")
	assert.Nil(t, c, "autoCreateSubscriptionGroup=false")
	assert.False(t, created)

	assert.True(t, m2.Delete("cg"))
	assert.False(t, m2.Delete("cg"))
	assert.Nil(t, m2.Get("cg"))
	require.ErrorIs(t, m2.Update(nil), ErrBadGroupName)

	require.NoError(t, os.WriteFile(path, []byte("{nope"), 0o644))
	require.ErrorIs(t, NewSubscriptionGroupManager(path, true, baLogger()).Load(), ErrBadSubscriptionGroupFile)
}

// TestSubscriptionGroupManagerLoadDamagedEntries: entries no broker writes
// are skipped, a group is known by its key, and a file that is no table at
// all is an error (no .bak here) rather than an empty table.
func TestSubscriptionGroupManagerLoadDamagedEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	long := strings.Repeat("g", maxGroupNameLength+1)
	require.NoError(t, os.WriteFile(path, []byte(`{"subscriptionGroupTable":{
		"a":{"groupName":"b","retryMaxTimes":3},"":{"groupName":""},"nil":null,"`+long+`":{}},
		"dataVersion":{"timestamp":5,"counter":2}}`), 0o644))
	m := NewSubscriptionGroupManager(path, false, baLogger())
	require.NoError(t, m.Load())
	a := m.Get("a")
	require.NotNil(t, a)
	assert.Equal(t, "a", a.GroupName)
	assert.EqualValues(t, 3, a.RetryMaxTimes)
	assert.Nil(t, m.Get("b"))
	assert.Nil(t, m.Get(""))
	assert.Nil(t, m.Get(long))
	assert.NotNil(t, m.Get("TOOLS_CONSUMER"), "system groups stay")
	assert.Equal(t, int64(2), m.DataVersion().Counter)

	for _, bad := range []string{"null", `{"subscriptionGroupTable":{"a":{"retryMaxTimes":1e20}}}`, `{"subscriptionGroupTable":[]}`} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o644))
		err := NewSubscriptionGroupManager(path, false, baLogger()).Load()
		require.ErrorIs(t, err, ErrBadSubscriptionGroupFile, bad)
		require.ErrorIs(t, err, fsutil.ErrNoValidCopy, bad)
	}
}

// FuzzConsumerOffsetRestore: any file content loads or fails with
// ErrBadOffsetFile, never panics; what loads survives Encode and Restore.
func FuzzConsumerOffsetRestore(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{"T@g":{"0":5,"3":9}}}`))
	f.Add([]byte("{\"offsetTable\":{\"T@g\":{0:5,3:9}}}"))
	f.Add([]byte(`{"offsetTable":{"nogroup":{"0":1}}}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := NewConsumerOffsetManager("unused", baLogger())
		if err := m.Restore(data); err != nil {
			require.ErrorIs(t, err, ErrBadOffsetFile)
			return
		}
		enc, _ := m.Encode()
		m2 := NewConsumerOffsetManager("unused", baLogger())
		require.NoError(t, m2.Restore(enc))
		enc2, _ := m2.Encode()
		assert.Equal(t, string(enc), string(enc2))
	})
}
