package acl

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
)

// Errors of the ACL administration.
var (
	// ErrBadUpdate means an edit RocketMQ refuses too: keys of 6 characters
	// or fewer, a permission entry that is not resource=PERM with a known
	// PERM, an address pattern that does not parse.
	ErrBadUpdate = errors.New("acl: bad ACL update")
	// ErrNoSuchAccount means a delete of an AccessKey the file does not list.
	ErrNoSuchAccount = errors.New("acl: no such account")
	// ErrFileBroken means the file on disk does not load: it is not edited
	// until someone fixes it (the rules in force are the last good ones).
	ErrFileBroken = errors.New("acl: the ACL file on disk does not load; fix it before editing it remotely")
)

// aclFilePerm is the mode of an ACL file the broker creates: it holds secrets.
const aclFilePerm = 0o600

// AccountUpdate is an UPDATE_AND_CREATE_ACL_CONFIG request. As in RocketMQ,
// AccessKey and SecretKey are required and Admin is always written; a nil
// field leaves the account's value as it is (a new account goes without
// it), an empty default permission likewise.
type AccountUpdate struct {
	AccessKey          string
	SecretKey          string
	Admin              bool
	WhiteRemoteAddress *string
	DefaultTopicPerm   string
	DefaultGroupPerm   string
	TopicPerms         *[]string
	GroupPerms         *[]string
}

func (u *AccountUpdate) validate() error {
	if len(u.AccessKey) < minKeyLength || len(u.SecretKey) < minKeyLength {
		return fmt.Errorf("%w: accessKey and secretKey must be longer than 6 characters", ErrBadUpdate)
	}
	for _, d := range []struct{ name, v string }{{"defaultTopicPerm", u.DefaultTopicPerm}, {"defaultGroupPerm", u.DefaultGroupPerm}} {
		if _, ok := ParsePerm(d.v); d.v != "" && !ok {
			return fmt.Errorf("%w: %s %q is not DENY, PUB, SUB or PUB|SUB", ErrBadUpdate, d.name, d.v)
		}
	}
	for _, list := range []*[]string{u.TopicPerms, u.GroupPerms} {
		if list == nil {
			continue
		}
		for _, item := range *list {
			_, p, err := splitResourcePerm(item)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrBadUpdate, err)
			}
			if _, ok := ParsePerm(p); !ok {
				return fmt.Errorf("%w: %q: the permission must be DENY, PUB, SUB or PUB|SUB", ErrBadUpdate, item)
			}
		}
	}
	return nil
}

// UpdateAccount creates the account u names, or updates it
// (PlainPermissionManager.updateAccessConfig), in the file and in force.
func (v *Validator) UpdateAccount(u AccountUpdate) error {
	if err := u.validate(); err != nil {
		return err
	}
	return v.edit(func(root *yaml.Node) error {
		accounts := mapValue(root, "accounts")
		if accounts == nil || accounts.Kind != yaml.SequenceNode {
			accounts = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			setMapValue(root, "accounts", accounts)
		}
		acc := findAccount(accounts, u.AccessKey)
		if acc == nil {
			acc = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			accounts.Content = append(accounts.Content, acc)
		}
		setMapValue(acc, "accessKey", strNode(u.AccessKey))
		setMapValue(acc, "secretKey", strNode(u.SecretKey))
		if u.WhiteRemoteAddress != nil {
			setMapValue(acc, "whiteRemoteAddress", strNode(*u.WhiteRemoteAddress))
		}
		setMapValue(acc, "admin", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(u.Admin)})
		if u.DefaultTopicPerm != "" {
			setMapValue(acc, "defaultTopicPerm", strNode(strings.TrimSpace(u.DefaultTopicPerm)))
		}
		if u.DefaultGroupPerm != "" {
			setMapValue(acc, "defaultGroupPerm", strNode(strings.TrimSpace(u.DefaultGroupPerm)))
		}
		if u.TopicPerms != nil {
			setMapValue(acc, "topicPerms", seqNode(*u.TopicPerms))
		}
		if u.GroupPerms != nil {
			setMapValue(acc, "groupPerms", seqNode(*u.GroupPerms))
		}
		return nil
	})
}

