package client

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// TestE2ESQL92 sends a mixed stream with our producer; our push consumer
// subscribed with a SQL92 expression receives exactly the matches. The
// last message of each queue matches, so once the consumer has those four
// it has read every queue to its end.
func TestE2ESQL92(t *testing.T) {
	ns, _, _ := e2eClusterWith(t, func(c *conf.BrokerConfig) { c.EnablePropertyFilter = true }, "E2ESQL")
	p := MustStartProducer(t, WithNameServer(ns))
	ctx := testCtx(t)
	var want []string
	for i := range 40 {
		region := []string{"us", "eu", "ap", "sa"}[i%4]
		m := NewMessage("E2ESQL", []byte(fmt.Sprintf("m-%02d", i))).WithProperty("region", region).WithProperty("amount", strconv.Itoa(i*10))
		if i%3 == 0 {
			m.WithProperty("vip", "yes")
		}
		if i >= 36 || region == "eu" && i*10 >= 100 && i%3 != 0 {
			want = append(want, fmt.Sprintf("m-%02d", i))
			m.WithProperty("tail", "yes")
		}
		_, err := p.SendSync(ctx, m)
		require.NoError(t, err)
	}
	sort.Strings(want)
	var col collector
	MustStartPushConsumer(t, func(pc *PushConsumer) {
		require.NoError(t, pc.Subscribe("E2ESQL", MessageSelector{Type: SQL92,
			Expression: "tail = 'yes' OR (region = 'eu' AND amount >= 100 AND vip IS NULL)"}, col.handler))
	}, append(fastOptions(ns), WithGroupName("e2e-sql"), WithConsumeFromWhere(ConsumeFromFirstOffset))...)
	require.Eventually(t, func() bool {
		b := col.bodies()
		return slices.Contains(b, "m-36") && slices.Contains(b, "m-37") && slices.Contains(b, "m-38") && slices.Contains(b, "m-39")
	}, 15*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return col.count() >= len(want) }, 15*time.Second, 20*time.Millisecond)
	got := col.bodies()
	sort.Strings(got)
	assert.Equal(t, want, got)
}

// TestE2ESQL92Refused: Start of our consumer fails with the broker's answer
// (CHECK_CLIENT_CONFIG) for an expression that does not parse, with the
// parse error, and for a broker with enablePropertyFilter off.
func TestE2ESQL92Refused(t *testing.T) {
	start := func(ns, topic, expr string) error {
		pc, err := NewPushConsumer(append(fastOptions(ns), WithGroupName("e2e-sql-refused"))...)
		require.NoError(t, err)
		require.NoError(t, pc.Subscribe(topic, MessageSelector{Type: SQL92, Expression: expr}, (&collector{}).handler))
		err = pc.Start()
		require.NoError(t, pc.Shutdown())
		return err
	}
	ns, _, _ := e2eClusterWith(t, func(c *conf.BrokerConfig) { c.EnablePropertyFilter = true }, "E2ESQLBad")
	err := start(ns, "E2ESQLBad", "amount BETWEEN 'a' AND 5")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrBadSubscription)
	var be *BrokerError
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, remoting.SubscriptionParseFailed, be.Code)
	assert.Contains(t, be.Remark, "BETWEEN", "the parse error")

	off, _, _ := e2eCluster(t, "E2ESQLOff")
	err = start(off, "E2ESQLOff", "amount > 5")
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, remoting.SystemError, be.Code)
	assert.Contains(t, be.Remark, "enablePropertyFilter=true")
}
