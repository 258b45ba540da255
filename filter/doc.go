// Package filter compiles and evaluates RocketMQ's SQL92 message selectors:
// the expressions a consumer subscribes with when its selector type is
// SQL92 (consumer.MessageSelector{Type: consumer.SQL92, Expression: ...}).
// The broker compiles a subscription's expression once, when the consumer
// registers it, and evaluates it against the properties of every candidate
// message of a pull, so messages that do not match never cross the wire.
//
// # Grammar
//
// The grammar is RocketMQ's (filter/…/parser/SelectorParser.jj), lowest
// precedence first:
//
//	selector    = or EOF                      (must yield a boolean)
//	or          = and { OR and }
//	and         = equality { AND equality }
//	equality    = comparison { ("=" | "<>") comparison | IS [NOT] NULL }
//	comparison  = unary { (">" | ">=" | "<" | "<=") unary
//	                    | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	                    | [NOT] BETWEEN unary AND unary
//	                    | [NOT] IN "(" string { "," string } ")" }
//	unary       = "+" unary | "-" unary | NOT unary | primary
//	primary     = literal | property | "(" or ")"
//	literal     = string | decimal | float | TRUE | FALSE | NULL
//
// Keywords are case-insensitive; property names ([a-zA-Z_$][a-zA-Z0-9_$]*)
// are not. Strings are single-quoted with ” for a quote. A decimal literal
// ("0" or [1-9][0-9]*, an optional L ignored) is a Java int when it fits,
// else a long; a float literal is a double and must be at least the
// smallest positive double (so 0.0 is refused, as in RocketMQ). "-- …"
// comments run to a line end and /* … */ comments may appear anywhere.
// Note that NOT binds tighter than comparisons: NOT a = 1 is (NOT a) = 1;
// write NOT (a = 1). As in RocketMQ, whose parser does not ask for the end
// of the text, whatever follows a complete expression is ignored: "a = 1
// b = 2" is "a = 1" (though a NOT or IS there must still continue it, and
// the token right after it must still lex).
//
// Some expressions are refused at compile time, as RocketMQ refuses them:
// a string, boolean or NULL literal, or any boolean expression, as an
// operand of <, <=, >, >=; NULL as an operand of = or <>; a boolean literal
// compared with a non-boolean literal; IN on anything but a property; a
// BETWEEN whose literal bounds are NULL or out of order; and an expression
// that does not yield a boolean (a bare number, string or negation).
//
// # Evaluation
//
// A message's properties are strings; a missing property is NULL. The
// result is RocketMQ's, including its three-valued logic and its
// conversions (ComparisonExpression, LogicExpression, UnaryExpression):
//
//   - A comparison with NULL is NULL, except = and IS [NOT] NULL: NULL = x
//     is NULL while x = NULL (x not NULL) is FALSE, and <> is NOT(=).
//     AND and OR follow SQL's three-valued logic; NOT NULL is NULL. A
//     message matches only when the whole expression is TRUE.
//   - A property compared with a number is converted to the number's type
//     the way Java's Integer.valueOf, Long.valueOf and Double.valueOf parse
//     it (so a = 5 holds for "5" but not for "5.0", and a = 5.0 holds for
//     both); compared with a boolean it is true when it is "true" in any
//     case. Two properties compared with <, <=, >, >= are both parsed as
//     doubles. A value that does not parse is an evaluation error: the
//     whole expression is then false for that message, whatever the rest
//     says (RocketMQ throws, and its filter drops the message).
//   - A boolean and a number are never equal. TRUE = a, with the literal
//     on the left of a property, is an evaluation error (Java converts the
//     wrong operand) while a = TRUE converts a.
//   - IN and NOT IN compare strings and are NULL for a missing property.
//     CONTAINS, STARTSWITH, ENDSWITH and their NOT forms are FALSE for a
//     missing property and for an empty search string.
//   - A bare property used as a boolean is NULL when missing and otherwise
//     FALSE (a property is a string, never a boolean).
//
// TAGS is the property holding the message's tag, so TAGS IN ('a', 'b')
// selects by tag.
//
// # Cost
//
// Compile allocates; Match does not: it finds a referenced property in the
// encoded properties (name 0x01 value, entries separated by 0x02) when the
// expression first needs it, keeps a slice of its value on the stack, and
// converts numbers without building strings. An Expression is immutable
// and safe for concurrent use.
//
// The cases in testdata/rocketmq_cases.txt were answered by RocketMQ's own
// filter classes; TestRocketMQCases holds this package to every answer.
package filter
