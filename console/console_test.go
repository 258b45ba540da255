package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

const waitFor = 30 * time.Second

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// mustCluster starts a nameserver and a broker on loopback, stopped when
// the test ends, and returns the nameserver's address and the broker.
func mustCluster(t testing.TB) (string, *broker.Broker) {
	t.Helper()
	stop := func(s interface{ Shutdown(context.Context) error }) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, s.Shutdown(ctx))
		})
	}
	nsCfg := conf.DefaultNamesrvConfig()
	nsCfg.BindAddress, nsCfg.ListenPort = "127.0.0.1", 0
	nsCfg.KvConfigPath = filepath.Join(t.TempDir(), "kv.json")
	nsCfg.ServerSelectorThreads = 1
	ns, err := nameserver.New(nsCfg, quietLog())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	stop(ns)
	cfg := conf.DefaultBrokerConfig()
	cfg.BrokerName = "broker-a"
	cfg.BrokerIP1, cfg.BindAddress, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	cfg.NamesrvAddr = ns.Addr()
	cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 1000, 4000
	cfg.ServerSelectorThreads = 1
	b, err := broker.New(&cfg, quietLog())
	require.NoError(t, err)
	require.NoError(t, b.Start())
	stop(b)
	return ns.Addr(), b
}

// mustConsole builds a console over the cluster at ns, served by an
// httptest server.
func mustConsole(t testing.TB, ns string, readOnly bool) (*Server, *httptest.Server) {
	t.Helper()
	c, err := New(Config{ClientOptions: []client.Option{client.WithNameServer(ns), client.WithLogger(quietLog())}, ReadOnly: readOnly, Log: quietLog()})
	require.NoError(t, err)
	hs := httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, c.Shutdown(context.Background()))
	})
	return c, hs
}

// noRedirect is an HTTP client that shows redirects instead of following.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: waitFor}

