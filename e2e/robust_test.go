package e2e

// Robustness over the network: every request code, with missing headers,
// garbage and extreme header values and garbage bodies, then malformed
// frames on raw connections, against the broker and nameserver binaries,
// while a well-formed client keeps working (reliability.md tests 23 and 24).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// robustCodes is every request code remoting/codes.go names, plus codes no
// server knows (0, negative, huge).
var robustCodes = []remoting.RequestCode{
	remoting.SendMessage, remoting.PullMessage, remoting.QueryMessage, remoting.QueryBrokerOffset,
	remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset, remoting.UpdateAndCreateTopic,
	remoting.GetAllTopicConfig, remoting.GetTopicConfigList, remoting.GetTopicNameList,
	remoting.UpdateBrokerConfig, remoting.GetBrokerConfig, remoting.TriggerDeleteFiles,
	remoting.GetBrokerRuntimeInfo, remoting.SearchOffsetByTimestamp, remoting.GetMaxOffset,
	remoting.GetMinOffset, remoting.GetEarliestMsgStoreTime, remoting.ViewMessageByID, remoting.HeartBeat,
	remoting.UnregisterClient, remoting.ConsumerSendMsgBack, remoting.EndTransaction,
	remoting.GetConsumerListByGroup, remoting.CheckTransactionState, remoting.NotifyConsumerIdsChanged,
	remoting.LockBatchMQ, remoting.UnlockBatchMQ, remoting.GetAllConsumerOffset, remoting.GetAllDelayOffset,
	remoting.CheckClientConfig, remoting.UpdateAndCreateACLConfig, remoting.DeleteACLConfig,
	remoting.GetBrokerClusterACLInfo, remoting.UpdateGlobalWhiteAddrsConfig, remoting.GetBrokerClusterACLConfig,
	remoting.PutKVConfig, remoting.GetKVConfig, remoting.DeleteKVConfig, remoting.RegisterBroker,
	remoting.UnregisterBroker, remoting.GetRouteInfoByTopic, remoting.GetBrokerClusterInfo,
	remoting.UpdateAndCreateSubscription, remoting.GetAllSubscriptionGroupConfig, remoting.GetTopicStatsInfo,
	remoting.GetConsumerConnectionList, remoting.GetProducerConnectionList, remoting.WipeWritePermOfBroker,
	remoting.GetAllTopicListFromNameServer, remoting.DeleteSubscriptionGroup, remoting.GetConsumeStats,
	remoting.SuspendConsumer, remoting.ResumeConsumer, remoting.ResetConsumerOffsetInConsumer,
	remoting.ResetConsumerOffsetInBroker, remoting.AdjustConsumerThreadPool, remoting.WhoConsumeTheMessage,
	remoting.DeleteTopicInBroker, remoting.DeleteTopicInNamesrv, remoting.RegisterTopicInNamesrv,
	remoting.GetKVListByNamespace, remoting.ResetConsumerClientOffset, remoting.GetConsumerStatusFromClient,
	remoting.InvokeBrokerToResetOffset, remoting.InvokeBrokerToGetConsumerStatus, remoting.GetTopicsByCluster,
	remoting.QueryTopicConsumeByWho, remoting.RegisterFilterServer, remoting.QueryConsumeTimeSpan,
	remoting.GetSystemTopicListFromNS, remoting.GetSystemTopicListFromBroker, remoting.CleanExpiredConsumeQueue,
	remoting.GetConsumerRunningInfo, remoting.QueryCorrectionOffset, remoting.ConsumeMessageDirectly,
	remoting.SendMessageV2, remoting.GetUnitTopicList, remoting.GetHasUnitSubTopicList,
	remoting.GetHasUnitSubUnunitTopicList, remoting.CloneGroupOffset, remoting.ViewBrokerStatsData,
	remoting.CleanUnusedTopic, remoting.GetBrokerConsumeStats, remoting.UpdateNamesrvConfig,
	remoting.GetNamesrvConfig, remoting.SendBatchMessage, remoting.QueryConsumeQueue, remoting.QueryDataVersion,
	remoting.ResumeCheckHalfMessage, remoting.SendReplyMessage, remoting.SendReplyMessageV2,
	remoting.PushReplyMessageToClient, remoting.AddWritePermOfBroker, remoting.QueryTopicsByConsumer,
	remoting.QuerySubscriptionByConsumer, remoting.GetTopicConfig, remoting.GetSubscriptionGroupConfig,
	0, -1, 9999, 1 << 30, -(1 << 31),
}

