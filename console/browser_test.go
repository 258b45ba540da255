package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
)

// requireBrowserEnv, when set to 1, turns a missing browser from a skip into
// a failure: .ci/run sets it after installing Chromium, so the console's
// browser test cannot silently stop running there.
const requireBrowserEnv = "GOROCKETMQ_REQUIRE_BROWSER"

// shotsEnv names a directory to write the screenshots to instead of the
// test's temp dir (docs/console-cluster.png comes from there).
const shotsEnv = "GOROCKETMQ_CONSOLE_SHOTS"

// browserBudget bounds the whole browser test: when it runs out the
// browser is killed and every step still waiting fails.
const browserBudget = 2 * time.Minute

// stepTimeout bounds one step (a page load and what it waits for).
const stepTimeout = 30 * time.Second

// chromium finds a Chromium or Chrome binary.
func chromium() (string, bool) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// mustBrowser starts headless Chromium for t and returns a tab's context.
// The browser is killed when the test ends or browserBudget runs out
// (chromedp also starts it with a parent-death signal, so a test binary
// killed on timeout takes it along).
func mustBrowser(t *testing.T) context.Context {
	t.Helper()
	path, ok := chromium()
	if !ok {
		msg := "no Chromium here (Debian: apt-get install chromium; .ci/run installs it): the console's browser test needs one"
		if os.Getenv(requireBrowserEnv) == "1" {
			t.Fatalf("%s=1 but %s", requireBrowserEnv, msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		// Chromium's own traffic would go to hosts a test machine cannot
		// reach; these keep it on loopback.
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-extensions", true),
	}
	budget, cancelBudget := context.WithTimeout(context.Background(), browserBudget)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(budget, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		cancelBudget()
	})
	// The first call starts the browser.
	require.NoError(t, chromedp.Do(ctx), "start Chromium at %s", path)
	return ctx
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// running cluster: every page loads, a topic is created, a message with
// markup in its body is sent, found by key and shown as text, a consumer
// group's lag goes to zero, a crafted topic name is refused and shown as
// text, and the live chart shows the traffic. A screenshot of each page
// lands in the test's temp dir (or $GOROCKETMQ_CONSOLE_SHOTS).
func TestConsoleInBrowser(t *testing.T) {
	ctx := mustBrowser(t)
	ns, _ := mustCluster(t)
	c, err := New(Config{Addr: "127.0.0.1:0", ClientOptions: []client.Option{client.WithNameServer(ns), client.WithLogger(quietLog())},
		ChartEvery: 500 * time.Millisecond, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, c.Shutdown(ctx))
	})
	base := "http://" + c.Addr()
	// Three points of the chart make a line; shots taken for people (the
	// README's) wait for a longer one.
	shots, chartPoints := t.TempDir(), 3
	if d := os.Getenv(shotsEnv); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		shots, chartPoints = d, 30
	}
	t.Logf("screenshots in %s", shots)

	// do runs steps within stepTimeout; on failure it says where the
	// browser was and what it showed.
	start := time.Now()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			loc, _ := chromedp.Run(qctx, chromedp.Location())
			page, _ := chromedp.Run(qctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			require.NoError(t, err, "%s: at %s the page shows:\n%s", what, loc, page)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, "text of %s", sel)
		return s
	}
	eval := func(expr string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		require.NoError(t, err, expr)
		return v
	}
	title := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Title())
		require.NoError(t, err)
		return s
	}
	shot := func(name string) {
		t.Helper()
		t.Logf("%s at %v", name, time.Since(start).Round(time.Millisecond))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		require.NoError(t, err, "screenshot "+name)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}

	// The cluster page lists the broker.
	do("cluster page", chromedp.Navigate(base+"/cluster"), chromedp.WaitVisible(chromedp.CSS("#brokers td.broker-name")))
	assert.Equal(t, "broker-a", text("#brokers td.broker-name"))

	// Create a topic from the topics page; the browser lands on its page.
	do("create a topic", chromedp.Navigate(base+"/topics"), chromedp.WaitVisible(chromedp.ID("create-topic")),
		chromedp.SendKeys(chromedp.ID("new-topic"), "BrowserTopic"), chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.ID("flash")))
	assert.Contains(t, text("#flash"), "Topic BrowserTopic created")
	do("topic page", chromedp.WaitVisible(chromedp.ID("queues")))
	queues, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#queues tbody tr").length`))
	require.NoError(t, err)
	assert.Equal(t, 8, queues, "8 queues, the form's default")
	assert.Contains(t, text("#route"), "broker-a")
	do("topics page", chromedp.Navigate(base+"/topics"), chromedp.WaitVisible(chromedp.CSS(`#topic-list a.topic-link`)))
	assert.Contains(t, text("#topic-list"), "BrowserTopic")
	shot("topics")

	// A crafted topic name is refused and shown as text.
	crafted := `<img id="evil-topic" src=x onerror="document.title='pwned'">`
	do("crafted topic name", chromedp.Navigate(base+"/topics"), chromedp.WaitVisible(chromedp.ID("create-topic")),
		chromedp.SetValue(chromedp.ID("new-topic"), crafted), chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.ID("error")))
	assert.Contains(t, text("#error"), crafted, "the name is shown as it was typed")
	assert.False(t, eval(`document.getElementById("evil-topic") !== null`), "and not made into an element")
	assert.NotEqual(t, "pwned", title())

	// Send a message whose body is markup and script.
	body := `<script>document.title='pwned'</script><b id="evil-body">bold</b>`
	do("send a message", chromedp.Navigate(base+"/topic?topic=BrowserTopic"), chromedp.WaitVisible(chromedp.ID("send-message")),
		chromedp.SendKeys(chromedp.ID("send-keys"), "browser-key"), chromedp.SetValue(chromedp.ID("send-body"), body),
		chromedp.Click(chromedp.ID("send-submit")), chromedp.WaitVisible(chromedp.ID("flash")))
	assert.Contains(t, text("#flash"), "SEND_OK")
	shot("topic")

	// Find it by key and open it: the body is text.
	do("find by key", chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(chromedp.ID("search-key")),
		chromedp.SendKeys(chromedp.ID("key-topic"), "BrowserTopic"), chromedp.SendKeys(chromedp.ID("key-key"), "browser-key"),
		chromedp.Click(chromedp.ID("search-key-submit")), chromedp.WaitVisible(chromedp.CSS("#results a.msg-link")))
	shot("messages")
	do("open the message", chromedp.Click(chromedp.CSS("#results a.msg-link")), chromedp.WaitVisible(chromedp.ID("body")))
	assert.Equal(t, body, text("#body"))
	assert.False(t, eval(`document.getElementById("evil-body") !== null`), "the body's markup is not rendered")
	assert.NotEqual(t, "pwned", title(), "nor its script run")
	shot("message")

	// A consumer group reads everything: its lag goes to zero.
	var consumed atomic.Int64
	pc, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithLogger(quietLog()), client.WithGroupName("browser-cg"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithPersistInterval(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("BrowserTopic", client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		consumed.Add(int64(len(msgs)))
		return client.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { assert.NoError(t, pc.Shutdown()) })
	require.Eventually(t, func() bool { return consumed.Load() >= 1 }, waitFor, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/group?group=browser-cg"), chromedp.WaitVisible(chromedp.ID("group-lag"))); err != nil {
			return false
		}
		lag, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("group-lag")))
		if err != nil || lag != "0" {
			return false
		}
		rows, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("lag")))
		return err == nil && strings.Contains(rows, "BrowserTopic")
	}, waitFor, 200*time.Millisecond, "the group's lag reaches zero")
	assert.Contains(t, text("#members"), pc.ClientID())
	assert.Contains(t, text("#subscriptions"), "BrowserTopic")
	shot("group")
	do("groups page", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.CSS(`#group-list a.group-link`)))
	assert.Contains(t, text("#group-list"), "browser-cg")
	shot("groups")

	// The live chart: with messages flowing, it shows send and consume
	// rates above zero. The sender stops once the chart has seen them.
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithLogger(quietLog()), client.WithGroupName("browser-pg"))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { assert.NoError(t, p.Shutdown()) })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // trafficLoop: about 50 messages a second until stop
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 50*int(browserBudget/time.Second); i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = p.SendSync(sctx, client.NewMessage("BrowserTopic", []byte("chart")))
			cancel()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	do("cluster page with traffic", chromedp.Navigate(base+"/cluster"), chromedp.WaitVisible(chromedp.CSS("#brokers td.broker-name")))
	// The stored total as the page came (or after the script's first
	// poll): the traffic makes later polls' totals differ from it.
	loaded, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#brokers td.put-total")))
	require.NoError(t, err)
	rates := regexp.MustCompile(`now: ([0-9.]+) sent/s, ([0-9.]+) consumed/s`)
	require.Eventually(t, func() bool {
		now, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("tps-now")))
		m := rates.FindStringSubmatch(now)
		if err != nil || m == nil || m[1] == "0.0" || m[2] == "0.0" {
			return false
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.getElementById("tps-chart").getAttribute("data-points"))`))
		return err == nil && n >= chartPoints
	}, waitFor, 100*time.Millisecond, "the chart shows messages sent and consumed")
	stored, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#brokers td.put-total")))
	require.NoError(t, err)
	assert.NotEqual(t, loaded, stored, "the table's totals follow the chart's polls")
	shot("cluster")

	for _, name := range []string{"cluster", "topics", "topic", "messages", "message", "groups", "group"} {
		fi, err := os.Stat(filepath.Join(shots, name+".png"))
		require.NoError(t, err, name)
		assert.Positive(t, fi.Size(), "%s.png is not empty", name)
	}
}
