package nameserver

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func topics(dv protocol.DataVersion, tcs ...*protocol.TopicConfig) *protocol.TopicConfigSerializeWrapper {
	w := &protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{}, DataVersion: dv}
	for _, tc := range tcs {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	return w
}

func tc(name string, r, w, perm int32) *protocol.TopicConfig {
	return &protocol.TopicConfig{TopicName: name, ReadQueueNums: r, WriteQueueNums: w, Perm: perm, TopicFilterType: protocol.SingleTag}
}

func mustRegister(t *testing.T, m *RouteInfoManager, req RegisterBrokerRequest) RegisterBrokerResult {
	t.Helper()
	res, err := m.RegisterBroker(req)
	require.NoError(t, err)
	return res
}

func TestRegisterAndPickRoute(t *testing.T) {
	m := NewRouteInfoManager(nil)
	dv := protocol.DataVersion{Timestamp: 1, Counter: 1}
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c1", BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", HaServerAddr: "10.0.0.1:10912",
		Topics: topics(dv, tc("T1", 4, 4, 6), tc("T2", 8, 2, 6)), ConnID: 1})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c1", BrokerName: "broker-b", BrokerAddr: "10.0.0.3:10911",
		Topics: topics(dv, tc("T1", 2, 2, 6)), ConnID: 2})

	r := m.PickupTopicRouteData("T1")
	require.NotNil(t, r)
	require.Len(t, r.QueueDatas, 2)
	assert.Equal(t, protocol.QueueData{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, *r.QueueDatas[0])
	assert.Equal(t, "broker-b", r.QueueDatas[1].BrokerName)
	require.Len(t, r.BrokerDatas, 2)
	assert.Equal(t, map[int64]string{0: "10.0.0.1:10911"}, r.BrokerDatas[0].BrokerAddrs)

	// The route is a copy.
	r.BrokerDatas[0].BrokerAddrs[5] = "x:1"
	r.QueueDatas[0].Perm = 0
	r2 := m.PickupTopicRouteData("T1")
	assert.Len(t, r2.BrokerDatas[0].BrokerAddrs, 1)
	assert.Equal(t, int32(6), r2.QueueDatas[0].Perm)

	assert.Nil(t, m.PickupTopicRouteData("nope"))
	assert.Equal(t, []string{"T1", "T2"}, m.AllTopics())
	assert.Equal(t, []string{"T1", "T2"}, m.TopicsByCluster("c1"))
	assert.Empty(t, m.TopicsByCluster("other"))

	ci := m.ClusterInfo()
	assert.Equal(t, []string{"broker-a", "broker-b"}, ci.ClusterAddrTable["c1"])
	assert.Equal(t, "10.0.0.3:10911", ci.BrokerAddrTable["broker-b"].MasterAddr())
}

func TestRegisterSlaveLearnsMaster(t *testing.T) {
	m := NewRouteInfoManager(nil)
	// The slave registers first: no master known yet.
	res := mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 1, BrokerAddr: "10.0.0.2:10911", HaServerAddr: "10.0.0.2:10912"})
	assert.Equal(t, RegisterBrokerResult{}, res)

	res = mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 0, BrokerAddr: "10.0.0.1:10911", HaServerAddr: "10.0.0.1:10912"})
	assert.Equal(t, RegisterBrokerResult{}, res, "a master is told nothing")

	res = mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 1, BrokerAddr: "10.0.0.2:10911", HaServerAddr: "10.0.0.2:10912"})
	assert.Equal(t, RegisterBrokerResult{MasterAddr: "10.0.0.1:10911", HaServerAddr: "10.0.0.1:10912"}, res)
}

func TestSlaveTopicsDoNotReplaceQueueData(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.1:1", Topics: topics(protocol.DataVersion{Counter: 1}, tc("T", 4, 4, 6))})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 1, BrokerAddr: "10.0.0.2:1", Topics: topics(protocol.DataVersion{Counter: 9}, tc("T", 1, 1, 4), tc("S", 1, 1, 4))})
	r := m.PickupTopicRouteData("T")
	require.NotNil(t, r)
	assert.Equal(t, int32(4), r.QueueDatas[0].WriteQueueNums)
	assert.Nil(t, m.PickupTopicRouteData("S"))
	assert.Equal(t, map[int64]string{0: "10.0.0.1:1", 1: "10.0.0.2:1"}, r.BrokerDatas[0].BrokerAddrs)
}

