package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Errors of the subscription group manager.
var (
	// ErrBadSubscriptionGroupFile is returned when subscriptionGroup.json
	// (and its .bak) exists but does not parse.
	ErrBadSubscriptionGroupFile = errors.New("broker: subscription group file does not parse")
	// ErrBadGroupName is returned for an empty or over-long group name.
	ErrBadGroupName = errors.New("broker: bad consumer group name")
)

// maxGroupNameLength is RocketMQ's limit on group names (Validators.CHARACTER_MAX_LENGTH).
const maxGroupNameLength = 255

// systemConsumerGroups are the groups RocketMQ's SubscriptionGroupManager
// creates at start, so tools using them work on a fresh broker.
var systemConsumerGroups = []string{
	"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
	"CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_SYS_RMQ_TRANS",
}

// SubscriptionGroupManager holds the consumer groups' settings and persists
// them to subscriptionGroup.json in RocketMQ's shape (the same JSON that
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG returns). Stored configs are never
// modified in place: Update replaces the pointer, so callers may keep and
// read what Find returns without a lock.
type SubscriptionGroupManager struct {
	path       string
	autoCreate bool
	log        logrus.FieldLogger

	mu      sync.RWMutex // guards table and version
	table   map[string]*protocol.SubscriptionGroupConfig
	version protocol.DataVersion

	persistMu sync.Mutex // serialises file writes
}

// NewSubscriptionGroupManager returns a manager holding the system groups;
// autoCreate makes Find create unknown groups (autoCreateSubscriptionGroup).
func NewSubscriptionGroupManager(path string, autoCreate bool, log logrus.FieldLogger) *SubscriptionGroupManager {
	m := &SubscriptionGroupManager{
		path: path, autoCreate: autoCreate, log: log.WithField("component", "groups"),
		table:   make(map[string]*protocol.SubscriptionGroupConfig),
		version: protocol.NewDataVersion(),
	}
	for _, g := range systemConsumerGroups {
		m.table[g] = protocol.NewSubscriptionGroupConfig(g)
	}
	return m
}

// Load reads the file, or its .bak when it is damaged (loadMetadataFile);
// with neither the system groups stay alone.
func (m *SubscriptionGroupManager) Load() error {
	w, found, err := loadMetadataFile(m.path, "subscription groups", m.log, func(data []byte) (*protocol.SubscriptionGroupWrapper, error) {
		var w protocol.SubscriptionGroupWrapper
		if err := fsutil.DecodeJSONObject(data, &w); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSubscriptionGroupFile, err)
		}
		return &w, nil
	})
	if err != nil || !found {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, c := range w.SubscriptionGroupTable {
		if c == nil || validateGroupName(name) != nil {
			m.log.WithField("group", name).Warn("skipping an invalid entry of subscriptionGroup.json")
			continue
		}
		c.GroupName = name // the key is what Find looks up
		m.table[name] = c
	}
	m.version = w.DataVersion
	return nil
}

// ReplaceFromMaster makes the table the master's (a slave's sync) when its
// version differs from ours, and persists it; it reports whether anything
// changed. The system groups stay.
func (m *SubscriptionGroupManager) ReplaceFromMaster(w *protocol.SubscriptionGroupWrapper) (bool, error) {
	m.mu.Lock()
	if w.DataVersion == m.version {
		m.mu.Unlock()
		return false, nil
	}
	table := make(map[string]*protocol.SubscriptionGroupConfig, len(w.SubscriptionGroupTable)+len(systemConsumerGroups))
	for _, g := range systemConsumerGroups {
		table[g] = protocol.NewSubscriptionGroupConfig(g)
	}
	for name, c := range w.SubscriptionGroupTable {
		if c == nil || validateGroupName(name) != nil {
			m.log.WithField("group", name).Warn("skipping an invalid group of the master's table")
			continue
		}
		cc := *c
		cc.GroupName = name
		table[name] = &cc
	}
	m.table = table
	m.version = w.DataVersion
	m.mu.Unlock()
	return true, m.Persist()
}

// Encode renders the table and its version as JSON.
func (m *SubscriptionGroupManager) Encode() ([]byte, error) {
	m.mu.RLock()
	w := protocol.SubscriptionGroupWrapper{
		SubscriptionGroupTable: make(map[string]*protocol.SubscriptionGroupConfig, len(m.table)),
		DataVersion:            m.version,
	}
	for k, v := range m.table {
		w.SubscriptionGroupTable[k] = v
	}
	m.mu.RUnlock()
	return json.Marshal(&w)
}

// Persist writes the file atomically.
func (m *SubscriptionGroupManager) Persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	data, err := m.Encode()
	if err != nil {
		return fmt.Errorf("broker: encode subscription groups: %w", err)
	}
	return writeMetadataFile(m.path, "subscription groups", data)
}

// Get returns the group's config or nil, never creating it.
func (m *SubscriptionGroupManager) Get(group string) *protocol.SubscriptionGroupConfig {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.table[group]
}

// Find returns the group's config, creating it with RocketMQ's defaults when
// auto-creation is on (created then reports true and the caller persists).
// It returns nil for an unknown group when auto-creation is off, or for a
// name that is empty or too long.
func (m *SubscriptionGroupManager) Find(group string) (c *protocol.SubscriptionGroupConfig, created bool) {
	if c := m.Get(group); c != nil {
		return c, false
	}
	if !m.autoCreate || validateGroupName(group) != nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.table[group]; c != nil {
		return c, false
	}
	c = protocol.NewSubscriptionGroupConfig(group)
	m.table[group] = c
	m.version = m.version.Next()
	return c, true
}

// Update stores c (a copy), replacing the group's config.
func (m *SubscriptionGroupManager) Update(c *protocol.SubscriptionGroupConfig) error {
	if c == nil {
		return fmt.Errorf("%w: no config", ErrBadGroupName)
	}
	if err := validateGroupName(c.GroupName); err != nil {
		return err
	}
	cp := *c
	m.mu.Lock()
	m.table[cp.GroupName] = &cp
	m.version = m.version.Next()
	m.mu.Unlock()
	return nil
}

// Delete removes the group's config and reports whether it existed.
func (m *SubscriptionGroupManager) Delete(group string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.table[group]; !ok {
		return false
	}
	delete(m.table, group)
	m.version = m.version.Next()
	return true
}

// DataVersion returns the table's version.
func (m *SubscriptionGroupManager) DataVersion() protocol.DataVersion {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.version
}

func validateGroupName(group string) error {
	switch {
	case strings.TrimSpace(group) == "":
		return fmt.Errorf("%w: the group name is empty", ErrBadGroupName)
	case len(group) > maxGroupNameLength:
		return fmt.Errorf("%w: the group name is longer than %d characters", ErrBadGroupName, maxGroupNameLength)
	}
	return nil
}
