package filter

import (
	"errors"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// The conversions RocketMQ applies to a property compared with a number or
// a boolean are Java's Integer.valueOf, Long.valueOf, Double.valueOf and
// Boolean.valueOf. These are those parsers over the raw UTF-8 bytes of a
// property value, without allocating.

// javaParseInt is Integer.parseInt (bits 32) or Long.parseLong (bits 64):
// an optional sign, then at least one decimal digit (any BMP character of
// Unicode category Nd counts, as Character.digit does), nothing else, in
// range.
func javaParseInt(b []byte, bits int) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	i := 0
	switch b[0] {
	case '-':
		neg, i = true, 1
	case '+':
		i = 1
	}
	if i == len(b) {
		return 0, false
	}
	limit := uint64(1)<<(bits-1) - 1 // the largest positive value
	if neg {
		limit++
	}
	var n uint64
	for i < len(b) {
		d, size := int(b[i]-'0'), 1
		if d > 9 { // not an ASCII digit (the byte wrapped below '0' too)
			if d, size = javaDigit(b[i:]); d < 0 {
				return 0, false
			}
		}
		i += size
		if n > (limit-uint64(d))/10 {
			return 0, false // overflow
		}
		n = n*10 + uint64(d)
	}
	if neg {
		return -int64(n), true // n == 1<<63 wraps to MinInt64, as intended
	}
	return int64(n), true
}

// javaDigit returns the value of the decimal digit starting b and its
// length in bytes, or -1. Java reads UTF-16 code units, so a digit outside
// the Basic Multilingual Plane (a surrogate pair) is not one.
func javaDigit(b []byte) (int, int) {
	if c := b[0]; c < utf8.RuneSelf {
		if c >= '0' && c <= '9' {
			return int(c - '0'), 1
		}
		return -1, 1
	}
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError || r > 0xFFFF {
		return -1, size
	}
	for _, rg := range unicode.Nd.R16 {
		if uint16(r) >= rg.Lo && uint16(r) <= rg.Hi {
			// Decimal digits come in runs of ten starting at zero, and the
			// table's ranges start at a zero.
			return int(uint16(r)-rg.Lo) % 10, size
		}
	}
	return -1, size
}

// javaParseBool is Boolean.valueOf(String): "true" in any case.
func javaParseBool(b []byte) bool {
	if len(b) != 4 {
		return false
	}
	for i, c := range b {
		if c|0x20 != "true"[i] {
			return false
		}
	}
	return true
}

// javaParseDouble is Double.valueOf(String) (FloatingDecimal): leading and
// trailing characters up to U+0020 are trimmed; then an optional sign and
// "NaN", "Infinity", a decimal number (digits with at most one point, at
// least one digit, an optional exponent) or a hexadecimal one (0x…p…),
// each number optionally followed by one of fFdD. A value too large is
// infinite, as in Java.
func javaParseDouble(b []byte) (float64, bool) {
	b = javaTrim(b)
	i := 0
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		i = 1
	}
	if i == len(b) {
		return 0, false
	}
	rest := b[i:]
	switch string(rest) {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if b[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	var end int
	if len(rest) > 1 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		end = hexFloatEnd(rest)
	} else {
		end = decFloatEnd(rest)
	}
	switch {
	case end < 0:
		return 0, false
	case end < len(rest):
		if end != len(rest)-1 || !isFloatSuffix(rest[end]) {
			return 0, false
		}
	}
	num := b[:i+end]
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false // not reached: the syntax was checked
	}
	return f, true
}

// decFloatEnd returns the length of a decimal number (digits, at most one
// point, at least one digit, an optional exponent) at the start of s, -1
// if there is none.
func decFloatEnd(s []byte) int {
	j, nd := 0, 0
	for j < len(s) && isDigit(s[j]) {
		j, nd = j+1, nd+1
	}
	if j < len(s) && s[j] == '.' {
		for j++; j < len(s) && isDigit(s[j]); j++ {
			nd++
		}
	}
	if nd == 0 {
		return -1
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		return expEnd(s, j+1)
	}
	return j
}

// hexFloatEnd returns the length of a hexadecimal floating-point number
// (0x, hex digits with at most one point and at least one digit, then a
// binary exponent, which Java requires) at the start of s, -1 if none.
func hexFloatEnd(s []byte) int {
	j, nd := 2, 0
	for j < len(s) && isHex(s[j]) {
		j, nd = j+1, nd+1
	}
	if j < len(s) && s[j] == '.' {
		for j++; j < len(s) && isHex(s[j]); j++ {
			nd++
		}
	}
	if nd == 0 || j >= len(s) || (s[j] != 'p' && s[j] != 'P') {
		return -1
	}
	return expEnd(s, j+1)
}

// expEnd returns the end of an exponent's signed digits starting at s[j],
// -1 if there is no digit.
func expEnd(s []byte, j int) int {
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	k := j
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == k {
		return -1
	}
	return j
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isFloatSuffix(c byte) bool { return c == 'f' || c == 'F' || c == 'd' || c == 'D' }

// javaTrim is String.trim: it drops characters up to U+0020 at both ends.
func javaTrim(b []byte) []byte {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	return b
}