// robustKeys is every extFields key a header in remoting/protocol declares
// (the short SEND_MESSAGE_V2 keys a-n included).
var robustKeys = strings.Fields(`MSG_REGION TRACE_ON a acceptStandardJsonOnly addTopicCount b batch
	beginTimestamp bname bodyCrc32 bornTimestamp brokerAddr brokerId brokerName c changed clientID clientId
	cluster clusterName commitLogOffset commitOffset commitOrRollback compressed consumerGroup d defaultTopic
	defaultTopicQueueNums delayLevel e endTimestamp expressionType f flag fromTransactionCheck g group groupName
	h haServerAddr i indexLastUpdatePhyoffset indexLastUpdateTimestamp isForce j jstackEnable k key l m
	masterAddr maxMsgNums maxNum maxOffset maxReconsumeTimes minOffset msgId n namespace nextBeginOffset offset
	offsetMsgId order originMsgId originTopic perm producerGroup properties queueId queueOffset readQueueNums
	reconsumeTimes removeOffset small subVersion subscription suggestWhichBrokerId suspendTimeoutMillis sysFlag
	timestamp topic topicFilterType topicSysFlag tranStateTableOffset transactionId unitMode value
	wipeTopicCount writeQueueNums`)

// robustNumericKeys get numbers in the plausible variant.
var robustNumericKeys = map[string]bool{
	"queueId": true, "queueOffset": true, "maxMsgNums": true, "sysFlag": true, "commitOffset": true,
	"suspendTimeoutMillis": true, "subVersion": true, "offset": true, "timestamp": true, "maxNum": true,
	"beginTimestamp": true, "endTimestamp": true, "commitLogOffset": true, "tranStateTableOffset": true,
	"perm": true, "readQueueNums": true, "writeQueueNums": true, "topicSysFlag": true, "bornTimestamp": true,
	"flag": true, "reconsumeTimes": true, "maxReconsumeTimes": true, "delayLevel": true, "brokerId": true,
	"defaultTopicQueueNums": true, "e": true, "d": true, "f": true, "g": true, "h": true, "j": true, "l": true,
}

// robustHeaders are the header variants sent with every code.
func robustHeaders(scratchTopic string) map[string]map[string]string {
	fill := func(v string) map[string]string {
		m := make(map[string]string, len(robustKeys))
		for _, k := range robustKeys {
			m[k] = v
		}
		return m
	}
	// Plausible names (a scratch topic, never the well-formed client's),
	// every number negative: the request parses, its values are illegal.
	plausible := func(num string) map[string]string {
		m := make(map[string]string, len(robustKeys))
		for _, k := range robustKeys {
			if robustNumericKeys[k] {
				m[k] = num
			} else {
				m[k] = scratchTopic
			}
		}
		m["properties"] = "DELAY\x01-3\x02UNIQ_KEY\x01x\x02"
		m["msgId"] = "ZZZZ"
		m["offsetMsgId"] = "7F00000100002A9F00000000FFFFFFFF"
		return m
	}
	return map[string]map[string]string{
		"no header":      nil,
		"empty values":   fill(""),
		"garbage values": fill("x%\x00\n{\"]\\\u00e9"),
		"minus one":      fill("-1"),
		"max int64":      fill("9223372036854775807"),
		"min int64":      fill("-9223372036854775808"),
		"overflow":       fill("99999999999999999999999999"),
		"float":          fill("1e308"),
		"negatives":      plausible("-7"),
		"huge numbers":   plausible("2147483647"),
		"long strings": {
			"topic": strings.Repeat("T", 70000), "consumerGroup": strings.Repeat("G", 70000),
			"properties": strings.Repeat("\x01\x02", 35000), "brokerName": strings.Repeat("B", 70000),
			"key": strings.Repeat("K", 70000), "queueId": strings.Repeat("9", 70000),
		},
	}
}

