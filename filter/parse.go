package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits on a compiled expression. RocketMQ has none; they keep a hostile
// subscription from costing the broker a deep recursion or a huge tree on
// every message.
const (
	// MaxNodes bounds the number of operators and operands.
	MaxNodes = 4096
	// MaxDepth bounds the nesting of parentheses and unary operators.
	MaxDepth = 128
)

// ErrInvalid is wrapped by every error Compile returns.
var ErrInvalid = errors.New("filter: invalid SQL92 expression")

// SyntaxError is a compile error at a byte offset of the expression.
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s: %s (at offset %d)", ErrInvalid.Error(), e.Msg, e.Pos)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *SyntaxError) Unwrap() error { return ErrInvalid }

// opcode is a node's operation.
type opcode uint8

const (
	opConst    opcode = iota // val
	opProp                   // the property of slot
	opNeg                    // -a
	opNot                    // NOT a
	opCast                   // a used as a boolean (a bare property)
	opAnd                    // a AND b
	opOr                     // a OR b
	opEq                     // a = b
	opLt                     // a < b
	opLe                     // a <= b
	opGt                     // a > b
	opGe                     // a >= b
	opIsNull                 // a IS NULL
	opIn                     // a [NOT] IN (list)
	opContains               // a [NOT] CONTAINS lit
	opStarts                 // a [NOT] STARTSWITH lit
	opEnds                   // a [NOT] ENDSWITH lit

	// Specialized forms of the commonest leaves (see specialize): the same
	// results without the general operand plumbing.
	opPropEqStr  // property = 'lit' (constLeft: 'lit' = property)
	opPropCmpNum // property <cmp> number (constLeft: number <cmp> property); cmp holds the op
	opPropIsNull // property IS NULL
)

// node is one operator or operand; children are indexes into
// Expression.nodes.
type node struct {
	op        opcode
	not       bool   // opIn, opContains, opStarts, opEnds: the NOT form
	constLeft bool   // opPropEqStr, opPropCmpNum: the literal is the left operand
	cmp       opcode // opPropCmpNum: opLt, opLe, opGt or opGe
	a, b      int32
	slot      int32 // opProp
	val       value // opConst
	lit       []byte
	list      []string            // opIn, fewer than inSetMin elements
	set       map[string]struct{} // opIn, otherwise
}

// inSetMin is the IN list length from which a set is used (RocketMQ
// switches to a HashSet at 5 too).
const inSetMin = 5

// Expression is a compiled SQL92 selector. It is immutable and safe for
// concurrent use.
type Expression struct {
	src     string
	nodes   []node
	root    int32
	names   []string // the properties referenced, by slot
	needles []needle // by slot: how the property's entries start
}

// Compile parses a SQL92 selector. The error wraps ErrInvalid and says
// where and why the expression is refused.
func Compile(src string) (x *Expression, err error) {
	p := &parser{lx: lexer{src: src}, x: &Expression{src: src}, slots: map[string]int32{}}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(lexFailure)
			if !ok {
				panic(r)
			}
			x, err = nil, b.err
		}
	}()
	root, err := p.selector()
	if err != nil {
		return nil, err
	}
	p.x.root = root
	p.x.specialize()
	return p.x, nil
}

// specialize rewrites the leaves that compare a property with a literal,
// and IS NULL on a property, into single nodes. They evaluate exactly as
// the general nodes would (equal, ordered, compare), but read the
// property and the literal directly.
func (x *Expression) specialize() {
	for i := range x.nodes {
		n := &x.nodes[i]
		switch n.op {
		case opEq, opLt, opLe, opGt, opGe:
			a, b := &x.nodes[n.a], &x.nodes[n.b]
			prop, lit, constLeft := b, a, true
			if a.op == opProp {
				prop, lit, constLeft = a, b, false
			}
			if prop.op != opProp || lit.op != opConst {
				continue
			}
			switch {
			case n.op == opEq && lit.val.k == kString:
				*n = node{op: opPropEqStr, slot: prop.slot, lit: lit.val.s, constLeft: constLeft}
			case n.op != opEq && lit.val.isNumber():
				*n = node{op: opPropCmpNum, cmp: n.op, slot: prop.slot, val: lit.val, constLeft: constLeft}
			}
		case opIsNull:
			if a := &x.nodes[n.a]; a.op == opProp {
				*n = node{op: opPropIsNull, slot: a.slot}
			}
		}
	}
}

