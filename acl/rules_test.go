package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// sampleACL is RocketMQ's distribution/conf/plain_acl.yml with two more
// accounts for the cases it lacks.
const sampleACL = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true

  - accessKey: adminWithPerms
    secretKey: secret-admin
    admin: true
    defaultTopicPerm: SUB
    topicPerms:
      - onlyPub=PUB

  - accessKey: fromOffice
    secretKey: 87654321
    whiteRemoteAddress: 172.16.5.{10,11}
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`

func mustRules(t testing.TB, text string) *Rules {
	t.Helper()
	f, err := ParseFile([]byte(text))
	require.NoError(t, err)
	r, _, err := Compile(f, time.UnixMilli(1))
	require.NoError(t, err)
	return r
}

// signedRequest builds a JSON-header request with fields, signed by
// (ak, sk); with sk empty it carries the AccessKey unsigned, with ak empty
// neither.
func signedRequest(code remoting.RequestCode, ak, sk string, fields map[string]string, body []byte) *remoting.Command {
	ext := map[string]string{}
	for k, v := range fields {
		ext[k] = v
	}
	req := remoting.NewRequest(code, ext, body)
	switch {
	case sk != "":
		Credentials{AccessKey: ak, SecretKey: sk}.Sign(req)
	case ak != "":
		req.SetExt(FieldAccessKey, ak)
	}
	return req
}

// TestSignatureVector checks the signed content against a signature
// computed outside Go (openssl dgst -sha1 -hmac 12345678 -binary | base64
// over the hand-assembled string), and the server's check and our signer
// against it, in both header encodings.
func TestSignatureVector(t *testing.T) {
	fields := map[string]string{
		"AccessKey":         "RocketMQ",
		"a":                 "ProducerGroupA",
		"b":                 "TopicA",
		"c":                 "TBW102",
		"d":                 "4",
		"e":                 "0",
		"g":                 "1700000000000",
		"_UNIQUE_KEY_QUERY": "false", // left out of the content
	}
	body := []byte("Hello RocketMQ")
	// The values in key order (AccessKey < a < b ...), then the body.
	content := "RocketMQ" + "ProducerGroupA" + "TopicA" + "TBW102" + "4" + "0" + "1700000000000" + "Hello RocketMQ"
	const want = "JmN8MWC1E11ThdlWa09jsL2JMC0="
	mac := hmac.New(sha1.New, []byte("12345678"))
	mac.Write([]byte(content))
	require.Equal(t, want, base64.StdEncoding.EncodeToString(mac.Sum(nil)), "the hand-assembled content")

	rules := mustRules(t, `accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: PUB
