package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxFrameSize is the largest frame accepted, length prefix included, as Java's
// NettyDecoder (com.rocketmq.remoting.frameMaxLength, 16 MiB): the length field
// itself may say at most MaxFrameSize-4.
const MaxFrameSize = 16 << 20

// rocketMQFixedHeaderLen is the fixed part of a binary header: code 2, language 1,
// version 2, opaque 4, flag 4, remark length 4, extFields length 4.
const rocketMQFixedHeaderLen = 21

// Errors from the codec. A connection that produced one of these is closed:
// after a bad frame its byte stream cannot be trusted to be in sync.
var (
	// ErrFrameTooLarge means a length field over MaxFrameSize.
	ErrFrameTooLarge = errors.New("remoting: frame larger than 16 MiB")
	// ErrFrameTooShort means a length field too small to hold the header word.
	ErrFrameTooShort = errors.New("remoting: frame shorter than its header word")
	// ErrBadHeaderLength means a header length beyond the frame's end.
	ErrBadHeaderLength = errors.New("remoting: header length beyond the frame")
	// ErrUnknownSerializeType means a header word naming neither JSON nor ROCKETMQ.
	ErrUnknownSerializeType = errors.New("remoting: unknown serialize type")
	// ErrBadHeader means a header that does not parse in its serialize type.
	ErrBadHeader = errors.New("remoting: malformed header")
)

// FrameLength checks the 4-byte length prefix of a frame and returns the number of
// bytes that follow it. It never trusts a length before checking its bounds, so a
// lying peer cannot make us allocate.
func FrameLength(prefix []byte) (int, error) {
	n := int(int32(binary.BigEndian.Uint32(prefix)))
	switch {
	case n > MaxFrameSize-4:
		return 0, fmt.Errorf("%w: length %d", ErrFrameTooLarge, n)
	case n < 4:
		return 0, fmt.Errorf("%w: length %d", ErrFrameTooShort, n)
	}
	return n, nil
}

// DecodeFrame decodes the bytes after the length prefix: header word, header,
// body. The body is copied, so frame may be reused after the call.
func DecodeFrame(frame []byte) (*Command, error) {
	return decodeFrame(frame, true, nil)
}

// decodeFrame is DecodeFrame; without copyBody the body aliases frame, for
// callers that allocated frame for this command alone (ReadCommand): a pull
// response carries up to 256 KiB of records, copied once less. Commands
// keepRaw accepts keep their binary header's fields in RawExt, which aliases
// frame like the body unless copyBody (decodeRocketMQHeader).
func decodeFrame(frame []byte, copyBody bool, keepRaw func(*Command) bool) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooShort, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	st := SerializeType(word >> 24)
	hlen := int(word & 0xFFFFFF)
	if hlen > len(frame)-4 {
		return nil, fmt.Errorf("%w: header %d bytes, frame %d", ErrBadHeaderLength, hlen, len(frame))
	}
	header := frame[4 : 4+hlen]
	var (
		cmd *Command
		err error
	)
	switch st {
	case JSONSerialize:
		cmd, err = decodeJSONHeader(header)
	case RocketMQSerialize:
		cmd, err = decodeRocketMQHeader(header, keepRaw)
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownSerializeType, st)
	}
	if err != nil {
		return nil, err
	}
	cmd.SerializeType = st
	if body := frame[4+hlen:]; len(body) > 0 {
		if copyBody {
			body = bytes.Clone(body)
		}
		cmd.Body = body
	}
	if copyBody && cmd.RawExt != nil {
		cmd.RawExt = bytes.Clone(cmd.RawExt)
	}
	return cmd, nil
}

// ReadCommand reads one frame from r. It allocates only after the length field
// has passed its bounds check. From a bufio.Reader, a small frame is decoded
// in place: only the body is copied out, so a frame without one (a send's
// answer) costs no frame buffer. A large one (a pull's records) is read into
// a buffer of its own, which becomes the body: making room for it in the
// reader's buffer would move what is buffered first.
func ReadCommand(r io.Reader) (*Command, error) { return readCommand(r, nil) }

