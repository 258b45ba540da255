package message

import (
	"bytes"
	"iter"
	"strings"
)

// AppendProperties appends props in RocketMQ's properties encoding:
// name 0x01 value, entries separated by 0x02, no trailing 0x02 (as the Java
// broker writes it). Entries with an empty name or value are skipped because
// no decoder (Java or Go) can read them back. Order follows map iteration.
func AppendProperties(dst []byte, props map[string]string) []byte {
	first := true
	for k, v := range props {
		if k == "" || v == "" {
			continue
		}
		if !first {
			dst = append(dst, PropertySeparator)
		}
		first = false
		dst = append(dst, k...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, v...)
	}
	return dst
}

// MarshalProperties returns props encoded as by AppendProperties.
func MarshalProperties(props map[string]string) []byte {
	return AppendProperties(make([]byte, 0, PropertiesSize(props)), props)
}

// PropertiesSize returns the length AppendProperties would append.
func PropertiesSize(props map[string]string) int {
	n := 0
	for k, v := range props {
		if k == "" || v == "" {
			continue
		}
		if n > 0 {
			n++
		}
		n += len(k) + 1 + len(v)
	}
	return n
}

// UnmarshalProperties decodes a properties string. It never fails and follows
// Java's MessageDecoder.string2messageProperties: entries are split on 0x02,
// the name ends at the first 0x01, and entries with an empty name or value (or
// without 0x01) are ignored. A trailing 0x02, as the Go client writes, is
// accepted. All strings share one allocation.
func UnmarshalProperties(b []byte) map[string]string { return ParseProperties(string(b)) }

// ParseProperties is UnmarshalProperties over a string the map may keep:
// names and values are substrings of s, so building the map allocates only
// the map (a consumer's decoder passes one string for a whole pull, the
// broker a send header's value).
func ParseProperties(s string) map[string]string {
	m := make(map[string]string, strings.Count(s, string(rune(PropertySeparator)))+1)
	for k, v := range PropertyEntries(s) {
		m[k] = v
	}
	return m
}

// PropertyEntries yields the entries of a properties string by the rules of
// UnmarshalProperties (entries without a name or a value are skipped; a
// repeated name yields twice, the last one being what a map keeps). Names
// and values are substrings of s.
func PropertyEntries(s string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for len(s) > 0 {
			item := s
			if end := strings.IndexByte(s, PropertySeparator); end >= 0 {
				item, s = s[:end], s[end+1:]
			} else {
				s = ""
			}
			if kv := strings.IndexByte(item, NameValueSeparator); kv > 0 && kv < len(item)-1 {
				if !yield(item[:kv], item[kv+1:]) {
					return
				}
			}
		}
	}
}

// PropertyValue finds key in an encoded properties string without building a
// map or allocating. It applies the same rules as UnmarshalProperties; when a
// key repeats, the last value wins, as with the map.
func PropertyValue(b []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	for len(b) > 0 {
		end := bytes.IndexByte(b, PropertySeparator)
		item := b
		if end >= 0 {
			item, b = b[:end], b[end+1:]
		} else {
			b = nil
		}
		kv := bytes.IndexByte(item, NameValueSeparator)
		if kv > 0 && kv < len(item)-1 && string(item[:kv]) == key {
			val, found = item[kv+1:], true
		}
	}
	return val, found
}
