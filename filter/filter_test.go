package filter

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

func props(kv ...string) []byte {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return message.MarshalProperties(m)
}

// TestMatch spells out RocketMQ's semantics case by case (the generated
// table in TestRocketMQCases covers the combinations).
func TestMatch(t *testing.T) {
	msg := props("a", "5", "b", "7", "s", "abc", "f", "2.5", "TAGS", "tagA", "big", "3000000000", "t", "TRUE", "neg", "-3")
	tests := []struct {
		expr string
		want bool
	}{
		// Numbers: the property converts to the literal's type.
		{"a = 5", true},
		{"a > 4", true},
		{"a >= 5 AND a <= 5", true},
		{"a < 5", false},
		{"a <> 6", true},
		{"a = 5.0", true},                  // "5" as a double
		{"f = 2.5", true},                  // "2.5" as a double
		{"f > 2", false},                   // "2.5" is not an int: an error, no match
		{"f > 2 OR a = 5", false},          // the error sinks the whole expression
		{"a = 5 OR f > 2", true},           // unless OR decided before reaching it
		{"big > 5", false},                 // 3000000000 is not an int
		{"big < 5000000000", true},         // a literal beyond int is a long
		{"big = 3000000000L", true},        //
		{"a = 5L", true},                   // an L suffix does not make a long
		{"neg = -3", true},                 // unary minus
		{"neg < -2", true},                 //
		{"a > b", false},                   // two properties compare as doubles
		{"b > a", true},                    //
		{"s > 1", false},                   // "abc" is no number: error
		{"5 < b", true},                    // literal on the left
		{"a BETWEEN 1 AND 5", true},        // inclusive
		{"a BETWEEN 6 AND 9", false},       //
		{"a NOT BETWEEN 6 AND 9", true},    //
		{"a BETWEEN -1 AND 5.5", true},     //
		{"missing BETWEEN 1 AND 9", false}, // NULL
		// Strings.
		{"s = 'abc'", true},
		{"s <> 'abd'", true},
		{"a = '5'", true},
		{"s IN ('x', 'abc')", true},
		{"s NOT IN ('x', 'abc')", false},
		{"TAGS IN ('tagA', 'tagB', 'c', 'd', 'e', 'f')", true}, // a set from 5 elements on
		{"s CONTAINS 'b'", true},
		{"s STARTSWITH 'ab'", true},
		{"s ENDSWITH 'bc'", true},
		{"s NOT CONTAINS 'z'", true},
		{"s CONTAINS ''", false}, // empty search: FALSE
		{"s NOT CONTAINS ''", false},
		// Booleans.
		{"t = TRUE", true},  // "TRUE" as a boolean
		{"s = TRUE", false}, // anything but "true" is false
		{"s = FALSE", true},
		{"TRUE", true},
		{"FALSE", false},
		{"NOT FALSE", true},
		{"TRUE = t", false}, // Java casts the wrong operand: an error
		{"t", false},        // a property is a string, never TRUE
		// NULL handling.
		{"missing IS NULL", true},
		{"a IS NULL", false},
		{"a IS NOT NULL", true},
		{"missing = 5", false},              // NULL
		{"NOT (missing = 5)", false},        // NOT NULL is NULL
		{"missing <> 5", false},             // NOT(NULL)
		{"5 <> missing", true},              // 5 = NULL is FALSE, so <> is TRUE
		{"missing IN ('a')", false},         // NULL
		{"missing NOT IN ('a')", false},     // NULL too
		{"missing NOT CONTAINS 'a'", false}, // FALSE
		{"missing > 1 OR a = 5", true},      // NULL OR TRUE
		{"missing > 1 AND a = 5", false},    // NULL AND TRUE
		{"NULL", false},
		{"NOT NULL", false},
		// Precedence.
		{"a = 5 OR a = 6 AND b = 0", true}, // AND binds tighter
		{"(a = 5 OR a = 6) AND b = 0", false},
		{"NOT a = 5", false}, // (NOT a) = 5: FALSE = 5
		{"NOT (a = 5)", false},
		{"NOT (a = 6)", true},
		// Lexical details.
		{"A = 5", false}, // property names are case-sensitive
		{"a = 5 and b = 7", true},
		{"a = 5 -- a comment\n AND b = 7", true},
		{"a /* a comment */ = 5", true},
		{"s = 'ab''c'", false},
		{"a = 5 b = 6", true}, // text after a complete expression is ignored, as in RocketMQ
	}
	for _, tt := range tests {
		x, err := Compile(tt.expr)
		require.NoError(t, err, tt.expr)
		assert.Equal(t, tt.want, x.Match(msg), "%s", tt.expr)
	}
}

// TestCompileErrors lists what RocketMQ refuses at compile time.
func TestCompileErrors(t *testing.T) {
	for _, expr := range []string{
		"",
		"a =",
		"a = 'x",      // unterminated string
		"a > 'x'",     // strings cannot be ordered
		"a > TRUE",    // nor booleans
		"a > NULL",    //
		"(a > 1) > 0", // nor boolean expressions
		"a = NULL",    // use IS NULL
		"NULL = a",    //
		"TRUE = 5",    // a boolean literal compared with a number
		"5 IN ('5')",  // IN needs a property
		"a IN (5)",    // IN lists strings
		"a IN ()",     //
		"a BETWEEN 5 AND 1",
		"a BETWEEN NULL AND 1",
		"a BETWEEN 1",
		"5",         // not a boolean
		"'x'",       //
		"-a",        //
		"a AND 5",   //
		"a > 0.0",   // a float literal must be positive and not below the smallest double
		"a > 1e400", // nor infinite
		"a = 99999999999999999999",
		"a != 5",    // no such operator
		"a NOT 5",   // NOT after an operand must start NOT IN & co
		"a IS 5",    //
		"a /* open", // unterminated comment
		"a = 5 !",   // text after an expression must still lex as far as the parser looks
		"a = é",     //
	} {
		_, err := Compile(expr)
		require.Error(t, err, "%q", expr)
		assert.True(t, errors.Is(err, ErrInvalid), "%q: %v", expr, err)
		var se *SyntaxError
		assert.True(t, errors.As(err, &se), "%q", expr)
	}
}