`)
	// JSON header: fields in ExtFields.
	req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{}, body)
	for k, v := range fields {
		req.SetExt(k, v)
	}
	req.SetExt("Signature", want)
	assert.NoError(t, rules.Check("127.0.0.1:5000", req))

	// Binary header of a raw-fields code: the fields in RawExt.
	raw := remoting.NewRequest(remoting.SendMessageV2, map[string]string{"Signature": want}, body)
	for _, k := range []string{"a", "b", "c", "d", "e", "g", "_UNIQUE_KEY_QUERY", "AccessKey"} {
		raw.RawExt = remoting.AppendField(raw.RawExt, k, fields[k])
	}
	assert.NoError(t, rules.Check("127.0.0.1:5000", raw))

	// Our signer gives the same signature.
	mine := remoting.NewRequest(remoting.SendMessageV2, map[string]string{}, body)
	for k, v := range fields {
		if k != "AccessKey" {
			mine.SetExt(k, v)
		}
	}
	Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}.Sign(mine)
	assert.Equal(t, want, mine.ExtFields["Signature"])

	// Any change to a signed value, the body or the key fails.
	tampered := remoting.NewRequest(remoting.SendMessageV2, map[string]string{}, body)
	for k, v := range req.ExtFields {
		tampered.SetExt(k, v)
	}
	tampered.SetExt("b", "TopicB")
	assert.ErrorIs(t, rules.Check("127.0.0.1:5000", tampered), ErrBadSignature)
	tampered.SetExt("b", "TopicA")
	tampered.Body = []byte("Hello RocketMQ!")
	assert.ErrorIs(t, rules.Check("127.0.0.1:5000", tampered), ErrBadSignature)
	tampered.Body = body
	tampered.SetExt("_UNIQUE_KEY_QUERY", "true") // not signed: still fine
	assert.NoError(t, rules.Check("127.0.0.1:5000", tampered))
}

// TestSignatureSecurityToken: Java clients sign the SecurityToken field,
// the official Go client sends it unsigned; both are accepted, and the
// token is otherwise covered like any field.
func TestSignatureSecurityToken(t *testing.T) {
	rules := mustRules(t, "accounts:\n  - {accessKey: RocketMQ, secretKey: \"12345678\", defaultTopicPerm: PUB}\n")
	base := map[string]string{"AccessKey": "RocketMQ", "SecurityToken": "token", "a": "ProducerGroupA", "b": "TopicA",
		"c": "TBW102", "d": "4", "e": "0", "g": "1700000000000"}
	check := func(sig string) error {
		req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{"Signature": sig}, []byte("Hello RocketMQ"))
		for k, v := range base {
			req.SetExt(k, v)
		}
		return rules.Check("127.0.0.1:1", req)
	}
	// openssl over "RocketMQ" "token" "ProducerGroupA"... (SecurityToken sorts after AccessKey).
	assert.NoError(t, check("1BfQvQ4QNgSvTEFybsJ/7j44WYg="), "Java: token signed")
	assert.NoError(t, check("JmN8MWC1E11ThdlWa09jsL2JMC0="), "Go client: token sent, not signed")
	assert.ErrorIs(t, check("xP5AOl0VJwEoKpqOdWnrfMNRv4M="), ErrBadSignature)
	assert.ErrorIs(t, check(""), ErrBadSignature)
}

func TestDecisions(t *testing.T) {
	rules := mustRules(t, sampleACL)
	const outside = "127.0.0.1:40000"
	send := func(ak, sk, topic string) *remoting.Command {
		return signedRequest(remoting.SendMessageV2, ak, sk, map[string]string{"a": "pg", "b": topic}, []byte("x"))
	}
	pull := func(ak, sk, topic, group string) *remoting.Command {
		return signedRequest(remoting.PullMessage, ak, sk, map[string]string{"topic": topic, "consumerGroup": group}, nil)
	}
	tests := []struct {
		name   string
		remote string
		req    *remoting.Command
		want   error // nil: allowed
		remark string
	}{
		{"global whitelist needs no key", "10.10.103.7:1", send("", "", "topicA"), nil, ""},
		{"global whitelist IPv4 range", "192.168.0.99:1", remoting.NewRequest(remoting.UpdateAndCreateTopic, nil, nil), nil, ""},
		{"no key", outside, send("", "", "topicB"), ErrNoAccessKey, "from 127.0.0.1"},
		{"unknown key", outside, send("nobody-here", "12345678", "topicB"), ErrUnknownAccessKey, `"nobody-here"`},
		{"wrong secret", outside, send("RocketMQ", "wrong-secret", "topicB"), ErrBadSignature, `AccessKey "RocketMQ"`},
		{"PUB on PUB|SUB topic", outside, send("RocketMQ", "12345678", "topicB"), nil, ""},
		{"PUB on SUB-only topic", outside, send("RocketMQ", "12345678", "topicC"), ErrNoPermission,
			`AccessKey "RocketMQ" may not PUB topic "topicC" (its permission on it is SUB)`},
		{"PUB on DENY topic", outside, send("RocketMQ", "12345678", "topicA"), ErrNoPermission, `topic "topicA"`},
		{"PUB on unlisted topic, default DENY", outside, send("RocketMQ", "12345678", "other"), ErrNoPermission,
			"its default topic permission is DENY"},
		{"batch send is checked", outside, signedRequest(remoting.SendBatchMessage, "RocketMQ", "12345678",
			map[string]string{"a": "pg", "b": "topicC"}, []byte("x")), ErrNoPermission, `topic "topicC"`},
		{"v1 send", outside, signedRequest(remoting.SendMessage, "RocketMQ", "12345678",
			map[string]string{"producerGroup": "pg", "topic": "topicC"}, []byte("x")), ErrNoPermission, `topic "topicC"`},
		{"send to a retry topic needs SUB on its group", outside, send("RocketMQ", "12345678", "%RETRY%groupC"), nil, ""},
		{"send to a denied group's retry topic", outside, send("RocketMQ", "12345678", "%RETRY%groupA"), ErrNoPermission, `group "groupA"`},
		{"trace topic PUB passes", outside, send("RocketMQ", "12345678", TraceTopic), nil, ""},
		{"pull SUB topic, SUB group", outside, pull("RocketMQ", "12345678", "topicC", "groupC"), nil, ""},
		{"pull SUB topic, default SUB group", outside, pull("RocketMQ", "12345678", "topicC", "unlisted"), nil, ""},
		{"pull DENY group", outside, pull("RocketMQ", "12345678", "topicC", "groupA"), ErrNoPermission,
			`may not SUB group "groupA" (its permission on it is DENY)`},
		{"pull DENY topic", outside, pull("RocketMQ", "12345678", "topicA", "groupC"), ErrNoPermission, `topic "topicA"`},
		{"send back needs group SUB", outside, signedRequest(remoting.ConsumerSendMsgBack, "RocketMQ", "12345678",
			map[string]string{"group": "groupA", "offset": "1"}, nil), ErrNoPermission, `group "groupA"`},
		{"offset commit", outside, signedRequest(remoting.UpdateConsumerOffset, "RocketMQ", "12345678",
			map[string]string{"consumerGroup": "groupB", "topic": "topicA"}, nil), ErrNoPermission, `topic "topicA"`},
		{"admin code, non-admin", outside, signedRequest(remoting.UpdateAndCreateTopic, "RocketMQ", "12345678",
			map[string]string{"topic": "topicB"}, nil), ErrNotAdmin, "request code 17 (UPDATE_AND_CREATE_TOPIC) needs admin: true"},
		{"ACL admin, non-admin", outside, signedRequest(remoting.GetBrokerClusterACLConfig, "RocketMQ", "12345678", nil, nil),
			ErrNotAdmin, "GET_BROKER_CLUSTER_ACL_CONFIG"},
		{"reset offsets, non-admin", outside, signedRequest(remoting.InvokeBrokerToResetOffset, "RocketMQ", "12345678",
			map[string]string{"topic": "topicB", "group": "groupB"}, nil), ErrNotAdmin, "INVOKE_BROKER_TO_RESET_OFFSET"},
		{"other codes need only a signature", outside, signedRequest(remoting.GetMaxOffset, "RocketMQ", "12345678",
			map[string]string{"topic": "topicA", "queueId": "0"}, nil), nil, ""},
		{"other codes: bad signature", outside, signedRequest(remoting.GetMaxOffset, "RocketMQ", "1234567x",
			map[string]string{"topic": "topicA", "queueId": "0"}, nil), ErrBadSignature, ""},
		{"admin without perms may do anything", outside, send("rocketmq2", "12345678", "anything"), nil, ""},
		{"admin code, admin", outside, signedRequest(remoting.DeleteTopicInBroker, "rocketmq2", "12345678",
			map[string]string{"topic": "x"}, nil), nil, ""},
		{"admin with perms is checked", outside, send("adminWithPerms", "secret-admin", "subOnly"), ErrNoPermission,
			"its default topic permission is SUB"},
		{"admin with perms, listed", outside, send("adminWithPerms", "secret-admin", "onlyPub"), nil, ""},
		{"account whitelist skips the signature", "172.16.5.11:1", pull("fromOffice", "", "t", "g"), nil, ""},
		{"account whitelist keeps permissions", "172.16.5.11:1", send("fromOffice", "", "t"), ErrNoPermission,
			"its default topic permission is SUB"},
		{"account whitelist keeps admin", "172.16.5.10:1", signedRequest(remoting.UpdateAndCreateTopic, "fromOffice", "",
			map[string]string{"topic": "x"}, nil), ErrNotAdmin, ""},
		{"account whitelist miss needs a signature", "172.16.5.12:1", pull("fromOffice", "", "t", "g"), ErrBadSignature, ""},
		{"IPv6 peer outside every list", "[::1]:1", send("", "", "t"), ErrNoAccessKey, "from ::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rules.Check(tt.remote, tt.req)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.remark)
		})
	}
}

func TestHeartbeatNeeds(t *testing.T) {
	rules := mustRules(t, sampleACL)
	hb := func(groups map[string][]string) []byte {
		d := protocol.HeartbeatData{ClientID: "c1", ProducerDataSet: []protocol.ProducerData{{GroupName: "anyProducer"}}}
		for g, topics := range groups {
			cd := protocol.ConsumerData{GroupName: g}
			for _, tp := range topics {
				cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, protocol.SubscriptionData{Topic: tp, SubString: "*"})
			}
			d.ConsumerDataSet = append(d.ConsumerDataSet, cd)
		}
		b, err := json.Marshal(d)
		require.NoError(t, err)
		return b
	}
	ok := signedRequest(remoting.HeartBeat, "RocketMQ", "12345678", nil, hb(map[string][]string{"groupC": {"topicC", "%RETRY%groupC"}}))
	assert.NoError(t, rules.Check("127.0.0.1:1", ok))
	producerOnly := signedRequest(remoting.HeartBeat, "RocketMQ", "12345678", nil, hb(nil))
	assert.NoError(t, rules.Check("127.0.0.1:1", producerOnly))
	badTopic := signedRequest(remoting.HeartBeat, "RocketMQ", "12345678", nil, hb(map[string][]string{"groupC": {"topicA"}}))
	assert.ErrorIs(t, rules.Check("127.0.0.1:1", badTopic), ErrNoPermission)
	badGroup := signedRequest(remoting.HeartBeat, "RocketMQ", "12345678", nil, hb(map[string][]string{"groupA": {"topicC"}}))
	err := rules.Check("127.0.0.1:1", badGroup)
	assert.ErrorIs(t, err, ErrNoPermission)
	assert.Contains(t, err.Error(), `group "groupA"`)
	garbage := signedRequest(remoting.HeartBeat, "RocketMQ", "12345678", nil, []byte("{not json"))
	assert.ErrorIs(t, rules.Check("127.0.0.1:1", garbage), ErrUncheckable)
	// A caller not yet known gets no body decoded: the signature fails first.
	forged := signedRequest(remoting.HeartBeat, "RocketMQ", "wrong-secret", nil, []byte("{not json"))
	assert.ErrorIs(t, rules.Check("127.0.0.1:1", forged), ErrBadSignature)
}

// TestDuplicateRawField: a binary header naming a field twice is refused:
// the send path reads one value, the signature another.
func TestDuplicateRawField(t *testing.T) {
	rules := mustRules(t, sampleACL)
	req := remoting.NewRequest(remoting.SendMessageV2, nil, []byte("x"))
	req.RawExt = remoting.AppendField(req.RawExt, "b", "topicB")
	req.RawExt = remoting.AppendField(req.RawExt, "b", "topicA")
	Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}.Sign(req)
	err := rules.Check("127.0.0.1:1", req)
	require.ErrorIs(t, err, ErrUncheckable)
	assert.Contains(t, err.Error(), `"b" appears twice`)
}

func TestCompileFile(t *testing.T) {
	f, err := ParseFile([]byte(sampleACL))
	require.NoError(t, err)
	r, warnings, err := Compile(f, time.UnixMilli(42))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, 4, r.Accounts())
	assert.Equal(t, DataVersion{Timestamp: 42}, r.Version(), "no dataVersion in the file: stamped at load")
	assert.Equal(t, "12345678", f.Accounts[0].SecretKey, "a secret of digits is read as text")

	r, warnings, err = Compile(mustParse(t, `
