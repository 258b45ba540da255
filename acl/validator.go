package acl

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// RefusalCode is the response code of every refused request: NO_PERMISSION.
// RocketMQ 4.9 answers SYSTEM_ERROR (1) there, only because its ACL hook
// throws and the remoting layer turns any exception into SYSTEM_ERROR;
// RocketMQ 5's authentication and authorization answer NO_PERMISSION, and
// the official clients retry both codes alike.
const RefusalCode = remoting.NoPermission

// DefaultReloadInterval is how often the file is looked at for changes.
const DefaultReloadInterval = time.Second

// Config configures a Validator.
type Config struct {
	// Path is plain_acl.yml.
	Path string
	// Logger receives reloads, broken files and (at most one a second)
	// refusals.
	Logger logrus.FieldLogger
	// ReloadInterval is how often the file is read for changes (default
	// DefaultReloadInterval).
	ReloadInterval time.Duration
}

// Validator holds the current rules of one plain_acl.yml, checks requests
// against them (Authorize, the remoting server's hook), re-reads the file
// when it changes and applies the ACL administration requests to it.
//
// Reloading polls: every ReloadInterval the file is read and its SHA-256
// compared with the last one seen. A file watcher (fsnotify) would react
// sooner, but editors replace files by rename, Kubernetes swaps a symlinked
// directory under a ConfigMap and network file systems send no events, all
// of which a watcher must be taught one by one; reading a few kilobytes a
// second costs nothing and sees every one of them.
type Validator struct {
	path     string
	log      logrus.FieldLogger
	interval time.Duration
	rules    atomic.Pointer[Rules]

	// mu serialises file writes (admin edits) with reloads, and guards
	// seen: the hash of the file content last read or written.
	mu      sync.Mutex
	seen    [sha256.Size]byte
	loadErr error // why the content last seen is not in force; nil when it is

	stop     chan struct{}
	wg       sync.WaitGroup
	startMu  sync.Mutex
	started  bool
	stopOnce sync.Once

	looks     atomic.Int64 // times reloadLoop read the file (tests)
	refused   atomic.Int64 // refusals since start
	lastLog   atomic.Int64 // unix nanos of the last refusal logged
	unlogged  atomic.Int64 // refusals not logged since then
	now       func() time.Time
	onRefusal func(error) // tests
}

// NewValidator loads the file at cfg.Path. A missing or broken file is an
// error: with ACL on, a broker must not start with rules nobody wrote.
func NewValidator(cfg Config) (*Validator, error) {
	if cfg.Path == "" {
		return nil, errors.New("acl: no ACL file path")
	}
	if cfg.Logger == nil {
		l := logrus.New()
		l.SetLevel(logrus.WarnLevel)
		cfg.Logger = l
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	v := &Validator{
		path:     cfg.Path,
		log:      cfg.Logger.WithFields(logrus.Fields{"component": "acl", "file": cfg.Path}),
		interval: cfg.ReloadInterval,
		stop:     make(chan struct{}),
		now:      time.Now,
	}
	data, err := os.ReadFile(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("acl: read %s: %w", cfg.Path, err)
	}
	rules, err := v.compile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	v.rules.Store(rules)
	v.seen = sha256.Sum256(data)
	v.log.WithFields(logrus.Fields{"accounts": rules.Accounts(), "globalWhiteRemoteAddresses": len(rules.global)}).Info("ACL rules loaded")
	return v, nil
}

// compile parses and compiles data, logging the warnings.
func (v *Validator) compile(data []byte) (*Rules, error) {
	f, err := ParseFile(data)
	if err != nil {
		return nil, err
	}
	rules, warnings, err := Compile(f, v.now())
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		v.log.Warn(w)
	}
	return rules, nil
}

// Path is the ACL file.
func (v *Validator) Path() string { return v.path }

// Rules are the rules in force.
func (v *Validator) Rules() *Rules { return v.rules.Load() }

// LoadError is why the file's current content is not in force (it does not
// parse or compile; the last good rules are), or nil when it is.
func (v *Validator) LoadError() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.loadErr
}

// Refused counts the requests refused since the validator was made.
func (v *Validator) Refused() int64 { return v.refused.Load() }

// Start starts reloadLoop. Safe to call once; Close stops it.
func (v *Validator) Start() {
	v.startMu.Lock()
	defer v.startMu.Unlock()
	if v.started {
		return
	}
	v.started = true
	v.wg.Add(1)
	go v.reloadLoop()
}

// Close stops reloadLoop and waits for it. Safe to call twice.
func (v *Validator) Close() {
	v.stopOnce.Do(func() { close(v.stop) })
	v.wg.Wait()
}

// reloadLoop reads the file every interval and applies it when its content
// changed and it compiles; a file that does not keeps the rules in force
// and is logged once per content.
func (v *Validator) reloadLoop() {
	defer v.wg.Done()
	t := time.NewTicker(v.interval)
	defer t.Stop()
	var lastReadErr string
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		}
		data, err := os.ReadFile(v.path)
		v.looks.Add(1)
		if err != nil {
			if err.Error() != lastReadErr {
				v.log.WithError(err).Error("cannot read the ACL file; the rules in force stay")
				lastReadErr = err.Error()
			}
			continue
		}
		lastReadErr = ""
		v.Reload(data)
	}
}

// Reload applies data as the file's new content when it differs from the
// content last seen, and reports whether new rules took effect. A content
// that does not compile is logged and leaves the rules in force.
func (v *Validator) Reload(data []byte) bool {
	sum := sha256.Sum256(data)
	v.mu.Lock()
	defer v.mu.Unlock()
	if sum == v.seen {
		return false
	}
	v.seen = sum
	rules, err := v.compile(data)
	if err != nil {
		v.loadErr = err
		v.log.WithError(err).Error("the ACL file changed but does not load; the previous rules stay in force until it is fixed")
		return false
	}
	v.loadErr = nil
	v.rules.Store(rules)
	v.log.WithFields(logrus.Fields{"accounts": rules.Accounts(), "globalWhiteRemoteAddresses": len(rules.global),
		"dataVersion": rules.version.Counter}).Info("ACL rules reloaded")
	return true
}

// Authorize is the remoting server's hook (remoting.Authorizer): it checks
// the request against the rules in force and refuses it with
// RefusalCode and a remark naming what was refused.
func (v *Validator) Authorize(c *remoting.Conn, req *remoting.Command) (remoting.ResponseCode, string, bool) {
	err := v.rules.Load().Check(c.RemoteAddr(), req)
	if err == nil {
		return remoting.Success, "", true
	}
	v.noteRefusal(c.RemoteAddr(), req, err)
	return RefusalCode, err.Error(), false
}

// noteRefusal counts a refusal and logs it, at most once a second with the
// count of those not logged since: a misconfigured client retrying in a
// loop must not flood the log.
func (v *Validator) noteRefusal(peer string, req *remoting.Command, err error) {
	v.refused.Add(1)
	if v.onRefusal != nil {
		v.onRefusal(err)
	}
	now := time.Now().UnixNano()
	last := v.lastLog.Load()
	if now-last < int64(time.Second) || !v.lastLog.CompareAndSwap(last, now) {
		v.unlogged.Add(1)
		return
	}
	v.log.WithFields(logrus.Fields{"peer": peer, "code": req.Code, "reason": err.Error(),
		"alsoRefusedSinceLastLine": v.unlogged.Swap(0)}).Warn("request refused")
}
