package protocol

// Headers of the requests a nameserver answers, with RocketMQ's extFields keys
// (org.apache.rocketmq.common.protocol.header.namesrv). "required" marks the
// fields Java declares @CFNotNull.

// RegisterBrokerRequestHeader is REGISTER_BROKER's header. BodyCrc32 is
// BodyCRC32 of the body, or 0 for no check; Compressed selects the zlib body.
type RegisterBrokerRequestHeader struct {
	BrokerName   string `ext:"brokerName,required"`
	BrokerAddr   string `ext:"brokerAddr,required"`
	ClusterName  string `ext:"clusterName,required"`
	HaServerAddr string `ext:"haServerAddr,required"`
	BrokerID     int64  `ext:"brokerId,required"`
	Compressed   bool   `ext:"compressed"`
	BodyCrc32    int32  `ext:"bodyCrc32"`
}

// RegisterBrokerResponseHeader tells a slave its master's address and HA
// address; both are empty for a master or a slave whose master is unknown.
type RegisterBrokerResponseHeader struct {
	HaServerAddr string `ext:"haServerAddr,omitempty"`
	MasterAddr   string `ext:"masterAddr,omitempty"`
}

// UnRegisterBrokerRequestHeader is UNREGISTER_BROKER's header.
type UnRegisterBrokerRequestHeader struct {
	BrokerName  string `ext:"brokerName,required"`
	BrokerAddr  string `ext:"brokerAddr,required"`
	ClusterName string `ext:"clusterName,required"`
	BrokerID    int64  `ext:"brokerId,required"`
}

// QueryDataVersionRequestHeader is QUERY_DATA_VERSION's header; the body is
// the broker's DataVersion.
type QueryDataVersionRequestHeader struct {
	BrokerName  string `ext:"brokerName,required"`
	BrokerAddr  string `ext:"brokerAddr,required"`
	ClusterName string `ext:"clusterName,required"`
	BrokerID    int64  `ext:"brokerId,required"`
}

// QueryDataVersionResponseHeader says whether the broker's topic table
// changed against what the nameserver holds.
type QueryDataVersionResponseHeader struct {
	Changed bool `ext:"changed,required"`
}

// GetRouteInfoRequestHeader is GET_ROUTEINFO_BY_TOPIC's header.
type GetRouteInfoRequestHeader struct {
	Topic string `ext:"topic,required"`
	// AcceptStandardJSONOnly asks a Java nameserver for quoted map keys; ours
	// always writes them.
	AcceptStandardJSONOnly bool `ext:"acceptStandardJsonOnly,omitempty"`
}

// DeleteTopicFromNamesrvRequestHeader is DELETE_TOPIC_IN_NAMESRV's header.
// With ClusterName set only that cluster's brokers lose the topic.
type DeleteTopicFromNamesrvRequestHeader struct {
	Topic       string `ext:"topic,required"`
	ClusterName string `ext:"clusterName,omitempty"`
}

// GetTopicsByClusterRequestHeader is GET_TOPICS_BY_CLUSTER's header.
type GetTopicsByClusterRequestHeader struct {
	Cluster string `ext:"cluster,required"`
}

// PutKVConfigRequestHeader is PUT_KV_CONFIG's header.
type PutKVConfigRequestHeader struct {
	Namespace string `ext:"namespace,required"`
	Key       string `ext:"key,required"`
	Value     string `ext:"value,required"`
}

// GetKVConfigRequestHeader is GET_KV_CONFIG's header.
type GetKVConfigRequestHeader struct {
	Namespace string `ext:"namespace,required"`
	Key       string `ext:"key,required"`
}

// GetKVConfigResponseHeader carries the value found.
type GetKVConfigResponseHeader struct {
	Value string `ext:"value,omitempty"`
}

// DeleteKVConfigRequestHeader is DELETE_KV_CONFIG's header.
type DeleteKVConfigRequestHeader struct {
	Namespace string `ext:"namespace,required"`
	Key       string `ext:"key,required"`
}

// GetKVListByNamespaceRequestHeader is GET_KVLIST_BY_NAMESPACE's header.
type GetKVListByNamespaceRequestHeader struct {
	Namespace string `ext:"namespace,required"`
}

// WipeWritePermOfBrokerRequestHeader is WIPE_WRITE_PERM_OF_BROKER's header.
type WipeWritePermOfBrokerRequestHeader struct {
	BrokerName string `ext:"brokerName,required"`
}

// WipeWritePermOfBrokerResponseHeader counts the topics that lost write permission.
type WipeWritePermOfBrokerResponseHeader struct {
	WipeTopicCount int32 `ext:"wipeTopicCount,required"`
}

// AddWritePermOfBrokerRequestHeader is ADD_WRITE_PERM_OF_BROKER's header.
type AddWritePermOfBrokerRequestHeader struct {
	BrokerName string `ext:"brokerName,required"`
}

// AddWritePermOfBrokerResponseHeader counts the topics that got write permission back.
type AddWritePermOfBrokerResponseHeader struct {
	AddTopicCount int32 `ext:"addTopicCount,required"`
}

// NamespaceOrderTopicConfig is the KV namespace holding orderTopicConf per
// topic (NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
const NamespaceOrderTopicConfig = "ORDER_TOPIC_CONFIG"
