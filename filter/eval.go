package filter

import (
	"bytes"
	"cmp"
	"math"
	"strconv"

	"github.com/gorocketmq/gorocketmq/message"
)

// kind is the Java type a value stands for.
type kind uint8

const (
	kNull   kind = iota
	kBool        // java.lang.Boolean
	kInt         // java.lang.Integer
	kLong        // java.lang.Long
	kDouble      // java.lang.Double
	kString      // java.lang.String: a property value or a string literal
	kErr         // an exception in RocketMQ: the message does not match
)

// value is an operand or result. Strings alias the expression or the
// message's properties; values live on the stack during Match.
type value struct {
	k kind
	b bool
	i int64 // kInt, kLong
	f float64
	s []byte
}

var (
	nullValue = value{k: kNull}
	errValue  = value{k: kErr}
)

// intBits is the width of a kInt or kLong: a string compared with one is
// parsed as an Integer or a Long.
func (k kind) intBits() int {
	if k == kInt {
		return 32
	}
	return 64
}

func boolValue(b bool) value { return value{k: kBool, b: b} }

func (v value) isNumber() bool { return v.k == kInt || v.k == kLong || v.k == kDouble }

// String renders a literal for error messages.
func (v value) String() string {
	switch v.k {
	case kNull:
		return "NULL"
	case kBool:
		if v.b {
			return "TRUE"
		}
		return "FALSE"
	case kInt, kLong:
		return strconv.FormatInt(v.i, 10)
	case kDouble:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case kString:
		return "'" + string(bytes.ReplaceAll(v.s, []byte("'"), []byte("''"))) + "'"
	}
	return "an error"
}

// inlineSlots is how many referenced properties Match remembers once
// looked up; further ones (rare) are looked up at each use.
const inlineSlots = 4

// env is what Match knows of one message. It lives on Match's stack.
type env struct {
	props    []byte
	resolved uint8 // slots looked up (bits)
	found    uint8 // slots the message has (bits)
	vals     [inlineSlots][]byte
}

// Match reports whether a message whose encoded properties are props
// (name 0x01 value, entries separated by 0x02, as in a commitlog record)
// satisfies the expression. It does not allocate.
func (x *Expression) Match(props []byte) bool {
	var en env
	en.props = props
	v := x.eval(x.root, &en)
	return v.k == kBool && v.b
}

// MatchMap is Match for properties held in a map (a decoded message). It
// encodes them first, so it allocates.
func (x *Expression) MatchMap(props map[string]string) bool {
	return x.Match(message.MarshalProperties(props))
}

// prop returns the value of the property in slot, and whether the message
// has it. A property is looked up when first used, so AND and OR that
// decide early never look at the rest.
func (x *Expression) prop(slot int32, en *env) ([]byte, bool) {
	if slot >= inlineSlots {
		return lookup(en.props, &x.needles[slot])
	}
	bit := uint8(1) << slot
	if en.resolved&bit == 0 {
		en.resolved |= bit
		if v, ok := lookup(en.props, &x.needles[slot]); ok {
			en.vals[slot] = v
			en.found |= bit
		}
	}
	return en.vals[slot], en.found&bit != 0
}

// needle is how the entries of one property start in encoded properties:
// its name and 0x01. rare is the index of the byte searched for first:
// the byte of the name least likely to occur in properties, so a search
// stops at few places that are not the entry.
type needle struct {
	b    []byte
	rare int
}

func newNeedle(name string) needle {
	n := needle{b: append([]byte(name), message.NameValueSeparator)}
	for i := 1; i < len(name); i++ {
		if byteRank(name[i]) < byteRank(name[n.rare]) {
			n.rare = i
		}
	}
	return n
}

// byteRank estimates how common a byte is in properties: ids and offsets
// are upper-case hex, RocketMQ's own names upper-case words, values often
// lower-case words. Lower is rarer. It only steers the search.
func byteRank(c byte) int {
	switch {
	case c >= '0' && c <= '9', c >= 'A' && c <= 'F':
		return 9
	case bytes.IndexByte([]byte("etaoinsrhldcu"), c) >= 0:
		return 8
	case bytes.IndexByte([]byte("ETRSIKYULNOPM_"), c) >= 0:
		return 7
	case c == 'G' || c == 'Q' || c == 'W':
		return 6
	case c >= 'a' && c <= 'z':
		return 3
	case c >= 'A' && c <= 'Z':
		return 2
	}
	return 1
}

