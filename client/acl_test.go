package client

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// testSignature is the signature a broker expects for these fields and
// body, computed here without the signer: values in key order, Signature
// and _UNIQUE_KEY_QUERY left out, then the body.
func testSignature(secret string, fields map[string]string, body []byte) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "Signature" && k != "_UNIQUE_KEY_QUERY" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	content := ""
	for _, k := range keys {
		content += fields[k]
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(content))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestSignVector: our signer against a signature computed outside Go
// (openssl dgst -sha1 -hmac 12345678 over the hand-assembled content
// "RocketMQ" "ProducerGroupA" "TopicA" "TBW102" "4" "0" "1700000000000"
// "Hello RocketMQ"), for a map header and a RawExt one.
func TestSignVector(t *testing.T) {
	const want = "JmN8MWC1E11ThdlWa09jsL2JMC0="
	fields := [][2]string{{"a", "ProducerGroupA"}, {"b", "TopicA"}, {"c", "TBW102"}, {"d", "4"}, {"e", "0"}, {"g", "1700000000000"}, {"_UNIQUE_KEY_QUERY", "x"}}
	body := []byte("Hello RocketMQ")
	cred := Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}

	m := remoting.NewRequest(remoting.SendMessageV2, map[string]string{}, body)
	for _, f := range fields {
		m.SetExt(f[0], f[1])
	}
	Sign(cred, m)
	assert.Equal(t, want, m.ExtFields["Signature"])
	assert.Equal(t, "RocketMQ", m.ExtFields["AccessKey"])

	raw := remoting.NewRequest(remoting.SendMessageV2, nil, body)
	for _, f := range fields {
		raw.RawExt = remoting.AppendField(raw.RawExt, f[0], f[1])
	}
	Sign(cred, raw)
	assert.Nil(t, raw.ExtFields, "a RawExt request gets no header map")
	got := raw.FieldMap()
	assert.Equal(t, want, got["Signature"])
	assert.Equal(t, "RocketMQ", got["AccessKey"])

	// Signing again (a retried request) replaces the ACL fields.
	raw.RawExt = remoting.AppendField(raw.RawExt[:0], "b", "TopicA")
	Sign(cred, raw)
	Sign(Credentials{AccessKey: "RocketMQ", SecretKey: "12345678", SecurityToken: "token"}, raw)
	n := 0
	for k := range remoting.Fields(raw.RawExt) {
		if string(k) == "AccessKey" || string(k) == "Signature" {
			n++
		}
	}
	assert.Equal(t, 2, n, "one AccessKey and one Signature")
	got = raw.FieldMap()
	assert.Equal(t, testSignature("12345678", got, body), got["Signature"])
	assert.Equal(t, "token", got["SecurityToken"])
}

// TestSignSecurityToken: the token is signed, as Java clients sign it
// (openssl over "RocketMQ" "token" "ProducerGroupA" ...).
func TestSignSecurityToken(t *testing.T) {
	req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{"a": "ProducerGroupA", "b": "TopicA", "c": "TBW102",
		"d": "4", "e": "0", "g": "1700000000000"}, []byte("Hello RocketMQ"))
	Sign(Credentials{AccessKey: "RocketMQ", SecretKey: "12345678", SecurityToken: "token"}, req)
	assert.Equal(t, "1BfQvQ4QNgSvTEFybsJ/7j44WYg=", req.ExtFields["Signature"])
}

// TestSignAllocs: signing a send (RawExt) allocates nothing once warm.
func TestSignAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race; allocation counts only hold without it")
	}
	cred := Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}
	req := remoting.NewRequest(remoting.SendMessageV2, nil, make([]byte, 1024))
	req.RawExt = make([]byte, 0, 1024)
	build := func() {
		req.RawExt = remoting.AppendField(req.RawExt[:0], "a", "ProducerGroupA")
		req.RawExt = remoting.AppendField(req.RawExt, "b", "TopicA")
		req.RawExt = remoting.AppendIntField(req.RawExt, "g", 1700000000000)
	}
	build()
	Sign(cred, req)
	allocs := testing.AllocsPerRun(200, func() {
		build()
		Sign(cred, req)
	})
	require.Zero(t, allocs)
}

// TestSignManyFields: headers past the insertion-sort size sign in plain
// sort order.
func TestSignManyFields(t *testing.T) {
	for _, n := range []int{3, 31, 32, 33, 200} {
		ext := map[string]string{"b": "T"}
		raw := remoting.NewRequest(remoting.SendMessageV2, nil, []byte("body"))
		for i := range n {
			k, v := fmt.Sprintf("k%03d-%d", (i*7919)%1000, i), fmt.Sprint(i*i)
			ext[k] = v
			raw.RawExt = remoting.AppendField(raw.RawExt, k, v)
		}
		m := remoting.NewRequest(remoting.SendMessageV2, ext, []byte("body"))
		cred := Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}
		Sign(cred, m)
		assert.Equal(t, testSignature("12345678", m.ExtFields, m.Body), m.ExtFields["Signature"], "%d fields", n)
		Sign(cred, raw)
		f := raw.FieldMap()
		assert.Equal(t, testSignature("12345678", f, raw.Body), f["Signature"], "%d raw fields", n)
	}
}
