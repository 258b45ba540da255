package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/metrics/latency"
)

// BrokerCollector reads a broker's figures at each scrape. It is an
// unchecked collector (its series depend on the topics and groups that
// exist), so Describe sends nothing.
type BrokerCollector struct {
	b *broker.Broker
}

// NewBrokerCollector returns a collector over b; before b starts (and
// after a failed start) it reports nothing.
func NewBrokerCollector(b *broker.Broker) *BrokerCollector { return &BrokerCollector{b: b} }

// Describe implements prometheus.Collector (unchecked: sends nothing).
func (c *BrokerCollector) Describe(chan<- *prometheus.Desc) {}

// Label sets.
var (
	brokerLabels  = []string{"cluster", "broker"}
	exporterNums  = []string{"cluster", "brokerIP", "broker"}                                          // BROKER_NUMS_LABEL_NAMES
	runtimeLabels = []string{"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"} // BROKER_RUNTIME_METRIC_LABEL_NAMES
	topicLabels   = []string{"cluster", "broker", "topic"}
	groupLabels   = []string{"cluster", "broker", "topic", "group"}
	diffLabels    = []string{"cluster", "broker", "group", "topic", "queueid", "countOfOnlineConsumers", "msgModel"}
)

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// Descriptors, built once.
var (
	dBrokerTPS  = desc("rocketmq_broker_tps", "Messages stored per second over the last minute.", exporterNums)
	dBrokerQPS  = desc("rocketmq_broker_qps", "Messages returned to pulls per second over the last minute.", exporterNums)
	dProdTPS    = desc("rocketmq_producer_tps", "Messages stored in the topic per second over the last minute.", topicLabels)
	dProdSize   = desc("rocketmq_producer_message_size", "Bytes stored in the topic per second over the last minute.", topicLabels)
	dProdOffset = desc("rocketmq_producer_offset", "Sum of the topic's queue max offsets (messages ever stored in it).", topicLabels)
	dProdCount  = desc("rocketmq_producer_count", "Connections of the producer group.", []string{"cluster", "broker", "group"})
	dConsTPS    = desc("rocketmq_consumer_tps", "Messages the group pulled from the topic per second over the last minute.", groupLabels)
	dConsSize   = desc("rocketmq_consumer_message_size", "Bytes the group pulled from the topic per second over the last minute.", groupLabels)
	dConsOffset = desc("rocketmq_consumer_offset", "Sum of the group's committed offsets in the topic.", groupLabels)
	dAccum      = desc("rocketmq_message_accumulation", "Messages of the topic the group has not consumed yet (sum over queues).", groupLabels)
	dGroupDiff  = desc("rocketmq_group_diff", "Messages of one queue the group has not consumed yet.", diffLabels)
	dSendBack   = desc("rocketmq_send_back_nums", "Messages the group sent back for retry since start.", groupLabels)

	dMsgsIn     = desc("rocketmq_messages_in_total", "Messages stored in the topic since start.", topicLabels)
	dBytesIn    = desc("rocketmq_throughput_in_total", "Bytes stored in the topic since start.", topicLabels)
	dMsgsOut    = desc("rocketmq_messages_out_total", "Messages returned to the group's pulls since start.", []string{"cluster", "broker", "topic", "consumer_group"})
	dBytesOut   = desc("rocketmq_throughput_out_total", "Bytes returned to the group's pulls since start.", []string{"cluster", "broker", "topic", "consumer_group"})
	dTopicNum   = desc("rocketmq_topic_number", "Topics on the broker.", brokerLabels)
	dGroupNum   = desc("rocketmq_consumer_group_number", "Consumer groups with offsets on the broker.", brokerLabels)
	dWatermark  = desc("rocketmq_processor_watermark", "Requests waiting in the processor's queue.", []string{"cluster", "broker", "processor"})
	dPoolBusy   = desc("rocketmq_processor_busy_workers", "Workers of the processor running a request now.", []string{"cluster", "broker", "processor"})
	dPoolCap    = desc("rocketmq_processor_queue_capacity", "Requests the processor's queue holds before it answers SYSTEM_BUSY.", []string{"cluster", "broker", "processor"})
	dRejected   = desc("rocketmq_requests_rejected_total", "Requests answered SYSTEM_BUSY because the processor's queue was full.", []string{"cluster", "broker", "processor"})
	dDispatch   = desc("rocketmq_storage_dispatch_behind_bytes", "Commitlog bytes not yet dispatched to consume queues and the index.", brokerLabels)
	dFlushBh    = desc("rocketmq_storage_flush_behind_bytes", "Commitlog bytes written but not yet flushed to disk.", brokerLabels)
	dStorSize   = desc("rocketmq_storage_size", "Bytes the commitlog spans (max offset minus min offset).", brokerLabels)
	dPulls      = desc("rocketmq_pulls_found_total", "Pulls that returned messages, by where the records lay: page_cache (within the commitlog tail kept in memory) or disk.", []string{"cluster", "broker", "source"})
	dHeld       = desc("rocketmq_pull_held", "Long-polling pulls parked now, waiting for messages.", brokerLabels)
	dParked     = desc("rocketmq_pull_parked_total", "Long-polling pulls parked since start.", brokerLabels)
	dHoldRefuse = desc("rocketmq_pull_hold_refused_total", "Pulls answered SYSTEM_BUSY because the hold table was full.", brokerLabels)
	dReplLag    = desc("rocketmq_replication_lag_bytes", "Commitlog bytes a slave has not acknowledged (on a master, per slave connection).", []string{"cluster", "broker", "slave"})
	dReplAck    = desc("rocketmq_replication_slave_ack_offset", "Commitlog offset the slave acknowledged (on a master, per slave connection).", []string{"cluster", "broker", "slave"})
	dReplSlaves = desc("rocketmq_replication_slaves", "Slaves connected to this master.", brokerLabels)
	dBehind     = desc("rocketmq_replication_behind_master_bytes", "On a slave: commitlog bytes behind its master (-1 while unknown).", brokerLabels)
	dGCRounds   = desc("rocketmq_group_commit_rounds_total", "SYNC_FLUSH group-commit rounds that answered writers.", brokerLabels)
	dGCWaiters  = desc("rocketmq_group_commit_waiters_total", "Writers answered by SYNC_FLUSH group commit.", brokerLabels)

	dPutLat   = desc("rocketmq_store_put_latency_seconds", "Time to append to the commitlog (encode, writer lock, copy), sampled: one put in 16 is timed.", brokerLabels)
	dGetLat   = desc("rocketmq_store_get_latency_seconds", "Time of a store read for a pull, sampled: one read in 16 is timed.", brokerLabels)
	dFlushLat = desc("rocketmq_store_flush_latency_seconds", "Time of each commitlog flush that persisted pages.", brokerLabels)
	dGCLat    = desc("rocketmq_store_group_commit_latency_seconds", "Time of each SYNC_FLUSH group-commit round with waiting writers: its flush and the answers.", brokerLabels)

	dRtPutToday   = desc("rocketmq_brokeruntime_msg_put_total_today_now", "Messages stored since start.", runtimeLabels)
	dRtGetToday   = desc("rocketmq_brokeruntime_msg_gettotal_today_now", "Messages returned to pulls since start.", runtimeLabels)
	dRtPutSize    = desc("rocketmq_brokeruntime_put_message_size_total", "Bytes stored since start.", runtimeLabels)
	dRtAvgSize    = desc("rocketmq_brokeruntime_put_message_average_size", "Average stored message size in bytes.", runtimeLabels)
	dRtDispatch   = desc("rocketmq_brokeruntime_dispatch_behind_bytes", "Commitlog bytes not yet dispatched.", runtimeLabels)
	dRtMaxOff     = desc("rocketmq_brokeruntime_commitlog_maxoffset", "Commitlog max offset.", runtimeLabels)
	dRtMinOff     = desc("rocketmq_brokeruntime_commitlog_minoffset", "Commitlog min offset.", runtimeLabels)
	dRtDiskRatio  = desc("rocketmq_brokeruntime_commitlog_disk_ratio", "Used share of the commitlog's file system (0-1).", runtimeLabels)
	dRtDiskFree   = desc("rocketmq_brokeruntime_commitlogdir_capacity_free", "Free bytes on the commitlog's file system.", runtimeLabels)
	dRtDiskTotal  = desc("rocketmq_brokeruntime_commitlogdir_capacity_total", "Size in bytes of the commitlog's file system.", runtimeLabels)
	dRtToFlush    = desc("rocketmq_brokeruntime_remain_howmanydata_toflush", "Commitlog bytes not yet flushed.", runtimeLabels)
	dRtPutTps10   = desc("rocketmq_brokeruntime_put_tps10", "Messages stored per second over 10 s.", runtimeLabels)
	dRtPutTps60   = desc("rocketmq_brokeruntime_put_tps60", "Messages stored per second over a minute.", runtimeLabels)
	dRtPutTps600  = desc("rocketmq_brokeruntime_put_tps600", "Messages stored per second over 10 minutes.", runtimeLabels)
	dRtGetTps10   = desc("rocketmq_brokeruntime_gettransfered_tps10", "Messages returned to pulls per second over 10 s.", runtimeLabels)
	dRtGetTps60   = desc("rocketmq_brokeruntime_gettransfered_tps60", "Messages returned to pulls per second over a minute.", runtimeLabels)
	dRtGetTps600  = desc("rocketmq_brokeruntime_gettransfered_tps600", "Messages returned to pulls per second over 10 minutes.", runtimeLabels)
	dRtSendQueue  = desc("rocketmq_brokeruntime_send_threadpool_queue_size", "Send requests waiting for a worker.", runtimeLabels)
	dRtSendCap    = desc("rocketmq_brokeruntime_send_threadpoolqueue_capacity", "Send queue capacity.", runtimeLabels)
	dRtPullQueue  = desc("rocketmq_brokeruntime_pull_threadpoolqueue_size", "Pull requests waiting for a worker.", runtimeLabels)
	dRtPullCap    = desc("rocketmq_brokeruntime_pull_threadpoolqueue_capacity", "Pull queue capacity.", runtimeLabels)
	dRtQueryQueue = desc("rocketmq_brokeruntime_query_threadpoolqueue_size", "Query requests waiting for a worker.", runtimeLabels)
	dRtQueryCap   = desc("rocketmq_brokeruntime_query_threadpool_queue_capacity", "Query queue capacity.", runtimeLabels)
)

