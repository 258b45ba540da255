package remoting

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuthorizeRefusesBeforeProcessing: a refused request gets the
// authorizer's code and remark, and neither its pooled nor its inline
// processor runs; an accepted one goes through; unrouted codes still get
// REQUEST_CODE_NOT_SUPPORTED.
func TestAuthorizeRefusesBeforeProcessing(t *testing.T) {
	const inlineCode RequestCode = 9998
	var processed, inlined atomic.Int32
	auth := func(c *Conn, req *Command) (ResponseCode, string, bool) {
		if req.FieldMap()["who"] == "mallory" {
			return NoPermission, "no entry for mallory", false
		}
		return Success, "", true
	}
	s := MustStartServer(t, ServerConfig{Authorize: auth}, func(s *Server) {
		pool := s.NewPool("counted", 1, 16)
		s.HandleInline(inlineCode, pool, func(c *Conn, req *Command) (*Command, error) {
			inlined.Add(1)
			return NewResponse(req, Success, "inline"), nil
		}, func(c *Conn, req *Command) (*Command, error) {
			processed.Add(1)
			return NewResponse(req, Success, "pooled"), nil
		})
		s.ReadRawFields(inlineCode)
	})
	cl := MustNewClient(t, ClientConfig{})
	for _, st := range []SerializeType{JSONSerialize, RocketMQSerialize} {
		for _, code := range []RequestCode{echoCode, inlineCode} {
			req := NewRequest(code, map[string]string{"who": "mallory"}, []byte("body"))
			req.SerializeType = st
			resp := invoke(t, cl, s.Addr(), req)
			assert.Equal(t, NoPermission, resp.ResponseCode(), "%s code %d", st, code)
			assert.Equal(t, "no entry for mallory", resp.Remark)
			assert.Empty(t, resp.Body)

			req = NewRequest(code, map[string]string{"who": "alice"}, []byte("body"))
			req.SerializeType = st
			resp = invoke(t, cl, s.Addr(), req)
			assert.Equal(t, Success, resp.ResponseCode(), "%s code %d", st, code)
		}
	}
	assert.Equal(t, int32(2), inlined.Load(), "only alice's inline requests ran")
	assert.Zero(t, processed.Load())

	resp := invoke(t, cl, s.Addr(), NewRequest(4242, map[string]string{"who": "mallory"}, nil))
	assert.Equal(t, RequestCodeNotSupported, resp.ResponseCode())
}

// TestAuthorizeSeesRawFields: for a code read from RawExt, the authorizer
// sees every field of a binary header (RawExt), and of a JSON one
// (ExtFields).
func TestAuthorizeSeesRawFields(t *testing.T) {
	const rawCode RequestCode = 9997
	seen := make(chan map[string]string, 4)
	auth := func(c *Conn, req *Command) (ResponseCode, string, bool) {
		m := map[string]string{}
		for k, v := range req.FieldMap() {
			m[k] = v
		}
		if len(req.RawExt) > 0 {
			m["(raw)"] = "yes"
		}
		seen <- m
		return Success, "", true
	}
	s := MustStartServer(t, ServerConfig{Authorize: auth}, func(s *Server) {
		pool := s.NewPool("raw", 1, 16)
		s.Handle(rawCode, pool, func(c *Conn, req *Command) (*Command, error) { return NewResponse(req, Success, ""), nil })
		s.ReadRawFields(rawCode)
	})
	cl := MustNewClient(t, ClientConfig{})
	for _, st := range []SerializeType{RocketMQSerialize, JSONSerialize} {
		req := NewRequest(rawCode, map[string]string{"AccessKey": "ak", "Signature": "sig"}, nil)
		req.RawExt = AppendField(nil, "b", "TopicA")
		req.SerializeType = st
		require.Equal(t, Success, invoke(t, cl, s.Addr(), req).ResponseCode())
		m := <-seen
		assert.Equal(t, "ak", m["AccessKey"], st)
		assert.Equal(t, "sig", m["Signature"], st)
		assert.Equal(t, "TopicA", m["b"], st)
		if st == RocketMQSerialize {
			assert.Equal(t, "yes", m["(raw)"], "binary headers of raw codes arrive in RawExt")
		}
	}
}

// TestAuthorizerPanicRefuses: a panicking authorizer refuses the request
// with SYSTEM_ERROR and the server keeps serving.
func TestAuthorizerPanicRefuses(t *testing.T) {
	auth := func(c *Conn, req *Command) (ResponseCode, string, bool) {
		if req.FieldMap()["boom"] != "" {
			panic("authorizer bug")
		}
		return Success, "", true
	}
	s := MustStartServer(t, ServerConfig{Authorize: auth}, nil)
	cl := MustNewClient(t, ClientConfig{})
	resp := invoke(t, cl, s.Addr(), NewRequest(echoCode, map[string]string{"boom": "1"}, nil))
	assert.Equal(t, SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "authorizer bug")
	resp = invoke(t, cl, s.Addr(), NewRequest(echoCode, map[string]string{"x": "1"}, []byte("hi")))
	assert.Equal(t, Success, resp.ResponseCode())
	assert.Equal(t, []byte("hi"), resp.Body)
}
