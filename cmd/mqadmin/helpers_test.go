package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func TestSortedKeys(t *testing.T) {
	assert.Equal(t, []string{"A", "a", "b"}, sortedKeys(map[string]string{"b": "", "a": "", "A": ""}))
	assert.Equal(t, []int64{0, 1, 2}, sortedKeys(map[int64]string{2: "", 0: "", 1: ""}))
	assert.Empty(t, sortedKeys(map[string]int(nil)))
}

func TestSortedQueues(t *testing.T) {
	mq := func(topic, broker string, id int32) client.MessageQueue {
		return client.MessageQueue{Topic: topic, BrokerName: broker, QueueID: id}
	}
	m := map[client.MessageQueue]int64{
		mq("T2", "a", 0): 0, mq("T1", "b", 0): 0, mq("T1", "a", 1): 0, mq("T1", "a", 0): 0,
	}
	assert.Equal(t, []client.MessageQueue{mq("T1", "a", 0), mq("T1", "a", 1), mq("T1", "b", 0), mq("T2", "a", 0)},
		sortedQueues(m))
}

// targetBrokers with -b or a known ClusterInfo never asks the admin, so a
// nil one shows it made no request.
func TestTargetBrokers(t *testing.T) {
	ci := &protocol.ClusterInfo{
		ClusterAddrTable: map[string][]string{"C1": {"broker-b", "broker-a"}, "C2": {"broker-c"}},
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"broker-a": {BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}},
			"broker-b": {BrokerName: "broker-b", BrokerAddrs: map[int64]string{0: "10.0.0.3:10911"}},
			"broker-c": {BrokerName: "broker-c", BrokerAddrs: map[int64]string{0: "10.0.0.4:10911"}},
		},
	}
	cases := []struct {
		name       string
		vals       values
		ci         *protocol.ClusterInfo
		withSlaves bool
		want       []string
	}{
		{"-b wins, no lookup", values{"b": " 10.9.9.9:10911 ", "c": "C1"}, nil, false, []string{"10.9.9.9:10911"}},
		{"-c masters", values{"c": "C1"}, ci, false, []string{"10.0.0.1:10911", "10.0.0.3:10911"}},
		{"-c with slaves", values{"c": "C1"}, ci, true, []string{"10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{vals: tc.vals, ctx: context.Background()}
			got, err := targetBrokers(e, nil, tc.ci, tc.withSlaves)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := targetBrokers(&env{vals: values{"c": "Nope"}, ctx: context.Background()}, nil, ci, false)
	assert.ErrorIs(t, err, errNoCluster)
}