// MustCompile is Compile that panics on error, for expressions known good.
func MustCompile(src string) *Expression {
	x, err := Compile(src)
	if err != nil {
		panic(err)
	}
	return x
}

// String returns the source of the expression.
func (x *Expression) String() string { return x.src }

// Properties returns the names of the properties the expression reads.
func (x *Expression) Properties() []string { return append([]string(nil), x.names...) }

// parser is a recursive-descent parser over the token list, one method per
// rule of the grammar (see the package doc).
type parser struct {
	lx    lexer
	toks  []token // lexed so far
	i     int     // the next token to consume
	depth int
	x     *Expression
	slots map[string]int32
}

// lexFailure carries a lexical error out of the parse (Compile recovers
// it): tokens are lexed on demand, deep inside the rules.
type lexFailure struct{ err error }

// at returns the token k places ahead, lexing on demand.
func (p *parser) at(k int) token {
	for len(p.toks) <= p.i+k {
		if n := len(p.toks); n > 0 && p.toks[n-1].kind == tEOF {
			return p.toks[n-1]
		}
		t, err := p.lx.next()
		if err != nil {
			panic(lexFailure{err})
		}
		p.toks = append(p.toks, t)
	}
	return p.toks[p.i+k]
}

func (p *parser) peek() token { return p.at(0) }

// peek2 is the token after the next: RocketMQ's LOOKAHEAD(2), used only
// after NOT and IS.
func (p *parser) peek2() token { return p.at(1) }

func (p *parser) next() token {
	t := p.at(0)
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unexpected(t token, want string) error {
	if t.kind == tEOF {
		return p.errAt(t.pos, "expected %s, found the end of the expression", want)
	}
	return p.errAt(t.pos, "expected %s, found %q", want, t.text)
}

func (p *parser) add(n node) (int32, error) {
	if len(p.x.nodes) >= MaxNodes {
		return 0, p.errAt(p.peek().pos, "expression too large (more than %d operators and operands)", MaxNodes)
	}
	p.x.nodes = append(p.x.nodes, n)
	return int32(len(p.x.nodes) - 1), nil
}

func (p *parser) n(i int32) *node { return &p.x.nodes[i] }

// selector = or, as a boolean. Like RocketMQ's JmsSelector it does not
// ask for the end of the text: what follows a complete expression is not
// read (see lexer).
func (p *parser) selector() (int32, error) {
	start := p.peek().pos
	e, err := p.or()
	if err != nil {
		return 0, err
	}
	return p.asBoolean(e, start)
}

func (p *parser) or() (int32, error) { return p.logic(tOr, opOr, p.and) }

func (p *parser) and() (int32, error) { return p.logic(tAnd, opAnd, p.equality) }

// logic parses operand (tok operand)*, left-associative, into op (AND or
// OR) nodes over operands made boolean.
func (p *parser) logic(tok tokKind, op opcode, operand func() (int32, error)) (int32, error) {
	start := p.peek().pos
	l, err := operand()
	if err != nil {
		return 0, err
	}
	for p.peek().kind == tok {
		p.next()
		rstart := p.peek().pos
		r, err := operand()
		if err != nil {
			return 0, err
		}
		if l, err = p.asBoolean(l, start); err != nil {
			return 0, err
		}
		if r, err = p.asBoolean(r, rstart); err != nil {
			return 0, err
		}
		if l, err = p.add(node{op: op, a: l, b: r}); err != nil {
			return 0, err
		}
	}
	return l, nil
}

func (p *parser) equality() (int32, error) {
	l, err := p.comparison()
	if err != nil {
		return 0, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tEq || t.kind == tNe:
			p.next()
			rpos := p.peek().pos
			r, err := p.comparison()
			if err != nil {
				return 0, err
			}
			if err := p.checkEqualOperands(l, t.pos, r, rpos); err != nil {
				return 0, err
			}
			if l, err = p.add(node{op: opEq, a: l, b: r}); err != nil {
				return 0, err
			}
			if t.kind == tNe {
				if l, err = p.add(node{op: opNot, a: l}); err != nil {
					return 0, err
				}
			}
		case t.kind == tIs && p.peek2().kind == tNull:
			p.next()
			p.next()
			if l, err = p.add(node{op: opIsNull, a: l}); err != nil {
				return 0, err
			}
		case t.kind == tIs && p.peek2().kind == tNot:
			p.next()
			p.next()
			if nt := p.next(); nt.kind != tNull {
				return 0, p.unexpected(nt, "NULL")
			}
			if l, err = p.add(node{op: opIsNull, a: l}); err != nil {
				return 0, err
			}
			if l, err = p.add(node{op: opNot, a: l}); err != nil {
				return 0, err
			}
		case t.kind == tIs:
			p.next()
			return 0, p.unexpected(p.peek(), "NULL or NOT NULL")
		default:
			return l, nil
		}
	}
}

