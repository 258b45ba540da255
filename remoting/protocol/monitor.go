package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Headers and bodies of the admin requests that look into a running
// cluster: producer connections, consumers' running info and status,
// direct consumption, per-broker consume stats, broker stats, offset
// cloning (RocketMQ 4.x's names and fields).

// GetProducerConnectionListRequestHeader is GET_PRODUCER_CONNECTION_LIST's header.
type GetProducerConnectionListRequestHeader struct {
	ProducerGroup string `ext:"producerGroup,required"`
}

// ProducerConnection answers GET_PRODUCER_CONNECTION_LIST.
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// ConsumeMessageDirectlyResultRequestHeader is CONSUME_MESSAGE_DIRECTLY's
// header: the message (an offset msgId) to hand to one client of a group.
type ConsumeMessageDirectlyResultRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	ClientID      string `ext:"clientId"`
	MsgID         string `ext:"msgId"`
	BrokerName    string `ext:"brokerName"`
}

// CMResult is how a client's listener took a directly consumed message
// (RocketMQ's CMResult). Java writes the names; the official Go client
// writes the ordinals; UnmarshalJSON takes both.
type CMResult int

// The results, in Java's order.
const (
	CRSuccess        CMResult = iota // CR_SUCCESS
	CRLater                          // CR_LATER
	CRRollback                       // CR_ROLLBACK
	CRCommit                         // CR_COMMIT
	CRThrowException                 // CR_THROW_EXCEPTION
	CRReturnNull                     // CR_RETURN_NULL
)

var cmResultNames = [...]string{"CR_SUCCESS", "CR_LATER", "CR_ROLLBACK", "CR_COMMIT", "CR_THROW_EXCEPTION", "CR_RETURN_NULL"}

// String is Java's name.
func (r CMResult) String() string {
	if r >= 0 && int(r) < len(cmResultNames) {
		return cmResultNames[r]
	}
	return "CR_" + strconv.Itoa(int(r))
}

// MarshalJSON writes Java's name.
func (r CMResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON reads a name or an ordinal.
func (r *CMResult) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		for i, n := range cmResultNames {
			if n == name {
				*r = CMResult(i)
				return nil
			}
		}
		return fmt.Errorf("%w: unknown consume result %q", ErrBadBody, name)
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%w: consume result %s", ErrBadBody, b)
	}
	*r = CMResult(n)
	return nil
}

// ConsumeMessageDirectlyResult answers CONSUME_MESSAGE_DIRECTLY.
type ConsumeMessageDirectlyResult struct {
	Order          bool     `json:"order"`
	AutoCommit     bool     `json:"autoCommit"`
	ConsumeResult  CMResult `json:"consumeResult"`
	Remark         string   `json:"remark"`
	SpentTimeMills int64    `json:"spentTimeMills"`
}

// GetConsumerStatusRequestHeader is INVOKE_BROKER_TO_GET_CONSUMER_STATUS's
// header and, forwarded, GET_CONSUMER_STATUS_FROM_CLIENT's.
type GetConsumerStatusRequestHeader struct {
	Topic      string `ext:"topic,required"`
	Group      string `ext:"group,required"`
	ClientAddr string `ext:"clientAddr"` // a client id; empty: every client
}

// GetConsumerStatusBody is a client's offsets (messageQueueTable, from
// GET_CONSUMER_STATUS_FROM_CLIENT) or the broker's collection of them by
// client id (consumerTable, answering INVOKE_BROKER_TO_GET_CONSUMER_STATUS).
// Both tables are keyed by MessageQueue object literals, as fastjson writes.
type GetConsumerStatusBody struct {
	MessageQueueTable map[MessageQueue]int64
	ConsumerTable     map[string]map[MessageQueue]int64
}

