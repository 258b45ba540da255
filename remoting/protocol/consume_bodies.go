package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Group topic prefixes (MixAll.RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX).
const (
	RetryGroupTopicPrefix = "%RETRY%"
	DLQGroupTopicPrefix   = "%DLQ%"
)

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryGroupTopicPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQGroupTopicPrefix + group }

// OffsetWrapper is one queue's line in ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// ConsumeStats answers GET_CONSUME_STATS: per queue, the broker's max offset,
// the group's committed offset and the store time of the last consumed
// message.
//
// RocketMQ's fastjson writes the MessageQueue map keys as JSON objects, which
// is not valid JSON:
//
//	{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,...}}}
//
// Encode writes exactly that (so Java's mqadmin reads it) and
// DecodeConsumeStats reads it back.
type ConsumeStats struct {
	OffsetTable map[MessageQueue]OffsetWrapper
	ConsumeTps  float64
}

// Encode renders the fastjson form, queues sorted by topic, broker, id.
func (cs *ConsumeStats) Encode() ([]byte, error) {
	mqs := make([]MessageQueue, 0, len(cs.OffsetTable))
	for mq := range cs.OffsetTable {
		mqs = append(mqs, mq)
	}
	SortMessageQueues(mqs)
	buf := make([]byte, 0, 64+96*len(mqs))
	buf = append(buf, `{"consumeTps":`...)
	tps := strconv.FormatFloat(cs.ConsumeTps, 'f', -1, 64)
	if !strings.ContainsAny(tps, ".eE") {
		tps += ".0" // fastjson writes doubles with a fraction
	}
	buf = append(buf, tps...)
	buf = append(buf, `,"offsetTable":{`...)
	for i, mq := range mqs {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = AppendMessageQueueKey(buf, mq); err != nil {
			return nil, err
		}
		w := cs.OffsetTable[mq]
		buf = fmt.Appendf(buf, `:{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":%d}`,
			w.BrokerOffset, w.ConsumerOffset, w.LastTimestamp)
	}
	return append(buf, "}}"...), nil
}

// DecodeConsumeStats parses the fastjson form Encode writes.
func DecodeConsumeStats(b []byte) (*ConsumeStats, error) {
	cs := &ConsumeStats{OffsetTable: make(map[MessageQueue]OffsetWrapper)}
	if i := bytes.Index(b, []byte(`"consumeTps":`)); i >= 0 {
		rest := b[i+len(`"consumeTps":`):]
		end := bytes.IndexAny(rest, ",}")
		if end < 0 {
			return nil, wrapBody("ConsumeStats", fmt.Errorf("unterminated consumeTps"))
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest[:end])), 64)
		if err != nil {
			return nil, wrapBody("ConsumeStats", err)
		}
		cs.ConsumeTps = v
	}
	if !bytes.Contains(b, []byte(`"offsetTable":`)) {
		return cs, nil
	}
	err := DecodeMessageQueueTable(b, "offsetTable", func(mq MessageQueue, raw []byte) error {
		var w OffsetWrapper
		if err := json.Unmarshal(raw, &w); err != nil {
			return err
		}
		cs.OffsetTable[mq] = w
		return nil
	})
	if err != nil {
		return nil, wrapBody("ConsumeStats", err)
	}
	return cs, nil
}

// GroupList answers QUERY_TOPIC_CONSUME_BY_WHO: the groups consuming a topic.
type GroupList struct {
	GroupList []string `json:"groupList"`
}