func (p *parser) comparison() (int32, error) {
	lpos := p.peek().pos
	l, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		t := p.peek()
		not := false
		if t.kind == tNot {
			// NOT after an operand must start NOT CONTAINS & co: RocketMQ's
			// generated parser enters this loop on NOT and fails otherwise.
			switch p.peek2().kind {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
				p.next()
				not, t = true, p.peek()
			default:
				return 0, p.unexpected(p.peek2(), "CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT")
			}
		}
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.next()
			rpos := p.peek().pos
			r, err := p.unary()
			if err != nil {
				return 0, err
			}
			op := map[tokKind]opcode{tGt: opGt, tGe: opGe, tLt: opLt, tLe: opLe}[t.kind]
			if l, err = p.ordered(op, l, lpos, r, rpos); err != nil {
				return 0, err
			}
		case tContains, tStartsWith, tEndsWith:
			p.next()
			s := p.next()
			if s.kind != tString {
				return 0, p.unexpected(s, "a string after "+t.kind.String())
			}
			op := map[tokKind]opcode{tContains: opContains, tStartsWith: opStarts, tEndsWith: opEnds}[t.kind]
			if l, err = p.add(node{op: op, a: l, lit: []byte(s.text), not: not}); err != nil {
				return 0, err
			}
		case tBetween:
			p.next()
			if l, err = p.between(l, lpos, not); err != nil {
				return 0, err
			}
		case tIn:
			p.next()
			if l, err = p.in(l, lpos, not); err != nil {
				return 0, err
			}
		default:
			return l, nil
		}
	}
}

// ordered builds <, <=, >, >= after RocketMQ's checkLessThanOperand: a
// literal operand must be a number and no operand may be boolean.
func (p *parser) ordered(op opcode, l int32, lpos int, r int32, rpos int) (int32, error) {
	for _, o := range [2]struct {
		i   int32
		pos int
	}{{l, lpos}, {r, rpos}} {
		n := p.n(o.i)
		if n.op == opConst && !n.val.isNumber() || p.isBoolean(o.i) {
			return 0, p.errAt(o.pos, "%s cannot be compared with <, <=, > or >=", p.describe(o.i))
		}
	}
	return p.add(node{op: op, a: l, b: r})
}

