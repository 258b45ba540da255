package remoting

import (
	"encoding/binary"
	"fmt"
	"iter"
	"strconv"
)

// Header fields without a map.
//
// A command's extFields usually live in Command.ExtFields. The send path,
// which carries a dozen fields per message, builds and reads them in
// Command.RawExt instead: the block as the binary (ROCKETMQ) header lays it
// out, per field a big-endian int16 key length, the key, an int32 value
// length and the value. Building it is appends into one buffer; reading it
// is one pass over the bytes. A map per request and per answer on both
// sides, with its hashing and growth, was a tenth of the broker's CPU under
// async sends.

// AppendField appends one field to a RawExt block.
func AppendField(dst []byte, key, value string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

// AppendIntField appends one field with v in decimal, as Java writes numbers.
func AppendIntField(dst []byte, key string, v int64) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = strconv.AppendInt(dst, v, 10)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// Fields yields the keys and values of a RawExt block. Both alias raw. A
// malformed block (possible only in one a caller built by hand: decoders
// check theirs) ends the sequence where it stops making sense.
func Fields(raw []byte) iter.Seq2[[]byte, []byte] { return fieldSeq(raw) }

// StringFields is Fields over a copy of a block as a string: keys and values
// are substrings of it, so a reader that keeps them pays one allocation for
// the whole header (string(req.RawExt)) instead of one per field.
func StringFields(raw string) iter.Seq2[string, string] { return fieldSeq(raw) }

func fieldSeq[T ~string | ~[]byte](raw T) iter.Seq2[T, T] {
	return func(yield func(T, T) bool) {
		for p := 0; p < len(raw); {
			k, v, next, err := nextField(raw, p)
			if err != nil || !yield(k, v) {
				return
			}
			p = next
		}
	}
}

// nextField reads the field at p of a RawExt block.
func nextField[T ~string | ~[]byte](raw T, p int) (key, value T, next int, err error) {
	var none T
	if len(raw)-p < 2 {
		return none, none, 0, fmt.Errorf("%w: truncated extFields key length", ErrBadHeader)
	}
	kl := int(int16(uint16(raw[p])<<8 | uint16(raw[p+1])))
	p += 2
	if kl < 0 || kl > len(raw)-p-4 {
		return none, none, 0, fmt.Errorf("%w: extFields key length %d", ErrBadHeader, kl)
	}
	key = raw[p : p+kl]
	p += kl
	vl := int(int32(uint32(raw[p])<<24 | uint32(raw[p+1])<<16 | uint32(raw[p+2])<<8 | uint32(raw[p+3])))
	p += 4
	if vl < 0 || vl > len(raw)-p {
		return none, none, 0, fmt.Errorf("%w: extFields value length %d", ErrBadHeader, vl)
	}
	return key, raw[p : p+vl], p + vl, nil
}

// checkFields validates a RawExt block and counts its fields.
func checkFields(raw []byte) (n int, err error) {
	for p := 0; p < len(raw); n++ {
		if _, _, p, err = nextField(raw, p); err != nil {
			return n, err
		}
	}
	return n, nil
}

// FieldMap returns every header field in one map: ExtFields and RawExt
// together (a new map when RawExt has any). For code off the hot path that
// wants a map whatever the request carried.
func (c *Command) FieldMap() map[string]string {
	if len(c.RawExt) == 0 {
		return c.ExtFields
	}
	n, _ := checkFields(c.RawExt)
	m := make(map[string]string, len(c.ExtFields)+n)
	for k, v := range c.ExtFields {
		m[k] = v
	}
	for k, v := range StringFields(string(c.RawExt)) { // one copy for all
		m[k] = v
	}
	return m
}