// robustBodies are the body variants sent with the plausible header.
func robustBodies(rng *rand.Rand) map[string][]byte {
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	return map[string][]byte{
		"truncated json": []byte(`{"topicConfigTable":{"x":`),
		"wrong types":    []byte(`{"topicConfigTable":[1,2],"offsetTable":"x","brokerDatas":{"a":1},"mqSet":7,"consumerDataSet":"y","producerDataSet":[null]}`),
		"null":           []byte(`null`),
		"huge number":    []byte(`{"a":1e999,"b":-99999999999999999999999999,"queueId":-1}`),
		"deep nesting":   []byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
		"random 512":     random(512),
		"random 64k":     random(64 << 10),
		"properties":     []byte("listenPort=1\nstorePathRootDir=/tmp/robust-must-not-exist\n\x00=\x00\n"),
	}
}

// robustOutcome counts what the fuzzed requests got.
type robustOutcome struct {
	answered, closed, notSupported int
	hangs                          []string
	// successes lists code/variant pairs answered SUCCESS although every
	// header value was garbage (a reader's hint, not a failure: a getter
	// that ignores its header may rightly succeed).
	successes []string
}

// fuzzServer sends every registered code × header variant (no body) and
// every registered code × body variant (plausible header) to addr, one
// garbage request per unregistered code, and records the outcomes. It also
// returns the codes the server registers (anything but
// REQUEST_CODE_NOT_SUPPORTED to a request without a header).
func fuzzServer(t *testing.T, cl *remoting.Client, addr, scratchTopic string, rng *rand.Rand) (robustOutcome, map[remoting.RequestCode]bool) {
	var out robustOutcome
	registered := make(map[remoting.RequestCode]bool)
	headers := robustHeaders(scratchTopic)
	bodies := robustBodies(rng)
	try := func(code remoting.RequestCode, what string, ext map[string]string, body []byte) *remoting.Command {
		if len(out.hangs) > 3 {
			return nil // the verdict is in; do not spend minutes on timeouts
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var e map[string]string
		if ext != nil {
			e = make(map[string]string, len(ext))
			for k, v := range ext {
				e[k] = v
			}
		}
		resp, err := cl.InvokeSync(ctx, addr, remoting.NewRequest(code, e, body))
		switch {
		case err == nil:
			out.answered++
			if resp.Code == int32(remoting.Success) && strings.HasPrefix(what, "header ") && what != "header negatives" && what != "header no header" {
				out.successes = append(out.successes, fmt.Sprintf("%d/%s", code, strings.TrimPrefix(what, "header ")))
			}
			if resp.Code == int32(remoting.RequestCodeNotSupported) {
				out.notSupported++
			}
			return resp
		case errors.Is(err, context.DeadlineExceeded):
			out.hangs = append(out.hangs, fmt.Sprintf("code %d, %s", code, what))
			cl.CloseConn(addr)
		default:
			out.closed++
			cl.CloseConn(addr)
		}
		return nil
	}
	for _, code := range robustCodes {
		resp := try(code, "no header", nil, nil)
		if resp == nil || resp.Code == int32(remoting.RequestCodeNotSupported) {
			// Not registered: one garbage request is enough to show the
			// code is refused before anything parses it.
			try(code, "garbage header and body", headers["garbage values"], bodies["random 512"])
			continue
		}
		registered[code] = true
		for name, h := range headers {
			try(code, "header "+name, h, nil)
		}
		for name, b := range bodies {
			try(code, "body "+name, headers["negatives"], b)
		}
		// Oneway: no answer expected, the server must not choke on it.
		req := remoting.NewRequest(code, headers["garbage values"], bodies["random 512"])
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = cl.InvokeOneway(ctx, addr, req)
		cancel()
	}
	return out, registered
}

// goodClient is a well-formed client working against the cluster while it
// is being fuzzed; every failure counts.
type goodClient struct {
	c      *binCluster
	cl     *remoting.Client
	topic  string
	ok     atomic.Int64
	errs   atomic.Int64
	mu     sync.Mutex
	first  error
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

func startGoodClient(c *binCluster, topic string) *goodClient {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	log.SetOutput(io.Discard)
	g := &goodClient{c: c, cl: remoting.NewClient(remoting.ClientConfig{Logger: log}), topic: topic,
		stop: make(chan struct{}), done: make(chan struct{})}
	go g.workLoop()
	return g
}

func (g *goodClient) fail(err error) {
	g.errs.Add(1)
	g.mu.Lock()
	if g.first == nil {
		g.first = err
	}
	g.mu.Unlock()
}

// workLoop sends a message, reads a max offset and a route, every 10 ms,
// until stopped (at most 100000 rounds).
func (g *goodClient) workLoop() {
	defer close(g.done)
	for i := range 100000 {
		select {
		case <-g.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		call := func(addr string, code remoting.RequestCode, header any, body []byte) {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			resp, err := g.cl.InvokeSync(ctx, addr, remoting.NewRequest(code, protocol.EncodeHeader(header, nil), body))
			if err == nil && resp.Code != int32(remoting.Success) {
				err = fmt.Errorf("code %d: %d %s", code, resp.Code, resp.Remark)
			}
			if err != nil {
				g.fail(fmt.Errorf("request %d to %s: %w", code, addr, err))
				return
			}
			g.ok.Add(1)
		}
		call(g.c.BrokerAddr, remoting.SendMessage, &protocol.SendMessageRequestHeader{
			ProducerGroup: "PG_GOOD", Topic: g.topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: int32(i % 4), BornTimestamp: time.Now().UnixMilli(),
		}, []byte(fmt.Sprintf("good-%d", i)))
		call(g.c.BrokerAddr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: g.topic, QueueID: int32(i % 4)}, nil)
		call(g.c.NamesrvAddr, remoting.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: g.topic}, nil)
	}
}

func (g *goodClient) close() {
	g.closed.Do(func() {
		close(g.stop)
		<-g.done
		_ = g.cl.Close()
	})
}

// TestRobustBadRequestsToBinaries: the broker and nameserver answer every
// request code with garbage in every header field and body (or close only
// that connection), never hang or die, and a well-formed client on its own
// connection is served all along; afterwards a normal send and pull work.
func TestRobustBadRequestsToBinaries(t *testing.T) {
	t.Parallel()
	c := startBinCluster(t, nil)
	topic, scratch := uniq("RobustGood"), uniq("RobustScratch")
	c.createTopic(topic, 4)
	c.createTopic(scratch, 4)
	c.waitRoute(topic)

	good := startGoodClient(c, topic)
	t.Cleanup(good.close)
	require.Eventually(t, func() bool { return good.ok.Load() >= 3 }, opTimeout, 10*time.Millisecond, "the well-formed client never got going")

	log := logrus.New()
	log.SetOutput(io.Discard)
	fuzz := remoting.NewClient(remoting.ClientConfig{Logger: log, DialTimeout: time.Second})
	t.Cleanup(func() { _ = fuzz.Close() })
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed: a failure reproduces

	for _, srv := range []struct {
		name, addr string
		must       []remoting.RequestCode
		p          *binProc
	}{
		{"broker", c.BrokerAddr, []remoting.RequestCode{remoting.SendMessage, remoting.PullMessage, remoting.HeartBeat}, c.broker},
		{"nameserver", c.NamesrvAddr, []remoting.RequestCode{remoting.GetRouteInfoByTopic, remoting.RegisterBroker}, c.ns},
	} {
		start := time.Now()
		out, registered := fuzzServer(t, fuzz, srv.addr, scratch, rng)
		for _, code := range srv.must {
			assert.True(t, registered[code], "%s: code %d not registered", srv.name, code)
		}
		assert.Empty(t, out.hangs, "%s: requests never answered (hang)", srv.name)
		// The frames were well formed: closing the connection over their
		// content would drop every other request in flight on it.
		assert.Zero(t, out.closed, "%s: connections closed over well-framed requests", srv.name)
		require.True(t, srv.p.running(), "%s died during the fuzz:\n%s", srv.name, tailLines(srv.p.lastRunLog(), 40))
		t.Logf("%s: %d codes registered; %d answered (%d REQUEST_CODE_NOT_SUPPORTED), %d connections closed, %d hangs, in %v",
			srv.name, len(registered), out.answered, out.notSupported, out.closed, len(out.hangs), time.Since(start).Round(time.Millisecond))
		t.Logf("%s: SUCCESS despite garbage header values: %s", srv.name, strings.Join(out.successes, " "))
	}

	configPathInjection(t, c)
	malformedFrames(t, c.BrokerAddr)
	malformedFrames(t, c.NamesrvAddr)

	good.close()
	good.mu.Lock()
	first := good.first
	good.mu.Unlock()
	assert.Zero(t, good.errs.Load(), "the well-formed client failed during the fuzz: %v", first)
	assert.Positive(t, good.ok.Load())

	require.True(t, c.broker.running(), "broker died")
	require.True(t, c.ns.running(), "nameserver died")
	r, err := c.send(topic, 2, "robust-after", []byte("robust-after"), nil)
	require.NoError(t, err, "send after the fuzz")
	msgs := c.pullAll(topic, 2)
	require.NotEmpty(t, msgs)
	assert.Equal(t, "robust-after", string(msgs[len(msgs)-1].Body))
	assert.Equal(t, r.QueueOffset, msgs[len(msgs)-1].QueueOffset)
	c.waitRoute(topic)

	for _, p := range []*binProc{c.broker, c.ns} {
		hits := scanLog(strings.NewReader(p.log()), "panic", "fatal error:", "DATA RACE")
		assert.Empty(t, hits, "%s logged a panic", p.name)
	}
	// No fuzzed UPDATE_BROKER_CONFIG body moved the store (CVE-2023-33246's
	// class of bug: config keys that name paths).
	resp := c.mustInvoke(c.BrokerAddr, remoting.GetBrokerConfig, nil, nil)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), "storePathRootDir="+c.StoreDir+"\n", "the store path changed")
	assert.NotContains(t, string(resp.Body), "robust-must-not-exist")
}