// DeleteAccount removes the account with accessKey from the file and from
// the rules in force (ErrNoSuchAccount when the file has none).
func (v *Validator) DeleteAccount(accessKey string) error {
	return v.edit(func(root *yaml.Node) error {
		accounts := mapValue(root, "accounts")
		if accounts != nil && accounts.Kind == yaml.SequenceNode {
			for i, acc := range accounts.Content {
				if isAccount(acc, accessKey) {
					accounts.Content = append(accounts.Content[:i], accounts.Content[i+1:]...)
					return nil
				}
			}
		}
		return fmt.Errorf("%w %q", ErrNoSuchAccount, accessKey)
	})
}

// UpdateGlobalWhiteAddrs replaces globalWhiteRemoteAddresses with addrs
// (each a pattern ParseAddressPattern reads).
func (v *Validator) UpdateGlobalWhiteAddrs(addrs []string) error {
	for _, a := range addrs {
		if _, err := ParseAddressPattern(a); err != nil {
			return fmt.Errorf("%w: %w", ErrBadUpdate, err)
		}
	}
	return v.edit(func(root *yaml.Node) error {
		setMapValue(root, "globalWhiteRemoteAddresses", seqNode(addrs))
		return nil
	})
}

// edit applies change to the file's YAML tree, bumps its dataVersion,
// writes it atomically (the previous content kept as .bak) and puts the
// new rules in force. Editing the tree rather than re-encoding the
// configuration keeps the operator's comments, key order and any keys we do
// not know. Nothing is written when change or the result's compilation
// fails.
func (v *Validator) edit(change func(root *yaml.Node) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	data, err := os.ReadFile(v.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("acl: read %s: %w", v.path, err)
	}
	if f, err := ParseFile(data); err != nil {
		return fmt.Errorf("%w: %w", ErrFileBroken, err)
	} else if _, _, err := Compile(f, v.now()); err != nil {
		return fmt.Errorf("%w: %w", ErrFileBroken, err)
	}
	var doc yaml.Node
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("%w: %w", ErrFileBroken, err)
		}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: the top level is not a mapping", ErrFileBroken)
	}
	if err := change(root); err != nil {
		return err
	}
	next := v.rules.Load().version.Counter + 1
	if dv := mapValue(root, "dataVersion"); dv != nil && dv.Kind == yaml.SequenceNode && len(dv.Content) > 0 {
		if c := mapValue(dv.Content[0], "counter"); c != nil {
			if n, err := strconv.ParseInt(c.Value, 10, 64); err == nil {
				next = n + 1
			}
		}
	}
	setMapValue(root, "dataVersion", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{{
		Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			strNode("counter"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(next, 10)},
			strNode("timestamp"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.now().UnixMilli(), 10)},
		},
	}}})
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("acl: encode %s: %w", v.path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("acl: encode %s: %w", v.path, err)
	}
	out := buf.Bytes()
	rules, err := v.compile(out)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadUpdate, err)
	}
	perm := os.FileMode(aclFilePerm)
	if st, err := os.Stat(v.path); err == nil {
		perm = st.Mode().Perm()
	}
	if err := fsutil.WriteFileWithBackup(v.path, out, perm); err != nil {
		return fmt.Errorf("acl: write %s: %w", v.path, err)
	}
	v.rules.Store(rules)
	v.seen = sha256.Sum256(out)
	v.loadErr = nil
	v.log.WithFields(map[string]any{"accounts": rules.Accounts(), "dataVersion": next}).Info("ACL file updated by an admin request")
	return nil
}

// mapValue returns the value node of key in mapping m, nil if absent.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setMapValue replaces the value of key in mapping m, or appends the pair.
// A replaced value keeps the comments written beside the old one.
func setMapValue(m *yaml.Node, key string, val *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			old := m.Content[i+1]
			val.HeadComment, val.LineComment, val.FootComment = old.HeadComment, old.LineComment, old.FootComment
			m.Content[i+1] = val
			return
		}
	}
	m.Content = append(m.Content, strNode(key), val)
}

func findAccount(accounts *yaml.Node, accessKey string) *yaml.Node {
	for _, acc := range accounts.Content {
		if isAccount(acc, accessKey) {
			return acc
		}
	}
	return nil
}

func isAccount(acc *yaml.Node, accessKey string) bool {
	k := mapValue(acc, "accessKey")
	return k != nil && k.Value == accessKey
}

// strNode is a string scalar: tagged, so a secret of digits stays a string.
func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func seqNode(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range items {
		n.Content = append(n.Content, strNode(strings.TrimSpace(s)))
	}
	return n
}
