package acl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

const pubAccount = `# operators' notes stay
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: PUB # may publish anywhere
    defaultGroupPerm: SUB
`

func writeACL(t *testing.T, path, text string) {
	t.Helper()
	// Write then rename, as editors and config managers do.
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func newTestValidator(t *testing.T, text string) (*Validator, string, *test.Hook) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, text)
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	v, err := NewValidator(Config{Path: path, Logger: log, ReloadInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v, path, hook
}

func sendAs(ak, sk, topic string) *remoting.Command {
	return signedRequest(remoting.SendMessageV2, ak, sk, map[string]string{"a": "pg", "b": topic}, []byte("m"))
}

// TestReloadFlipsPermission: a changed file takes effect within a few
// reload intervals, without a restart.
func TestReloadFlipsPermission(t *testing.T) {
	v, path, _ := newTestValidator(t, pubAccount)
	v.Start()
	require.NoError(t, v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")))
	writeACL(t, path, strings.Replace(pubAccount, "defaultTopicPerm: PUB", "defaultTopicPerm: SUB", 1))
	require.Eventually(t, func() bool {
		return v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")) != nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")), ErrNoPermission)
}

// TestBrokenFileKeepsRules: a file that stops loading leaves the last good
// rules in force and says so in the log, once; fixing it applies the fix.
func TestBrokenFileKeepsRules(t *testing.T) {
	v, path, hook := newTestValidator(t, pubAccount)
	v.Start()
	for _, broken := range []string{
		"accounts:\n  - accessKey: producer1\n    secretKey: [unclosed\n",                  // not YAML
		"accounts:\n  - {accessKey: producer1, secretKey: short, defaultTopicPerm: SUB}\n", // refused by the rules
	} {
		hook.Reset()
		writeACL(t, path, broken)
		require.Eventually(t, func() bool {
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.ErrorLevel && strings.Contains(e.Message, "does not load") {
					return true
				}
			}
			return false
		}, 10*time.Second, 10*time.Millisecond)
		assert.NoError(t, v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")), "the old rules hold")
		assert.ErrorIs(t, v.LoadError(), ErrBadFile)
	}
	// Logged once per broken content, not at every look.
	countErrors := func() int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.ErrorLevel {
				n++
			}
		}
		return n
	}
	logged, looks := countErrors(), v.looks.Load()
	require.Eventually(t, func() bool { return v.looks.Load() >= looks+5 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, logged, countErrors())
	assert.Equal(t, 1, logged)

	writeACL(t, path, strings.Replace(pubAccount, "defaultTopicPerm: PUB", "defaultTopicPerm: DENY", 1))
	require.Eventually(t, func() bool {
		return v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")) != nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.NoError(t, v.LoadError())
}

func TestNewValidatorNeedsAGoodFile(t *testing.T) {
	dir := t.TempDir()
	_, err := NewValidator(Config{Path: filepath.Join(dir, "missing.yml")})
	assert.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(dir, "bad.yml")
	require.NoError(t, os.WriteFile(bad, []byte("accounts: [\n"), 0o600))
	_, err = NewValidator(Config{Path: bad})
	assert.ErrorIs(t, err, ErrBadFile)
	_, err = NewValidator(Config{})
	assert.Error(t, err)
}

func readFile(t *testing.T, path string) *File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := ParseFile(data)
	require.NoError(t, err)
	return f
}

func TestUpdateAccount(t *testing.T) {
	v, path, _ := newTestValidator(t, pubAccount)
	v.now = func() time.Time { return time.UnixMilli(1700000000000) }
	white := "127.0.0.9"
	topics := []string{"TopicA=PUB|SUB", "TopicB=SUB"}
	require.NoError(t, v.UpdateAccount(AccountUpdate{AccessKey: "consumer1", SecretKey: "consumer-secret",
		WhiteRemoteAddress: &white, DefaultGroupPerm: "SUB", TopicPerms: &topics}))

	// In force at once, and written.
	assert.NoError(t, v.Rules().Check("127.0.0.1:1", signedRequest(remoting.PullMessage, "consumer1", "consumer-secret",
		map[string]string{"topic": "TopicB", "consumerGroup": "g"}, nil)))
	assert.ErrorIs(t, v.Rules().Check("127.0.0.1:1", sendAs("consumer1", "consumer-secret", "TopicB")), ErrNoPermission)
	f := readFile(t, path)
	require.Len(t, f.Accounts, 2)
	assert.Equal(t, Account{AccessKey: "consumer1", SecretKey: "consumer-secret", WhiteRemoteAddress: "127.0.0.9",
		DefaultGroupPerm: "SUB", TopicPerms: topics}, f.Accounts[1])
	assert.Equal(t, []DataVersion{{Counter: 1, Timestamp: 1700000000000}}, f.DataVersion)
	assert.Equal(t, DataVersion{Counter: 1, Timestamp: 1700000000000}, v.Rules().Version())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), "# operators' notes stay")
	assert.Contains(t, string(data), "# may publish anywhere")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// An update keeps what it does not name; admin is always written.
	require.NoError(t, v.UpdateAccount(AccountUpdate{AccessKey: "consumer1", SecretKey: "new-consumer-secret", Admin: true}))
	f = readFile(t, path)
	assert.Equal(t, Account{AccessKey: "consumer1", SecretKey: "new-consumer-secret", WhiteRemoteAddress: "127.0.0.9",
		Admin: true, DefaultGroupPerm: "SUB", TopicPerms: topics}, f.Accounts[1])
	assert.Equal(t, int64(2), f.DataVersion[0].Counter)
	bak := readFile(t, path+".bak")
	assert.Equal(t, "consumer-secret", bak.Accounts[1].SecretKey, "the previous content is kept as .bak")
	assert.ErrorIs(t, v.Rules().Check("127.0.0.1:1", sendAs("consumer1", "consumer-secret", "TopicA")), ErrBadSignature)

	// Refused updates write nothing.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	badWhite := "300.0.0.1"
	badPerms := []string{"TopicA=WRITE"}
	for _, u := range []AccountUpdate{
		{AccessKey: "short", SecretKey: "long-enough"},
		{AccessKey: "long-enough", SecretKey: "short"},
		{AccessKey: "long-enough", SecretKey: "long-enough", DefaultTopicPerm: "ALL"},
		{AccessKey: "long-enough", SecretKey: "long-enough", TopicPerms: &badPerms},
		{AccessKey: "long-enough", SecretKey: "long-enough", WhiteRemoteAddress: &badWhite},
	} {
		assert.ErrorIs(t, v.UpdateAccount(u), ErrBadUpdate, "%+v", u)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

func TestDeleteAccountAndGlobalWhite(t *testing.T) {
	v, path, _ := newTestValidator(t, pubAccount)
	assert.ErrorIs(t, v.DeleteAccount("nobody-here"), ErrNoSuchAccount)
	require.NoError(t, v.UpdateGlobalWhiteAddrs([]string{"10.10.103.*", "192.168.0.{1,2}"}))
	assert.Equal(t, []string{"10.10.103.*", "192.168.0.{1,2}"}, readFile(t, path).GlobalWhiteRemoteAddresses)
	assert.NoError(t, v.Rules().Check("10.10.103.8:1", sendAs("", "", "T")), "whitelisted at once")
	assert.ErrorIs(t, v.UpdateGlobalWhiteAddrs([]string{"10.10.*.x"}), ErrBadUpdate)

	require.NoError(t, v.DeleteAccount("producer1"))
	assert.Empty(t, readFile(t, path).Accounts)
	assert.ErrorIs(t, v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")), ErrUnknownAccessKey)
	assert.Equal(t, int64(2), v.Rules().Version().Counter)
}

// TestEditRefusedOnBrokenFile: a file broken on disk is not edited over
// (the operator's half-made change would be lost); the rules in force stay.
func TestEditRefusedOnBrokenFile(t *testing.T) {
	v, path, _ := newTestValidator(t, pubAccount)
	writeACL(t, path, "accounts: [\n")
	assert.ErrorIs(t, v.UpdateGlobalWhiteAddrs([]string{"10.0.0.1"}), ErrFileBroken)
	assert.ErrorIs(t, v.DeleteAccount("producer1"), ErrFileBroken)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "accounts: [\n", string(data))
	assert.NoError(t, v.Rules().Check("127.0.0.1:1", sendAs("producer1", "producer-secret", "T")))
}

func TestParseCredentials(t *testing.T) {
	c, err := ParseCredentials(`{"accessKey":"rocketmq2","secretKey":"12345678"}`)
	require.NoError(t, err)
	assert.Equal(t, Credentials{AccessKey: "rocketmq2", SecretKey: "12345678"}, c)
	c, err = ParseCredentials("  ")
	require.NoError(t, err)
	assert.True(t, c.IsZero())
	for _, bad := range []string{"rocketmq2:12345678", `{"accessKey":"x"}`, `{"secretKey":"y"}`} {
		_, err := ParseCredentials(bad)
		assert.Error(t, err, bad)
	}
}
