package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// offsetStore keeps a consumer group's next offset per queue: in the broker
// for clustering, in a local file for broadcasting.
type offsetStore interface {
	// read returns the stored offset of mq, or -1 when there is none.
	read(ctx context.Context, mq MessageQueue) (int64, error)
	// update sets mq's offset in memory; with increaseOnly a smaller value
	// is ignored (late acknowledgements must not move an offset back).
	update(mq MessageQueue, offset int64, increaseOnly bool)
	// current returns the in-memory offset, or -1.
	current(mq MessageQueue) int64
	// persist writes the in-memory offsets of mqs to their store.
	persist(ctx context.Context, mqs []MessageQueue)
	// remove forgets mq (it moved to another member).
	remove(mq MessageQueue)
}

type memOffsets struct {
	mu  sync.Mutex
	tab map[MessageQueue]int64
}

func (m *memOffsets) update(mq MessageQueue, offset int64, increaseOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.tab[mq]; ok && increaseOnly && offset < cur {
		return
	}
	m.tab[mq] = offset
}

func (m *memOffsets) current(mq MessageQueue) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off, ok := m.tab[mq]; ok {
		return off
	}
	return -1
}

func (m *memOffsets) remove(mq MessageQueue) {
	m.mu.Lock()
	delete(m.tab, mq)
	m.mu.Unlock()
}

// remoteOffsetStore keeps offsets in the brokers (QUERY_CONSUMER_OFFSET /
// UPDATE_CONSUMER_OFFSET), at the queue's master, or at a slave while the
// master is out of the route: RocketMQ's own client does so
// (RemoteBrokerOffsetStore over findBrokerAddressInAdmin), so a consumer
// that takes a queue while the master is down resumes at the offset the
// slave copied from the master rather than not at all, and its progress
// there is kept. The official Go client asks the master only and fails
// meanwhile. Once the master is back, commits go to it again; the slave's
// metadata sync then overwrites the slave's copy with the master's.
type remoteOffsetStore struct {
	memOffsets
	c     *core
	group string
}

func newRemoteOffsetStore(c *core, group string) *remoteOffsetStore {
	return &remoteOffsetStore{memOffsets: memOffsets{tab: map[MessageQueue]int64{}}, c: c, group: group}
}

func (s *remoteOffsetStore) read(ctx context.Context, mq MessageQueue) (int64, error) {
	addr, err := s.c.findBroker(ctx, mq.Topic, mq.BrokerName, protocol.MasterID)
	if err != nil {
		return -1, err
	}
	h := &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: s.group, Topic: mq.Topic, QueueID: mq.QueueID, BrokerName: mq.BrokerName}
	resp, err := s.c.invoke(ctx, addr, remoting.NewRequest(remoting.QueryConsumerOffset, protocol.EncodeHeader(h, nil), nil), 3*time.Second)
	if err != nil {
		return -1, err
	}
	switch resp.ResponseCode() {
	case remoting.QueryNotFound:
		return -1, nil
	case remoting.Success:
	default:
		return -1, brokerError(addr, resp)
	}
	var oh protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &oh); err != nil {
		return -1, err
	}
	s.update(mq, oh.Offset, false)
	return oh.Offset, nil
}

func (s *remoteOffsetStore) persist(ctx context.Context, mqs []MessageQueue) {
	for _, mq := range mqs {
		off := s.current(mq)
		if off < 0 {
			continue
		}
		addr, err := s.c.findBroker(ctx, mq.Topic, mq.BrokerName, protocol.MasterID)
		if err != nil {
			continue
		}
		h := &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: s.group, Topic: mq.Topic, QueueID: mq.QueueID,
			CommitOffset: off, BrokerName: mq.BrokerName}
		if _, err := s.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.UpdateConsumerOffset, protocol.EncodeHeader(h, nil), nil), 3*time.Second); err != nil {
			s.c.log.WithFields(logrus.Fields{"queue": mq, "err": err}).Debug("offset persist failed")
		}
	}
}

// localOffsetStore keeps a broadcasting consumer's offsets in a JSON file,
// rewritten atomically (temp file, fsync, rename).
type localOffsetStore struct {
	memOffsets
	path   string
	loaded bool
	fileMu sync.Mutex
}

type offsetEntry struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Offset     int64  `json:"offset"`
}

type offsetFile struct {
	OffsetTable []offsetEntry `json:"offsetTable"`
}

func newLocalOffsetStore(dir, group, instance string) *localOffsetStore {
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".gorocketmq", "offsets")
	}
	p := filepath.Join(dir, group)
	if instance != "" {
		p = filepath.Join(p, instance)
	}
	return &localOffsetStore{memOffsets: memOffsets{tab: map[MessageQueue]int64{}}, path: filepath.Join(p, "offsets.json")}
}

func (s *localOffsetStore) load() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.loaded {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		s.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("client: read offsets: %w", err)
	}
	var f offsetFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("client: offsets file %s: %w", s.path, err)
	}
	for _, e := range f.OffsetTable {
		s.update(MessageQueue{Topic: e.Topic, BrokerName: e.BrokerName, QueueID: e.QueueID}, e.Offset, false)
	}
	s.loaded = true
	return nil
}

func (s *localOffsetStore) read(_ context.Context, mq MessageQueue) (int64, error) {
	if err := s.load(); err != nil {
		return -1, err
	}
	return s.current(mq), nil
}

func (s *localOffsetStore) persist(context.Context, []MessageQueue) {
	if err := s.save(); err != nil {
		// A failed write is retried on the next persist.
		return
	}
}

func (s *localOffsetStore) save() error {
	s.mu.Lock()
	var f offsetFile
	for mq, off := range s.tab {
		f.OffsetTable = append(f.OffsetTable, offsetEntry{mq.Topic, mq.BrokerName, mq.QueueID, off})
	}
	s.mu.Unlock()
	sort.Slice(f.OffsetTable, func(i, j int) bool {
		a, b := f.OffsetTable[i], f.OffsetTable[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	b, err := json.Marshal(&f)
	if err != nil {
		return err
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	return writeFileAtomic(s.path, b)
}

// writeFileAtomic replaces path with data so a crash leaves the old or the
// new file, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".offsets-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
