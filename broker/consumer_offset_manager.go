package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// ErrBadOffsetFile is returned when consumerOffset.json (and its .bak) or
// a copied offset table does not parse; the broker refuses to start rather
// than silently resetting every group's position.
var ErrBadOffsetFile = errors.New("broker: consumer offset file does not parse")

// offsetKeySeparator joins topic and group in the table's keys, as
// RocketMQ's ConsumerOffsetManager does ("topic@group").
const offsetKeySeparator = "@"

// ConsumerOffsetManager holds the committed offset of every (topic, group,
// queue) and persists them to consumerOffset.json in RocketMQ's shape:
//
//	{"offsetTable":{"TopicTest@cg":{"0":12,"1":7}}}
//
// Java's fastjson writes the queue ids unquoted ({0:12}); Load accepts both
// forms, Persist writes standard JSON (which fastjson also reads).
type ConsumerOffsetManager struct {
	path string
	log  logrus.FieldLogger

	mu    sync.RWMutex // guards table and version
	table map[string]map[int32]int64
	// version counts changes, so Persist can skip an unchanged table.
	version uint64

	persistMu sync.Mutex // serialises file writes; guards persisted
	persisted uint64
}

// NewConsumerOffsetManager returns an empty manager that persists to path.
func NewConsumerOffsetManager(path string, log logrus.FieldLogger) *ConsumerOffsetManager {
	return &ConsumerOffsetManager{path: path, log: log.WithField("component", "offsets"), table: make(map[string]map[int32]int64)}
}

// offsetFile is the JSON shape of consumerOffset.json.
type offsetFile struct {
	OffsetTable map[string]map[string]int64 `json:"offsetTable"`
}

// fastjsonIntKey finds the unquoted integer object keys fastjson writes for
// Map<Integer,Long>. Topic and group names cannot contain '{' or ',' or ':'
// so the pattern cannot match inside a name.
var fastjsonIntKey = regexp.MustCompile(`([{,]\s*)(-?\d+)(\s*:)`)

// Load reads the file, or its .bak when it is damaged (loadMetadataFile);
// with neither the table is empty.
func (m *ConsumerOffsetManager) Load() error {
	table, found, err := loadMetadataFile(m.path, "consumer offsets", m.log, parseOffsetTable)
	if err != nil || !found {
		return err
	}
	m.swap(table)
	return nil
}

// Restore replaces the table with the content of a consumerOffset.json (or
// a GET_ALL_CONSUMER_OFFSET body, which a slave copies from its master).
// Empty data is an empty table.
func (m *ConsumerOffsetManager) Restore(data []byte) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	table, err := parseOffsetTable(data)
	if err != nil {
		return err
	}
	m.swap(table)
	return nil
}

// MergeFromMaster takes the offsets of a GET_ALL_CONSUMER_OFFSET body (a
// slave's sync): each topic@group of the master replaces ours, as RocketMQ's
// putAll does, and ours that the master does not have stay (offsets a
// consumer committed here while the master was down).
func (m *ConsumerOffsetManager) MergeFromMaster(data []byte) error {
	table, err := parseOffsetTable(data)
	if err != nil {
		return err
	}
	m.mu.Lock()
	merged := make(map[string]map[int32]int64, len(m.table)+len(table))
	for k, v := range m.table {
		merged[k] = v
	}
	for k, v := range table {
		merged[k] = v
	}
	m.table = merged
	m.version++
	m.mu.Unlock()
	return nil
}

// swap makes table the manager's table.
func (m *ConsumerOffsetManager) swap(table map[string]map[int32]int64) {
	m.mu.Lock()
	m.table = table
	m.version++
	m.mu.Unlock()
}

// parseOffsetTable decodes consumerOffset.json (either key form) into a new
// table; errors wrap ErrBadOffsetFile.
func parseOffsetTable(data []byte) (map[string]map[int32]int64, error) {
	var f offsetFile
	if err := fsutil.DecodeJSONObject(data, &f); err != nil {
		f = offsetFile{} // a failed decode may have filled part of it
		if err2 := fsutil.DecodeJSONObject(fastjsonIntKey.ReplaceAll(data, []byte(`$1"$2"$3`)), &f); err2 != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadOffsetFile, err)
		}
	}
	table := make(map[string]map[int32]int64, len(f.OffsetTable))
	for key, queues := range f.OffsetTable {
		if !strings.Contains(key, offsetKeySeparator) {
			return nil, fmt.Errorf("%w: key %q is not topic@group", ErrBadOffsetFile, key)
		}
		q := make(map[int32]int64, len(queues))
		for id, off := range queues {
			n, err := strconv.ParseInt(id, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%w: queue id %q of %s", ErrBadOffsetFile, id, key)
			}
			q[int32(n)] = off
		}
		table[key] = q
	}
	return table, nil
}

