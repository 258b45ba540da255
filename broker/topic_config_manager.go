package broker

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Topic names RocketMQ reserves (TopicValidator, MixAll).
const (
	AutoCreateTopicKey     = "TBW102"                   // AUTO_CREATE_TOPIC_KEY_TOPIC: template of auto-created topics
	ScheduleTopic          = "SCHEDULE_TOPIC_XXXX"      // RMQ_SYS_SCHEDULE_TOPIC: delayed messages wait here
	ScheduleTopicV2        = "SCHEDULE_TOPIC_XXXX_V2"   // RMQ_SYS_SCHEDULE_TOPIC_V2
	BenchmarkTopic         = "BenchmarkTest"            // RMQ_SYS_BENCHMARK_TOPIC
	TransHalfTopic         = "RMQ_SYS_TRANS_HALF_TOPIC" // half (prepared) transaction messages
	TransOpHalfTopic       = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	TraceTopic             = "RMQ_SYS_TRACE_TOPIC" // default msgTraceTopicName
	TransCheckMaxTimeTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	SelfTestTopic          = "SELF_TEST_TOPIC"
	OffsetMovedEventTopic  = "OFFSET_MOVED_EVENT"
	SystemTopicPrefix      = "rmq_sys_"
	RetryGroupTopicPrefix  = "%RETRY%" // %RETRY%<group>: messages a group will consume again
	DLQGroupTopicPrefix    = "%DLQ%"   // %DLQ%<group>: messages a group gave up on
	replyTopicSuffix       = "_REPLY_TOPIC"
	scheduleTopicQueueNums = 18 // one queue per delay level
	MaxTopicLength         = 127
	maxTopicQueueNums      = 1024 // our bound on read/write queue numbers (RocketMQ has none)
	topicNameRule          = "^[%|a-zA-Z0-9_-]+$"
)

// TopicSysFlag bits (TopicSysFlag.java) a unit-mode send asks for.
const (
	sendTopicSysFlagUnit    int32 = 1 << 0 // FLAG_UNIT
	sendTopicSysFlagUnitSub int32 = 1 << 1 // FLAG_UNIT_SUB
)

// Errors of the topic table.
var (
	// ErrTopicInvalid means a topic name breaks RocketMQ's rules: empty,
	// longer than 127 characters, or a character outside [%|a-zA-Z0-9_-].
	ErrTopicInvalid = errors.New("broker: invalid topic name")
	// ErrTopicSystem means a user tried to create, change or delete a
	// topic the broker reserves.
	ErrTopicSystem = errors.New("broker: system topic")
	// ErrTopicConfigInvalid means queue numbers, perm or filter type out of range.
	ErrTopicConfigInvalid = errors.New("broker: invalid topic config")
	// ErrNoDefaultTopic means an auto-create found no usable template topic.
	ErrNoDefaultTopic = errors.New("broker: no default topic to create from")
)

// systemTopics are the topics a user may not create, change or delete
// (TopicValidator.SYSTEM_TOPIC_SET); names starting with rmq_sys_ too.
var systemTopics = map[string]bool{
	AutoCreateTopicKey: true, ScheduleTopic: true, ScheduleTopicV2: true, BenchmarkTopic: true,
	TransHalfTopic: true, TraceTopic: true, TransOpHalfTopic: true, TransCheckMaxTimeTopic: true,
	SelfTestTopic: true, OffsetMovedEventTopic: true,
}

// notAllowedSendTopics are the topics no client may send to
// (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET) plus TBW102, which is only a
// template: a message stored there would never be consumed.
var notAllowedSendTopics = map[string]bool{
	AutoCreateTopicKey: true, ScheduleTopic: true, ScheduleTopicV2: true, TransHalfTopic: true,
	TransOpHalfTopic: true, TransCheckMaxTimeTopic: true, SelfTestTopic: true, OffsetMovedEventTopic: true,
}

