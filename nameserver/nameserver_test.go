package nameserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func brokerA() broker {
	return broker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:10911", ha: "127.0.0.1:10912",
		topics:  []*protocol.TopicConfig{tc("TopicA", 4, 4, 6), tc("TopicB", 8, 2, 6)},
		version: protocol.DataVersion{Timestamp: 1700000000000, Counter: 1}}
}

func TestRegisterAndQueryOverTheWire(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	cl := mustClient(t)
	a := brokerA()
	a.mustRegister(t, cl, ns.Addr())

	r := mustRoute(t, cl, ns.Addr(), "TopicA")
	require.Len(t, r.QueueDatas, 1)
	assert.Equal(t, protocol.QueueData{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, *r.QueueDatas[0])
	require.Len(t, r.BrokerDatas, 1)
	assert.Equal(t, map[int64]string{0: "127.0.0.1:10911"}, r.BrokerDatas[0].BrokerAddrs)

	// Unknown topic: TOPIC_NOT_EXIST with RocketMQ's remark.
	resp := mustInvoke(t, cl, ns.Addr(), routeRequest("Nope"))
	assert.Equal(t, remoting.TopicNotExist, resp.ResponseCode())
	assert.True(t, strings.HasPrefix(resp.Remark, "No topic route info in name server for the topic: Nope"), resp.Remark)

	// Route request without its topic: a clear error, not a crash.
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, nil, nil))
	assert.Equal(t, remoting.SystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "topic")

	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	ci, err := protocol.DecodeClusterInfo(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, []string{"broker-a"}, ci.ClusterAddrTable["DefaultCluster"])
	assert.Equal(t, "127.0.0.1:10911", ci.BrokerAddrTable["broker-a"].MasterAddr())

	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil))
	tl, err := protocol.DecodeTopicList(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, []string{"TopicA", "TopicB"}, tl.Topics)

	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.GetTopicsByCluster,
		protocol.EncodeHeader(&protocol.GetTopicsByClusterRequestHeader{Cluster: "DefaultCluster"}, nil), nil))
	tl, err = protocol.DecodeTopicList(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, []string{"TopicA", "TopicB"}, tl.Topics)

	// Wipe, then restore, write permission.
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.WipeWritePermOfBroker,
		protocol.EncodeHeader(&protocol.WipeWritePermOfBrokerRequestHeader{BrokerName: "broker-a"}, nil), nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	var wipe protocol.WipeWritePermOfBrokerResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &wipe))
	assert.Equal(t, int32(2), wipe.WipeTopicCount)
	assert.Equal(t, int32(4), mustRoute(t, cl, ns.Addr(), "TopicA").QueueDatas[0].Perm)
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.AddWritePermOfBroker,
		protocol.EncodeHeader(&protocol.AddWritePermOfBrokerRequestHeader{BrokerName: "broker-a"}, nil), nil))
	var add protocol.AddWritePermOfBrokerResponseHeader
	require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &add))
	assert.Equal(t, int32(2), add.AddTopicCount)
	assert.Equal(t, int32(6), mustRoute(t, cl, ns.Addr(), "TopicA").QueueDatas[0].Perm)

	// QUERY_DATA_VERSION.
	query := func(dv protocol.DataVersion) (bool, *protocol.DataVersion) {
		body, err := dv.Encode()
		require.NoError(t, err)
		h := &protocol.QueryDataVersionRequestHeader{BrokerName: "broker-a", BrokerAddr: a.addr, ClusterName: a.cluster}
		resp := mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.QueryDataVersion, protocol.EncodeHeader(h, nil), body))
		require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
		var rh protocol.QueryDataVersionResponseHeader
		require.NoError(t, protocol.DecodeHeader(resp.ExtFields, &rh))
		known, err := protocol.DecodeDataVersion(resp.Body)
		require.NoError(t, err)
		return rh.Changed, known
	}
	changed, known := query(a.version)
	assert.False(t, changed)
	assert.Equal(t, a.version, *known)
	changed, _ = query(a.version.Next())
	assert.True(t, changed)

	// Delete one topic.
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.DeleteTopicInNamesrv,
		protocol.EncodeHeader(&protocol.DeleteTopicFromNamesrvRequestHeader{Topic: "TopicB"}, nil), nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	assert.Equal(t, remoting.TopicNotExist, routeCode(t, cl, ns.Addr(), "TopicB"))

	// Unregister: the group is empty, its routes go.
	resp = mustInvoke(t, cl, ns.Addr(), remoting.NewRequest(remoting.UnregisterBroker, protocol.EncodeHeader(&protocol.UnRegisterBrokerRequestHeader{
		BrokerName: a.name, BrokerAddr: a.addr, ClusterName: a.cluster}, nil), nil))
	require.Equal(t, remoting.Success, resp.ResponseCode())
	assert.Equal(t, remoting.TopicNotExist, routeCode(t, cl, ns.Addr(), "TopicA"))
}