func TestQueueDataReplacedOnlyWhenVersionChanges(t *testing.T) {
	m := NewRouteInfoManager(nil)
	req := RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.1:1", Topics: topics(protocol.DataVersion{Counter: 1}, tc("T", 4, 4, 6))}
	mustRegister(t, m, req)
	assert.Equal(t, 1, m.WipeWritePerm("b"))
	assert.Equal(t, int32(4), m.PickupTopicRouteData("T").QueueDatas[0].Perm)

	// Same version: the wipe survives the periodic registration.
	mustRegister(t, m, req)
	assert.Equal(t, int32(4), m.PickupTopicRouteData("T").QueueDatas[0].Perm)
	assert.False(t, m.IsBrokerTopicConfigChanged("10.0.0.1:1", protocol.DataVersion{Counter: 1}))
	assert.True(t, m.IsBrokerTopicConfigChanged("10.0.0.1:1", protocol.DataVersion{Counter: 2}))

	// New version: the broker's view wins.
	req.Topics = topics(protocol.DataVersion{Counter: 2}, tc("T", 8, 8, 6))
	mustRegister(t, m, req)
	qd := m.PickupTopicRouteData("T").QueueDatas[0]
	assert.Equal(t, int32(6), qd.Perm)
	assert.Equal(t, int32(8), qd.WriteQueueNums)

	assert.Equal(t, 1, m.WipeWritePerm("b"))
	assert.Equal(t, 1, m.AddWritePerm("b"))
	assert.Equal(t, int32(6), m.PickupTopicRouteData("T").QueueDatas[0].Perm)
	assert.Equal(t, 0, m.WipeWritePerm("unknown"))
}

func TestSlavePromotedKeepsOneIDPerAddress(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 1, BrokerAddr: "10.0.0.2:1"})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 0, BrokerAddr: "10.0.0.2:1"})
	assert.Equal(t, map[int64]string{0: "10.0.0.2:1"}, m.ClusterInfo().BrokerAddrTable["b"].BrokerAddrs)
}

func TestRegisterRejectsBadInput(t *testing.T) {
	m := NewRouteInfoManager(nil)
	tests := []struct {
		name string
		req  RegisterBrokerRequest
		err  error
	}{
		{"no cluster", RegisterBrokerRequest{BrokerName: "b", BrokerAddr: "1.2.3.4:5"}, ErrBadRegistration},
		{"no name", RegisterBrokerRequest{ClusterName: "c", BrokerAddr: "1.2.3.4:5"}, ErrBadRegistration},
		{"negative id", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: -1, BrokerAddr: "1.2.3.4:5"}, ErrBadRegistration},
		{"no port", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "1.2.3.4"}, ErrBadBrokerAddr},
		{"comma", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "1.2.3.4:5,6"}, ErrBadBrokerAddr},
		{"quote", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: `1.2.3.4:5"`}, ErrBadBrokerAddr},
		{"space", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "1.2.3.4: 5"}, ErrBadBrokerAddr},
		{"port zero", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "1.2.3.4:0"}, ErrBadBrokerAddr},
		{"bad ha", RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "1.2.3.4:5", HaServerAddr: "a,b"}, ErrBadBrokerAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.RegisterBroker(tt.req)
			assert.ErrorIs(t, err, tt.err)
		})
	}
	assert.Empty(t, m.ClusterInfo().BrokerAddrTable)
}

func TestUnregisterBroker(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.1:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerID: 1, BrokerAddr: "10.0.0.2:1"})

	m.UnregisterBroker("c", "10.0.0.1:1", "b", 0)
	r := m.PickupTopicRouteData("T")
	require.NotNil(t, r, "the slave still serves reads")
	assert.Equal(t, map[int64]string{1: "10.0.0.2:1"}, r.BrokerDatas[0].BrokerAddrs)
	_, ok := m.LiveBroker("10.0.0.1:1")
	assert.False(t, ok)

	m.UnregisterBroker("c", "10.0.0.2:1", "b", 1)
	assert.Nil(t, m.PickupTopicRouteData("T"))
	assert.Empty(t, m.AllTopics())
	assert.Empty(t, m.ClusterInfo().ClusterAddrTable)
	m.UnregisterBroker("c", "10.0.0.2:1", "b", 1) // twice is harmless
}

