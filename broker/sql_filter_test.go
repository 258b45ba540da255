package broker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// sqlSub is a SQL92 subscription as the official Go client builds it.
func sqlSub(topic, expr string) protocol.SubscriptionData {
	return protocol.SubscriptionData{Topic: topic, SubString: expr, SubVersion: time.Now().UnixNano(), ExpressionType: protocol.ExpressionSQL92}
}

// sendProps stores a message with properties.
func sendProps(t *testing.T, cl *remoting.Client, addr, topic, body string, props map[string]string) {
	t.Helper()
	props[message.PropUniqKey] = strconv.FormatInt(time.Now().UnixNano(), 16)
	resp := baInvoke(t, cl, addr, sendReq(topic, 0, []byte(body), props))
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
}

func startSQLBroker(t *testing.T, enable bool) *Broker {
	t.Helper()
	return bcStartBroker(t, func(b *Broker) { b.cfg.EnablePropertyFilter = enable })
}

// TestPullSQL92 serves a SQL92 subscription registered by heartbeat (the
// official push consumer) and one sent with each pull (pull consumers):
// only matching messages are returned, in order, and the scan moves past
// the rest.
func TestPullSQL92(t *testing.T) {
	baVerifyNoLeaks(t)
	b := startSQLBroker(t, true)
	bcCreateTopic(t, b, "SQ", 1)
	cl := baClient(t)
	addr := b.Addr()
	for i := range 10 {
		props := map[string]string{"n": strconv.Itoa(i), message.PropTags: []string{"a", "b"}[i%2]}
		if i%3 == 0 {
			props["region"] = "eu"
		}
		sendProps(t, cl, addr, "SQ", fmt.Sprintf("m%d", i), props)
	}
	bcWaitQueue(t, b, "SQ", 0, 10)

	const expr = "n > 2 AND (region = 'eu' OR TAGS = 'b')"
	bcHeartbeat(t, cl, addr, "127.0.0.1@1", "cg", protocol.ConsumeFromFirstOffset, sqlSub("SQ", expr))
	r := bcPull(t, cl, addr, bcPullHeader("cg", "SQ", 0, 0, 0, 0))
	require.Equal(t, remoting.Success, r.code, r.remark)
	assert.Equal(t, []string{"m3", "m5", "m6", "m7", "m9"}, r.bodies)
	assert.Equal(t, int64(10), r.hdr.NextBeginOffset)

	h := bcPullHeader("pc", "SQ", 0, 0, protocol.PullFlagSubscription, 0)
	h.ExpressionType, h.Subscription = protocol.ExpressionSQL92, "n BETWEEN 2 AND 4 OR region IS NULL AND TAGS IN ('a')"
	r = bcPull(t, cl, addr, h)
	require.Equal(t, remoting.Success, r.code, r.remark)
	assert.Equal(t, []string{"m2", "m3", "m4", "m8"}, r.bodies)

	// Entries scanned and none matched: PULL_RETRY_IMMEDIATELY past them.
	h.QueueOffset, h.Subscription = 5, "n > 100"
	r = bcPull(t, cl, addr, h)
	assert.Equal(t, remoting.PullRetryImmediately, r.code)
	assert.Equal(t, int64(10), r.hdr.NextBeginOffset)

	// The subscription is compiled once: every heartbeat and pull shares it.
	_, c1, _, _ := b.consume.consumers.Subscription("cg", "SQ")
	bcHeartbeat(t, cl, addr, "127.0.0.1@2", "cg", protocol.ConsumeFromFirstOffset, sqlSub("SQ", expr))
	_, c2, _, _ := b.consume.consumers.Subscription("cg", "SQ")
	assert.Same(t, c1, c2)
	assert.Same(t, c1, b.consume.filters.get(protocol.ExpressionSQL92, expr))
}

// TestPullSQL92Refused: a bad expression is refused with RocketMQ's code
// and the parse error; SQL92 with enablePropertyFilter off, and unknown
// expression types, with RocketMQ's SYSTEM_ERROR remark. CHECK_CLIENT_CONFIG
// answers the same before a consumer starts.
func TestPullSQL92Refused(t *testing.T) {
	baVerifyNoLeaks(t)
	for _, enable := range []bool{true, false} {
		t.Run(fmt.Sprintf("enablePropertyFilter=%v", enable), func(t *testing.T) {
			b := startSQLBroker(t, enable)
			bcCreateTopic(t, b, "SQ", 1)
			cl := baClient(t)
			addr := b.Addr()
			cases := []struct {
				typ, expr string
				code      remoting.ResponseCode
				remark    string
			}{
				{protocol.ExpressionSQL92, "a > 'x'", remoting.SubscriptionParseFailed, "cannot be compared"},
				{protocol.ExpressionSQL92, "a = = 1", remoting.SubscriptionParseFailed, "expected a value"},
				{protocol.ExpressionSQL92, "a = 1", remoting.Success, ""},
				{"CLASS", "com.example.Filter", remoting.SystemError, "does not support consumer to filter message by CLASS"},
			}
			for i, c := range cases {
				code, remark := c.code, c.remark
				if !enable && c.typ == protocol.ExpressionSQL92 {
					code, remark = remoting.SystemError, "enablePropertyFilter=true"
				}
				group := fmt.Sprintf("g%d", i)
				sd := protocol.SubscriptionData{Topic: "SQ", SubString: c.expr, ExpressionType: c.typ, SubVersion: 1}
				// Registered by heartbeat.
				bcHeartbeat(t, cl, addr, "127.0.0.1@1", group, protocol.ConsumeFromFirstOffset, sd)
				r := bcPull(t, cl, addr, bcPullHeader(group, "SQ", 0, 0, 0, 0))
				if code == remoting.Success {
					assert.Equal(t, remoting.PullNotFound, r.code, "%s: %s", c.expr, r.remark)
				} else {
					assert.Equal(t, code, r.code, c.expr)
					assert.Contains(t, r.remark, remark, c.expr)
				}
				// Sent with the pull.
				h := bcPullHeader(group, "SQ", 0, 0, protocol.PullFlagSubscription, 0)
				h.ExpressionType, h.Subscription = c.typ, c.expr
				r = bcPull(t, cl, addr, h)
				if code == remoting.Success {
					assert.Equal(t, remoting.PullNotFound, r.code, "%s: %s", c.expr, r.remark)
				} else {
					assert.Equal(t, code, r.code, c.expr)
					assert.Contains(t, r.remark, remark, c.expr)
				}
				// Checked before starting.
				body, err := json.Marshal(&protocol.CheckClientRequestBody{ClientID: "127.0.0.1@1", Group: group, SubscriptionData: &sd})
				require.NoError(t, err)
				resp := baInvoke(t, cl, addr, remoting.NewRequest(remoting.CheckClientConfig, nil, body))
				assert.Equal(t, int32(code), resp.Code, "%s: %s", c.expr, resp.Remark)
				assert.Contains(t, resp.Remark, remark, c.expr)
			}
		})
	}
}