// validTopicChar is the bitmap of [%|a-zA-Z0-9_-].
var validTopicChar = func() (m [256]bool) {
	for c := '0'; c <= '9'; c++ {
		m[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		m[c] = true
		m[c-'a'+'A'] = true
	}
	m['%'], m['|'], m['_'], m['-'] = true, true, true, true
	return m
}()

// ValidateTopic checks a topic name against RocketMQ's rules and returns an
// error wrapping ErrTopicInvalid whose text says what is wrong.
func ValidateTopic(topic string) error {
	if strings.TrimSpace(topic) == "" {
		return fmt.Errorf("%w: the specified topic is blank", ErrTopicInvalid)
	}
	for i := 0; i < len(topic); i++ {
		if !validTopicChar[topic[i]] {
			return fmt.Errorf("%w: the specified topic %q contains illegal characters (at byte %d), allowing only %s",
				ErrTopicInvalid, truncate(topic, 64), i, topicNameRule)
		}
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: the specified topic is longer than topic max length %d (%d characters)",
			ErrTopicInvalid, MaxTopicLength, len(topic))
	}
	return nil
}

// IsSystemTopic reports whether topic is reserved by the broker.
func IsSystemTopic(topic string) bool {
	return systemTopics[topic] || strings.HasPrefix(topic, SystemTopicPrefix)
}

// IsNotAllowedSendTopic reports whether clients may not send to topic.
func IsNotAllowedSendTopic(topic string) bool { return notAllowedSendTopics[topic] }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TopicConfigManager is the broker's topic table (RocketMQ's
// TopicConfigManager): the system topics, the topics created by admins and
// by sends, persisted to topics.json and versioned for registration.
//
// Stored configs are never modified in place: Update replaces the pointer,
// so Get can hand out the stored value on the send path without copying.
type TopicConfigManager struct {
	cfg  *conf.BrokerConfig
	log  logrus.FieldLogger
	path string

	mu          sync.RWMutex // guards table and dataVersion
	table       map[string]*protocol.TopicConfig
	dataVersion protocol.DataVersion

	persistMu sync.Mutex // serialises writes of topics.json
	onChange  func()     // told after every change, e.g. to re-register
}

// NewTopicConfigManager returns a table holding the system topics RocketMQ's
// broker creates at start; Load adds the persisted ones.
func NewTopicConfigManager(cfg *conf.BrokerConfig, path string, log logrus.FieldLogger) *TopicConfigManager {
	m := &TopicConfigManager{
		cfg:         cfg,
		log:         log.WithField("component", "topics"),
		path:        path,
		table:       make(map[string]*protocol.TopicConfig),
		dataVersion: protocol.NewDataVersion(),
	}
	add := func(name string, queues int32, perm int32) {
		tc := protocol.NewTopicConfig(name)
		tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm = queues, queues, perm
		m.table[name] = tc
	}
	rw := protocol.PermRead | protocol.PermWrite
	add(SelfTestTopic, 1, rw)
	if cfg.AutoCreateTopicEnable {
		add(AutoCreateTopicKey, cfg.DefaultTopicQueueNums, protocol.PermInherit|rw)
	}
	add(BenchmarkTopic, 1024, rw)
	clusterPerm, brokerPerm := protocol.PermInherit, protocol.PermInherit
	if cfg.ClusterTopicEnable {
		clusterPerm |= rw
	}
	if cfg.BrokerTopicEnable {
		brokerPerm |= rw
	}
	add(cfg.BrokerClusterName, 16, clusterPerm)
	add(cfg.BrokerName, 1, brokerPerm)
	add(OffsetMovedEventTopic, 1, rw)
	add(ScheduleTopic, scheduleTopicQueueNums, rw)
	if cfg.TraceTopicEnable && cfg.MsgTraceTopicName != "" {
		add(cfg.MsgTraceTopicName, 1, rw)
	}
	add(cfg.BrokerClusterName+replyTopicSuffix, 1, rw)
	return m
}

