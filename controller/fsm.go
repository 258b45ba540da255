package controller

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/sirupsen/logrus"
)

// fsm is the Raft state machine: the replica state, changed only by
// applying log entries, read by the controller's processors under mu.
type fsm struct {
	log logrus.FieldLogger

	mu sync.RWMutex
	st *state // guarded by mu
}

func newFSM(log logrus.FieldLogger) *fsm { return &fsm{log: log, st: newState()} }

// Apply applies one committed entry (raft.FSM). Its result is an
// applyResult; a refused event changes nothing.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return applyResult{}
	}
	e, err := decodeEvent(l.Data)
	if err != nil {
		f.log.WithError(err).WithField("index", l.Index).Error("skipping an unreadable Raft log entry")
		return applyResult{err: err}
	}
	f.mu.Lock()
	res := f.st.apply(e)
	f.mu.Unlock()
	return res
}

// Snapshot copies the state for a snapshot (raft.FSM); Persist writes it
// outside the lock.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(f.st)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return fsmSnapshot(b), nil
}

// Restore replaces the state with a snapshot's (raft.FSM).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("controller: restore snapshot: %w", err)
	}
	if st.Groups == nil {
		st.Groups = map[string]*Group{}
	}
	if st.Controllers == nil {
		st.Controllers = map[string]string{}
	}
	// A damaged or hand-edited snapshot may hold JSON nulls: every reader
	// and Apply expect non-nil groups, replica tables and replicas, so
	// nulls are dropped here rather than panicking later.
	for name, g := range st.Groups {
		if g == nil {
			f.log.WithField("brokerName", name).Warn("snapshot holds a null broker group; dropped")
			delete(st.Groups, name)
			continue
		}
		if g.Replicas == nil {
			g.Replicas = map[int64]*Replica{}
		}
		for id, r := range g.Replicas {
			if r == nil {
				delete(g.Replicas, id)
			}
		}
		if g.SyncStateSet == nil {
			g.SyncStateSet = []int64{}
		}
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// group returns a copy of the named group, nil when unknown.
func (f *fsm) group(name string) *Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.st.Groups[name]; g != nil {
		return g.clone()
	}
	return nil
}

// groups returns a copy of every group, by name.
func (f *fsm) groups() []*Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Group, 0, len(f.st.Groups))
	for _, n := range f.st.groupNames() {
		out = append(out, f.st.Groups[n].clone())
	}
	return out
}

// groupNames returns the group names, sorted.
func (f *fsm) groupNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.groupNames()
}

// controllerAddr returns the remoting address recorded for a controller.
func (f *fsm) controllerAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Controllers[id]
}

// fsmSnapshot is the JSON of the state.
type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}

// hclogFor returns an hclog.Logger (what hashicorp/raft logs to) that
// hands every line to log with its fields, at its level.
func hclogFor(log logrus.FieldLogger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Info,
		Output:      &hclogWriter{log: log},
		JSONFormat:  true,
		DisableTime: true,
	})
}

// hclogWriter turns hclog's JSON lines into logrus entries.
type hclogWriter struct {
	log logrus.FieldLogger
	mu  sync.Mutex
	buf strings.Builder
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	s := w.buf.String()
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return len(p), nil
	}
	w.buf.Reset()
	w.buf.WriteString(s[i+1:])
	sc := bufio.NewScanner(strings.NewReader(s[:i]))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		w.line(sc.Bytes())
	}
	return len(p), nil
}

func (w *hclogWriter) line(b []byte) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		w.log.Info(string(b))
		return
	}
	level, _ := m["@level"].(string)
	msg, _ := m["@message"].(string)
	fields := logrus.Fields{}
	for k, v := range m {
		if !strings.HasPrefix(k, "@") {
			fields[k] = v
		}
	}
	if mod, ok := m["@module"].(string); ok {
		fields["module"] = mod
	}
	l := w.log.WithFields(fields)
	switch level {
	case "trace", "debug":
		l.Debug(msg)
	case "warn":
		l.Warn(msg)
	case "error":
		l.Error(msg)
	default:
		l.Info(msg)
	}
}