func TestRegisterSlaveAndCompressed(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	cl := mustClient(t)
	master := brokerA()
	master.compressed = true
	h := master.mustRegister(t, cl, ns.Addr())
	assert.Empty(t, h.MasterAddr)

	slave := broker{cluster: master.cluster, name: master.name, id: 1, addr: "127.0.0.2:10911", ha: "127.0.0.2:10912", compressed: true}
	h = slave.mustRegister(t, cl, ns.Addr())
	assert.Equal(t, protocol.RegisterBrokerResponseHeader{MasterAddr: master.addr, HaServerAddr: master.ha}, h)

	r := mustRoute(t, cl, ns.Addr(), "TopicB")
	assert.Equal(t, map[int64]string{0: master.addr, 1: slave.addr}, r.BrokerDatas[0].BrokerAddrs)
	assert.Equal(t, int32(2), r.QueueDatas[0].WriteQueueNums)
}

func TestRegisterBrokerBadInput(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	cl := mustClient(t)
	good := brokerA()

	tests := []struct {
		name   string
		mutate func(*remoting.Command)
		remark string
	}{
		{"crc mismatch", func(c *remoting.Command) { c.ExtFields["bodyCrc32"] = "1" }, "crc32 not match"},
		{"body not json", func(c *remoting.Command) { c.Body = []byte("{nope"); c.ExtFields["bodyCrc32"] = "0" }, "RegisterBrokerBody"},
		{"body not zlib", func(c *remoting.Command) { c.ExtFields["compressed"] = "true"; c.ExtFields["bodyCrc32"] = "0" }, "compressed"},
		{"missing brokerAddr", func(c *remoting.Command) { delete(c.ExtFields, "brokerAddr") }, "brokerAddr"},
		{"bad brokerId", func(c *remoting.Command) { c.ExtFields["brokerId"] = "one" }, "brokerId"},
		{"address with a comma", func(c *remoting.Command) { c.ExtFields["brokerAddr"] = "127.0.0.1:1,2" }, "broker address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := good.registerRequest(t)
			tt.mutate(req)
			resp := mustInvoke(t, cl, ns.Addr(), req)
			assert.Equal(t, remoting.SystemError, resp.ResponseCode())
			assert.Contains(t, resp.Remark, tt.remark)
		})
	}
	assert.Empty(t, ns.Routes().AllTopics(), "nothing was registered")

	// A broker older than 3.0.11 sends a bare TopicConfigSerializeWrapper.
	w := &protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{"Old": tc("Old", 2, 2, 6)}}
	body, err := w.Encode()
	require.NoError(t, err)
	req := good.registerRequest(t)
	req.Body = body
	req.Version = 36
	req.ExtFields["bodyCrc32"] = "0"
	resp := mustInvoke(t, cl, ns.Addr(), req)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, int32(2), mustRoute(t, cl, ns.Addr(), "Old").QueueDatas[0].ReadQueueNums)
}

func TestBinaryHeaderAnsweredInKind(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	cl := mustClient(t)
	a := brokerA()
	req := a.registerRequest(t)
	req.SerializeType = remoting.RocketMQSerialize
	resp := mustInvoke(t, cl, ns.Addr(), req)
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	assert.Equal(t, remoting.RocketMQSerialize, resp.SerializeType)

	req = routeRequest("TopicA")
	req.SerializeType = remoting.RocketMQSerialize
	resp = mustInvoke(t, cl, ns.Addr(), req)
	assert.Equal(t, remoting.Success, resp.ResponseCode())
	assert.Equal(t, remoting.RocketMQSerialize, resp.SerializeType)
}