// Encode renders the table as consumerOffset.json's content, keys sorted so
// the file is stable and diffable.
func (m *ConsumerOffsetManager) Encode() ([]byte, uint64) {
	m.mu.RLock()
	version := m.version
	keys := make([]string, 0, len(m.table))
	for k := range m.table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(`{"offsetTable":{`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteString(":{")
		queues := m.table[k]
		ids := make([]int, 0, len(queues))
		for id := range queues {
			ids = append(ids, int(id))
		}
		sort.Ints(ids)
		for j, id := range ids {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%d":%d`, id, queues[int32(id)])
		}
		b.WriteByte('}')
	}
	b.WriteString("}}")
	m.mu.RUnlock()
	return []byte(b.String()), version
}

// Persist writes the table atomically if it changed since the last write.
func (m *ConsumerOffsetManager) Persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	data, version := m.Encode()
	if version == m.persisted {
		if _, err := os.Stat(m.path); err == nil {
			return nil
		}
	}
	if err := writeMetadataFile(m.path, "consumer offsets", data); err != nil {
		return err
	}
	m.persisted = version
	return nil
}

// Commit stores offset as the group's position in topic/queueID. As in
// RocketMQ, the last commit wins (a consumer reset may move it back).
func (m *ConsumerOffsetManager) Commit(group, topic string, queueID int32, offset int64) {
	key := topic + offsetKeySeparator + group
	m.mu.Lock()
	q := m.table[key]
	if q == nil {
		q = make(map[int32]int64, 4)
		m.table[key] = q
	}
	if old, ok := q[queueID]; !ok || old != offset {
		q[queueID] = offset
		m.version++
	}
	m.mu.Unlock()
}

// Query returns the committed offset, or -1 if there is none.
func (m *ConsumerOffsetManager) Query(group, topic string, queueID int32) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if off, ok := m.table[topic+offsetKeySeparator+group][queueID]; ok {
		return off
	}
	return -1
}

// QueryAll returns a copy of the group's offsets in topic (nil if none).
func (m *ConsumerOffsetManager) QueryAll(group, topic string) map[int32]int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q := m.table[topic+offsetKeySeparator+group]
	if q == nil {
		return nil
	}
	out := make(map[int32]int64, len(q))
	for k, v := range q {
		out[k] = v
	}
	return out
}

// TopicsOfGroup returns the topics the group has offsets in, sorted.
func (m *ConsumerOffsetManager) TopicsOfGroup(group string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for k := range m.table {
		if t, g, ok := splitOffsetKey(k); ok && g == group {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// RemoveGroup drops every offset of the group (DELETE_SUBSCRIPTIONGROUP with
// removeOffset).
func (m *ConsumerOffsetManager) RemoveGroup(group string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.table {
		if _, g, ok := splitOffsetKey(k); ok && g == group {
			delete(m.table, k)
			m.version++
		}
	}
}

// RemoveTopic drops every group's offsets of a deleted topic.
func (m *ConsumerOffsetManager) RemoveTopic(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.table {
		if t, _, ok := splitOffsetKey(k); ok && t == topic {
			delete(m.table, k)
			m.version++
		}
	}
}

// splitOffsetKey splits "topic@group". Topics cannot contain '@' (name rule
// [%|a-zA-Z0-9_-]), so the first '@' is the separator.
func splitOffsetKey(k string) (topic, group string, ok bool) {
	i := strings.Index(k, offsetKeySeparator)
	if i < 0 {
		return "", "", false
	}
	return k[:i], k[i+1:], true
}

// GroupsOfTopic returns the groups that have offsets in topic, sorted.
func (m *ConsumerOffsetManager) GroupsOfTopic(topic string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for k := range m.table {
		if t, g, ok := splitOffsetKey(k); ok && t == topic {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}
