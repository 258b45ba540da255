package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func MustAdmin(t *testing.T, opts ...Option) *Admin {
	t.Helper()
	a, err := NewAdmin(append([]Option{WithLogger(testLogger())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

func TestAdminNameServerSide(t *testing.T) {
	ns := MustStartNameServer(t)
	fb := MustStartFakeBroker(t, "broker-a", ns.Addr())
	fb.AddTopic("Orders", 3)
	a := MustAdmin(t, WithNameServer(ns.Addr()))
	ctx := testCtx(t)

	topics, err := a.TopicList(ctx)
	require.NoError(t, err)
	assert.Contains(t, topics, "Orders")

	route, err := a.TopicRoute(ctx, "Orders")
	require.NoError(t, err)
	require.Len(t, route.QueueDatas, 1)
	assert.Equal(t, int32(3), route.QueueDatas[0].WriteQueueNums)
	assert.Equal(t, fb.Addr(), route.BrokerDatas[0].MasterAddr())

	ci, err := a.ClusterInfo(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"broker-a"}, ci.ClusterAddrTable["TestCluster"])
	masters, err := a.masters(ctx, "TestCluster")
	require.NoError(t, err)
	assert.Equal(t, []string{fb.Addr()}, masters)
	_, err = a.masters(ctx, "NoCluster")
	assert.ErrorIs(t, err, ErrBrokerNotFound)

	require.NoError(t, a.PutKVConfig(ctx, "ORDER_TOPIC_CONFIG", "Orders", "broker-a:3"))
	v, err := a.GetKVConfig(ctx, "ORDER_TOPIC_CONFIG", "Orders")
	require.NoError(t, err)
	assert.Equal(t, "broker-a:3", v)
	kv, err := a.KVList(ctx, "ORDER_TOPIC_CONFIG")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Orders": "broker-a:3"}, kv)
	require.NoError(t, a.DeleteKVConfig(ctx, "ORDER_TOPIC_CONFIG", "Orders"))
	_, err = a.GetKVConfig(ctx, "ORDER_TOPIC_CONFIG", "Orders")
	assert.Error(t, err)

	cfg, err := a.NameServerConfig(ctx, ns.Addr())
	require.NoError(t, err)
	assert.NotEmpty(t, cfg)
}

func TestProperties(t *testing.T) {
	in := map[string]string{"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH"}
	b := formatProperties(in)
	assert.Equal(t, "brokerName=broker-a\nflushDiskType=ASYNC_FLUSH\n", string(b))
	assert.Equal(t, in, parseProperties(b))
	assert.Equal(t, map[string]string{"a": "b=c"}, parseProperties([]byte("# comment\n\na = b=c\nnoequals\n")))
}
