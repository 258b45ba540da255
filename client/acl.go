package client

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"sort"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// ACL header keys (SessionCredentials.java).
const (
	aclAccessKey     = "AccessKey"
	aclSignature     = "Signature"
	aclSecurityToken = "SecurityToken"
	// uniqueKeyQuery is excluded from the signature by brokers (AclUtils).
	uniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Sign signs req for RocketMQ's ACL the way the Java client's
// AclClientRPCHook does: AccessKey (and SecurityToken, when set) are added to
// the header first, then the values of every header field, sorted by key,
// are concatenated, the body appended, and the result HMAC-SHA1'd with the
// secret key and Base64-encoded into the Signature field. Unlike the official
// Go client, SecurityToken is signed too, so Java-compatible brokers accept it.
func Sign(c Credentials, req *remoting.Command) {
	req.SetExt(aclAccessKey, c.AccessKey)
	if c.SecurityToken != "" {
		req.SetExt(aclSecurityToken, c.SecurityToken)
	}
	// FieldMap: a send's fields are in RawExt, and signed all the same.
	req.SetExt(aclSignature, signature(c.SecretKey, req.FieldMap(), req.Body))
}

// signature is the Base64 HMAC-SHA1 over the sorted header values and body,
// as a broker recomputes it (Signature and _UNIQUE_KEY_QUERY excluded).
func signature(secretKey string, ext map[string]string, body []byte) string {
	keys := make([]string, 0, len(ext))
	for k := range ext {
		if k == aclSignature || k == uniqueKeyQuery {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(secretKey))
	for _, k := range keys {
		mac.Write([]byte(ext[k]))
	}
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
