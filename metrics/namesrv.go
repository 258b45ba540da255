package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// NameServerCollector reads a nameserver's figures at each scrape
// (unchecked, like BrokerCollector).
type NameServerCollector struct {
	ns *nameserver.NameServer
}

// NewNameServerCollector returns a collector over ns.
func NewNameServerCollector(ns *nameserver.NameServer) *NameServerCollector {
	return &NameServerCollector{ns: ns}
}

var (
	nsLabels     = []string{"namesrv"}
	dNsBroker    = desc("rocketmq_namesrv_broker", "A registered broker (1 per broker address).", []string{"namesrv", "cluster", "broker", "brokerId", "addr"})
	dNsBrokers   = desc("rocketmq_namesrv_brokers", "Brokers registered, masters and slaves.", nsLabels)
	dNsTopics    = desc("rocketmq_namesrv_topics", "Topics in the route table.", nsLabels)
	dNsRequests  = desc("rocketmq_namesrv_requests_total", "Requests served since start, by request code.", []string{"namesrv", "code", "request"})
	dNsWatermark = desc("rocketmq_processor_watermark", "Requests waiting in the processor's queue.", []string{"namesrv", "processor"})
	dNsBusy      = desc("rocketmq_processor_busy_workers", "Workers of the processor running a request now.", []string{"namesrv", "processor"})
	dNsRejected  = desc("rocketmq_requests_rejected_total", "Requests answered SYSTEM_BUSY because the processor's queue was full.", []string{"namesrv", "processor"})
	dNsQueueCap  = desc("rocketmq_processor_queue_capacity", "Requests the processor's queue holds before it answers SYSTEM_BUSY.", []string{"namesrv", "processor"})
)

// requestNames are the Java names of the codes a nameserver serves.
var requestNames = map[remoting.RequestCode]string{
	remoting.RegisterBroker: "REGISTER_BROKER", remoting.UnregisterBroker: "UNREGISTER_BROKER",
	remoting.GetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC", remoting.GetBrokerClusterInfo: "GET_BROKER_CLUSTER_INFO",
	remoting.GetAllTopicListFromNameServer: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", remoting.GetTopicsByCluster: "GET_TOPICS_BY_CLUSTER",
	remoting.DeleteTopicInNamesrv: "DELETE_TOPIC_IN_NAMESRV", remoting.PutKVConfig: "PUT_KV_CONFIG", remoting.GetKVConfig: "GET_KV_CONFIG",
	remoting.DeleteKVConfig: "DELETE_KV_CONFIG", remoting.GetKVListByNamespace: "GET_KVLIST_BY_NAMESPACE",
	remoting.QueryDataVersion: "QUERY_DATA_VERSION", remoting.WipeWritePermOfBroker: "WIPE_WRITE_PERM_OF_BROKER",
	remoting.AddWritePermOfBroker: "ADD_WRITE_PERM_OF_BROKER", remoting.GetNamesrvConfig: "GET_NAMESRV_CONFIG",
	remoting.UpdateNamesrvConfig: "UPDATE_NAMESRV_CONFIG",
}

// requestNameOf is the Java name of a code, or its number.
func requestNameOf(c remoting.RequestCode) string {
	if n, ok := requestNames[c]; ok {
		return n
	}
	return strconv.Itoa(int(c))
}

// Describe implements prometheus.Collector (unchecked: sends nothing).
func (c *NameServerCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *NameServerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.ns.Stats()
	ns := s.Addr
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, b := range s.Brokers {
		gauge(dNsBroker, 1, ns, b.Cluster, b.BrokerName, strconv.FormatInt(b.BrokerID, 10), b.Addr)
	}
	gauge(dNsBrokers, float64(len(s.Brokers)), ns)
	gauge(dNsTopics, float64(s.Topics), ns)
	for code, n := range s.Requests {
		ch <- prometheus.MustNewConstMetric(dNsRequests, prometheus.CounterValue, float64(n), ns, strconv.Itoa(int(code)), requestNameOf(code))
	}
	gauge(dNsWatermark, float64(s.PoolQueued), ns, "namesrv")
	gauge(dNsBusy, float64(s.PoolBusy), ns, "namesrv")
	gauge(dNsQueueCap, float64(s.PoolCapacity), ns, "namesrv")
	ch <- prometheus.MustNewConstMetric(dNsRejected, prometheus.CounterValue, float64(s.PoolRejected), ns, "namesrv")
}