// SetOnChange sets the function told after each change of the table (the
// broker re-registers with the nameservers). Call it before Start.
func (m *TopicConfigManager) SetOnChange(fn func()) { m.onChange = fn }

// Load reads topics.json, or its .bak when it is damaged
// (loadMetadataFile); its entries replace the built-in ones of the same
// name. With neither file it writes the built-in table. When neither loads
// it is an error: starting without them would silently drop topics.
func (m *TopicConfigManager) Load() error {
	w, found, err := loadMetadataFile(m.path, "topics", m.log, func(data []byte) (*protocol.TopicConfigSerializeWrapper, error) {
		var w protocol.TopicConfigSerializeWrapper
		if err := fsutil.DecodeJSONObject(data, &w); err != nil {
			return nil, fmt.Errorf("not a topic table: %w", err)
		}
		return &w, nil
	})
	if err != nil {
		return err
	}
	if !found {
		return m.Persist()
	}
	m.mu.Lock()
	n := 0
	for name, tc := range w.TopicConfigTable {
		if tc == nil || ValidateTopic(name) != nil || !loadableQueueNums(tc) {
			m.log.WithField("topic", name).Warn("skipping an invalid entry of topics.json")
			continue
		}
		c := *tc
		c.TopicName = name
		if !c.TopicFilterType.Valid() {
			c.TopicFilterType = protocol.SingleTag
		}
		m.table[name] = &c
		n++
	}
	if !m.cfg.AutoCreateTopicEnable {
		// A template kept from a run with auto-create on would still be
		// advertised to clients, which would then send to topics that are
		// never created.
		delete(m.table, AutoCreateTopicKey)
	}
	if w.DataVersion.Timestamp > 0 {
		m.dataVersion = w.DataVersion.Next()
	}
	m.mu.Unlock()
	m.log.WithFields(logrus.Fields{"file": m.path, "topics": n}).Info("topics loaded")
	return nil
}

// ReplaceFromMaster makes the table the master's (a slave's sync, RocketMQ's
// SlaveSynchronize.syncTopicConfig) when its version differs from ours, and
// persists it; it reports whether anything changed. Entries a broker could
// not have written are skipped, as Load skips them.
func (m *TopicConfigManager) ReplaceFromMaster(w *protocol.TopicConfigSerializeWrapper) (bool, error) {
	m.mu.Lock()
	if w.DataVersion == m.dataVersion {
		m.mu.Unlock()
		return false, nil
	}
	table := make(map[string]*protocol.TopicConfig, len(w.TopicConfigTable))
	for name, tc := range w.TopicConfigTable {
		if tc == nil || ValidateTopic(name) != nil || !loadableQueueNums(tc) {
			m.log.WithField("topic", name).Warn("skipping an invalid topic of the master's table")
			continue
		}
		c := *tc
		c.TopicName = name
		table[name] = &c
	}
	m.table = table
	m.dataVersion = w.DataVersion
	m.mu.Unlock()
	return true, m.changed()
}

// Get returns the topic's config or nil. The value is shared: do not modify it.
func (m *TopicConfigManager) Get(topic string) *protocol.TopicConfig {
	m.mu.RLock()
	tc := m.table[topic]
	m.mu.RUnlock()
	return tc
}

// Names returns every topic name, sorted.
func (m *TopicConfigManager) Names() []string {
	m.mu.RLock()
	out := make([]string, 0, len(m.table))
	for name := range m.table {
		out = append(out, name)
	}
	m.mu.RUnlock()
	sort.Strings(out)
	return out
}

// DataVersion returns the table's current version.
func (m *TopicConfigManager) DataVersion() protocol.DataVersion {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.dataVersion
}

// Wrapper returns a copy of the table with its version: the registration
// body and the answer to GET_ALL_TOPIC_CONFIG.
func (m *TopicConfigManager) Wrapper() *protocol.TopicConfigSerializeWrapper {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w := &protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: make(map[string]*protocol.TopicConfig, len(m.table)),
		DataVersion:      m.dataVersion,
	}
	for name, tc := range m.table {
		c := *tc
		w.TopicConfigTable[name] = &c
	}
	return w
}