func TestBrokerExpiresAfterSilence(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	cfg.ScanNotActiveBrokerInterval = 20
	// Long enough that broker b, re-registering every 50 ms, never looks
	// silent even on a loaded CI machine.
	cfg.BrokerChannelExpiredTime = 1000
	ns := MustStartNameServer(t, cfg)
	// Each broker has its own connection, as real brokers do: the
	// nameserver closes an expired broker's connection.
	cl, clA, clB := mustClient(t), mustClient(t), mustClient(t)
	a := brokerA()
	b := broker{cluster: "DefaultCluster", name: "broker-b", addr: "127.0.0.3:10911", topics: []*protocol.TopicConfig{tc("TopicA", 2, 2, 6)}}
	registeredAt := time.Now() // a's last update is no earlier than this
	a.mustRegister(t, clA, ns.Addr())
	b.mustRegister(t, clB, ns.Addr())
	require.Len(t, mustRoute(t, cl, ns.Addr(), "TopicA").QueueDatas, 2)

	// b keeps registering (every 50 ms, as a broker does every 30 s); a goes silent.
	require.Eventually(t, func() bool {
		b.mustRegister(t, clB, ns.Addr())
		_, alive := ns.Routes().LiveBroker(a.addr)
		return !alive
	}, 5*time.Second, 50*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(registeredAt), time.Second, "not dropped before its expiry")

	r := mustRoute(t, cl, ns.Addr(), "TopicA")
	require.Len(t, r.QueueDatas, 1)
	assert.Equal(t, "broker-b", r.QueueDatas[0].BrokerName)
	assert.Equal(t, remoting.TopicNotExist, routeCode(t, cl, ns.Addr(), "TopicB"), "a's queue data went with it")
	_, alive := ns.Routes().LiveBroker(b.addr)
	assert.True(t, alive)
}

func TestBrokerRemovedWhenConnectionCloses(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	brokerConn := mustClient(t)
	reader := mustClient(t)
	a := brokerA()
	a.mustRegister(t, brokerConn, ns.Addr())
	require.Equal(t, remoting.Success, routeCode(t, reader, ns.Addr(), "TopicA"))

	brokerConn.CloseConn(ns.Addr())
	require.Eventually(t, func() bool {
		return routeCode(t, reader, ns.Addr(), "TopicA") == remoting.TopicNotExist
	}, 5*time.Second, 10*time.Millisecond)
	_, alive := ns.Routes().LiveBroker(a.addr)
	assert.False(t, alive)

	// The reader's own connection closing removes nothing it did not register.
	a.mustRegister(t, brokerConn, ns.Addr())
	reader.CloseConn(ns.Addr())
	require.Equal(t, remoting.Success, routeCode(t, reader, ns.Addr(), "TopicA"))
}

func TestTwoNameServersEachHoldTheFullTable(t *testing.T) {
	verifyNoLeaks(t)
	ns1 := MustStartNameServer(t, testConfig(t))
	ns2 := MustStartNameServer(t, testConfig(t))
	a := brokerA()
	b := broker{cluster: "DefaultCluster", name: "broker-b", addr: "127.0.0.3:10911", topics: []*protocol.TopicConfig{tc("TopicA", 2, 2, 6), tc("TopicC", 1, 1, 6)}}
	// Each broker has one client and registers to every nameserver, as brokers do.
	for _, br := range []broker{a, b} {
		cl := mustClient(t)
		for _, ns := range []*NameServer{ns1, ns2} {
			br.mustRegister(t, cl, ns.Addr())
		}
	}
	reader := mustClient(t)
	for _, ns := range []*NameServer{ns1, ns2} {
		r := mustRoute(t, reader, ns.Addr(), "TopicA")
		assert.Len(t, r.QueueDatas, 2, ns.Addr())
		assert.Len(t, r.BrokerDatas, 2, ns.Addr())
		assert.Equal(t, []string{"TopicA", "TopicB", "TopicC"}, ns.Routes().AllTopics())
	}
	assert.Equal(t, ns1.Routes().ClusterInfo(), ns2.Routes().ClusterInfo())

	// One nameserver going away leaves the other whole.
	mustShutdown(t, ns1)
	assert.Len(t, mustRoute(t, reader, ns2.Addr(), "TopicA").QueueDatas, 2)
}

// rawConn is a plain TCP connection for sending bytes no well-behaved client would.
func rawConn(t *testing.T, addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// requireClosedByPeer waits for the server to close c: a read returns an
// error (EOF or reset), not a timeout.
func requireClosedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // a response to something earlier; keep reading
		}
		var ne net.Error
		require.False(t, errorsAs(err, &ne) && ne.Timeout(), "the server did not close the connection")
		return
	}
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

func frameWord(length int32, st byte, hlen int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(length))
	binary.BigEndian.PutUint32(b[4:], uint32(st)<<24|uint32(hlen))
	return b
}

