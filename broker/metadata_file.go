package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// metadataFilePerm is the mode of the JSON files under <root>/config.
const metadataFilePerm = 0o644

// writeMetadataFile replaces path with data atomically (temp file, fsync,
// rename, fsync of the directory: fsutil.WriteFileAtomic), creating the
// directory first, so a crash leaves the old content or the new, never a
// mix. what names the content in errors. Every metadata file of the broker
// (topics, subscription groups, consumer and delay offsets, transaction
// state) is written through here.
func writeMetadataFile(path, what string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("broker: create %s: %w", filepath.Dir(path), err)
	}
	if err := fsutil.WriteFileAtomic(path, data, metadataFilePerm); err != nil {
		return fmt.Errorf("broker: persist %s: %w", what, err)
	}
	return nil
}

// writeMetadataJSON is writeMetadataFile with v as indented JSON, for people
// to read.
func writeMetadataJSON(path, what string, v any) error {
	data, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return fmt.Errorf("broker: encode %s: %w", what, err)
	}
	return writeMetadataFile(path, what, data)
}

// serviceLoops owns the goroutines of a background service (the schedule,
// timer and transaction services): goLoop starts one, stopLoops closes stop,
// waits for all of them and then runs the service's last step, once, so a
// shutdown is safe twice and without a start. Embedded, its fields read as
// the service's own (s.stop in a loop's select); build it as
// serviceLoops{stop: make(chan struct{})}.
type serviceLoops struct {
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// goLoop runs loop in a goroutine that stopLoops waits for.
func (l *serviceLoops) goLoop(loop func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		loop()
	}()
}

// stopLoops stops the loops and then runs last (may be nil), the first
// time only.
func (l *serviceLoops) stopLoops(last func()) {
	l.once.Do(func() {
		close(l.stop)
		l.wg.Wait()
		if last != nil {
			last()
		}
	})
}