func get(t *testing.T, hs *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(hs.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, hs *httptest.Server, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.PostForm(hs.URL+path, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestConsoleEscapesWhatTheClusterHolds: a crafted topic name is refused
// with the name shown as text, and a message whose body, tag and keys hold
// markup is shown as text on every page it appears on.
func TestConsoleEscapesWhatTheClusterHolds(t *testing.T) {
	ns, b := mustCluster(t)
	c, hs := mustConsole(t, ns, false)

	crafted := `<img src=x onerror="alert(1)">`
	resp, body := post(t, hs, "/topics", url.Values{"token": {c.token}, "topic": {crafted}, "read": {"4"}, "write": {"4"}, "perm": {"6"}, "target": {"broker:" + b.Addr()}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, `&lt;img src=x onerror=&#34;alert(1)&#34;&gt;`)
	assert.NotContains(t, body, crafted)

	resp, _ = post(t, hs, "/topics", url.Values{"token": {c.token}, "topic": {"EscTopic"}, "read": {"4"}, "write": {"4"}, "perm": {"6"}, "target": {"broker:" + b.Addr()}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	created := "Topic EscTopic created (4 read, 4 write queues)."
	assert.Equal(t, "/topic?"+url.Values{"flash": {created}, "fsig": {c.flashMAC(created)}, "topic": {"EscTopic"}}.Encode(), resp.Header.Get("Location"))
	require.Eventually(t, func() bool { code, _ := get(t, hs, "/topic?topic=EscTopic"); return code == http.StatusOK }, waitFor, 50*time.Millisecond)

	script := `<script>document.title="pwned"</script><b>bold</b>`
	resp, _ = post(t, hs, "/topic/send", url.Values{"token": {c.token}, "topic": {"EscTopic"}, "body": {script},
		"tag": {`<i>t</i>`}, "keys": {`k1 "><svg/onload=alert(2)>`}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc := resp.Header.Get("Location")
	id := regexp.MustCompile(`offsetMsgId\+([0-9A-F]+)`).FindStringSubmatch(loc)
	require.Len(t, id, 2, loc)

	_, page := get(t, hs, "/message?id="+id[1])
	assert.Contains(t, page, `&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;`)
	assert.NotContains(t, page, "<script>document")
	assert.NotContains(t, page, "<b>bold")
	assert.NotContains(t, page, "<svg")
	assert.Contains(t, page, `&lt;i&gt;t&lt;/i&gt;`)

	// The key search shows it, escaped, and the flash of a redirect too.
	_, page = get(t, hs, "/messages?"+url.Values{"by": {"key"}, "topic": {"EscTopic"}, "key": {"k1"}}.Encode())
	assert.Contains(t, page, `class="msg-link" href="/message?id=`+id[1]+`"`, "the link's query is escaped once")
	assert.NotContains(t, page, "<svg")
	// A flash the console did not issue is not shown: a crafted link
	// cannot make it say anything.
	_, page = get(t, hs, "/cluster?flash="+url.QueryEscape("Topic orders deleted."))
	assert.NotContains(t, page, "Topic orders deleted.")
	_, page = get(t, hs, "/cluster?"+url.Values{"flash": {"Topic orders deleted."}, "fsig": {c.flashMAC("Topic orders")}}.Encode())
	assert.NotContains(t, page, "Topic orders deleted.")
	_, page = get(t, hs, "/cluster?"+url.Values{"flash": {"Topic EscTopic created."}, "fsig": {c.flashMAC("Topic EscTopic created.")}}.Encode())
	assert.Contains(t, page, `id="flash">Topic EscTopic created.<`)
	// One it issued is escaped like everything else.
	_, page = get(t, hs, "/cluster?"+url.Values{"flash": {crafted}, "fsig": {c.flashMAC(crafted)}}.Encode())
	assert.NotContains(t, page, crafted)
	assert.Contains(t, page, `&lt;img src=x`)
	// A query value out of the rules never reaches the cluster.
	code, page := get(t, hs, "/topic?topic="+url.QueryEscape(crafted))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.NotContains(t, page, crafted)

	code, _ = get(t, hs, "/static/console.js")
	assert.Equal(t, http.StatusOK, code)
	resp, err := noRedirect.Get(hs.URL + "/cluster")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
}

// TestConsoleWritesNeedTokenAndWritableMode: a post without the form token
// is refused, and a read-only console refuses and hides every write.
func TestConsoleWritesNeedTokenAndWritableMode(t *testing.T) {
	ns, b := mustCluster(t)
	c, hs := mustConsole(t, ns, false)
	resp, body := post(t, hs, "/topics", url.Values{"topic": {"NoToken"}, "read": {"1"}, "write": {"1"}, "perm": {"6"}, "target": {"broker:" + b.Addr()}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, body, "stale or from another site")
	resp, _ = post(t, hs, "/topics", url.Values{"token": {"wrong"}, "topic": {"NoToken"}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	ro, rhs := mustConsole(t, ns, true)
	for _, path := range []string{"/topics", "/topic/send", "/topic/delete", "/group/reset", "/group/skip", "/message/resend", "/message/deliver"} {
		resp, body := post(t, rhs, path, url.Values{"token": {ro.token}, "topic": {"T"}})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		assert.Contains(t, body, "read-only", path)
	}
	code, page := get(t, rhs, "/topics")
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, page, `id="create-topic"`)
	assert.Contains(t, page, `id="read-only"`)
	_, page = get(t, hs, "/topics")
	assert.Contains(t, page, `id="create-topic"`)
	assert.NotContains(t, page, `id="read-only"`)
	_ = c
}

// TestConsoleStatsAPI: the chart's source reports every broker's totals.
func TestConsoleStatsAPI(t *testing.T) {
	ns, b := mustCluster(t)
	_, hs := mustConsole(t, ns, true)
	var pt statsPoint
	require.Eventually(t, func() bool {
		code, body := get(t, hs, "/api/stats")
		return code == http.StatusOK && json.Unmarshal([]byte(body), &pt) == nil && len(pt.Brokers) == 1
	}, waitFor, 50*time.Millisecond)
	assert.Equal(t, b.Addr(), pt.Brokers[0].Addr)
	assert.Positive(t, pt.Time)
	code, body := get(t, hs, "/")
	assert.Equal(t, http.StatusSeeOther, code, body)
}

func TestInputRules(t *testing.T) {
	_, err := checkName("topic", "ok_Topic-1%|x")
	assert.NoError(t, err)
	for _, bad := range []string{"", "a b", "<x>", strings.Repeat("a", 128), "a/b", "a\nb"} {
		_, err := checkName("topic", bad)
		assert.ErrorIs(t, err, ErrBadInput, bad)
	}
	_, err = checkMsgID("7F00000100002A9F0000000000000000")
	assert.NoError(t, err)
	_, err = checkMsgID("xyz")
	assert.ErrorIs(t, err, ErrBadInput)
	_, err = checkText("body", "\xff", 10, true)
	assert.ErrorIs(t, err, ErrBadInput)
	_, err = checkText("body", "", 10, true)
	assert.ErrorIs(t, err, ErrBadInput)
	at, err := parseWhen("2024-03-01T10:20")
	require.NoError(t, err)
	assert.Equal(t, 10, at.Hour())
	at, err = parseWhen("1700000000000")
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000000), at.UnixMilli())
	_, err = parseWhen("yesterday")
	assert.ErrorIs(t, err, ErrBadInput)
	assert.True(t, viewBody([]byte{0xff, 0x00}).Binary)
	assert.Equal(t, "ff 00", viewBody([]byte{0xff, 0x00}).Text)
	assert.False(t, viewBody([]byte("text")).Binary)
}

// flashOf is the flash message of a redirect.
func flashOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	u, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	return u.Query().Get("flash")
}

// lagOf sums group's lag on topic.
func lagOf(t *testing.T, admin *client.Admin, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	prog, err := admin.ConsumerProgress(ctx, group, topic)
	require.NoError(t, err)
	var lag int64
	for _, q := range prog {
		lag += q.Lag
	}
	return lag
}

// TestConsoleDeadLetterResendAndOffsets: a message that fails lands in the
// group's dead-letter topic; the console finds it by queue and offset and
// by id, resends it so the same group gets it again as a message of its
// first topic; the group's backlog is skipped and then its offsets reset
// to the beginning by time.
func TestConsoleDeadLetterResendAndOffsets(t *testing.T) {
	ns, b := mustCluster(t)
	c, hs := mustConsole(t, ns, false)
	const topic, group = "DLTopic", "dl-cg"
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	admin, err := client.NewAdmin(client.WithNameServer(ns), client.WithLogger(quietLog()))
	require.NoError(t, err)
	defer admin.Close()

	resp, _ := post(t, hs, "/topics", url.Values{"token": {c.token}, "topic": {topic}, "read": {"2"}, "write": {"2"}, "perm": {"6"}, "target": {"cluster:DefaultCluster"}})
	assert.Contains(t, flashOf(t, resp), "Topic DLTopic created (2 read, 2 write queues)")
	// No retries for this group: a failure goes to %DLQ% at once. The
	// retry topic exists before the consumer starts, so the resent message
	// reaches it without waiting for a route refresh.
	sg := protocol.NewSubscriptionGroupConfig(group)
	sg.RetryMaxTimes = 0
	require.NoError(t, admin.CreateSubscriptionGroup(ctx, b.Addr(), sg))
	require.NoError(t, admin.CreateTopic(ctx, client.TopicConfig{Topic: protocol.RetryTopic(group), ReadQueueNums: 1, WriteQueueNums: 1, BrokerAddr: b.Addr()}))

	p, err := client.NewProducer(client.WithNameServer(ns), client.WithLogger(quietLog()), client.WithGroupName("dl-pg"))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { assert.NoError(t, p.Shutdown()) }()
	for i := range 5 {
		body := fmt.Sprintf("ok-%d", i)
		if i == 2 {
			body = "fail-once"
		}
		_, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body)).WithKeys(body))
		require.NoError(t, err)
	}

	var mu sync.Mutex
	got := map[string][]*client.MessageExt{}
	pc, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithLogger(quietLog()), client.WithGroupName(group),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithPersistInterval(100*time.Millisecond),
		client.WithMaxReconsumeTimes(0))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		res := client.ConsumeSuccess
		for _, m := range msgs {
			got[string(m.Body)] = append(got[string(m.Body)], m)
			if string(m.Body) == "fail-once" && len(got["fail-once"]) == 1 {
				res = client.ConsumeRetryLater
			}
		}
		return res, nil
	}))
	require.NoError(t, pc.Start())
	stopped := false
	stopConsumer := func() {
		if !stopped {
			stopped = true
			assert.NoError(t, pc.Shutdown())
		}
	}
	defer stopConsumer()
	dlq := protocol.DLQTopic(group)
	require.Eventually(t, func() bool { return b.Store().MaxOffsetInQueue(dlq, 0) == 1 }, waitFor, 20*time.Millisecond,
		"the failed message is a dead letter")
	require.Eventually(t, func() bool { _, err := admin.TopicRoute(ctx, dlq); return err == nil }, waitFor, 20*time.Millisecond,
		"the dead-letter topic is routed")

	// The dead-letter topics' list, the DLQ's page and the search by queue
	// and offset find it.
	_, page := get(t, hs, "/topics?filter=dlq")
	assert.Contains(t, page, `href="/topic?topic=%25DLQ%25dl-cg"`)
	code, page := get(t, hs, "/topic?topic="+url.QueryEscape(dlq))
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "Dead letters of group")
	code, page = get(t, hs, "/messages?"+url.Values{"by": {"offset"}, "topic": {dlq}, "broker": {"broker-a"}, "queue": {"0"}, "offset": {"0"}}.Encode())
	require.Equal(t, http.StatusOK, code)
	ids := regexp.MustCompile(`href="/message\?id=([0-9A-F]+)"`).FindStringSubmatch(page)
	require.Len(t, ids, 2, page)
	_, page = get(t, hs, "/messages?"+url.Values{"by": {"id"}, "id": {ids[1]}}.Encode())
	assert.Contains(t, page, `href="/message?id=`+ids[1]+`"`, "found by its id too")
	_, page = get(t, hs, "/message?id="+ids[1])
	assert.Contains(t, page, `id="resend"`)
	assert.Contains(t, page, "fail-once")

	// The group gets its retries back before the resend: with none, the
	// broker would move the resent message, a retry like any other,
	// straight back to the dead-letter topic.
	sg.RetryMaxTimes = 16
	require.NoError(t, admin.CreateSubscriptionGroup(ctx, b.Addr(), sg))
	resp, _ = post(t, hs, "/message/resend", url.Values{"token": {c.token}, "id": {ids[1]}})
	assert.Contains(t, flashOf(t, resp), "Resent to %RETRY%dl-cg")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got["fail-once"]) == 2 }, waitFor, 20*time.Millisecond,
		"the group gets the resent message")
	mu.Lock()
	again := got["fail-once"][1]
	mu.Unlock()
	assert.Equal(t, topic, again.Topic, "as a message of the topic it was first sent to")
	assert.Equal(t, "fail-once", again.Keys())
	resp, _ = post(t, hs, "/message/resend", url.Values{"token": {c.token}, "id": {again.OffsetMsgID()}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "only a dead letter is resent")

	// Offline, the group's backlog grows; skip it, then reset to the start.
	require.Eventually(t, func() bool { return lagOf(t, admin, group, topic) == 0 }, waitFor, 50*time.Millisecond)
	stopConsumer()
	for i := range 3 {
		_, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprintf("late-%d", i))))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), lagOf(t, admin, group, topic))
	resp, _ = post(t, hs, "/group/skip", url.Values{"token": {c.token}, "group": {group}, "topic": {topic}})
	assert.Contains(t, flashOf(t, resp), "Backlog of dl-cg on DLTopic skipped (2 queues)")
	assert.Zero(t, lagOf(t, admin, group, topic))
	resp, _ = post(t, hs, "/group/reset", url.Values{"token": {c.token}, "group": {group}, "topic": {topic}, "time": {"0"}})
	assert.Contains(t, flashOf(t, resp), "Offsets of dl-cg on DLTopic reset")
	assert.Equal(t, int64(8), lagOf(t, admin, group, topic), "back to the first of the 8 messages")
	resp, page = post(t, hs, "/group/reset", url.Values{"token": {c.token}, "group": {group}, "topic": {topic}, "time": {"yesterday"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, page, "time &#34;yesterday&#34;")

	// Delete asks for the name typed again, then removes the topic.
	resp, _ = post(t, hs, "/topic/delete", url.Values{"token": {c.token}, "topic": {topic}, "confirm": {"nope"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = post(t, hs, "/topic/delete", url.Values{"token": {c.token}, "topic": {topic}, "confirm": {topic}})
	assert.Contains(t, flashOf(t, resp), "Topic DLTopic deleted")
	require.Eventually(t, func() bool { _, err := admin.TopicRoute(ctx, topic); return err != nil }, waitFor, 20*time.Millisecond)
	assert.Nil(t, b.Topics().Get(topic))
}