// readCommand is ReadCommand, keeping the binary header fields of the
// commands keepRaw accepts in RawExt.
func readCommand(r io.Reader, keepRaw func(*Command) bool) (*Command, error) {
	var prefix [4]byte
	if br, ok := r.(*bufio.Reader); ok {
		p, err := br.Peek(4)
		if err != nil {
			return nil, readErr(err, len(p))
		}
		n, err := FrameLength(p)
		if err != nil {
			return nil, err
		}
		if 4+n <= min(br.Size(), maxInPlaceFrame) {
			frame, err := br.Peek(4 + n)
			if err != nil {
				return nil, readErr(err, len(frame))
			}
			cmd, err := decodeFrame(frame[4:], true, keepRaw)
			_, _ = br.Discard(4 + n)
			return cmd, err
		}
	}
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n, err := FrameLength(prefix[:])
	if err != nil {
		return nil, err
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	return decodeFrame(frame, false, keepRaw)
}

// maxInPlaceFrame bounds the frames ReadCommand decodes in a
// bufio.Reader's buffer.
const maxInPlaceFrame = 8 << 10

// readErr is what io.ReadFull would report after reading got bytes of a
// frame: io.EOF only before the first byte, io.ErrUnexpectedEOF after.
func readErr(err error, got int) error {
	if errors.Is(err, io.EOF) && got > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame appends the whole frame of c (length prefix included) to dst.
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	return AppendFrameWith(dst, c, len(c.Body), func(b []byte) []byte { return append(b, c.Body...) })
}

// AppendFrameWith is AppendFrame with the body written by appendBody, which
// must append exactly bodyLen bytes (c.Body is ignored). A pull response uses
// it to copy records from the mapped commitlog straight into the frame.
func AppendFrameWith(dst []byte, c *Command, bodyLen int, appendBody func([]byte) []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // length and header word, patched below
	switch c.SerializeType {
	case JSONSerialize:
		dst = appendJSONHeader(dst, c)
	case RocketMQSerialize:
		var err error
		if dst, err = appendRocketMQHeader(dst, c); err != nil {
			return dst[:start], err
		}
	default:
		return dst[:start], fmt.Errorf("%w: %d", ErrUnknownSerializeType, c.SerializeType)
	}
	hlen := len(dst) - start - 8
	if hlen > 0xFFFFFF {
		return dst[:start], fmt.Errorf("%w: header of %d bytes", ErrFrameTooLarge, hlen)
	}
	if bodyLen < 0 {
		return dst[:start], fmt.Errorf("remoting: body of %d bytes", bodyLen)
	}
	total := 4 + hlen + bodyLen
	if total > MaxFrameSize-4 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	// One growth at most for the whole body, rather than one per record
	// the writer appends.
	dst = slices.Grow(dst, bodyLen)
	before := len(dst)
	dst = appendBody(dst)
	if len(dst)-before != bodyLen {
		return dst[:start], fmt.Errorf("remoting: body writer appended %d bytes, promised %d", len(dst)-before, bodyLen)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(hlen))
	return dst, nil
}

// EncodeFrame returns the whole frame of c in a new buffer.
func EncodeFrame(c *Command) ([]byte, error) {
	return AppendFrame(make([]byte, 0, 160+len(c.Body)+32*len(c.ExtFields)+len(c.RawExt)), c)
}

// jsonHeader mirrors RemotingCommand's bean properties. Language is raw because
// Java and Go write the enum name but some clients write its number.
type jsonHeader struct {
	Code      int32             `json:"code"`
	Language  json.RawMessage   `json:"language"`
	Version   int32             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
}

// looseHeader is the fallback for headers whose extFields carry non-string
// values (fastjson is lenient about them, so we are too).
type looseHeader struct {
	ExtFields map[string]any `json:"extFields"`
}

func decodeJSONHeader(b []byte) (*Command, error) {
	if cmd, ok := parseJSONHeaderFast(b); ok {
		return cmd, nil
	}
	return decodeJSONHeaderStd(b)
}

// decodeJSONHeaderStd is the reference decoder: encoding/json, lenient about
// extFields value types.
func decodeJSONHeaderStd(b []byte) (*Command, error) {
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) || typeErr.Field == "" || !strings.HasPrefix(typeErr.Field, "extFields") {
			return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
		}
		h.ExtFields = nil
		var loose looseHeader
		if err := json.Unmarshal(b, &loose); err != nil {
			return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
		}
		h.ExtFields = make(map[string]string, len(loose.ExtFields))
		for k, v := range loose.ExtFields {
			switch v := v.(type) {
			case string:
				h.ExtFields[k] = v
			case nil:
			default:
				raw, _ := json.Marshal(v)
				h.ExtFields[k] = string(raw)
			}
		}
	}
	cmd := &Command{
		Code: h.Code, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag,
		Remark: h.Remark, ExtFields: h.ExtFields, Language: LangOther,
	}
	if len(h.Language) > 0 {
		if h.Language[0] == '"' {
			var s string
			if err := json.Unmarshal(h.Language, &s); err == nil {
				cmd.Language = ParseLanguage(s)
			}
		} else if n, err := strconv.Atoi(string(h.Language)); err == nil && n >= 0 && n < len(languageNames) {
			cmd.Language = LanguageCode(n)
		}
	}
	return cmd, nil
}

