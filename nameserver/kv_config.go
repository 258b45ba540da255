package nameserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// ErrKVPersist means the KV config could not be written to disk; the change
// that needed writing was rolled back.
var ErrKVPersist = errors.New("nameserver: cannot persist kv config")

// kvConfigFile is the shape of kvConfig.json (KVConfigSerializeWrapper.java):
// {"configTable":{"namespace":{"key":"value"}}}.
type kvConfigFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// KVConfigManager holds the nameserver's namespaced key/value config
// (PUT_KV_CONFIG...), the only state a nameserver keeps across restarts.
// Every change is written to disk before it is acknowledged, atomically and
// keeping the previous version as kvConfig.json.bak
// (fsutil.WriteFileWithBackup), so a crash leaves the old file or the new
// one, never half, and a file damaged later has its previous version.
type KVConfigManager struct {
	path string
	log  logrus.FieldLogger

	mu    sync.RWMutex // guards table; held across a persist so writes are ordered
	table map[string]map[string]string
}

// NewKVConfigManager returns an empty manager persisting to path; call Load
// to read what is there.
func NewKVConfigManager(path string, log logrus.FieldLogger) *KVConfigManager {
	return &KVConfigManager{path: path, log: log.WithField("component", "kvconfig"), table: make(map[string]map[string]string)}
}

// Load reads the file, or its .bak when the file is missing, empty or does
// not parse (fsutil.LoadWithBackup: a warning names both, and the damaged
// file is kept aside). With neither the table is empty. When neither loads
// it is an error naming both: the table holds what routes cannot teach a
// nameserver again (ORDER_TOPIC_CONFIG), so starting without it would
// silently change how clients route.
func (k *KVConfigManager) Load() error {
	table, _, err := fsutil.LoadWithBackup(k.path, k.log, func(data []byte) (map[string]map[string]string, error) {
		var f kvConfigFile
		if err := fsutil.DecodeJSONObject(data, &f); err != nil {
			return nil, fmt.Errorf("not a kv config: %w", err)
		}
		table := make(map[string]map[string]string, len(f.ConfigTable))
		for ns, kv := range f.ConfigTable {
			if kv != nil {
				table[ns] = kv
			}
		}
		return table, nil
	})
	if err != nil {
		return fmt.Errorf("nameserver: load kv config: %w", err)
	}
	if table == nil {
		table = make(map[string]map[string]string)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.table = table
	k.log.WithFields(logrus.Fields{"file": k.path, "namespaces": len(k.table)}).Info("kv config loaded")
	return nil
}

// Put sets namespace/key to value and persists it.
func (k *KVConfigManager) Put(namespace, key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	kv := k.table[namespace]
	created := kv == nil
	if created {
		kv = make(map[string]string)
		k.table[namespace] = kv
	}
	old, had := kv[key]
	kv[key] = value
	if err := k.persistLocked(); err != nil {
		if had {
			kv[key] = old
		} else {
			delete(kv, key)
		}
		if created {
			delete(k.table, namespace)
		}
		return err
	}
	k.log.WithFields(logrus.Fields{"namespace": namespace, "key": key, "value": value}).Info("kv config put")
	return nil
}

// Delete removes namespace/key, if present, and persists the change.
func (k *KVConfigManager) Delete(namespace, key string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	kv := k.table[namespace]
	old, had := kv[key]
	if !had {
		return nil
	}
	delete(kv, key)
	if len(kv) == 0 {
		delete(k.table, namespace)
	}
	if err := k.persistLocked(); err != nil {
		if len(kv) == 0 {
			k.table[namespace] = kv
		}
		kv[key] = old
		return err
	}
	k.log.WithFields(logrus.Fields{"namespace": namespace, "key": key}).Info("kv config deleted")
	return nil
}

// Get returns the value of namespace/key.
func (k *KVConfigManager) Get(namespace, key string) (string, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	v, ok := k.table[namespace][key]
	return v, ok
}

// List returns a copy of namespace's pairs, and false when it has none.
func (k *KVConfigManager) List(namespace string) (map[string]string, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	kv := k.table[namespace]
	if len(kv) == 0 {
		return nil, false
	}
	out := make(map[string]string, len(kv))
	for key, v := range kv {
		out[key] = v
	}
	return out, true
}

// Namespaces returns the namespaces holding at least one pair, sorted.
func (k *KVConfigManager) Namespaces() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.table))
	for ns := range k.table {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// persistLocked writes the table. Lock should be held.
func (k *KVConfigManager) persistLocked() error {
	b, err := json.MarshalIndent(kvConfigFile{ConfigTable: k.table}, "", "\t")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKVPersist, err)
	}
	if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrKVPersist, err)
	}
	if err := fsutil.WriteFileWithBackup(k.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrKVPersist, err)
	}
	return nil
}