// frame builds a raw frame: total length, then the header-length word
// (serialize type in its high byte), then header and body, with lengths
// given explicitly so they can lie.
func frame(total uint32, serType byte, headerLen uint32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, total)
	b = binary.BigEndian.AppendUint32(b, uint32(serType)<<24|headerLen&0xFFFFFF)
	return append(b, rest...)
}

// jsonFrame is a well-framed request with header as its JSON header.
func jsonFrame(header string) []byte {
	return frame(uint32(4+len(header)), 0, uint32(len(header)), []byte(header))
}

// malformedFrames writes bad frames on raw connections to addr. Each
// connection must be answered or closed within the deadline (a frame that
// claims more bytes than sent may be waited for: then only our close ends
// it); the server must serve a fresh connection after each.
func malformedFrames(t *testing.T, addr string) {
	t.Helper()
	cases := []struct {
		name string
		b    []byte
		// complete: the frame is whole, so the server must answer or close.
		complete bool
	}{
		{"zero length", binary.BigEndian.AppendUint32(nil, 0), true},
		{"length 3", append(binary.BigEndian.AppendUint32(nil, 3), 1, 2, 3), true},
		{"length 2^31-1", append(binary.BigEndian.AppendUint32(nil, 1<<31-1), []byte("xxxxxxxx")...), true},
		{"length 2^32-1", append(binary.BigEndian.AppendUint32(nil, 1<<32-1), []byte("xxxxxxxx")...), true},
		{"header longer than frame", frame(10, 0, 1000, []byte("{\"code\":1}")), true},
		{"unknown serialize type", frame(14, 7, 10, []byte("0123456789")), true},
		{"ROCKETMQ header with lying lengths", frame(30, 1, 26, append([]byte{0, 10, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}, make([]byte, 10)...)), true},
		{"invalid JSON header", jsonFrame(`{"code":10,"opaque":`), true},
		{"JSON header of wrong types", jsonFrame(`{"code":"ten","opaque":[1],"extFields":{"topic":[1,2]},"flag":"x"}`), true},
		{"JSON header extFields null", jsonFrame(`{"code":10,"opaque":5,"extFields":null,"language":99999}`), true},
		{"JSON header huge numbers", jsonFrame(`{"code":1e300,"opaque":99999999999999999999,"version":-1}`), true},
		{"truncated frame", append(binary.BigEndian.AppendUint32(nil, 100), []byte("{\"code\"")...), false},
	}
	var outcomes []string
	for _, tc := range cases {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.NoError(t, err, "%s: dial %s after earlier bad frames", tc.name, addr)
		_, err = conn.Write(tc.b)
		require.NoError(t, err)
		wait := 3 * time.Second
		if !tc.complete {
			wait = 300 * time.Millisecond // it may rightly wait for the rest
		}
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 4096)
		n, rerr := conn.Read(buf)
		var ne net.Error
		timedOut := errors.As(rerr, &ne) && ne.Timeout()
		if tc.complete {
			assert.False(t, timedOut, "%s to %s: neither answered nor closed within 3 s", tc.name, addr)
		}
		switch {
		case n > 0:
			outcomes = append(outcomes, tc.name+": answered")
		case timedOut:
			outcomes = append(outcomes, tc.name+": kept open")
		default:
			outcomes = append(outcomes, tc.name+": closed")
		}
		_ = conn.Close()
	}
	t.Logf("bad frames to %s: %s", addr, strings.Join(outcomes, "; "))
}