// checkEqualOperands applies RocketMQ's checkEqualOperand (no NULL literal
// on either side) and checkEqualOperandCompatability (a boolean literal is
// not compared with another kind of literal).
func (p *parser) checkEqualOperands(l int32, lpos int, r int32, rpos int) error {
	ln, rn := p.n(l), p.n(r)
	if ln.op == opConst && ln.val.k == kNull {
		return p.errAt(lpos, "NULL cannot be compared with = or <>; use IS NULL")
	}
	if rn.op == opConst && rn.val.k == kNull {
		return p.errAt(rpos, "NULL cannot be compared with = or <>; use IS NULL")
	}
	if ln.op == opConst && rn.op == opConst && ln.val.k == kBool && rn.val.k != kBool {
		return p.errAt(lpos, "%s cannot be compared with %s", p.describe(l), p.describe(r))
	}
	return nil
}

// between builds v [NOT] BETWEEN low AND high as RocketMQ does: (v >= low
// AND v <= high), or (v < low OR v > high); literal bounds of BETWEEN must
// not be NULL and low must not exceed high.
func (p *parser) between(v int32, vpos int, not bool) (int32, error) {
	lowPos := p.peek().pos
	low, err := p.unary()
	if err != nil {
		return 0, err
	}
	if t := p.next(); t.kind != tAnd {
		return 0, p.unexpected(t, "AND in BETWEEN")
	}
	highPos := p.peek().pos
	high, err := p.unary()
	if err != nil {
		return 0, err
	}
	if not {
		lt, err := p.ordered(opLt, v, vpos, low, lowPos)
		if err != nil {
			return 0, err
		}
		gt, err := p.ordered(opGt, v, vpos, high, highPos)
		if err != nil {
			return 0, err
		}
		return p.add(node{op: opOr, a: lt, b: gt})
	}
	if ln, hn := p.n(low), p.n(high); ln.op == opConst && hn.op == opConst {
		if ln.val.k == kNull || hn.val.k == kNull {
			return 0, p.errAt(lowPos, "the bounds of BETWEEN cannot be NULL")
		}
		c, ok := compare(&hn.val, &ln.val)
		if !ok {
			return 0, p.errAt(lowPos, "the bounds of BETWEEN, %s and %s, cannot be compared", p.describe(low), p.describe(high))
		}
		if c < 0 {
			return 0, p.errAt(lowPos, "the lower bound of BETWEEN, %s, is above the upper bound, %s", p.describe(low), p.describe(high))
		}
	}
	ge, err := p.ordered(opGe, v, vpos, low, lowPos)
	if err != nil {
		return 0, err
	}
	le, err := p.ordered(opLe, v, vpos, high, highPos)
	if err != nil {
		return 0, err
	}
	return p.add(node{op: opAnd, a: ge, b: le})
}

// in builds prop [NOT] IN ('a', ...): the left side must be a property.
func (p *parser) in(v int32, vpos int, not bool) (int32, error) {
	if p.n(v).op != opProp {
		return 0, p.errAt(vpos, "IN needs a property on its left, found %s", p.describe(v))
	}
	if t := p.next(); t.kind != tLParen {
		return 0, p.unexpected(t, `"(" after IN`)
	}
	var list []string
	for {
		s := p.next()
		if s.kind != tString {
			return 0, p.unexpected(s, "a string in the IN list")
		}
		list = append(list, s.text)
		t := p.next()
		if t.kind == tRParen {
			break
		}
		if t.kind != tComma {
			return 0, p.unexpected(t, `"," or ")" in the IN list`)
		}
	}
	n := node{op: opIn, a: v, not: not}
	if len(list) < inSetMin {
		n.list = list
	} else {
		n.set = make(map[string]struct{}, len(list))
		for _, s := range list {
			n.set[s] = struct{}{}
		}
	}
	return p.add(n)
}