// appendJSONHeader writes the header as compact JSON. remark and extFields are
// always present (the official Go client writes them the same way).
func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":"`...)
	dst = append(dst, c.Language.String()...)
	dst = append(dst, `","version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = AppendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	first := true
	for k, v := range c.ExtFields {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = AppendJSONString(dst, v)
	}
	for k, v := range Fields(c.RawExt) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		// Views of the bytes for the escaper, which keeps nothing.
		dst = AppendJSONString(dst, unsafe.String(unsafe.SliceData(k), len(k)))
		dst = append(dst, ':')
		dst = AppendJSONString(dst, unsafe.String(unsafe.SliceData(v), len(v)))
	}
	dst = append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string. Control characters (message
// properties use \x01 and \x02) become \u00XX escapes; invalid UTF-8 becomes
// U+FFFD as encoding/json does.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeRocketMQHeader decodes a binary header. A command keepRaw accepts
// (it sees all but the fields) keeps its extFields as a RawExt block
// aliasing b (checked here, so readers can trust it) instead of a map.
func decodeRocketMQHeader(b []byte, keepRaw func(*Command) bool) (*Command, error) {
	if len(b) < rocketMQFixedHeaderLen {
		return nil, fmt.Errorf("%w: binary header of %d bytes", ErrBadHeader, len(b))
	}
	cmd := &Command{
		Code:     int32(int16(binary.BigEndian.Uint16(b[0:]))),
		Language: LanguageCode(b[2]),
		Version:  int32(int16(binary.BigEndian.Uint16(b[3:]))),
		Opaque:   int32(binary.BigEndian.Uint32(b[5:])),
		Flag:     int32(binary.BigEndian.Uint32(b[9:])),
	}
	p := 13
	remarkLen := int(int32(binary.BigEndian.Uint32(b[p:])))
	p += 4
	if remarkLen < 0 || remarkLen > len(b)-p-4 {
		return nil, fmt.Errorf("%w: remark length %d", ErrBadHeader, remarkLen)
	}
	cmd.Remark = string(b[p : p+remarkLen])
	p += remarkLen
	extLen := int(int32(binary.BigEndian.Uint32(b[p:])))
	p += 4
	if extLen < 0 || extLen != len(b)-p {
		return nil, fmt.Errorf("%w: extFields length %d, %d bytes left", ErrBadHeader, extLen, len(b)-p)
	}
	raw := b[p:]
	n, err := checkFields(raw)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return cmd, nil
	}
	if keepRaw != nil && keepRaw(cmd) {
		cmd.RawExt = raw
		return cmd, nil
	}
	// One copy of the fields: keys and values are substrings of it, one
	// allocation per request instead of two per field.
	cmd.ExtFields = make(map[string]string, n)
	for k, v := range StringFields(string(raw)) {
		cmd.ExtFields[k] = v
	}
	return cmd, nil
}

func appendRocketMQHeader(dst []byte, c *Command) ([]byte, error) {
	if c.Code > 0x7FFF || c.Code < -0x8000 || c.Version > 0x7FFF || c.Version < -0x8000 {
		return dst, fmt.Errorf("%w: code %d or version %d does not fit the binary header's int16", ErrBadHeader, c.Code, c.Version)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Code)))
	dst = append(dst, byte(c.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Version)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range c.ExtFields {
		if len(k) > 0x7FFF {
			return dst, fmt.Errorf("%w: extFields key of %d bytes", ErrBadHeader, len(k))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	dst = append(dst, c.RawExt...)
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst, nil
}
