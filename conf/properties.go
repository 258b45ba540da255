package conf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errPropertiesEncode: configs are written with Format, never through viper.
var errPropertiesEncode = errors.New("conf: writing properties through viper is not supported")

// propertiesCodec is a viper codec for Java properties files, which viper
// no longer reads itself. Keys are kept flat: a dotted key stays one key.
type propertiesCodec struct{}

func (propertiesCodec) Encode(map[string]any) ([]byte, error) { return nil, errPropertiesEncode }

func (propertiesCodec) Decode(b []byte, v map[string]any) error {
	props, err := ParseProperties(string(b))
	if err != nil {
		return err
	}
	for k, val := range props {
		v[k] = val
	}
	return nil
}

// ParseProperties parses the text of a Java properties file: '#' and '!'
// comment lines, key and value separated by '=', ':' or whitespace, a
// trailing backslash continuing the line, and the escapes \t \n \r \f \uXXXX.
// A later line for the same key wins, as in java.util.Properties.
func ParseProperties(text string) (map[string]string, error) {
	out := make(map[string]string)
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: an odd number of trailing backslashes.
		// The text can come from a client (UPDATE_NAMESRV_CONFIG): joined in a
		// builder, a body of many continued lines costs linear time, not
		// the quadratic time of re-concatenating the joined line.
		if endsWithContinuation(line) {
			var joined strings.Builder
			for endsWithContinuation(line) && i+1 < len(lines) {
				joined.WriteString(line[:len(line)-1])
				i++
				line = strings.TrimLeft(lines[i], " \t\f")
			}
			if endsWithContinuation(line) {
				line = line[:len(line)-1]
			}
			joined.WriteString(line)
			line = joined.String()
		}
		key, value := splitProperty(line)
		k, err := unescapeProperty(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: key: %w", lineNo, err)
		}
		val, err := unescapeProperty(value)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %s: %w", lineNo, k, err)
		}
		out[k] = val
	}
	return out, nil
}

func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits at the first unescaped '=', ':' or whitespace; the
// separator and whitespace around it are dropped.
func splitProperty(line string) (string, string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i >= len(line) {
		return line, ""
	}
	key := line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("short \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// escapePropertyValue escapes what would otherwise change a value's meaning
// when the line is read back.
func escapePropertyValue(s string) string {
	if !strings.ContainsAny(s, "\\\n\r\t\f") && !strings.HasPrefix(s, " ") {
		return s
	}
	var b strings.Builder
	// Bytes, not runes: every special character is ASCII, and ranging over
	// runes would turn invalid UTF-8 into U+FFFD.
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