func (p *parser) unary() (int32, error) {
	if p.depth >= MaxDepth {
		return 0, p.errAt(p.peek().pos, "expression nested more than %d levels deep", MaxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	t := p.peek()
	switch t.kind {
	case tPlus:
		p.next()
		return p.unary()
	case tMinus:
		p.next()
		a, err := p.unary()
		if err != nil {
			return 0, err
		}
		return p.add(node{op: opNeg, a: a})
	case tNot:
		p.next()
		pos := p.peek().pos
		a, err := p.unary()
		if err != nil {
			return 0, err
		}
		if a, err = p.asBoolean(a, pos); err != nil {
			return 0, err
		}
		return p.add(node{op: opNot, a: a})
	}
	return p.primary()
}

func (p *parser) primary() (int32, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return p.add(node{op: opConst, val: value{k: kString, s: []byte(t.text)}})
	case tDecimal:
		v, err := decimalLiteral(t.text)
		if err != nil {
			return 0, p.errAt(t.pos, "%s", err)
		}
		return p.add(node{op: opConst, val: v})
	case tFloat:
		v, err := floatLiteral(t.text)
		if err != nil {
			return 0, p.errAt(t.pos, "%s", err)
		}
		return p.add(node{op: opConst, val: v})
	case tTrue, tFalse:
		return p.add(node{op: opConst, val: boolValue(t.kind == tTrue)})
	case tNull:
		return p.add(node{op: opConst, val: value{k: kNull}})
	case tID:
		slot, ok := p.slots[t.text]
		if !ok {
			slot = int32(len(p.x.names))
			p.slots[t.text] = slot
			p.x.names = append(p.x.names, t.text)
			p.x.needles = append(p.x.needles, newNeedle(t.text))
		}
		return p.add(node{op: opProp, slot: slot})
	case tLParen:
		e, err := p.or()
		if err != nil {
			return 0, err
		}
		if c := p.next(); c.kind != tRParen {
			return 0, p.unexpected(c, `")"`)
		}
		return e, nil
	}
	return 0, p.unexpected(t, "a value, a property or \"(\"")
}

// asBoolean is RocketMQ's asBooleanExpression: a boolean expression stays,
// a bare property is cast (NULL when missing, else FALSE), anything else is
// refused.
func (p *parser) asBoolean(i int32, pos int) (int32, error) {
	if p.isBoolean(i) {
		return i, nil
	}
	if p.n(i).op == opProp {
		return p.add(node{op: opCast, a: i})
	}
	return 0, p.errAt(pos, "%s does not yield a boolean", p.describe(i))
}

// isBoolean reports whether the node is one of RocketMQ's
// BooleanExpressions: comparisons, logic, NOT, casts and the TRUE, FALSE
// and NULL literals.
func (p *parser) isBoolean(i int32) bool {
	n := p.n(i)
	switch n.op {
	case opConst:
		return n.val.k == kBool || n.val.k == kNull
	case opProp, opNeg:
		return false
	}
	return true
}

// describe names a node in an error message.
func (p *parser) describe(i int32) string {
	n := p.n(i)
	switch n.op {
	case opConst:
		return n.val.String()
	case opProp:
		return "property " + p.x.names[n.slot]
	case opNeg:
		return "a negation"
	}
	return "a boolean expression"
}

// decimalLiteral is RocketMQ's ConstantExpression.createFromDecimal: an L
// suffix is dropped, the value must fit a long and is an int when it fits
// one.
func decimalLiteral(text string) (value, error) {
	text = strings.TrimRight(text, "lL")
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return value{}, fmt.Errorf("the number %s is out of the range of a long", text)
	}
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return value{k: kInt, i: n}, nil
	}
	return value{k: kLong, i: n}, nil
}

// floatLiteral is RocketMQ's ConstantExpression.createFloat: a double no
// larger than the largest double and no smaller than the smallest positive
// one (so 0.0 is refused).
func floatLiteral(text string) (value, error) {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return value{}, fmt.Errorf("the number %s does not parse", text)
	}
	if f > math.MaxFloat64 {
		return value{}, fmt.Errorf("the number %s is greater than %v", text, math.MaxFloat64)
	}
	if f < math.SmallestNonzeroFloat64 {
		return value{}, fmt.Errorf("the number %s is less than %v", text, math.SmallestNonzeroFloat64)
	}
	return value{k: kDouble, f: f}, nil
}
