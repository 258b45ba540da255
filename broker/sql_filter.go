package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorocketmq/gorocketmq/filter"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
	"github.com/gorocketmq/gorocketmq/store"
)

// ErrExpressionType means a subscription names an expression type other
// than TAG and SQL92.
var ErrExpressionType = errors.New("broker: unsupported expression type")

// sqlFilter is a compiled SQL92 subscription as a store filter: it passes
// every consume-queue entry (no tags to decide on) and decides on the
// record's properties, which the store reads for it (store.PropertyFilter).
type sqlFilter struct{ x *filter.Expression }

// IsMatchedByConsumeQueue passes every entry: the properties decide.
func (f *sqlFilter) IsMatchedByConsumeQueue(int64) bool { return true }

// IsMatchedByCommitLog evaluates the expression on a record's properties.
func (f *sqlFilter) IsMatchedByCommitLog(record []byte) bool {
	props, ok := message.RecordProperties(record)
	return ok && f.x.Match(props)
}

// MatchProperties evaluates the expression on encoded properties.
func (f *sqlFilter) MatchProperties(props []byte) bool { return f.x.Match(props) }

// compiledSubscription is a subscription expression compiled once: the
// store filter for its pulls, or why it has none.
type compiledSubscription struct {
	filter store.MessageFilter
	sql    bool  // the expression is SQL92
	err    error // wraps filter.ErrInvalid or ErrExpressionType
}

// compileSubscription compiles an expression of a type: TAG (or empty) to
// a tag filter, SQL92 to a property filter.
func compileSubscription(typ, expr string) *compiledSubscription {
	switch typ {
	case "", protocol.ExpressionTag:
		return &compiledSubscription{filter: store.NewTagFilter(expr)}
	case protocol.ExpressionSQL92:
		x, err := filter.Compile(expr)
		if err != nil {
			return &compiledSubscription{sql: true, err: err}
		}
		return &compiledSubscription{filter: &sqlFilter{x: x}, sql: true}
	}
	return &compiledSubscription{err: fmt.Errorf("%w %q", ErrExpressionType, typ)}
}

// maxCachedFilters and maxCachedFilterBytes bound the filter cache, in
// entries and in expression bytes; past either it starts over. The bytes
// bound matters: an expression may be nearly a frame (16 MB) long.
const (
	maxCachedFilters     = 1024
	maxCachedFilterBytes = 16 << 20
)

// filterKey names a cached expression.
type filterKey struct{ typ, expr string }

// filterCache holds compiled SQL92 expressions by type and text, so a
// subscription is compiled once however often it arrives: in the
// heartbeat of every member of a group, and in every pull of a client that
// sends its subscription with each pull (RocketMQ caches parses too).
// Entries are immutable and shared; a sync.Map keeps the per-pull lookup
// free of a lock the pull workers would contend on.
type filterCache struct {
	m     sync.Map // filterKey -> *compiledSubscription
	n     atomic.Int64
	bytes atomic.Int64 // expression bytes held (approximate under races, like n)
}

// get returns the compiled expression, compiling it on first use.
func (c *filterCache) get(typ, expr string) *compiledSubscription {
	k := filterKey{typ, expr}
	if cs, ok := c.m.Load(k); ok {
		return cs.(*compiledSubscription)
	}
	size := int64(len(typ) + len(expr))
	if c.n.Load() >= maxCachedFilters || c.bytes.Load()+size > maxCachedFilterBytes {
		c.m.Clear()
		c.n.Store(0)
		c.bytes.Store(0)
	}
	cs, loaded := c.m.LoadOrStore(k, compileSubscription(typ, expr))
	if !loaded {
		c.n.Add(1)
		c.bytes.Add(size)
	}
	return cs.(*compiledSubscription)
}

// refuseFilter returns the pull refusal for a subscription that cannot be
// served, or nil: an expression that did not compile (RocketMQ's
// SUBSCRIPTION_PARSE_FAILED, with the parse error), an expression type we
// do not know, or SQL92 while enablePropertyFilter is off (RocketMQ's
// SYSTEM_ERROR and remark; the official clients show both).
func (cs *consumeState) refuseFilter(req *remoting.Command, typ string, c *compiledSubscription) *remoting.Command {
	switch {
	case errors.Is(c.err, ErrExpressionType):
		return remoting.NewResponse(req, remoting.SystemError, "The broker does not support consumer to filter message by "+typ)
	case c.sql && !cs.b.cfg.EnablePropertyFilter:
		return remoting.NewResponse(req, remoting.SystemError,
			"The broker does not support consumer to filter message by "+typ+" (set enablePropertyFilter=true in the broker's config)")
	case c.err != nil:
		return remoting.NewResponse(req, remoting.SubscriptionParseFailed, "parse the consumer's subscription failed: "+c.err.Error())
	}
	return nil
}

// processCheckClientConfig answers CHECK_CLIENT_CONFIG, which the Java
// consumer sends at start for a subscription that is not a tag expression:
// success, or why its pulls will be refused.
func (cs *consumeState) processCheckClientConfig(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := protocol.DecodeCheckClientRequestBody(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
	}
	if sd := body.SubscriptionData; sd != nil && !isTagExpression(sd.ExpressionType) {
		c := cs.filters.get(sd.ExpressionType, sd.SubString)
		if resp := cs.refuseFilter(req, sd.ExpressionType, c); resp != nil {
			if c.err != nil && !errors.Is(c.err, ErrExpressionType) && cs.b.cfg.EnablePropertyFilter {
				resp.Remark = c.err.Error() // RocketMQ answers the parse error itself here
			}
			return resp, nil
		}
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}