// lookup returns the value of the entry of encoded properties b that
// starts with the needle, by the rules of message.PropertyValue: an entry
// without a value is skipped and a repeated name keeps its last value. A
// match must start an entry: a value may hold 0x01 but never 0x02, and
// names have neither.
func lookup(b []byte, n *needle) ([]byte, bool) {
	var val []byte
	found := false
	c := n.b[n.rare]
	for i := n.rare; i < len(b); {
		j := bytes.IndexByte(b[i:], c)
		if j < 0 {
			break
		}
		p := i + j - n.rare // where the entry would start
		i += j + 1
		if p+len(n.b) > len(b) || string(b[p:p+len(n.b)]) != string(n.b) || p > 0 && b[p-1] != message.PropertySeparator {
			continue
		}
		v := b[p+len(n.b):]
		if end := bytes.IndexByte(v, message.PropertySeparator); end >= 0 {
			v = v[:end]
		}
		if len(v) > 0 {
			val, found = v, true
		}
		i = max(i, p+len(n.b)+len(v)+1+n.rare) // the next entry's earliest match
	}
	return val, found
}

// eval evaluates node i as RocketMQ's expression classes do. An error
// (kErr) propagates up through every operator, as an exception would.
func (x *Expression) eval(i int32, en *env) value {
	n := &x.nodes[i]
	switch n.op {
	case opConst:
		return n.val
	case opProp:
		if v, ok := x.prop(n.slot, en); ok {
			return value{k: kString, s: v}
		}
		return nullValue
	case opNeg:
		return negate(x.eval(n.a, en))
	case opNot:
		v := x.eval(n.a, en)
		if v.k == kBool {
			v.b = !v.b
		}
		return v
	case opCast:
		v := x.eval(n.a, en)
		if v.k == kNull || v.k == kErr || v.k == kBool {
			return v
		}
		return boolValue(false)
	case opAnd:
		l := x.eval(n.a, en)
		if l.k == kErr || l.k == kBool && !l.b {
			return l
		}
		r := x.eval(n.b, en)
		if r.k == kErr || r.k == kBool && !r.b {
			return r
		}
		if l.k == kNull || r.k == kNull {
			return nullValue
		}
		return boolValue(true)
	case opOr:
		l := x.eval(n.a, en)
		if l.k == kErr || l.k == kBool && l.b {
			return l
		}
		r := x.eval(n.b, en)
		if r.k == kErr || r.k == kBool && r.b {
			return r
		}
		if l.k == kNull || r.k == kNull {
			return nullValue
		}
		return boolValue(false)
	case opEq:
		l := x.eval(n.a, en)
		if l.k == kErr {
			return l
		}
		r := x.eval(n.b, en)
		if r.k == kErr {
			return r
		}
		return equal(&l, &r)
	case opLt, opLe, opGt, opGe:
		return x.ordered(n, en)
	case opPropEqStr:
		v, ok := x.prop(n.slot, en)
		if !ok {
			// NULL = 'lit' is NULL, 'lit' = NULL is FALSE (equal).
			if n.constLeft {
				return boolValue(false)
			}
			return nullValue
		}
		return boolValue(bytes.Equal(v, n.lit))
	case opPropCmpNum:
		v, ok := x.prop(n.slot, en)
		if !ok {
			return nullValue
		}
		pv := value{k: kString, s: v}
		var c int
		if n.constLeft {
			c, ok = compare(&n.val, &pv)
		} else {
			c, ok = compare(&pv, &n.val)
		}
		if !ok {
			return errValue
		}
		return boolValue(cmpHolds(n.cmp, c))
	case opPropIsNull:
		_, ok := x.prop(n.slot, en)
		return boolValue(!ok)
	case opIsNull:
		v := x.eval(n.a, en)
		if v.k == kErr {
			return v
		}
		return boolValue(v.k == kNull)
	case opIn:
		v := x.eval(n.a, en)
		if v.k != kString {
			return nullValue // a missing property (the operand is always one)
		}
		return boolValue(n.contains(v.s) != n.not)
	case opContains, opStarts, opEnds:
		if len(n.lit) == 0 {
			return boolValue(false) // before the operand is even looked at
		}
		v := x.eval(n.a, en)
		if v.k == kErr {
			return v
		}
		if v.k != kString {
			return boolValue(false)
		}
		var hit bool
		switch n.op {
		case opContains:
			hit = bytes.Contains(v.s, n.lit)
		case opStarts:
			hit = bytes.HasPrefix(v.s, n.lit)
		default:
			hit = bytes.HasSuffix(v.s, n.lit)
		}
		return boolValue(hit != n.not)
	}
	return errValue
}

