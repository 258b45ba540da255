package nameserver

// The oracle: Apache's own Go client, driven against our nameserver. No
// goleak here: the official client keeps goroutines after Close.

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// mustStartFakeBroker is our remoting server standing in for a broker at a
// registered address; it records the topics the official client asks it to
// delete, which proves the client resolved the broker address from our route.
func mustStartFakeBroker(t *testing.T) (*remoting.Server, <-chan string) {
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", Logger: testLogger(), NumEventLoops: 1})
	pool := srv.NewPool("fake-broker", 1, 8)
	deleted := make(chan string, 4)
	srv.Handle(remoting.DeleteTopicInBroker, pool, func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		deleted <- req.ExtFields["topic"]
		return remoting.NewResponse(req, remoting.Success, ""), nil
	})
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv, deleted
}

type queueKey struct {
	broker string
	id     int
}

func queueKeys(mqs []*primitive.MessageQueue, topic string, t *testing.T) []queueKey {
	keys := make([]queueKey, 0, len(mqs))
	for _, mq := range mqs {
		assert.Equal(t, topic, mq.Topic)
		keys = append(keys, queueKey{mq.BrokerName, mq.QueueId})
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].broker != keys[j].broker {
			return keys[i].broker < keys[j].broker
		}
		return keys[i].id < keys[j].id
	})
	return keys
}

func TestOfficialClientSeesRegisteredBroker(t *testing.T) {
	rlog.SetLogLevel("fatal")
	ns := MustStartNameServer(t, testConfig(t))
	fake, deleted := mustStartFakeBroker(t)

	// broker-a: a master (the fake broker) and a slave, two topics; broker-b
	// shares TopicA. Registered through our remoting client, JSON and zlib bodies.
	cl := mustClient(t)
	a := broker{cluster: "DefaultCluster", name: "broker-a", addr: fake.Addr(), ha: "127.0.0.1:10912",
		topics:  []*protocol.TopicConfig{tc("TopicA", 4, 4, 6), tc("TopicB", 8, 2, 6)},
		version: protocol.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}}
	a.mustRegister(t, cl, ns.Addr())
	slave := broker{cluster: "DefaultCluster", name: "broker-a", id: 1, addr: "127.0.0.1:20911", ha: "127.0.0.1:20912"}
	h := slave.mustRegister(t, cl, ns.Addr())
	require.Equal(t, fake.Addr(), h.MasterAddr)
	b := broker{cluster: "DefaultCluster", name: "broker-b", addr: "127.0.0.2:10911", compressed: true,
		topics: []*protocol.TopicConfig{tc("TopicA", 2, 2, 6)}}
	b.mustRegister(t, cl, ns.Addr())

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tl, err := adm.FetchAllTopicList(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"TopicA", "TopicB"}, tl.TopicList)

	// Publish queues come from the route's write queues of groups with a master.
	mqs, err := adm.FetchPublishMessageQueues(ctx, "TopicA")
	require.NoError(t, err)
	assert.Equal(t, []queueKey{{"broker-a", 0}, {"broker-a", 1}, {"broker-a", 2}, {"broker-a", 3}, {"broker-b", 0}, {"broker-b", 1}},
		queueKeys(mqs, "TopicA", t))
	mqs, err = adm.FetchPublishMessageQueues(ctx, "TopicB")
	require.NoError(t, err)
	assert.Equal(t, []queueKey{{"broker-a", 0}, {"broker-a", 1}}, queueKeys(mqs, "TopicB", t))

	clusters, err := adm.FetchClusterList("TopicA")
	require.NoError(t, err)
	assert.Equal(t, []string{"DefaultCluster"}, clusters)

	_, err = adm.FetchPublishMessageQueues(ctx, "NoSuchTopic")
	assert.ErrorIs(t, err, rmqerrors.ErrTopicNotExist, "TOPIC_NOT_EXIST is understood")

	// DeleteTopic resolves the broker from our route (the master of the only
	// group holding TopicB, i.e. the fake broker), then deletes on the nameserver.
	require.NoError(t, adm.DeleteTopic(ctx, admin.WithTopicDelete("TopicB")))
	select {
	case topic := <-deleted:
		assert.Equal(t, "TopicB", topic)
	case <-ctx.Done():
		t.Fatal("the official client never reached the broker address from our route")
	}
	assert.Equal(t, []string{"TopicA"}, ns.Routes().AllTopics())
	tl, err = adm.FetchAllTopicList(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"TopicA"}, tl.TopicList)
}