func TestCompileLimits(t *testing.T) {
	deep := ""
	for range MaxDepth + 1 {
		deep += "("
	}
	_, err := Compile(deep + "a = 1")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "nested")

	long := "a = 1"
	for range MaxNodes {
		long += " OR a = 1"
	}
	_, err = Compile(long)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "too large")
}

func TestPropertiesParsing(t *testing.T) {
	x := MustCompile("a = 'x' AND b = 'y'")
	assert.Equal(t, []string{"a", "b"}, x.Properties())
	assert.Equal(t, "a = 'x' AND b = 'y'", x.String())
	// Raw encodings: a trailing separator (the Go client writes one), an
	// entry without a value or a name (skipped), a repeated name (the
	// last wins).
	assert.True(t, x.Match([]byte("a\x01x\x02b\x01y\x02")))
	assert.True(t, x.Match([]byte("\x01z\x02a\x01\x02a\x01x\x02b\x01y")))
	assert.False(t, x.Match([]byte("a\x01x\x02b\x01y\x02a\x01z")))
	assert.True(t, x.Match([]byte("a\x01z\x02b\x01y\x02a\x01x")))
	assert.False(t, x.Match(nil))
	assert.True(t, x.MatchMap(map[string]string{"a": "x", "b": "y"}))

	// More referenced properties than Match resolves in its one pass.
	expr, last := "", ""
	m := map[string]string{}
	for i := range inlineSlots + 4 {
		if i > 0 {
			expr += " AND "
		}
		last = string(rune('a'+i%26)) + string(rune('a'+i/26))
		expr += last + " = " + "'v'"
		m[last] = "v"
	}
	y := MustCompile(expr)
	assert.True(t, y.MatchMap(m))
	m[last] = "w" // one looked up on use
	assert.False(t, y.MatchMap(m))
}

func TestJavaNumbers(t *testing.T) {
	ints := []struct {
		in   string
		bits int
		want int64
		ok   bool
	}{
		{"5", 32, 5, true}, {"+5", 32, 5, true}, {"-5", 32, -5, true}, {"-", 32, 0, false}, {"", 32, 0, false},
		{" 5", 32, 0, false}, {"5.0", 32, 0, false}, {"2147483647", 32, 2147483647, true},
		{"2147483648", 32, 0, false}, {"-2147483648", 32, -2147483648, true}, {"-2147483649", 32, 0, false},
		{"2147483648", 64, 2147483648, true}, {"9223372036854775807", 64, 9223372036854775807, true},
		{"9223372036854775808", 64, 0, false}, {"-9223372036854775808", 64, -9223372036854775808, true},
		{"\u0663\u0664", 32, 34, true}, // Arabic-Indic digits, as Character.digit reads them
		{"\U0001D7CF", 32, 0, false},   // a digit outside the BMP is a surrogate pair to Java
	}
	for _, tt := range ints {
		got, ok := javaParseInt([]byte(tt.in), tt.bits)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		if ok {
			assert.Equal(t, tt.want, got, "%q", tt.in)
		}
	}
	doubles := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"5", 5, true}, {" 5 ", 5, true}, {"\t5\n", 5, true}, {"5.", 5, true}, {".5", 0.5, true}, {"1e3", 1000, true},
		{"1.5f", 1.5, true}, {"1.5D", 1.5, true}, {"0x1p3", 8, true}, {"0x1.8p1", 3, true}, {"-0x1p-2d", -0.25, true},
		{"1e309", 0, true}, // infinite, checked below
		{"inf", 0, false}, {"nan", 0, false}, {"1_0", 0, false}, {"0x10", 0, false}, {"1e", 0, false},
		{".", 0, false}, {"e1", 0, false}, {"1ff", 0, false}, {"", 0, false}, {"+", 0, false},
	}
	for _, tt := range doubles {
		got, ok := javaParseDouble([]byte(tt.in))
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		if ok && tt.in != "1e309" {
			assert.Equal(t, tt.want, got, "%q", tt.in)
		}
	}
	inf, ok := javaParseDouble([]byte("-1e309"))
	assert.True(t, ok)
	assert.Equal(t, -1, compareDouble(inf, -1e308))
	nan, ok := javaParseDouble([]byte("-NaN"))
	assert.True(t, ok)
	assert.Equal(t, 0, compareDouble(nan, nan))
	assert.Equal(t, 1, compareDouble(nan, inf*-1))
	assert.Equal(t, -1, compareDouble(math.Copysign(0, -1), 0))
	assert.True(t, javaParseBool([]byte("tRuE")))
	assert.False(t, javaParseBool([]byte("yes")))
}

// TestMatchDoesNotAllocate guards the broker's per-message path.
func TestMatchDoesNotAllocate(t *testing.T) {
	x := MustCompile("(a > 3 AND f = 2.5 OR s IN ('q','w','e','r','t','y')) AND TAGS <> 'x' AND s IS NOT NULL")
	msg := props("a", "5", "f", "2.5", "s", "abc", "TAGS", "tagA")
	allocs := testing.AllocsPerRun(100, func() { x.Match(msg) })
	assert.Zero(t, allocs)
}