// Encode writes the fastjson form.
func (b *GetConsumerStatusBody) Encode() ([]byte, error) {
	out := []byte(`{"consumerTable":{`)
	ids := make([]string, 0, len(b.ConsumerTable))
	for id := range b.ConsumerTable {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var err error
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(id)
		out = append(append(out, k...), ':')
		if out, err = appendOffsetTable(out, b.ConsumerTable[id]); err != nil {
			return nil, err
		}
	}
	out = append(out, `},"messageQueueTable":`...)
	if out, err = appendOffsetTable(out, b.MessageQueueTable); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// appendOffsetTable writes a Map<MessageQueue,Long> as fastjson does.
func appendOffsetTable(out []byte, t map[MessageQueue]int64) ([]byte, error) {
	mqs := make([]MessageQueue, 0, len(t))
	for mq := range t {
		mqs = append(mqs, mq)
	}
	SortMessageQueues(mqs)
	out = append(out, '{')
	for i, mq := range mqs {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = AppendMessageQueueKey(out, mq); err != nil {
			return nil, err
		}
		out = append(out, ':')
		out = strconv.AppendInt(out, t[mq], 10)
	}
	return append(out, '}'), nil
}

// decodeOffsetTable reads one Map<MessageQueue,Long> object.
func decodeOffsetTable(raw []byte) (map[MessageQueue]int64, error) {
	out := map[MessageQueue]int64{}
	err := DecodeMessageQueueTable(wrapField(raw), "t", func(mq MessageQueue, v []byte) error {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return err
		}
		out[mq] = n
		return nil
	})
	return out, err
}

// wrapField returns a new buffer {"t":raw}, for DecodeMessageQueueTable.
// (Appending to raw itself would write into the body it was cut from.)
func wrapField(raw []byte) []byte {
	out := make([]byte, 0, len(raw)+6)
	out = append(out, `{"t":`...)
	out = append(out, raw...)
	return append(out, '}')
}

// DecodeGetConsumerStatusBody reads either form (a client's or a broker's).
func DecodeGetConsumerStatusBody(b []byte) (*GetConsumerStatusBody, error) {
	body := &GetConsumerStatusBody{MessageQueueTable: map[MessageQueue]int64{}, ConsumerTable: map[string]map[MessageQueue]int64{}}
	if raw, ok := topLevelField(b, "messageQueueTable"); ok {
		t, err := decodeOffsetTable(raw)
		if err != nil {
			return nil, wrapBody("GetConsumerStatusBody", err)
		}
		body.MessageQueueTable = t
	}
	if raw, ok := topLevelField(b, "consumerTable"); ok {
		err := eachObjectMember(raw, func(key string, v []byte) error {
			t, err := decodeOffsetTable(v)
			if err != nil {
				return err
			}
			body.ConsumerTable[key] = t
			return nil
		})
		if err != nil {
			return nil, wrapBody("GetConsumerStatusBody", err)
		}
	}
	return body, nil
}

// topLevelField returns the raw value of a top-level field of a fastjson
// object (whose values may hold MessageQueue-keyed maps, not JSON).
func topLevelField(b []byte, field string) ([]byte, bool) {
	var found []byte
	ok := false
	_ = eachObjectMember(b, func(key string, v []byte) error {
		if key == field && !ok {
			found, ok = v, true
		}
		return nil
	})
	return found, ok
}

// eachObjectMember walks an object whose keys are strings and whose values
// may be fastjson's non-JSON literals, calling fn with each key and value.
func eachObjectMember(b []byte, fn func(key string, raw []byte) error) error {
	p := &mqScanner{b: b}
	return p.members("the body", '"', func(rawKey, raw []byte) error {
		var key string
		if err := json.Unmarshal(rawKey, &key); err != nil {
			return fmt.Errorf("%w: key: %v", errBadMQTable, err)
		}
		return fn(key, raw)
	})
}

// ProcessQueueInfo is one queue's state in a consumer's running info.
// Java spells the dropped flag "droped", the official Go client "dropped".
type ProcessQueueInfo struct {
	CommitOffset         int64 `json:"commitOffset"`
	CachedMsgMinOffset   int64 `json:"cachedMsgMinOffset"`
	CachedMsgMaxOffset   int64 `json:"cachedMsgMaxOffset"`
	CachedMsgCount       int64 `json:"cachedMsgCount"`
	CachedMsgSizeInMiB   int64 `json:"cachedMsgSizeInMiB"`
	Locked               bool  `json:"locked"`
	TryUnlockTimes       int64 `json:"tryUnlockTimes"`
	LastLockTimestamp    int64 `json:"lastLockTimestamp"`
	Droped               bool  `json:"droped"`
	Dropped              bool  `json:"dropped,omitempty"`
	LastPullTimestamp    int64 `json:"lastPullTimestamp"`
	LastConsumeTimestamp int64 `json:"lastConsumeTimestamp"`
	// NextOffset is ours: the next offset the client pulls.
	NextOffset int64 `json:"nextOffset,omitempty"`
}

