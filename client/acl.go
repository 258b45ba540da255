package client

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"slices"
	"sync"

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
//
// A request whose fields are all in RawExt (a send) gets the ACL fields
// appended there too, so signing adds no header map; signing it again
// replaces them. Signing allocates the Signature string of a map header,
// nothing else once warm.
func Sign(c Credentials, req *remoting.Command) {
	s := signScratchPool.Get().(*signScratch)
	defer signScratchPool.Put(s)
	if len(req.ExtFields) == 0 && req.RawExt != nil {
		// Fields an earlier Sign appended come last, from AccessKey on.
		if at := rawFieldOffset(req.RawExt, aclAccessKey); at >= 0 {
			req.RawExt = req.RawExt[:at]
		}
		req.RawExt = remoting.AppendField(req.RawExt, aclAccessKey, c.AccessKey)
		if c.SecurityToken != "" {
			req.RawExt = remoting.AppendField(req.RawExt, aclSecurityToken, c.SecurityToken)
		}
		var sig [28]byte
		s.sign(c.SecretKey, req, sig[:])
		req.RawExt = appendBytesField(req.RawExt, aclSignature, sig[:])
		return
	}
	req.SetExt(aclAccessKey, c.AccessKey)
	if c.SecurityToken != "" {
		req.SetExt(aclSecurityToken, c.SecurityToken)
	}
	var sig [28]byte
	s.sign(c.SecretKey, req, sig[:])
	req.SetExt(aclSignature, string(sig[:]))
}

// signScratch holds one signature's working copies, pooled.
type signScratch struct {
	buf     []byte // every field's key and value, copied
	spans   []fieldSpan
	content []byte
	sum     [sha1.Size]byte // heap room for the MAC: a stack array passed to Sum escapes
}

// fieldSpan locates one field's key and value in signScratch.buf.
type fieldSpan struct{ k0, k1, v0, v1 int }

var signScratchPool = sync.Pool{New: func() any {
	return &signScratch{buf: make([]byte, 0, 1024), spans: make([]fieldSpan, 0, 24), content: make([]byte, 0, 512)}
}}

// macPools keeps, per secret key, a pool of HMAC-SHA1 states keyed with it:
// hmac.New hashes the key and allocates two digests every time otherwise.
var macPools sync.Map // string -> *sync.Pool

func macFor(secret string) (hash.Hash, *sync.Pool) {
	p, ok := macPools.Load(secret)
	if !ok {
		p, _ = macPools.LoadOrStore(secret, &sync.Pool{New: func() any { return hmac.New(sha1.New, []byte(secret)) }})
	}
	pool := p.(*sync.Pool)
	m := pool.Get().(hash.Hash)
	m.Reset()
	return m, pool
}

// sign writes the Base64 HMAC-SHA1 of req's signed content into out (28
// bytes): every header field's value but Signature's and
// _UNIQUE_KEY_QUERY's, in key order, then the body, as a broker recomputes it.
func (s *signScratch) sign(secret string, req *remoting.Command, out []byte) {
	s.buf, s.spans = s.buf[:0], s.spans[:0]
	for k, v := range req.ExtFields {
		addSpan(s, k, v)
	}
	for k, v := range remoting.Fields(req.RawExt) {
		addSpan(s, k, v)
	}
	s.sortSpans()
	buf := s.buf
	c := s.content[:0]
	for _, sp := range s.spans {
		c = append(c, buf[sp.v0:sp.v1]...)
	}
	s.content = c
	m, pool := macFor(secret)
	m.Write(c)
	m.Write(req.Body)
	base64.StdEncoding.Encode(out, m.Sum(s.sum[:0]))
	pool.Put(m)
}

// sortSpans sorts the fields by key: by insertion for a header's usual
// dozen or two, by pdqsort beyond (n log n for a huge header).
func (s *signScratch) sortSpans() {
	buf, sp := s.buf, s.spans
	if len(sp) > 32 {
		slices.SortFunc(sp, func(a, b fieldSpan) int { return bytes.Compare(buf[a.k0:a.k1], buf[b.k0:b.k1]) })
		return
	}
	for i := 1; i < len(sp); i++ {
		x, j := sp[i], i
		for ; j > 0 && string(buf[x.k0:x.k1]) < string(buf[sp[j-1].k0:sp[j-1].k1]); j-- {
			sp[j] = sp[j-1]
		}
		sp[j] = x
	}
}

// addSpan copies one field into s, unless brokers leave it out of the
// signed content.
func addSpan[T ~string | ~[]byte](s *signScratch, k, v T) {
	if string(k) == aclSignature || string(k) == uniqueKeyQuery {
		return
	}
	sp := fieldSpan{k0: len(s.buf)}
	s.buf = append(s.buf, k...)
	sp.k1, sp.v0 = len(s.buf), len(s.buf)
	s.buf = append(s.buf, v...)
	sp.v1 = len(s.buf)
	s.spans = append(s.spans, sp)
}

// rawFieldOffset returns where the first field named key starts in a
// RawExt block, or -1.
func rawFieldOffset(raw []byte, key string) int {
	for p := 0; p+2 <= len(raw); {
		kl := int(binary.BigEndian.Uint16(raw[p:]))
		if p+2+kl+4 > len(raw) {
			return -1
		}
		vl := int(binary.BigEndian.Uint32(raw[p+2+kl:]))
		if string(raw[p+2:p+2+kl]) == key {
			return p
		}
		p += 2 + kl + 4 + vl
	}
	return -1
}

// appendBytesField is remoting.AppendField with the value in bytes.
func appendBytesField(dst []byte, key string, value []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}