// ordered evaluates <, <=, >, >= (ComparisonExpression.evaluate): NULL on
// either side is NULL (the right side is not evaluated after a NULL left);
// two strings are compared as doubles.
func (x *Expression) ordered(n *node, en *env) value {
	l := x.eval(n.a, en)
	if l.k == kErr || l.k == kNull {
		return l
	}
	r := x.eval(n.b, en)
	if r.k == kErr || r.k == kNull {
		return r
	}
	var c int
	if l.k == kString && r.k == kString {
		lf, lok := javaParseDouble(l.s)
		rf, rok := javaParseDouble(r.s)
		if !lok || !rok {
			return errValue
		}
		c = compareDouble(lf, rf)
	} else {
		var ok bool
		if c, ok = compare(&l, &r); !ok {
			return errValue
		}
	}
	return boolValue(cmpHolds(n.op, c))
}

// cmpHolds reports whether a comparison result satisfies op.
func cmpHolds(op opcode, c int) bool {
	switch op {
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

// contains reports whether s is in the IN list.
func (n *node) contains(s []byte) bool {
	if n.set != nil {
		_, ok := n.set[string(s)]
		return ok
	}
	for _, e := range n.list {
		if string(s) == e {
			return true
		}
	}
	return false
}

// negate is UnaryExpression.createNegate: numbers are negated (an int or
// long wraps as in Java), anything else is NULL.
func negate(v value) value {
	switch v.k {
	case kInt:
		v.i = int64(-int32(v.i))
	case kLong:
		v.i = -v.i
	case kDouble:
		v.f = -v.f
	case kErr:
	default:
		return nullValue
	}
	return v
}

// equal is RocketMQ's equality (ComparisonExpression.doCreateEqual): one
// NULL side gives NULL when it is the left one and FALSE otherwise, two
// NULLs are equal, and other values compare after conversion.
func equal(l, r *value) value {
	if (l.k == kNull) != (r.k == kNull) {
		if l.k == kNull {
			return nullValue
		}
		return boolValue(false)
	}
	if l.k == kNull {
		return boolValue(true)
	}
	c, ok := compare(l, r)
	if !ok {
		return errValue
	}
	return boolValue(c == 0)
}

// compare is ComparisonExpression.__compare with string conversion on:
// values of different types are converted towards the right-hand type (a
// string is parsed as the number or boolean it is compared with; an int
// widens to a long or a double). ok is false where Java throws: a string
// that does not parse, or a boolean on the left of a string (Java's
// conversion casts the wrong operand). Types with no conversion compare
// as -1.
func compare(l, r *value) (int, bool) {
	if l.k == r.k {
		switch l.k {
		case kBool:
			return compareBool(l.b, r.b), true
		case kInt, kLong:
			return cmp.Compare(l.i, r.i), true
		case kDouble:
			return compareDouble(l.f, r.f), true
		case kString:
			return bytes.Compare(l.s, r.s), true
		}
		return 0, true
	}
	switch l.k {
	case kBool:
		if r.k == kString {
			return 0, false
		}
	case kInt, kLong:
		switch r.k {
		case kInt, kLong: // the other one of the two
			return cmp.Compare(l.i, r.i), true
		case kDouble:
			return compareDouble(float64(l.i), r.f), true
		case kString:
			n, ok := javaParseInt(r.s, l.k.intBits())
			return cmp.Compare(l.i, n), ok
		}
	case kDouble:
		switch r.k {
		case kInt, kLong:
			return compareDouble(l.f, float64(r.i)), true
		case kString:
			f, ok := javaParseDouble(r.s)
			return compareDouble(l.f, f), ok
		}
	case kString:
		switch r.k {
		case kBool:
			return compareBool(javaParseBool(l.s), r.b), true
		case kInt, kLong:
			n, ok := javaParseInt(l.s, r.k.intBits())
			return cmp.Compare(n, r.i), ok
		case kDouble:
			f, ok := javaParseDouble(l.s)
			return compareDouble(f, r.f), ok
		}
	}
	return -1, true
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// compareDouble is Java's Double.compare: -0.0 is below 0.0, and NaN is
// equal to itself and above everything else.
func compareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := javaDoubleBits(a), javaDoubleBits(b)
	switch {
	case ab == bb:
		return 0
	case ab < bb:
		return -1
	}
	return 1
}

// javaDoubleBits is Double.doubleToLongBits: every NaN is the canonical one.
func javaDoubleBits(f float64) int64 {
	if f != f {
		return 0x7ff8000000000000
	}
	return int64(math.Float64bits(f))
}