// configPathInjection sends UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG
// bodies that point the servers' files at another directory
// (CVE-2023-33246 / CVE-2023-37582): both must refuse, and nothing may be
// written there by the writes that follow (a KV put, a topic creation, an
// offset persist).
func configPathInjection(t *testing.T, c *binCluster) {
	t.Helper()
	evil := t.TempDir()
	brokerBody := fmt.Sprintf("storePathRootDir=%[1]s\nstorePathCommitLog=%[1]s/cl\nrocketmqHome=%[1]s\nconfigStorePath=%[1]s/b.properties\n", evil)
	resp := c.mustInvoke(c.BrokerAddr, remoting.UpdateBrokerConfig, nil, []byte(brokerBody))
	assert.NotEqual(t, int32(remoting.Success), resp.Code, "broker accepted path keys: %s", brokerBody)
	nsBody := fmt.Sprintf("kvConfigPath=%[1]s/kv.json\nconfigStorePath=%[1]s/ns.properties\nrocketmqHome=%[1]s\n", evil)
	resp = c.mustInvoke(c.NamesrvAddr, remoting.UpdateNamesrvConfig, nil, []byte(nsBody))
	assert.NotEqual(t, int32(remoting.Success), resp.Code, "nameserver accepted path keys: %s", nsBody)

	resp = c.mustInvoke(c.NamesrvAddr, remoting.PutKVConfig, &protocol.PutKVConfigRequestHeader{Namespace: "robust", Key: "k", Value: "v"}, nil)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	c.createTopic(uniq("RobustAfterInjection"), 1)
	time.Sleep(1200 * time.Millisecond) // one flushConsumerOffsetInterval (1 s) for the periodic writers
	entries, err := os.ReadDir(evil)
	require.NoError(t, err)
	assert.Empty(t, entries, "a server wrote into the injected directory")
}
