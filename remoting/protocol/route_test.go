package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTopicRouteDataEncode(t *testing.T) {
	tests := []struct {
		name string
		in   TopicRouteData
		want string
	}{
		{
			name: "two brokers, master and slave",
			in: TopicRouteData{
				QueueDatas: []*QueueData{
					{BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6},
					{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicSysFlag: 1},
				},
				BrokerDatas: []*BrokerData{
					{Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerAddrs: map[int64]string{0: "10.0.0.3:10911"}},
					{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}},
				},
			},
			want: `{"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":1},` +
				`{"brokerName":"broker-b","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicSysFlag":0}],` +
				`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}},` +
				`{"cluster":"DefaultCluster","brokerName":"broker-b","brokerAddrs":{"0":"10.0.0.3:10911"}}],"filterServerTable":{}}`,
		},
		{
			name: "order conf and nil addrs",
			in: TopicRouteData{
				OrderTopicConf: "broker-a:4",
				BrokerDatas:    []*BrokerData{{Cluster: "c", BrokerName: "broker-a"}},
			},
			want: `{"orderTopicConf":"broker-a:4","queueDatas":[],"brokerDatas":[{"cluster":"c","brokerName":"broker-a","brokerAddrs":{}}],"filterServerTable":{}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.in.Encode()
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
			assert.NotContains(t, string(b), " ", "the Go client keeps whitespace inside brokerAddrs")

			back, err := DecodeTopicRouteData(b)
			require.NoError(t, err)
			assert.Equal(t, tt.in.OrderTopicConf, back.OrderTopicConf)
			assert.Len(t, back.BrokerDatas, len(tt.in.BrokerDatas))
		})
	}
}

func TestTopicRouteDataDecodeJavaShape(t *testing.T) {
	// A Java 4.9.8 nameserver's answer to a >= 4.9.4 client (sorted fields, null order conf).
	body := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],` +
		`"filterServerTable":{},"orderTopicConf":null,"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	r, err := DecodeTopicRouteData([]byte(body))
	require.NoError(t, err)
	require.Len(t, r.BrokerDatas, 1)
	assert.Equal(t, "10.0.0.1:10911", r.BrokerDatas[0].MasterAddr())
	assert.Equal(t, int32(4), r.QueueDatas[0].WriteQueueNums)

	_, err = DecodeTopicRouteData([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"a"}}]}`))
	assert.ErrorIs(t, err, ErrBadBody)
}

func TestBrokerDataClone(t *testing.T) {
	bd := &BrokerData{Cluster: "c", BrokerName: "b", BrokerAddrs: map[int64]string{0: "a:1"}}
	c := bd.Clone()
	c.BrokerAddrs[1] = "a:2"
	assert.Len(t, bd.BrokerAddrs, 1)
	assert.Equal(t, "a:1", c.MasterAddr())
}

func BenchmarkTopicRouteDataEncode(b *testing.B) {
	r := &TopicRouteData{
		QueueDatas:  []*QueueData{{BrokerName: "broker-a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}, {BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		BrokerDatas: []*BrokerData{{Cluster: "c", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}, {Cluster: "c", BrokerName: "broker-b", BrokerAddrs: map[int64]string{0: "10.0.0.3:10911"}}},
	}
	enc, _ := r.Encode()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTopicRouteDataDecode(b *testing.B) {
	r := &TopicRouteData{
		QueueDatas:  []*QueueData{{BrokerName: "broker-a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		BrokerDatas: []*BrokerData{{Cluster: "c", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}},
	}
	enc, _ := r.Encode()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		var out TopicRouteData
		if err := json.Unmarshal(enc, &out); err != nil {
			b.Fatal(err)
		}
	}
}