func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	good := mustClient(t)
	brokerA().mustRegister(t, good, ns.Addr())

	badJSON := `{"code":105,"opaque":`
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"length over 16 MiB", frameWord(17<<20, 0, 10)},
		{"negative length", frameWord(-1, 0, 0)},
		{"header length beyond frame", append(frameWord(8, 0, 100), 0, 0, 0, 0)},
		{"unknown serialize type", append(frameWord(6, 7, 2), '{', '}')},
		{"invalid JSON header", append(frameWord(int32(4+len(badJSON)), 0, len(badJSON)), badJSON...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawConn(t, ns.Addr())
			_, err := c.Write(tt.bytes)
			require.NoError(t, err)
			// Meanwhile the good client, on its existing connection, is served.
			assert.Equal(t, remoting.Success, routeCode(t, good, ns.Addr(), "TopicA"))
			requireClosedByPeer(t, c)
			assert.Equal(t, remoting.Success, routeCode(t, good, ns.Addr(), "TopicA"))
		})
	}
	_, alive := ns.Routes().LiveBroker(brokerA().addr)
	assert.True(t, alive, "the registered broker's connection was never touched")
}

func TestUnknownCodeEchoesOpaque(t *testing.T) {
	verifyNoLeaks(t)
	ns := MustStartNameServer(t, testConfig(t))
	c := rawConn(t, ns.Addr())
	for _, st := range []remoting.SerializeType{remoting.JSONSerialize, remoting.RocketMQSerialize} {
		req := remoting.NewRequest(remoting.RequestCode(9999), map[string]string{"a": "b"}, nil)
		req.Opaque = 424242
		req.SerializeType = st
		frame, err := remoting.EncodeFrame(req)
		require.NoError(t, err)
		_, err = c.Write(frame)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := remoting.ReadCommand(bufio.NewReader(c))
		require.NoError(t, err)
		assert.True(t, resp.IsResponse())
		assert.Equal(t, remoting.RequestCodeNotSupported, resp.ResponseCode())
		assert.Equal(t, int32(424242), resp.Opaque)
		assert.Equal(t, st, resp.SerializeType)
	}
}

func TestFullPoolAnswersSystemBusy(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	cfg.ServerWorkerThreads = 1
	cfg.DefaultThreadPoolQueueCapacity = 1
	ns, err := New(cfg, testLogger())
	require.NoError(t, err)
	// A processor that blocks until released, on the nameserver's own pool.
	release := make(chan struct{})
	const blockCode = remoting.RequestCode(30000)
	ns.srv.Handle(blockCode, ns.pool, func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		<-release
		return remoting.NewResponse(req, remoting.Success, ""), nil
	})
	require.NoError(t, ns.Start())
	t.Cleanup(func() { mustShutdown(t, ns) })
	cl := mustClient(t)

	type result struct {
		resp *remoting.Command
		err  error
	}
	results := make(chan result, 2)
	invokeAsync := func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := cl.InvokeSync(ctx, ns.Addr(), remoting.NewRequest(blockCode, nil, nil))
			results <- result{resp, err}
		}()
	}
	invokeAsync() // takes the only worker
	require.Eventually(t, func() bool { return ns.pool.Busy() == 1 }, 5*time.Second, time.Millisecond)
	invokeAsync() // fills the queue
	require.Eventually(t, func() bool { return ns.pool.Queued() == 1 }, 5*time.Second, time.Millisecond)

	resp := mustInvoke(t, cl, ns.Addr(), routeRequest("TopicA"))
	assert.Equal(t, remoting.SystemBusy, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "busy")

	close(release)
	for range 2 {
		r := <-results
		require.NoError(t, r.err)
		assert.Equal(t, remoting.Success, r.resp.ResponseCode())
	}
	assert.Equal(t, remoting.TopicNotExist, routeCode(t, cl, ns.Addr(), "TopicA"), "served again once the pool drains")
}

func TestLifecycle(t *testing.T) {
	verifyNoLeaks(t)
	cfg := testConfig(t)
	ns, err := New(cfg, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, ns.Shutdown(ctx), "before Start")
	require.NoError(t, ns.Shutdown(ctx), "twice")

	ns = MustStartNameServer(t, cfg)
	assert.ErrorIs(t, ns.Start(), ErrAlreadyStarted)
	assert.True(t, strings.HasPrefix(ns.Addr(), "127.0.0.1:"))
	mustShutdown(t, ns)
	mustShutdown(t, ns)

	// A port already taken: Start fails with the listen error.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	cfg.ListenPort = busy.Addr().(*net.TCPAddr).Port
	ns2, err := New(cfg, nil)
	require.NoError(t, err)
	assert.Error(t, ns2.Start())
	require.NoError(t, ns2.Shutdown(ctx))

	cfg.ListenPort = -1
	_, err = New(cfg, nil)
	assert.ErrorContains(t, err, "listenPort")
}
