package remoting

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSONHeaderFast decodes the JSON header shapes real clients send (an
// object of numbers, strings and one flat string map) without reflection. It
// reports ok=false for anything else (nested values it does not expect,
// non-string extFields values, numbers out of range, malformed text), and the
// caller then falls back to encoding/json, which has the final word on
// validity. The fuzz test checks both paths agree.
func parseJSONHeaderFast(b []byte) (cmd *Command, ok bool) {
	// One copy of the whole header: every escape-free key and value is a
	// substring of it, so a request costs one string allocation instead of
	// one per field (a SEND_MESSAGE carries about 14).
	p := jsonScanner{b: b, s: string(b)}
	cmd = &Command{Language: LangOther}
	if !p.consume('{') {
		return nil, false
	}
	if p.consume('}') {
		return cmd, p.atEnd()
	}
	for {
		key, ok := p.str()
		if !ok || !p.consume(':') {
			return nil, false
		}
		switch key {
		case "code", "version", "opaque", "flag":
			n, ok := p.int32()
			if !ok {
				return nil, false
			}
			switch key {
			case "code":
				cmd.Code = n
			case "version":
				cmd.Version = n
			case "opaque":
				cmd.Opaque = n
			default:
				cmd.Flag = n
			}
		case "language":
			if p.peek() == '"' {
				s, ok := p.str()
				if !ok {
					return nil, false
				}
				cmd.Language = ParseLanguage(s)
			} else {
				n, ok := p.int32()
				if !ok {
					return nil, false
				}
				if n >= 0 && int(n) < len(languageNames) {
					cmd.Language = LanguageCode(n)
				}
			}
		case "remark":
			if p.null() {
				cmd.Remark = ""
				break
			}
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			cmd.Remark = s
		case "extFields":
			if p.null() {
				break
			}
			m, ok := p.stringMap()
			if !ok {
				return nil, false
			}
			cmd.ExtFields = m
		case "serializeTypeCurrentRPC":
			if !p.null() {
				if _, ok := p.str(); !ok {
					return nil, false
				}
			}
		default:
			return nil, false // unknown key: let encoding/json judge it
		}
		if p.consume(',') {
			continue
		}
		if p.consume('}') {
			return cmd, p.atEnd()
		}
		return nil, false
	}
}

type jsonScanner struct {
	b []byte
	s string // the same bytes as b, copied once; results are substrings of it
	i int
}

func (p *jsonScanner) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScanner) peek() byte {
	p.skipSpace()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *jsonScanner) consume(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonScanner) atEnd() bool {
	p.skipSpace()
	return p.i == len(p.b)
}

func (p *jsonScanner) null() bool {
	p.skipSpace()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

func (p *jsonScanner) int32() (int32, bool) {
	p.skipSpace()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	// JSON forbids leading zeros; fractions and exponents go to the slow path.
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 32)
	return int32(n), err == nil
}

// str reads a JSON string. Without escapes the result is a substring of p.s,
// which shares no memory with the frame buffer, so that can be reused.
func (p *jsonScanner) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false // encoding/json substitutes U+FFFD; leave that to it
			}
			return p.s[start : p.i-1], true
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *jsonScanner) strEscaped(start int) (string, bool) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A surrogate must be followed by its pair; a lone one is left to
				// encoding/json, which replaces it.
				if len(p.b)-p.i < 6 || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return "", false
				}
				p.i += 2
				r2, ok := p.hex4()
				if !ok {
					return "", false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", false
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *jsonScanner) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

func (p *jsonScanner) stringMap() (map[string]string, bool) {
	if !p.consume('{') {
		return nil, false
	}
	if p.consume('}') {
		return map[string]string{}, true
	}
	// The pairs are gathered first so the map is made at its final size: a
	// response's half dozen fields fit one map group, a send's dozen need no
	// growing.
	var stack [32]string // 16 pairs: a send header has 13
	kv := stack[:0]
	for {
		k, ok := p.str()
		if !ok || !p.consume(':') {
			return nil, false
		}
		if p.null() {
			return nil, false // the slow path drops nulls; keep one source of truth
		}
		v, ok := p.str()
		if !ok {
			return nil, false
		}
		kv = append(kv, k, v)
		if p.consume(',') {
			continue
		}
		if !p.consume('}') {
			return nil, false
		}
		m := make(map[string]string, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			if _, dup := m[kv[i]]; dup {
				return nil, false // encoding/json keeps the last; let it decide
			}
			m[kv[i]] = kv[i+1]
		}
		return m, true
	}
}