// loadableQueueNums tells whether a topics.json entry's numbers are ones a
// broker could have written: queue numbers within our bound (0 allowed, as
// an admin may close a side) and perm bits only. A damaged entry beyond them
// would make loops over the queues run for billions of rounds.
func loadableQueueNums(tc *protocol.TopicConfig) bool {
	return tc.ReadQueueNums >= 0 && tc.ReadQueueNums <= maxTopicQueueNums &&
		tc.WriteQueueNums >= 0 && tc.WriteQueueNums <= maxTopicQueueNums &&
		tc.Perm >= 0 && tc.Perm <= 15
}

// checkConfig validates a config an admin or client asks for.
func checkConfig(tc *protocol.TopicConfig) error {
	if err := ValidateTopic(tc.TopicName); err != nil {
		return err
	}
	switch {
	case tc.ReadQueueNums < 1 || tc.ReadQueueNums > maxTopicQueueNums:
		return fmt.Errorf("%w: readQueueNums %d must be 1-%d", ErrTopicConfigInvalid, tc.ReadQueueNums, maxTopicQueueNums)
	case tc.WriteQueueNums < 1 || tc.WriteQueueNums > maxTopicQueueNums:
		return fmt.Errorf("%w: writeQueueNums %d must be 1-%d", ErrTopicConfigInvalid, tc.WriteQueueNums, maxTopicQueueNums)
	case tc.Perm < 0 || tc.Perm > 15:
		return fmt.Errorf("%w: perm %d must be 0-15 (2 write, 4 read, 6 read and write)", ErrTopicConfigInvalid, tc.Perm)
	case !tc.TopicFilterType.Valid():
		return fmt.Errorf("%w: topicFilterType %q must be SINGLE_TAG or MULTI_TAG", ErrTopicConfigInvalid, tc.TopicFilterType)
	}
	return nil
}

// Update creates or replaces a topic (UPDATE_AND_CREATE_TOPIC), persists
// the table and tells the change. System topics cannot be changed.
func (m *TopicConfigManager) Update(tc *protocol.TopicConfig) error {
	if tc == nil {
		return fmt.Errorf("%w: nil config", ErrTopicConfigInvalid)
	}
	if err := checkConfig(tc); err != nil {
		return err
	}
	if m.isReserved(tc.TopicName) {
		return fmt.Errorf("%w: the topic[%s] is conflict with system topic", ErrTopicSystem, tc.TopicName)
	}
	c := *tc
	m.mu.Lock()
	old := m.table[c.TopicName]
	m.table[c.TopicName] = &c
	m.dataVersion = m.dataVersion.Next()
	m.mu.Unlock()
	m.log.WithFields(logrus.Fields{"topic": c.TopicName, "old": old, "new": &c}).Info("topic created or updated")
	return m.changed()
}

// isReserved reports whether a topic belongs to the broker: the system
// topics and the cluster and broker name topics.
func (m *TopicConfigManager) isReserved(topic string) bool {
	return IsSystemTopic(topic) || topic == m.cfg.BrokerClusterName || topic == m.cfg.BrokerName ||
		topic == m.cfg.BrokerClusterName+replyTopicSuffix || topic == m.cfg.MsgTraceTopicName && m.cfg.TraceTopicEnable
}

// Delete removes a topic (DELETE_TOPIC_IN_BROKER) and reports whether it
// existed. System topics cannot be deleted.
func (m *TopicConfigManager) Delete(topic string) (bool, error) {
	if m.isReserved(topic) {
		return false, fmt.Errorf("%w: the topic[%s] is conflict with system topic", ErrTopicSystem, topic)
	}
	m.mu.Lock()
	_, ok := m.table[topic]
	if ok {
		delete(m.table, topic)
		m.dataVersion = m.dataVersion.Next()
	}
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	m.log.WithField("topic", topic).Info("topic deleted")
	return true, m.changed()
}

