package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
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
	assert.Equal(t, "/topic?flash=Topic+EscTopic+created+%284+read%2C+4+write+queues%29.&topic=EscTopic", resp.Header.Get("Location"))
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
	_, page = get(t, hs, "/cluster?flash="+url.QueryEscape(crafted))
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
