package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClusterInfoShape(t *testing.T) {
	ci := &ClusterInfo{
		BrokerAddrTable: map[string]*BrokerData{
			"broker-a": {Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911"}},
		},
		ClusterAddrTable: map[string][]string{"DefaultCluster": {"broker-b", "broker-a"}},
	}
	b, err := ci.Encode()
	require.NoError(t, err)
	assert.Equal(t, `{"brokerAddrTable":{"broker-a":{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911"}}},"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"]}}`, string(b))
	back, err := DecodeClusterInfo(b)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:10911", back.BrokerAddrTable["broker-a"].MasterAddr())
	assert.Equal(t, []string{"broker-b", "broker-a"}, ci.ClusterAddrTable["DefaultCluster"], "Encode must not sort the caller's slice")

	empty, err := (&ClusterInfo{}).Encode()
	require.NoError(t, err)
	assert.Equal(t, `{"brokerAddrTable":{},"clusterAddrTable":{}}`, string(empty))
}

func TestTopicListShape(t *testing.T) {
	tests := []struct {
		name string
		in   TopicList
		want string
	}{
		{"no broker", TopicList{Topics: []string{"b", "a"}}, `{"topicList":["a","b"],"brokerAddr":null}`},
		{"empty", TopicList{}, `{"topicList":[],"brokerAddr":null}`},
		{"with broker", TopicList{Topics: []string{"x"}, BrokerAddr: "1.2.3.4:5"}, `{"topicList":["x"],"brokerAddr":"1.2.3.4:5"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.in.Encode()
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
			back, err := DecodeTopicList(b)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.in.Topics, back.Topics)
			assert.Equal(t, tt.in.BrokerAddr, back.BrokerAddr)
		})
	}
	_, err := DecodeTopicList([]byte(`{"topicList":"x"}`))
	assert.ErrorIs(t, err, ErrBadBody)
}

func TestKVTableShape(t *testing.T) {
	tests := []struct {
		in   KVTable
		want string
	}{
		{KVTable{Table: map[string]string{"k": "v", "a": "b"}}, `{"table":{"a":"b","k":"v"}}`},
		{KVTable{}, `{"table":{}}`},
	}
	for _, tt := range tests {
		b, err := tt.in.Encode()
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(b))
		back, err := DecodeKVTable(b)
		require.NoError(t, err)
		assert.Len(t, back.Table, len(tt.in.Table))
	}
	_, err := DecodeKVTable([]byte(`{"table":[1]}`))
	assert.ErrorIs(t, err, ErrBadBody)
}
