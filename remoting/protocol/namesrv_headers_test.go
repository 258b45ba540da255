package protocol

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// TestNamesrvHeadersRoundTrip encodes each header into extFields, checks the
// exact keys and values RocketMQ uses, sends it through a frame in both header
// serializations, and decodes it back.
func TestNamesrvHeadersRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    any
		ext  map[string]string
	}{
		{"RegisterBrokerRequest", &RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", ClusterName: "DefaultCluster", HaServerAddr: "10.0.0.1:10912", BrokerID: 1, Compressed: true, BodyCrc32: 12345},
			map[string]string{"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911", "clusterName": "DefaultCluster", "haServerAddr": "10.0.0.1:10912", "brokerId": "1", "compressed": "true", "bodyCrc32": "12345"}},
		{"RegisterBrokerResponse", &RegisterBrokerResponseHeader{HaServerAddr: "10.0.0.1:10912", MasterAddr: "10.0.0.1:10911"},
			map[string]string{"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}},
		{"RegisterBrokerResponseEmpty", &RegisterBrokerResponseHeader{}, map[string]string{}},
		{"UnRegisterBroker", &UnRegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "1.2.3.4:5", ClusterName: "c", BrokerID: 0},
			map[string]string{"brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "brokerId": "0"}},
		{"QueryDataVersion", &QueryDataVersionRequestHeader{BrokerName: "b", BrokerAddr: "1.2.3.4:5", ClusterName: "c", BrokerID: 2},
			map[string]string{"brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "brokerId": "2"}},
		{"QueryDataVersionResponse", &QueryDataVersionResponseHeader{Changed: true}, map[string]string{"changed": "true"}},
		{"GetRouteInfo", &GetRouteInfoRequestHeader{Topic: "TopicTest"}, map[string]string{"topic": "TopicTest"}},
		{"GetRouteInfoStandardJSON", &GetRouteInfoRequestHeader{Topic: "T", AcceptStandardJSONOnly: true}, map[string]string{"topic": "T", "acceptStandardJsonOnly": "true"}},
		{"DeleteTopicFromNamesrv", &DeleteTopicFromNamesrvRequestHeader{Topic: "T", ClusterName: "c"}, map[string]string{"topic": "T", "clusterName": "c"}},
		{"GetTopicsByCluster", &GetTopicsByClusterRequestHeader{Cluster: "c"}, map[string]string{"cluster": "c"}},
		{"PutKVConfig", &PutKVConfigRequestHeader{Namespace: "ns", Key: "k", Value: "v=1;x"}, map[string]string{"namespace": "ns", "key": "k", "value": "v=1;x"}},
		{"GetKVConfig", &GetKVConfigRequestHeader{Namespace: "ns", Key: "k"}, map[string]string{"namespace": "ns", "key": "k"}},
		{"GetKVConfigResponse", &GetKVConfigResponseHeader{Value: "v"}, map[string]string{"value": "v"}},
		{"DeleteKVConfig", &DeleteKVConfigRequestHeader{Namespace: "ns", Key: "k"}, map[string]string{"namespace": "ns", "key": "k"}},
		{"GetKVListByNamespace", &GetKVListByNamespaceRequestHeader{Namespace: "ns"}, map[string]string{"namespace": "ns"}},
		{"WipeWritePerm", &WipeWritePermOfBrokerRequestHeader{BrokerName: "b"}, map[string]string{"brokerName": "b"}},
		{"WipeWritePermResponse", &WipeWritePermOfBrokerResponseHeader{WipeTopicCount: 3}, map[string]string{"wipeTopicCount": "3"}},
		{"AddWritePerm", &AddWritePermOfBrokerRequestHeader{BrokerName: "b"}, map[string]string{"brokerName": "b"}},
		{"AddWritePermResponse", &AddWritePermOfBrokerResponseHeader{AddTopicCount: 4}, map[string]string{"addTopicCount": "4"}},
	}
	for _, tt := range tests {
		for _, st := range []remoting.SerializeType{remoting.JSONSerialize, remoting.RocketMQSerialize} {
			t.Run(tt.name+"/"+st.String(), func(t *testing.T) {
				ext := EncodeHeader(tt.h, nil)
				assert.Equal(t, tt.ext, ext)

				cmd := remoting.NewRequest(remoting.RegisterBroker, ext, nil)
				cmd.SerializeType = st
				frame, err := remoting.EncodeFrame(cmd)
				require.NoError(t, err)
				got, err := remoting.DecodeFrame(frame[4:])
				require.NoError(t, err)

				back := reflect.New(reflect.TypeOf(tt.h).Elem()).Interface()
				require.NoError(t, DecodeHeader(got.ExtFields, back))
				assert.Equal(t, tt.h, back)
			})
		}
	}
}

func TestNamesrvHeadersMissingRequired(t *testing.T) {
	tests := []struct {
		name string
		ext  map[string]string
		h    any
		key  string
	}{
		{"register without brokerId", map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "a:2"}, &RegisterBrokerRequestHeader{}, "brokerId"},
		{"register with bad brokerId", map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "a:2", "brokerId": "x"}, &RegisterBrokerRequestHeader{}, "brokerId"},
		{"route without topic", map[string]string{}, &GetRouteInfoRequestHeader{}, "topic"},
		{"put kv without value", map[string]string{"namespace": "n", "key": "k"}, &PutKVConfigRequestHeader{}, "value"},
		{"topics by cluster", nil, &GetTopicsByClusterRequestHeader{}, "cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeHeader(tt.ext, tt.h)
			require.ErrorIs(t, err, ErrBadHeader)
			assert.Contains(t, err.Error(), tt.key)
		})
	}
}

func TestRegisterBrokerHeaderOptionalDefaults(t *testing.T) {
	// A Java broker always sends compressed and bodyCrc32; older ones may not.
	var h RegisterBrokerRequestHeader
	require.NoError(t, DecodeHeader(map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "a:2", "brokerId": "0"}, &h))
	assert.False(t, h.Compressed)
	assert.Zero(t, h.BodyCrc32)
}