// CreateTopicInSendMessageMethod creates topic from the template
// defaultTopic on a client's first send (createTopicInSendMessageMethod):
// only when autoCreateTopicEnable is on and the template carries the inherit
// perm. Queue numbers are the smaller of the client's wish and the
// template's; perm is the template's without inherit. It returns the
// existing config when another send created it first.
func (m *TopicConfigManager) CreateTopicInSendMessageMethod(topic, defaultTopic string, clientQueueNums, topicSysFlag int32) (*protocol.TopicConfig, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if !m.cfg.AutoCreateTopicEnable {
		return nil, fmt.Errorf("%w: autoCreateTopicEnable is false on this broker", ErrNoDefaultTopic)
	}
	m.mu.Lock()
	if tc := m.table[topic]; tc != nil {
		m.mu.Unlock()
		return tc, nil
	}
	def := m.table[defaultTopic]
	if def == nil || !protocol.IsInherited(def.Perm) {
		m.mu.Unlock()
		if def == nil {
			return nil, fmt.Errorf("%w: the default topic[%s] does not exist", ErrNoDefaultTopic, defaultTopic)
		}
		return nil, fmt.Errorf("%w: the default topic[%s] has no inherit perm", ErrNoDefaultTopic, defaultTopic)
	}
	queues := min(max(clientQueueNums, 1), def.WriteQueueNums)
	tc := &protocol.TopicConfig{
		TopicName:       topic,
		ReadQueueNums:   queues,
		WriteQueueNums:  queues,
		Perm:            def.Perm &^ protocol.PermInherit,
		TopicFilterType: def.TopicFilterType,
		TopicSysFlag:    topicSysFlag,
	}
	m.table[topic] = tc
	m.dataVersion = m.dataVersion.Next()
	m.mu.Unlock()
	m.log.WithFields(logrus.Fields{"topic": topic, "defaultTopic": defaultTopic, "queues": queues}).Info("topic auto-created by a send")
	return tc, m.changed()
}

// CreateTopicInSendBackMethod creates a %RETRY% or %DLQ% topic on demand
// (createTopicInSendMessageBackMethod) with queueNums read and write queues,
// or returns the existing one.
func (m *TopicConfigManager) CreateTopicInSendBackMethod(topic string, queueNums, perm, topicSysFlag int32) (*protocol.TopicConfig, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if queueNums < 1 || queueNums > maxTopicQueueNums {
		return nil, fmt.Errorf("%w: queue nums %d must be 1-%d", ErrTopicConfigInvalid, queueNums, maxTopicQueueNums)
	}
	m.mu.Lock()
	if tc := m.table[topic]; tc != nil {
		m.mu.Unlock()
		return tc, nil
	}
	tc := &protocol.TopicConfig{
		TopicName:       topic,
		ReadQueueNums:   queueNums,
		WriteQueueNums:  queueNums,
		Perm:            perm,
		TopicFilterType: protocol.SingleTag,
		TopicSysFlag:    topicSysFlag,
	}
	m.table[topic] = tc
	m.dataVersion = m.dataVersion.Next()
	m.mu.Unlock()
	m.log.WithFields(logrus.Fields{"topic": topic, "queues": queueNums}).Info("retry/DLQ topic created")
	return tc, m.changed()
}

// changed persists the table and tells the change; the change stands in
// memory even when the write fails (the error is returned so the caller can
// report it).
func (m *TopicConfigManager) changed() error {
	err := m.Persist()
	if m.onChange != nil {
		m.onChange()
	}
	return err
}

// Persist writes topics.json atomically with the current table. Writers are
// serialised and each writes the table as it is when its turn comes, so an
// older table never overwrites a newer one.
func (m *TopicConfigManager) Persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	return writeMetadataJSON(m.path, "topics", m.Wrapper())
}