func TestScanNotActiveBroker(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6), tc("OnlyA", 1, 1, 6))})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.2:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})

	assert.Empty(t, m.ScanNotActiveBroker(time.Now().Add(-time.Minute)))
	require.NotNil(t, m.PickupTopicRouteData("OnlyA"))

	// Make a look silent: its registration is older than the deadline, b's is refreshed.
	deadline := time.Now()
	require.Eventually(t, func() bool { return time.Now().After(deadline) }, time.Second, time.Millisecond)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.2:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})

	assert.Equal(t, []string{"10.0.0.1:1"}, m.ScanNotActiveBroker(deadline))
	assert.Nil(t, m.PickupTopicRouteData("OnlyA"))
	r := m.PickupTopicRouteData("T")
	require.NotNil(t, r)
	require.Len(t, r.QueueDatas, 1)
	assert.Equal(t, "b", r.QueueDatas[0].BrokerName)
	assert.Equal(t, []string{"b"}, m.ClusterInfo().ClusterAddrTable["c"])
}

func TestRemoveByConn(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:1", ConnID: 7, Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.2:1", ConnID: 8, Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})
	assert.Empty(t, m.RemoveByConn(0))
	assert.Empty(t, m.RemoveByConn(99))
	assert.Equal(t, []string{"10.0.0.1:1"}, m.RemoveByConn(7))
	r := m.PickupTopicRouteData("T")
	require.NotNil(t, r)
	assert.Len(t, r.BrokerDatas, 1)

	// Re-registered over a new connection: closing the old one changes nothing.
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c", BrokerName: "b", BrokerAddr: "10.0.0.2:1", ConnID: 9, Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})
	assert.Empty(t, m.RemoveByConn(8))
	assert.NotNil(t, m.PickupTopicRouteData("T"))
}

func TestDeleteTopic(t *testing.T) {
	m := NewRouteInfoManager(nil)
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c1", BrokerName: "a", BrokerAddr: "10.0.0.1:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6), tc("U", 1, 1, 6))})
	mustRegister(t, m, RegisterBrokerRequest{ClusterName: "c2", BrokerName: "b", BrokerAddr: "10.0.0.2:1", Topics: topics(protocol.DataVersion{}, tc("T", 4, 4, 6))})

	assert.True(t, m.DeleteTopic("T", "c1"))
	r := m.PickupTopicRouteData("T")
	require.NotNil(t, r)
	assert.Equal(t, "b", r.QueueDatas[0].BrokerName)
	assert.False(t, m.DeleteTopic("T", "c1"))
	assert.True(t, m.DeleteTopic("T", ""))
	assert.Nil(t, m.PickupTopicRouteData("T"))
	assert.False(t, m.DeleteTopic("T", ""))
	assert.Equal(t, []string{"U"}, m.AllTopics())
}

func TestRouteInfoManagerConcurrent(t *testing.T) {
	m := NewRouteInfoManager(nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 200 {
				_, _ = m.RegisterBroker(RegisterBrokerRequest{ClusterName: "c", BrokerName: fmt.Sprintf("b%d", i), BrokerAddr: fmt.Sprintf("10.0.0.%d:1", i+1),
					ConnID: uint64(i + 1), Topics: topics(protocol.DataVersion{Counter: int64(j)}, tc("T", 4, 4, 6))})
				if j%50 == 0 {
					m.RemoveByConn(uint64(i + 1))
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if r := m.PickupTopicRouteData("T"); r != nil {
					_, _ = r.Encode()
				}
				_ = m.ClusterInfo()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, m.ClusterInfo().BrokerAddrTable, 4)
}

func BenchmarkPickupTopicRouteData(b *testing.B) {
	m := NewRouteInfoManager(nil)
	for i := range 8 {
		_, _ = m.RegisterBroker(RegisterBrokerRequest{ClusterName: "c", BrokerName: fmt.Sprintf("b%d", i), BrokerAddr: fmt.Sprintf("10.0.0.%d:1", i+1),
			Topics: topics(protocol.DataVersion{}, tc("T", 8, 8, 6))})
	}
	b.ReportAllocs()
	for b.Loop() {
		if m.PickupTopicRouteData("T") == nil {
			b.Fatal("no route")
		}
	}
}
