package acl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// ErrBadFile means a plain_acl.yml that does not parse or holds a value
// RocketMQ refuses too; the message names the entry.
var ErrBadFile = errors.New("acl: bad ACL file")

// minKeyLength is RocketMQ's bound on keys: an AccessKey or SecretKey must
// be longer than 6 characters (AclConstants.ACCESS_KEY_MIN_LENGTH).
const minKeyLength = 7

// RetryGroupTopicPrefix starts a consumer group's retry topic: a group is
// checked as the resource %RETRY%<group>, which is how groupPerms are kept.
const RetryGroupTopicPrefix = "%RETRY%"

// TraceTopic is the message-trace topic: a PUB to it needs only a valid
// signature, as in RocketMQ, so trace hooks work for any account.
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"

// File is plain_acl.yml as written: the YAML shape RocketMQ 4.x reads.
type File struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses,omitempty"`
	Accounts                   []Account     `yaml:"accounts,omitempty"`
	DataVersion                []DataVersion `yaml:"dataVersion,omitempty"`
}

// Account is one entry of accounts (PlainAccessConfig).
type Account struct {
	AccessKey          string   `yaml:"accessKey"`
	SecretKey          string   `yaml:"secretKey"`
	WhiteRemoteAddress string   `yaml:"whiteRemoteAddress"`
	Admin              bool     `yaml:"admin"`
	DefaultTopicPerm   string   `yaml:"defaultTopicPerm"`
	DefaultGroupPerm   string   `yaml:"defaultGroupPerm"`
	TopicPerms         []string `yaml:"topicPerms"`
	GroupPerms         []string `yaml:"groupPerms"`
}

// DataVersion is the file's edit stamp, kept in the file as a one-element
// list as RocketMQ writes it; admin edits bump it.
type DataVersion struct {
	Counter   int64 `yaml:"counter" json:"counter"`
	Timestamp int64 `yaml:"timestamp" json:"timestamp"`
}

// ParseFile decodes plain_acl.yml. An empty file is an empty configuration
// (no accounts: every request is refused unless its address is
// whitelisted). Unknown keys are ignored, as RocketMQ ignores them.
func ParseFile(data []byte) (*File, error) {
	var f File
	if len(bytes.TrimSpace(data)) == 0 {
		return &f, nil
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadFile, err)
	}
	return &f, nil
}

// Rules are a compiled ACL file: immutable, shared by every request checked
// while they are current.
type Rules struct {
	global   []AddressPattern
	accounts map[string]*account
	version  DataVersion
	file     *File // what they were compiled from
}

// account is one compiled Account.
type account struct {
	accessKey string
	secretKey []byte
	white     AddressPattern
	admin     bool
	defTopic  Perm
	defGroup  Perm
	// perms holds topicPerms by topic and groupPerms by %RETRY%<group>;
	// nil when the account lists neither (an admin then may do anything).
	perms map[string]Perm
	// macs recycles HMAC-SHA1 states keyed with secretKey: hmac.New costs
	// two hashes and the key schedule per request otherwise.
	macs sync.Pool
}

func (a *account) mac() hash.Hash {
	if m, ok := a.macs.Get().(hash.Hash); ok {
		m.Reset()
		return m
	}
	return hmac.New(sha1.New, a.secretKey)
}

// Compile checks f and builds its rules. Errors are the cases RocketMQ
// refuses to load too: a key of 6 characters or fewer, a permission entry
// that is not resource=PERM, an address pattern it cannot read. Warnings
// are cases it loads with a surprise, said aloud here: a permission word it
// does not know (read as DENY) and an AccessKey listed twice (the first
// entry counts). now stamps a file that carries no dataVersion.
func Compile(f *File, now time.Time) (*Rules, []string, error) {
	r := &Rules{accounts: make(map[string]*account, len(f.Accounts)), file: f}
	var warnings []string
	for _, s := range f.GlobalWhiteRemoteAddresses {
		p, err := ParseAddressPattern(s)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: globalWhiteRemoteAddresses: %w", ErrBadFile, err)
		}
		r.global = append(r.global, p)
	}
	for i, acc := range f.Accounts {
		a, warns, err := compileAccount(&acc)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: accounts[%d] (accessKey %q): %w", ErrBadFile, i, acc.AccessKey, err)
		}
		for _, w := range warns {
			warnings = append(warnings, fmt.Sprintf("accounts[%d] (accessKey %q): %s", i, acc.AccessKey, w))
		}
		if _, dup := r.accounts[a.accessKey]; dup {
			warnings = append(warnings, fmt.Sprintf("accounts[%d]: accessKey %q is listed before; this entry is ignored", i, a.accessKey))
			continue
		}
		r.accounts[a.accessKey] = a
	}
	if len(f.DataVersion) > 0 {
		r.version = f.DataVersion[0]
	} else {
		r.version = DataVersion{Timestamp: now.UnixMilli()}
	}
	return r, warnings, nil
}

func compileAccount(acc *Account) (*account, []string, error) {
	if len(acc.AccessKey) < minKeyLength || len(acc.SecretKey) < minKeyLength {
		return nil, nil, errors.New("accessKey and secretKey must be longer than 6 characters")
	}
	a := &account{
		accessKey: acc.AccessKey,
		secretKey: []byte(acc.SecretKey),
		admin:     acc.Admin,
	}
	var warnings []string
	perm := func(what, s string) Perm {
		p, ok := ParsePerm(s)
		if !ok && strings.TrimSpace(s) != "" {
			warnings = append(warnings, fmt.Sprintf("%s %q is not DENY, PUB, SUB or PUB|SUB: read as DENY", what, s))
		}
		return p
	}
	// A missing default is DENY, as RocketMQ reads it.
	a.defTopic = perm("defaultTopicPerm", acc.DefaultTopicPerm)
	a.defGroup = perm("defaultGroupPerm", acc.DefaultGroupPerm)
	var err error
	if a.white, err = ParseAddressPattern(acc.WhiteRemoteAddress); err != nil {
		return nil, nil, fmt.Errorf("whiteRemoteAddress: %w", err)
	}
	for _, list := range []struct {
		name   string
		prefix string
		items  []string
	}{{"topicPerms", "", acc.TopicPerms}, {"groupPerms", RetryGroupTopicPrefix, acc.GroupPerms}} {
		for _, item := range list.items {
			res, p, err := splitResourcePerm(item)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", list.name, err)
			}
			if a.perms == nil {
				a.perms = make(map[string]Perm)
			}
			a.perms[list.prefix+res] = perm(list.name+" "+res, p)
		}
	}
	return a, warnings, nil
}

// splitResourcePerm splits "resource=PERM" (Permission.parseResourcePerms:
// exactly two non-empty parts, trimmed).
func splitResourcePerm(item string) (res, perm string, err error) {
	var parts []string
	for _, p := range strings.Split(item, "=") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) != 2 || strings.TrimSpace(parts[0]) == "" {
		return "", "", fmt.Errorf("%q is not resource=PERM", item)
	}
	return strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), nil
}

// Version is the rules' data version.
func (r *Rules) Version() DataVersion { return r.version }

// File is the configuration the rules were compiled from; do not modify it.
func (r *Rules) File() *File { return r.file }

// Accounts is how many accounts the rules hold.
func (r *Rules) Accounts() int { return len(r.accounts) }
