package conf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDelayLevels(t *testing.T) {
	cases := []struct {
		in   string
		want []time.Duration
		err  bool
	}{
		{in: DefaultBrokerConfig().MessageDelayLevel, want: []time.Duration{
			time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute,
			4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
			20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}},
		{in: " 100ms  2d ", want: []time.Duration{100 * time.Millisecond, 48 * time.Hour}},
		{in: "", err: true},
		{in: "1s 0s", err: true},
		{in: "1s -5s", err: true},
		{in: "5", err: true},
		{in: "5w", err: true},
		{in: "1.5s", err: true},
		{in: "400d", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDelayLevels(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidateDelayAndTransactionKeys(t *testing.T) {
	for name, mut := range map[string]func(*BrokerConfig){
		"messageDelayLevel":        func(c *BrokerConfig) { c.MessageDelayLevel = "1s x" },
		"timerMaxDelaySec":         func(c *BrokerConfig) { c.TimerMaxDelaySec = 0 },
		"flushDelayOffsetInterval": func(c *BrokerConfig) { c.FlushDelayOffsetInterval = 0 },
		"transactionTimeOut":       func(c *BrokerConfig) { c.TransactionTimeOut = 0 },
		"transactionCheckMax":      func(c *BrokerConfig) { c.TransactionCheckMax = 0 },
		"transactionCheckInterval": func(c *BrokerConfig) { c.TransactionCheckInterval = -1 },
	} {
		c := DefaultBrokerConfig()
		mut(&c)
		err := c.Validate()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
	c := DefaultBrokerConfig()
	require.NoError(t, c.Validate())
}