accounts:
  - {accessKey: dupdupdup, secretKey: first-one, defaultTopicPerm: PUB}
  - {accessKey: dupdupdup, secretKey: second-one}
  - {accessKey: typo-account, secretKey: 12345678, defaultTopicPerm: "PUB,SUB", topicPerms: ["t=RW"]}
dataVersion:
  - {counter: 7, timestamp: 1700000000000}
`), time.UnixMilli(1))
	require.NoError(t, err)
	assert.Len(t, warnings, 3)
	assert.Equal(t, DataVersion{Counter: 7, Timestamp: 1700000000000}, r.Version())
	assert.Equal(t, "first-one", string(r.accounts["dupdupdup"].secretKey), "the first entry counts")
	assert.Equal(t, PermDeny, r.accounts["typo-account"].defTopic, "an unknown permission word is DENY")
	assert.Equal(t, PermDeny, r.accounts["typo-account"].perms["t"])

	empty, _, err := Compile(mustParse(t, "\n# nothing yet\n"), time.UnixMilli(1))
	require.NoError(t, err)
	assert.Zero(t, empty.Accounts())

	for name, text := range map[string]string{
		"short secret":   "accounts:\n  - {accessKey: longenough, secretKey: short}\n",
		"short key":      "accounts:\n  - {accessKey: ak, secretKey: longenough}\n",
		"bad perm entry": "accounts:\n  - {accessKey: longenough, secretKey: longenough, topicPerms: [topicA]}\n",
		"two equals":     "accounts:\n  - {accessKey: longenough, secretKey: longenough, groupPerms: [a=b=SUB]}\n",
		"bad white":      "accounts:\n  - {accessKey: longenough, secretKey: longenough, whiteRemoteAddress: 300.1.1.1}\n",
		"bad global":     "globalWhiteRemoteAddresses: [10.10.*.x]\n",
	} {
		f, err := ParseFile([]byte(text))
		require.NoError(t, err, name)
		_, _, err = Compile(f, time.UnixMilli(1))
		assert.ErrorIs(t, err, ErrBadFile, name)
	}
	for _, text := range []string{"accounts: [\n", "accounts: 5\n", "- a\n- b\n", "accounts:\n  - accessKey: [1, 2]\n"} {
		_, err := ParseFile([]byte(text))
		assert.ErrorIs(t, err, ErrBadFile, text)
	}
}

func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := ParseFile([]byte(text))
	require.NoError(t, err)
	return f
}

func TestPerm(t *testing.T) {
	for s, want := range map[string]Perm{"DENY": PermDeny, "PUB": PermPub, " SUB ": PermSub, "PUB|SUB": PermPub | PermSub, "SUB|PUB": PermPub | PermSub} {
		p, ok := ParsePerm(s)
		assert.True(t, ok, s)
		assert.Equal(t, want, p, s)
	}
	for _, s := range []string{"", "pub", "PUB | SUB", "ANY", "RW"} {
		p, ok := ParsePerm(s)
		assert.False(t, ok, s)
		assert.Equal(t, PermDeny, p, s)
	}
	assert.True(t, (PermPub | PermSub).Allows(PermPub))
	assert.False(t, PermSub.Allows(PermPub))
	assert.False(t, (PermDeny | PermPub).Allows(PermPub))
	assert.True(t, PermSub.Allows(PermAny))
	assert.False(t, PermDeny.Allows(PermAny))
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte(sampleACL))
	f.Add([]byte("accounts:\n  - {accessKey: RocketMQ, secretKey: \"12345678\", topicPerms: [a=PUB]}\n"))
	f.Add([]byte("globalWhiteRemoteAddresses: ['*']\n"))
	f.Add([]byte("dataVersion: [{counter: 1, timestamp: 2}]\n"))
	req := signedRequest(remoting.SendMessageV2, "RocketMQ", "12345678", map[string]string{"a": "pg", "b": "topicB"}, []byte("x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data)
		if err != nil {
			return
		}
		rules, _, err := Compile(file, time.UnixMilli(1))
		if err != nil {
			return
		}
		_ = rules.Check("127.0.0.1:1", req)
		_ = rules.Check("[::1]:1", req)
	})
}

// TestCheckAllocs: checking a signed send costs one allocation for a
// RawExt header (its one string copy) and none for a map header.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race; allocation counts only hold without it")
	}
	rules := mustRules(t, sampleACL)
	jsonReq := signedRequest(remoting.SendMessageV2, "RocketMQ", "12345678", map[string]string{"a": "pg", "b": "topicB"}, make([]byte, 1024))
	raw := remoting.NewRequest(remoting.SendMessageV2, nil, make([]byte, 1024))
	raw.RawExt = remoting.AppendField(remoting.AppendField(nil, "a", "pg"), "b", "topicB")
	Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}.Sign(raw)
	for k, v := range raw.ExtFields {
		raw.RawExt = remoting.AppendField(raw.RawExt, k, v)
	}
	raw.ExtFields = nil
	require.NoError(t, rules.Check("127.0.0.1:1", jsonReq))
	require.NoError(t, rules.Check("127.0.0.1:1", raw))
	assert.Zero(t, testing.AllocsPerRun(200, func() { _ = rules.Check("127.0.0.1:1", jsonReq) }))
	assert.LessOrEqual(t, testing.AllocsPerRun(200, func() { _ = rules.Check("127.0.0.1:1", raw) }), 1.0)
}

func BenchmarkCheckSignedSend(b *testing.B) {
	rules := mustRules(b, sampleACL)
	req := signedRequest(remoting.SendMessageV2, "RocketMQ", "12345678", map[string]string{"a": "pg", "b": "topicB", "c": "TBW102",
		"d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x01AC11000100002A9F0000000000000000\x02WAIT\x01true\x02",
		"j": "0", "k": "false", "l": "0", "m": "false", "n": "broker-a"}, make([]byte, 1024))
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if err := rules.Check("127.0.0.1:40000", req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSignatureManyFields: headers past the insertion-sort size are signed
// and checked in the same key order as a plain sort gives.
func TestSignatureManyFields(t *testing.T) {
	rules := mustRules(t, "accounts:\n  - {accessKey: RocketMQ, secretKey: \"12345678\", defaultTopicPerm: PUB}\n")
	for _, n := range []int{3, 31, 32, 33, 200} {
		ext := map[string]string{"AccessKey": "RocketMQ", "b": "T"}
		for i := range n {
			ext[fmt.Sprintf("k%03d-%d", (i*7919)%1000, i)] = fmt.Sprint(i * i)
		}
		keys := make([]string, 0, len(ext))
		for k := range ext {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		mac := hmac.New(sha1.New, []byte("12345678"))
		for _, k := range keys {
			mac.Write([]byte(ext[k]))
		}
		mac.Write([]byte("body"))
		ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
		assert.NoError(t, rules.Check("127.0.0.1:1", remoting.NewRequest(remoting.SendMessageV2, ext, []byte("body"))), "%d fields", n)
	}
}

// TestSampleFile: the shipped conf/plain_acl.yml loads and means what its
// comments say.
func TestSampleFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "conf", "plain_acl.yml"))
	require.NoError(t, err)
	f, err := ParseFile(data)
	require.NoError(t, err)
	rules, warnings, err := Compile(f, time.UnixMilli(1))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	app := func(code remoting.RequestCode, fields map[string]string) error {
		return rules.Check("10.0.0.5:1", signedRequest(code, "billing-app", "change-me-billing-secret", fields, []byte("x")))
	}
	assert.NoError(t, app(remoting.SendMessageV2, map[string]string{"b": "orders"}))
	assert.ErrorIs(t, app(remoting.SendMessageV2, map[string]string{"b": "payments"}), ErrNoPermission)
	assert.NoError(t, app(remoting.PullMessage, map[string]string{"topic": "payments", "consumerGroup": "billing"}))
	assert.ErrorIs(t, app(remoting.PullMessage, map[string]string{"topic": "orders", "consumerGroup": "billing"}), ErrNoPermission)
	assert.ErrorIs(t, app(remoting.UpdateAndCreateTopic, map[string]string{"topic": "x"}), ErrNotAdmin)
	assert.NoError(t, rules.Check("10.0.0.5:1", signedRequest(remoting.UpdateAndCreateTopic, "rocketmq-admin", "change-me-admin-secret",
		map[string]string{"topic": "x"}, nil)))
}
