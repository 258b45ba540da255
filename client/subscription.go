package client

import (
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// ExpressionType says how a subscription expression filters messages.
type ExpressionType int

const (
	// TAG expressions name tags joined by "||"; "*" or "" match everything.
	TAG ExpressionType = iota
	// SQL92 expressions filter on properties; the broker evaluates them
	// (enablePropertyFilter must be on).
	SQL92
)

// MessageSelector is a subscription's filter: the zero value matches every
// message.
type MessageSelector struct {
	Type       ExpressionType
	Expression string
}

// subscriptionData builds the heartbeat form of a subscription. Tags are
// split on "||" and trimmed; their hash codes are Java's String.hashCode,
// which the broker compares with its consume queue's tag codes.
func subscriptionData(topic string, sel MessageSelector) protocol.SubscriptionData {
	sd := protocol.SubscriptionData{
		Topic:          topic,
		SubVersion:     time.Now().UnixMilli(),
		ExpressionType: protocol.ExpressionTag,
		TagsSet:        []string{},
		CodeSet:        protocol.CodeSet{},
	}
	if sel.Type == SQL92 {
		sd.ExpressionType = protocol.ExpressionSQL92
		sd.SubString = sel.Expression
		return sd
	}
	expr := strings.TrimSpace(sel.Expression)
	if expr == "" || expr == protocol.SubAll {
		sd.SubString = protocol.SubAll
		return sd
	}
	sd.SubString = expr
	for _, t := range strings.Split(expr, "||") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		sd.TagsSet = append(sd.TagsSet, t)
		sd.CodeSet = append(sd.CodeSet, int32(message.TagsHashCode(t)))
	}
	return sd
}

// parseSubscription is subscriptionData for a tag expression.
func parseSubscription(topic, expr string) protocol.SubscriptionData {
	return subscriptionData(topic, MessageSelector{Expression: expr})
}

// matchTags is the client-side re-check of tag filtering: the broker filters
// by tag hash, which can collide.
func matchTags(sd *protocol.SubscriptionData, m *MessageExt) bool {
	if sd == nil || sd.ExpressionType != protocol.ExpressionTag || len(sd.TagsSet) == 0 {
		return true
	}
	tag := m.Tags()
	for _, t := range sd.TagsSet {
		if t == tag {
			return true
		}
	}
	return false
}
