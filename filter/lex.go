package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tLParen
	tRParen
	tComma
	tEq
	tNe
	tGt
	tGe
	tLt
	tLe
	tPlus
	tMinus
	tString  // 'text', value unquoted
	tDecimal // 0 | [1-9][0-9]*[lL]?
	tFloat   // 1.5, .5, 5., 1e3, …
	tID      // property name
	// Keywords (case-insensitive).
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith
)

var keywords = map[string]tokKind{
	"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "IN": tIn, "TRUE": tTrue, "FALSE": tFalse,
	"NULL": tNull, "IS": tIs, "CONTAINS": tContains, "STARTSWITH": tStartsWith, "ENDSWITH": tEndsWith,
}

var tokNames = [...]string{
	tEOF: "end of expression", tLParen: `"("`, tRParen: `")"`, tComma: `","`, tEq: `"="`, tNe: `"<>"`,
	tGt: `">"`, tGe: `">="`, tLt: `"<"`, tLe: `"<="`, tPlus: `"+"`, tMinus: `"-"`, tString: "a string",
	tDecimal: "a number", tFloat: "a number", tID: "a property name", tNot: "NOT", tAnd: "AND", tOr: "OR",
	tBetween: "BETWEEN", tIn: "IN", tTrue: "TRUE", tFalse: "FALSE", tNull: "NULL", tIs: "IS",
	tContains: "CONTAINS", tStartsWith: "STARTSWITH", tEndsWith: "ENDSWITH",
}

func (k tokKind) String() string { return tokNames[k] }

// singleCharTokens are the tokens that are one character whatever follows
// (tEOF: none starts with that byte).
var singleCharTokens = [256]tokKind{
	'(': tLParen, ')': tRParen, ',': tComma, '=': tEq, '+': tPlus, '-': tMinus,
}

// token is one lexical token of an expression.
type token struct {
	kind tokKind
	pos  int    // byte offset in the source
	text string // source text; for tString the unquoted value
}

// lexer produces the tokens of an expression on demand, the way
// RocketMQ's JavaCC token manager does: whitespace and comments are
// skipped, the longest match wins, and a keyword wins over a property name
// of the same length. On demand matters: the parser stops at the end of a
// complete expression and never lexes what follows its lookahead, so text
// there is ignored even when it would not lex (as in RocketMQ).
type lexer struct {
	src string
	i   int
}

// next returns the next token (tEOF at the end, again and again).
func (l *lexer) next() (token, error) {
	src := l.src
	i := skipBlank(src, l.i)
	if i < 0 {
		return token{}, &SyntaxError{Pos: -i - 1, Msg: "unterminated comment"}
	}
	if i >= len(src) {
		l.i = i
		return token{kind: tEOF, pos: i}, nil
	}
	c := src[i]
	start := i
	var k tokKind
	switch {
	case singleCharTokens[c] != tEOF:
		k, i = singleCharTokens[c], i+1
	case c == '>':
		k, i = tGt, i+1
		if i < len(src) && src[i] == '=' {
			k, i = tGe, i+1
		}
	case c == '<':
		k, i = tLt, i+1
		if i < len(src) && src[i] == '=' {
			k, i = tLe, i+1
		} else if i < len(src) && src[i] == '>' {
			k, i = tNe, i+1
		}
	case c == '\'':
		val, end, ok := lexString(src, i)
		if !ok {
			return token{}, &SyntaxError{Pos: i, Msg: "unterminated string literal"}
		}
		l.i = end
		return token{kind: tString, pos: i, text: val}, nil
	case isDigit(c) || c == '.':
		n, kind := lexNumber(src[i:])
		if n == 0 {
			return token{}, &SyntaxError{Pos: i, Msg: fmt.Sprintf("unexpected character %q", c)}
		}
		k, i = kind, i+n
	case isIDStart(c):
		for i++; i < len(src) && isIDPart(src[i]); i++ {
		}
		k = tID
		if kw, ok := keywords[strings.ToUpper(src[start:i])]; ok {
			k = kw
		}
	default:
		r, _ := utf8.DecodeRuneInString(src[i:])
		return token{}, &SyntaxError{Pos: i, Msg: fmt.Sprintf("unexpected character %q", r)}
	}
	l.i = i
	return token{kind: k, pos: start, text: src[start:i]}, nil
}

// skipBlank skips whitespace and comments from i. A line comment needs its
// line end (without one "--" is two minus signs, as in RocketMQ's lexer).
// An unterminated block comment returns -(its position)-1.
func skipBlank(src string, i int) int {
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			end := strings.IndexAny(src[i:], "\r\n")
			if end < 0 {
				return i // not a comment: lexed as "-"
			}
			i += end + 1
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return -i - 1
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

// lexString reads the string literal starting at src[i] == '\”; a quote
// inside is written twice. As JavaCC takes the longest match that closes,
// a literal running to the end of the text closes at the last quote that
// could have closed it (the first of a doubled pair).
func lexString(src string, i int) (val string, end int, ok bool) {
	var b strings.Builder
	lastClose, lastLen := -1, 0 // the last quote that could close, and len(b) there
	for j := i + 1; j < len(src); j++ {
		if src[j] != '\'' {
			b.WriteByte(src[j])
			continue
		}
		if j+1 < len(src) && src[j+1] == '\'' {
			lastClose, lastLen = j, b.Len()
			b.WriteByte('\'')
			j++
			continue
		}
		return b.String(), j + 1, true
	}
	if lastClose >= 0 {
		return b.String()[:lastLen], lastClose + 1, true
	}
	return "", 0, false
}

// lexNumber returns the length and kind of the longest number token at the
// start of s (0 if none): a decimal ("0" | [1-9][0-9]*[lL]?) or a float
// (digits "." digits? exp? | "." digits exp? | digits exp). On a tie the
// decimal wins, as it is declared first in RocketMQ's grammar.
func lexNumber(s string) (int, tokKind) {
	dec := 0
	switch {
	case s[0] == '0':
		dec = 1
	case s[0] >= '1' && s[0] <= '9':
		dec = digits(s)
		if dec < len(s) && (s[dec] == 'l' || s[dec] == 'L') {
			dec++
		}
	}
	flt := 0
	if n := digits(s); n > 0 {
		if n < len(s) && s[n] == '.' {
			m := n + 1 + digits(s[n+1:])
			flt = m + exponent(s[m:])
		} else if e := exponent(s[n:]); e > 0 {
			flt = n + e
		}
	} else if s[0] == '.' {
		if n := digits(s[1:]); n > 0 {
			flt = 1 + n + exponent(s[1+n:])
		}
	}
	if flt > dec {
		return flt, tFloat
	}
	return dec, tDecimal
}

// digits returns the length of the run of ASCII digits at the start of s.
func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// exponent returns the length of an exponent ([eE][+-]?[0-9]+) at the
// start of s, 0 if there is none.
func exponent(s string) int {
	if len(s) < 2 || (s[0] != 'e' && s[0] != 'E') {
		return 0
	}
	n := 1
	if s[n] == '+' || s[n] == '-' {
		n++
	}
	d := digits(s[n:])
	if d == 0 {
		return 0
	}
	return n + d
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIDStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIDPart(c byte) bool { return isIDStart(c) || isDigit(c) }
