// Package remoting speaks RocketMQ 4.x's remoting protocol: the frame codec with
// both header serializations, the request and response codes, a gnet-based
// server with bounded worker pools, and a client transport.
//
// A frame on the wire:
//
//	+--------+------------+----------------+-----------+
//	| length | headerWord |  header bytes  |   body    |
//	| int32  |   int32    | headerLen bytes| the rest  |
//	+--------+------------+----------------+-----------+
//	length     = 4 + headerLen + bodyLen (it does not count itself)
//	headerWord = serializeType<<24 | headerLen (24 bits)
//
// All integers are big-endian. The header is JSON (serialize type 0) or
// RocketMQ's binary layout (type 1); a server answers in the type the request
// used.
package remoting

import (
	"fmt"
	"strconv"
)

// SerializeType is the header encoding of a frame, the high byte of the header word.
type SerializeType byte

const (
	// JSONSerialize is RocketMQ's default header encoding (and the only one the
	// official Go client sends).
	JSONSerialize SerializeType = 0
	// RocketMQSerialize is the binary header encoding Java clients can opt into.
	RocketMQSerialize SerializeType = 1
)

// String returns RocketMQ's name of the serialize type.
func (t SerializeType) String() string {
	switch t {
	case JSONSerialize:
		return "JSON"
	case RocketMQSerialize:
		return "ROCKETMQ"
	}
	return "UNKNOWN(" + strconv.Itoa(int(t)) + ")"
}

// LanguageCode says which client library sent a command (LanguageCode.java).
type LanguageCode byte

// Language codes with RocketMQ's byte values.
const (
	LangJava LanguageCode = iota
	LangCPP
	LangDotNet
	LangPython
	LangDelphi
	LangErlang
	LangRuby
	LangOther
	LangHTTP
	LangGo
	LangPHP
	LangOMS
	LangRust
)

var languageNames = [...]string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"}

// String returns the enum name used in JSON headers.
func (l LanguageCode) String() string {
	if int(l) < len(languageNames) {
		return languageNames[l]
	}
	return "OTHER"
}

// ParseLanguage maps a JSON language name to its code; unknown names become LangOther.
func ParseLanguage(s string) LanguageCode {
	for i, n := range languageNames {
		if n == s {
			return LanguageCode(i)
		}
	}
	return LangOther
}

// Flag bits of a command.
const (
	flagResponse int32 = 1 << 0 // RPC_TYPE bit: the command is a response
	flagOneway   int32 = 1 << 1 // RPC_ONEWAY bit: the sender wants no response
)

// ServerVersion is the protocol version our servers and clients put in every
// command: RocketMQ 4.9.8's ordinal (MQVersion V4_9_8). It makes a nameserver
// send standard JSON route bodies and RegisterBrokerBody registrations.
const ServerVersion int32 = 409

// Command is one remoting frame: a request or a response.
type Command struct {
	Code      int32
	Language  LanguageCode
	Version   int32
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	// RawExt holds header fields in the binary header's layout (see
	// fields.go), for hot paths that build or read them without a map.
	// Encoding writes them after ExtFields, in either serialize type; a key
	// must not be in both. A server fills it instead of ExtFields for the
	// binary-header requests of codes registered with ReadRawFields; like
	// an inline processor's Body it then aliases the input buffer. A client
	// fills it instead of ExtFields in the binary answer to a request that
	// was sent with RawExt (other callers get ExtFields, as before).
	RawExt        []byte
	Body          []byte
	SerializeType SerializeType
}

// NewRequest builds a request with the given header fields (may be nil) and body.
// The opaque is set by the transport that sends it.
func NewRequest(code RequestCode, ext map[string]string, body []byte) *Command {
	return &Command{Code: int32(code), Language: LangGo, Version: ServerVersion, ExtFields: ext, Body: body}
}

// NewResponse builds the response to req: same opaque and serialize type, response bit set.
func NewResponse(req *Command, code ResponseCode, remark string) *Command {
	return &Command{
		Code:          int32(code),
		Language:      LangJava,
		Version:       ServerVersion,
		Opaque:        req.Opaque,
		Flag:          flagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&flagResponse != 0 }

// IsOneway reports whether the sender asked for no response. The official Go
// client never sets this bit, even for its "oneway" calls.
func (c *Command) IsOneway() bool { return c.Flag&flagOneway != 0 }

// MarkResponse sets the response bit.
func (c *Command) MarkResponse() { c.Flag |= flagResponse }

// MarkOneway sets the oneway bit.
func (c *Command) MarkOneway() { c.Flag |= flagOneway }

// RequestCode returns Code as a request code.
func (c *Command) RequestCode() RequestCode { return RequestCode(c.Code) }

// ResponseCode returns Code as a response code.
func (c *Command) ResponseCode() ResponseCode { return ResponseCode(c.Code) }

// SetExt sets one header field, creating the map on first use.
func (c *Command) SetExt(key, value string) {
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, 8)
	}
	c.ExtFields[key] = value
}

// String describes the command for logs (never the body).
func (c *Command) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	}
	return fmt.Sprintf("%s{code=%d opaque=%d flag=%d lang=%s version=%d remark=%q ext=%v bodyLen=%d}",
		kind, c.Code, c.Opaque, c.Flag, c.Language, c.Version, c.Remark, c.FieldMap(), len(c.Body))
}
