package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// TopicOffset is one queue's offsets in GET_TOPIC_STATS_INFO (TopicOffset.java).
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// TopicStatsTable answers GET_TOPIC_STATS_INFO (TopicStatsTable.java).
//
// Java keys offsetTable by MessageQueue objects, and fastjson writes such a
// key as an object literal:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":3,"minOffset":0}}}
//
// That is not JSON, but it is what Java's mqadmin and dashboard parse, so
// Encode writes it and DecodeTopicStatsTable reads it (and plain JSON
// objects keyed by anything are rejected).
type TopicStatsTable struct {
	OffsetTable map[MessageQueue]TopicOffset
}

// Encode renders the fastjson form, queues sorted by topic, broker and id.
func (t *TopicStatsTable) Encode() ([]byte, error) {
	mqs := make([]MessageQueue, 0, len(t.OffsetTable))
	for mq := range t.OffsetTable {
		mqs = append(mqs, mq)
	}
	SortMessageQueues(mqs)
	out := []byte(`{"offsetTable":{`)
	for i, mq := range mqs {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = AppendMessageQueueKey(out, mq); err != nil {
			return nil, err
		}
		out = append(out, ':')
		v, err := json.Marshal(t.OffsetTable[mq])
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return append(out, "}}"...), nil
}

// DecodeTopicStatsTable parses the fastjson form written by Encode (and by Java).
func DecodeTopicStatsTable(b []byte) (*TopicStatsTable, error) {
	t := &TopicStatsTable{OffsetTable: map[MessageQueue]TopicOffset{}}
	err := DecodeMessageQueueTable(b, "offsetTable", func(mq MessageQueue, raw []byte) error {
		var off TopicOffset
		if err := json.Unmarshal(raw, &off); err != nil {
			return err
		}
		t.OffsetTable[mq] = off
		return nil
	})
	if err != nil {
		return nil, wrapBody("TopicStatsTable", err)
	}
	return t, nil
}

// SortMessageQueues orders queues by topic, broker name and queue id.
func SortMessageQueues(mqs []MessageQueue) {
	sort.Slice(mqs, func(i, j int) bool {
		a, b := mqs[i], mqs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
}

// AppendMessageQueueKey appends mq as fastjson writes a MessageQueue map key:
// an object literal with its fields in alphabetical order.
func AppendMessageQueueKey(dst []byte, mq MessageQueue) ([]byte, error) {
	bn, err := json.Marshal(mq.BrokerName)
	if err != nil {
		return dst, err
	}
	tp, err := json.Marshal(mq.Topic)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"brokerName":`...)
	dst = append(dst, bn...)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(mq.QueueID), 10)
	dst = append(dst, `,"topic":`...)
	dst = append(dst, tp...)
	return append(dst, '}'), nil
}

var errBadMQTable = errors.New("not a MessageQueue-keyed table")

// DecodeMessageQueueTable walks the object at field of a fastjson body whose
// keys are MessageQueue object literals, calling fn with each key and the
// raw JSON of its value. Other top-level fields are skipped.
func DecodeMessageQueueTable(b []byte, field string, fn func(MessageQueue, []byte) error) error {
	key, err := json.Marshal(field)
	if err != nil {
		return err
	}
	i := bytes.Index(b, append(key, ':'))
	if i < 0 {
		return fmt.Errorf("%w: no %s field", errBadMQTable, field)
	}
	p := &mqScanner{b: b, i: i + len(key) + 1}
	return p.members(field, '{', func(rawKey, raw []byte) error {
		var mq MessageQueue
		if err := json.Unmarshal(rawKey, &mq); err != nil {
			return fmt.Errorf("%w: key: %v", errBadMQTable, err)
		}
		return fn(mq, raw)
	})
}

// members walks the object at the scanner's position, calling fn with the
// raw text of each key (which must open with keyOpen: '"' for a string key,
// '{' for fastjson's object keys) and of its value. what names the object
// in errors.
func (p *mqScanner) members(what string, keyOpen byte, fn func(rawKey, raw []byte) error) error {
	p.space()
	if !p.eat('{') {
		return fmt.Errorf("%w: %s is not an object", errBadMQTable, what)
	}
	for first := true; ; first = false {
		p.space()
		if p.eat('}') {
			return nil
		}
		if !first && !p.eat(',') {
			return fmt.Errorf("%w: missing ',' at %d", errBadMQTable, p.i)
		}
		p.space()
		rawKey, ok := p.value()
		if !ok || rawKey[0] != keyOpen {
			return fmt.Errorf("%w: key at %d does not open with %q", errBadMQTable, p.i, keyOpen)
		}
		p.space()
		if !p.eat(':') {
			return fmt.Errorf("%w: missing ':' at %d", errBadMQTable, p.i)
		}
		p.space()
		raw, ok := p.value()
		if !ok {
			return fmt.Errorf("%w: bad value at %d", errBadMQTable, p.i)
		}
		if err := fn(rawKey, raw); err != nil {
			return err
		}
	}
}

// mqScanner finds the extent of JSON-like values (objects may have object
// keys) without interpreting them.
type mqScanner struct {
	b []byte
	i int
}

func (p *mqScanner) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\r' || p.b[p.i] == '\t') {
		p.i++
	}
}

func (p *mqScanner) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// value returns the bytes of the value starting at i: a string, a balanced
// object or array, or a scalar up to the next delimiter.
func (p *mqScanner) value() ([]byte, bool) {
	start := p.i
	if p.i >= len(p.b) {
		return nil, false
	}
	switch p.b[p.i] {
	case '"':
		if !p.skipString() {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				if !p.skipString() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			p.i++
			if depth == 0 {
				return p.b[start:p.i], true
			}
		}
		return nil, false
	default:
		for p.i < len(p.b) && !bytes.ContainsRune([]byte(",}] \t\r\n:"), rune(p.b[p.i])) {
			p.i++
		}
	}
	if p.i == start {
		return nil, false
	}
	return p.b[start:p.i], true
}

func (p *mqScanner) skipString() bool {
	p.i++ // opening quote
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '\\':
			p.i += 2
			continue
		case '"':
			p.i++
			return true
		}
		p.i++
	}
	return false
}
