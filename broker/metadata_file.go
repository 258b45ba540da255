package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// metadataFilePerm is the mode of the JSON files under <root>/config.
const metadataFilePerm = 0o644

// writeMetadataFile replaces path with data, creating the directory first,
// and keeps the content it replaces as path.bak (fsutil.WriteFileWithBackup:
// temp file, fsync, hard link of the old file renamed over the .bak, rename
// over path, fsync of the directory), so a crash leaves the old content or
// the new, never a mix, and a file damaged later has its previous version
// next to it. what names the content in errors. Every metadata file of the
// broker (topics, subscription groups, consumer and delay offsets,
// transaction state) is written through here and read back through
// loadMetadataFile.
func writeMetadataFile(path, what string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("broker: create %s: %w", filepath.Dir(path), err)
	}
	if err := fsutil.WriteFileWithBackup(path, data, metadataFilePerm); err != nil {
		return fmt.Errorf("broker: persist %s: %w", what, err)
	}
	return nil
}

// loadMetadataFile reads a file writeMetadataFile wrote: path, or when it
// is missing, empty or does not parse, path.bak with a warning naming both
// (fsutil.LoadWithBackup). found is false when neither exists. When both
// exist and neither loads the error names both files: the broker refuses to
// start rather than run with the table lost. parse must return a fresh
// value and change nothing else; the caller applies it.
func loadMetadataFile[T any](path, what string, log logrus.FieldLogger, parse func(data []byte) (T, error)) (v T, found bool, err error) {
	v, found, err = fsutil.LoadWithBackup(path, log, parse)
	if err != nil {
		return v, false, fmt.Errorf("broker: load %s: %w", what, err)
	}
	return v, found, nil
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
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	stopped bool // stopLoops ran: rearm makes the service startable again
}

// rearm readies a stopped service to run its loops again (a broker that
// becomes master again in controller mode). Call it only while none of its
// loops runs, from the goroutine that starts and stops the service.
func (l *serviceLoops) rearm() {
	if l.stopped {
		l.stop = make(chan struct{})
		l.once = sync.Once{}
		l.stopped = false
	}
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
		l.stopped = true
		close(l.stop)
		l.wg.Wait()
		if last != nil {
			last()
		}
	})
}