// Collect implements prometheus.Collector.
func (c *BrokerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Store()
	if st == nil {
		return
	}
	s := c.b.Stats()
	cl, bn := s.Cluster, s.BrokerName
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}

	gauge(dBrokerTPS, s.Put.Nums60s, cl, s.Addr, bn)
	gauge(dBrokerQPS, s.Get.Nums60s, cl, s.Addr, bn)
	for _, t := range s.Topics {
		gauge(dProdTPS, t.Put.Nums60s, cl, bn, t.Topic)
		gauge(dProdSize, t.Put.Size60s, cl, bn, t.Topic)
		counter(dProdOffset, float64(t.MaxOffset), cl, bn, t.Topic)
		counter(dMsgsIn, float64(t.Put.Nums), cl, bn, t.Topic)
		counter(dBytesIn, float64(t.Put.Size), cl, bn, t.Topic)
	}
	for g, n := range s.ProducerConnections {
		gauge(dProdCount, float64(n), cl, bn, g)
	}
	groups := map[string]bool{}
	for _, g := range s.Groups {
		groups[g.Group] = true
		gauge(dConsTPS, g.Get.Nums60s, cl, bn, g.Topic, g.Group)
		gauge(dConsSize, g.Get.Size60s, cl, bn, g.Topic, g.Group)
		counter(dConsOffset, float64(g.ConsumerOffset), cl, bn, g.Topic, g.Group)
		gauge(dAccum, float64(g.Lag), cl, bn, g.Topic, g.Group)
		counter(dMsgsOut, float64(g.Get.Nums), cl, bn, g.Topic, g.Group)
		counter(dBytesOut, float64(g.Get.Size), cl, bn, g.Topic, g.Group)
		online := strconv.Itoa(g.OnlineConsumers)
		for _, q := range g.QueueLag {
			gauge(dGroupDiff, float64(q.Lag), cl, bn, g.Group, g.Topic, strconv.Itoa(int(q.QueueID)), online, g.MessageModel)
		}
	}
	for _, sb := range s.SendBack {
		counter(dSendBack, float64(sb.Nums), cl, bn, sb.Topic, sb.Group)
	}
	gauge(dTopicNum, float64(len(s.Topics)), cl, bn)
	gauge(dGroupNum, float64(len(groups)), cl, bn)
	for _, p := range s.Pools {
		gauge(dWatermark, float64(p.Queued), cl, bn, p.Name)
		gauge(dPoolBusy, float64(p.Busy), cl, bn, p.Name)
		gauge(dPoolCap, float64(p.Capacity), cl, bn, p.Name)
		counter(dRejected, float64(p.Rejected), cl, bn, p.Name)
	}
	counter(dPulls, float64(s.PullsFromCache), cl, bn, "page_cache")
	counter(dPulls, float64(s.PullsFromDisk), cl, bn, "disk")
	gauge(dHeld, float64(s.HeldPulls), cl, bn)
	counter(dParked, float64(s.PullsParked), cl, bn)
	counter(dHoldRefuse, float64(s.PullsRefused), cl, bn)
	if s.Replication.Master {
		gauge(dReplSlaves, float64(len(s.Replication.Slaves)), cl, bn)
		for _, sl := range s.Replication.Slaves {
			gauge(dReplLag, float64(sl.LagBytes), cl, bn, sl.Addr)
			gauge(dReplAck, float64(sl.AckOffset), cl, bn, sl.Addr)
		}
	} else {
		gauge(dBehind, float64(s.Replication.BehindMaster), cl, bn)
	}

	maxOff, minOff := st.CommitLogMaxOffset(), st.CommitLogMinOffset()
	dispatch := st.DispatchBehindBytes()
	toFlush := max(0, maxOff-st.CommitLogFlushedOffset())
	gauge(dDispatch, float64(dispatch), cl, bn)
	gauge(dFlushBh, float64(toFlush), cl, bn)
	gauge(dStorSize, float64(max(0, maxOff-minOff)), cl, bn)
	m := st.Metrics()
	counter(dGCRounds, float64(m.GroupCommitRounds.Load()), cl, bn)
	counter(dGCWaiters, float64(m.GroupCommitWaiters.Load()), cl, bn)
	ch <- histogram(dPutLat, m.PutLatency.Snapshot(), cl, bn)
	ch <- histogram(dGetLat, m.GetLatency.Snapshot(), cl, bn)
	ch <- histogram(dFlushLat, m.FlushLatency.Snapshot(), cl, bn)
	ch <- histogram(dGCLat, m.GroupCommitLatency.Snapshot(), cl, bn)

	rl := []string{cl, s.Addr, bn, s.Role, strconv.FormatInt(s.BootTime.UnixMilli(), 10), s.Version}
	gauge(dRtPutToday, float64(s.Put.Nums), rl...)
	gauge(dRtGetToday, float64(s.Get.Nums), rl...)
	gauge(dRtPutSize, float64(s.Put.Size), rl...)
	if s.Put.Nums > 0 {
		gauge(dRtAvgSize, float64(s.Put.Size)/float64(s.Put.Nums), rl...)
	}
	gauge(dRtDispatch, float64(dispatch), rl...)
	gauge(dRtMaxOff, float64(maxOff), rl...)
	gauge(dRtMinOff, float64(minOff), rl...)
	gauge(dRtToFlush, float64(toFlush), rl...)
	if ds, err := st.CommitLogDiskSpace(); err == nil {
		gauge(dRtDiskRatio, ds.UsedRatio, rl...)
		gauge(dRtDiskFree, float64(ds.Free), rl...)
		gauge(dRtDiskTotal, float64(ds.Total), rl...)
	}
	gauge(dRtPutTps10, s.Put.Nums10s, rl...)
	gauge(dRtPutTps60, s.Put.Nums60s, rl...)
	gauge(dRtPutTps600, s.Put.Nums600s, rl...)
	gauge(dRtGetTps10, s.Get.Nums10s, rl...)
	gauge(dRtGetTps60, s.Get.Nums60s, rl...)
	gauge(dRtGetTps600, s.Get.Nums600s, rl...)
	for _, p := range s.Pools {
		switch p.Name {
		case "send":
			gauge(dRtSendQueue, float64(p.Queued), rl...)
			gauge(dRtSendCap, float64(p.Capacity), rl...)
		case "pull":
			gauge(dRtPullQueue, float64(p.Queued), rl...)
			gauge(dRtPullCap, float64(p.Capacity), rl...)
		case "query":
			gauge(dRtQueryQueue, float64(p.Queued), rl...)
			gauge(dRtQueryCap, float64(p.Capacity), rl...)
		}
	}
}

// histogram turns a latency snapshot into a Prometheus histogram in
// seconds (cumulative buckets at latency.Bounds).
func histogram(d *prometheus.Desc, s latency.Snapshot, lv ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(latency.Bounds))
	var cum uint64
	for i, b := range latency.Bounds {
		cum += s.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, s.Count, s.Sum.Seconds(), buckets, lv...)
}