// ConsumeStatus is a client's per-topic rates in its running info.
type ConsumeStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs int64   `json:"consumeFailedMsgs"`
}

// ConsumerRunningInfo answers GET_CONSUMER_RUNNING_INFO: a client's
// properties, subscriptions, per-queue state and per-topic rates.
type ConsumerRunningInfo struct {
	Properties      map[string]string
	SubscriptionSet []SubscriptionData
	MQTable         map[MessageQueue]ProcessQueueInfo
	StatusTable     map[string]ConsumeStatus
	Jstack          string
}

// Encode writes the fastjson form (mqTable keyed by MessageQueue literals).
func (ri *ConsumerRunningInfo) Encode() ([]byte, error) {
	props, err := json.Marshal(ri.Properties)
	if err != nil {
		return nil, err
	}
	subs := ri.SubscriptionSet
	if subs == nil {
		subs = []SubscriptionData{}
	}
	sb, err := json.Marshal(subs)
	if err != nil {
		return nil, err
	}
	status := ri.StatusTable
	if status == nil {
		status = map[string]ConsumeStatus{}
	}
	st, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(ri.Jstack)
	if err != nil {
		return nil, err
	}
	out := []byte(`{"jstack":`)
	out = append(out, js...)
	out = append(out, `,"mqTable":{`...)
	mqs := make([]MessageQueue, 0, len(ri.MQTable))
	for mq := range ri.MQTable {
		mqs = append(mqs, mq)
	}
	SortMessageQueues(mqs)
	for i, mq := range mqs {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = AppendMessageQueueKey(out, mq); err != nil {
			return nil, err
		}
		v, err := json.Marshal(ri.MQTable[mq])
		if err != nil {
			return nil, err
		}
		out = append(append(out, ':'), v...)
	}
	out = append(out, `},"properties":`...)
	out = append(out, props...)
	out = append(out, `,"statusTable":`...)
	out = append(out, st...)
	out = append(out, `,"subscriptionSet":`...)
	out = append(out, sb...)
	return append(out, '}'), nil
}

