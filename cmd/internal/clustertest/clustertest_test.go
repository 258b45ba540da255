package clustertest

import (
	"io"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"

	"github.com/gorocketmq/gorocketmq/conf"
)

func TestMustStartAppliesOptions(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var nsTuned, brokerTuned bool
	ns, b := MustStart(t, Options{
		BrokerName: "broker-t",
		Log:        log,
		Namesrv:    func(c *conf.NamesrvConfig) { nsTuned = c.ListenPort == 0 },
		Broker: func(c *conf.BrokerConfig) {
			brokerTuned = c.NamesrvAddr != "" && c.BrokerName == "broker-t"
			c.MappedFileSizeCommitLog = 1 << 20
		},
	})
	assert.True(t, nsTuned, "the nameserver hook sees the loopback settings")
	assert.True(t, brokerTuned, "the broker hook sees the registration settings")
	assert.True(t, strings.HasPrefix(ns.Addr(), "127.0.0.1:"), ns.Addr())
	assert.True(t, strings.HasPrefix(b.Addr(), "127.0.0.1:"), b.Addr())
}
