package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// Credentials are an account's keys, for requests a broker sends itself: a
// slave's metadata sync with its master, registrations with nameservers.
type Credentials struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// ParseCredentials reads credentials as RocketMQ 5's
// innerClientAuthenticationCredentials holds them:
// {"accessKey":"...","secretKey":"..."}. Blank text is no credentials.
func ParseCredentials(text string) (Credentials, error) {
	var c Credentials
	if strings.TrimSpace(text) == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(text), &c); err != nil {
		return Credentials{}, fmt.Errorf("acl: credentials are not {\"accessKey\":...,\"secretKey\":...}: %w", err)
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return Credentials{}, fmt.Errorf("acl: credentials need both accessKey and secretKey")
	}
	return c, nil
}

// IsZero reports whether no credentials are set.
func (c Credentials) IsZero() bool { return c.AccessKey == "" && c.SecretKey == "" }

// Sign signs req as RocketMQ's AclClientRPCHook does: AccessKey is added to
// the header, then the HMAC-SHA1 (keyed with SecretKey) of every header
// field's value in key order followed by the body goes in Signature,
// Base64-encoded.
func (c Credentials) Sign(req *remoting.Command) {
	req.SetExt(FieldAccessKey, c.AccessKey)
	r := requestPool.Get().(*request)
	r.readFields(req)
	m := hmac.New(sha1.New, []byte(c.SecretKey))
	m.Write(r.signedContent(true))
	m.Write(req.Body)
	r.put()
	req.SetExt(FieldSignature, base64.StdEncoding.EncodeToString(m.Sum(nil)))
}