// DecodeConsumerRunningInfo reads the form Java and the official Go client
// write (and Encode).
func DecodeConsumerRunningInfo(b []byte) (*ConsumerRunningInfo, error) {
	ri := &ConsumerRunningInfo{Properties: map[string]string{}, MQTable: map[MessageQueue]ProcessQueueInfo{}, StatusTable: map[string]ConsumeStatus{}}
	err := eachObjectMember(b, func(key string, raw []byte) error {
		switch key {
		case "properties":
			// Java's Properties may hold non-string values; keep them as text.
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			for k, v := range m {
				if s, ok := v.(string); ok {
					ri.Properties[k] = s
				} else {
					ri.Properties[k] = fmt.Sprint(v)
				}
			}
		case "subscriptionSet":
			return json.Unmarshal(raw, &ri.SubscriptionSet)
		case "statusTable":
			return json.Unmarshal(raw, &ri.StatusTable)
		case "jstack":
			return json.Unmarshal(raw, &ri.Jstack)
		case "mqTable":
			return DecodeMessageQueueTable(wrapField(raw), "t", func(mq MessageQueue, v []byte) error {
				var pq ProcessQueueInfo
				if err := json.Unmarshal(v, &pq); err != nil {
					return err
				}
				pq.Droped = pq.Droped || pq.Dropped
				ri.MQTable[mq] = pq
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, wrapBody("ConsumerRunningInfo", err)
	}
	return ri, nil
}

// GetConsumeStatsInBrokerHeader is GET_BROKER_CONSUME_STATS's header.
type GetConsumeStatsInBrokerHeader struct {
	IsOrder bool `ext:"isOrder,required"`
}

// ConsumeStatsList answers GET_BROKER_CONSUME_STATS: for each subscription
// group, the consume stats of each topic it has offsets in.
type ConsumeStatsList struct {
	BrokerAddr string
	TotalDiff  int64
	// ConsumeStatsList is Java's List<Map<group, List<ConsumeStats>>>, one
	// single-entry map per group.
	ConsumeStatsList []map[string][]ConsumeStats
}

// Encode writes the fastjson form.
func (l *ConsumeStatsList) Encode() ([]byte, error) {
	ba, _ := json.Marshal(l.BrokerAddr)
	out := []byte(`{"brokerAddr":`)
	out = append(out, ba...)
	out = append(out, `,"consumeStatsList":[`...)
	for i, m := range l.ConsumeStatsList {
		if i > 0 {
			out = append(out, ',')
		}
		groups := make([]string, 0, len(m))
		for g := range m {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		out = append(out, '{')
		for j, g := range groups {
			if j > 0 {
				out = append(out, ',')
			}
			k, _ := json.Marshal(g)
			out = append(append(out, k...), ":["...)
			for n, cs := range m[g] {
				if n > 0 {
					out = append(out, ',')
				}
				enc, err := cs.Encode()
				if err != nil {
					return nil, err
				}
				out = append(out, enc...)
			}
			out = append(out, ']')
		}
		out = append(out, '}')
	}
	out = append(out, `],"totalDiff":`...)
	out = strconv.AppendInt(out, l.TotalDiff, 10)
	return append(out, '}'), nil
}

// DecodeConsumeStatsList reads the fastjson form.
func DecodeConsumeStatsList(b []byte) (*ConsumeStatsList, error) {
	l := &ConsumeStatsList{}
	err := eachObjectMember(b, func(key string, raw []byte) error {
		switch key {
		case "brokerAddr":
			return json.Unmarshal(raw, &l.BrokerAddr)
		case "totalDiff":
			return json.Unmarshal(raw, &l.TotalDiff)
		case "consumeStatsList":
			return eachArrayElement(raw, func(elem []byte) error {
				m := map[string][]ConsumeStats{}
				err := eachObjectMember(elem, func(group string, list []byte) error {
					return eachArrayElement(list, func(csRaw []byte) error {
						cs, err := DecodeConsumeStats(csRaw)
						if err != nil {
							return err
						}
						m[group] = append(m[group], *cs)
						return nil
					})
				})
				l.ConsumeStatsList = append(l.ConsumeStatsList, m)
				return err
			})
		}
		return nil
	})
	if err != nil {
		return nil, wrapBody("ConsumeStatsList", err)
	}
	return l, nil
}

// eachArrayElement walks an array whose elements may be fastjson literals.
func eachArrayElement(b []byte, fn func(raw []byte) error) error {
	p := &mqScanner{b: b}
	p.space()
	if !p.eat('[') {
		return fmt.Errorf("%w: not an array", errBadMQTable)
	}
	for first := true; ; first = false {
		p.space()
		if p.eat(']') {
			return nil
		}
		if !first && !p.eat(',') {
			return fmt.Errorf("%w: missing ',' at %d", errBadMQTable, p.i)
		}
		p.space()
		raw, ok := p.value()
		if !ok {
			return fmt.Errorf("%w: bad element at %d", errBadMQTable, p.i)
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
}

// CloneGroupOffsetRequestHeader is CLONE_GROUP_OFFSET's header.
type CloneGroupOffsetRequestHeader struct {
	SrcGroup  string `ext:"srcGroup,required"`
	DestGroup string `ext:"destGroup,required"`
	Topic     string `ext:"topic"`
	Offline   bool   `ext:"offline"`
}

// ViewBrokerStatsDataRequestHeader is VIEW_BROKER_STATS_DATA's header.
type ViewBrokerStatsDataRequestHeader struct {
	StatsName string `ext:"statsName,required"`
	StatsKey  string `ext:"statsKey,required"`
}

// BrokerStatsItem is one window of a broker statistic.
type BrokerStatsItem struct {
	Sum   int64   `json:"sum"`
	TPS   float64 `json:"tps"`
	Avgpt float64 `json:"avgpt"`
}

// BrokerStatsData answers VIEW_BROKER_STATS_DATA.
type BrokerStatsData struct {
	StatsMinute BrokerStatsItem `json:"statsMinute"`
	StatsHour   BrokerStatsItem `json:"statsHour"`
	StatsDay    BrokerStatsItem `json:"statsDay"`
}

// IsBlank reports whether s is empty or only spaces (UtilAll.isBlank).
func IsBlank(s string) bool { return strings.TrimSpace(s) == "" }
