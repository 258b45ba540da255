package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/cmd/internal/clustertest"
	"github.com/gorocketmq/gorocketmq/conf"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's process-wide goroutine pool (ants) is not ours to stop.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

func testLogger() logrus.FieldLogger {
	l, _ := test.NewNullLogger()
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cluster is an in-process nameserver and one broker on loopback.
type cluster struct {
	ns     string
	broker *broker.Broker
	addr   string // broker address
	admin  *client.Admin
}

// MustStartCluster starts a nameserver and broker "broker-a" of
// DefaultCluster, and waits until the broker is registered.
func MustStartCluster(t *testing.T) *cluster {
	t.Helper()
	return MustStartClusterWith(t, nil)
}

// smallBroker shrinks a broker's files and pools for tests.
func smallBroker(c *conf.BrokerConfig) {
	c.MappedFileSizeCommitLog = 1 << 20
	c.MappedFileSizeConsumeQueue = 20 * 1000
	c.SendMessageThreadPoolNums = 2
	c.PullMessageThreadPoolNums = 2
	c.QueryMessageThreadPoolNums = 2
	c.AdminBrokerThreadPoolNums = 2
	c.ClientManageThreadPoolNums = 2
	c.ConsumerManageThreadPoolNums = 2
	c.EndTransactionThreadPoolNums = 2
}

// MustStartClusterWith is MustStartCluster with the broker's config
// adjusted by tune (may be nil).
func MustStartClusterWith(t *testing.T, tune func(*conf.BrokerConfig)) *cluster {
	t.Helper()
	ns, b := clustertest.MustStart(t, clustertest.Options{
		BrokerName: "broker-a",
		Log:        testLogger(),
		Namesrv:    func(c *conf.NamesrvConfig) { c.ServerWorkerThreads = 2 },
		Broker: func(c *conf.BrokerConfig) {
			smallBroker(c)
			if tune != nil {
				tune(c)
			}
		},
	})

	a, err := client.NewAdmin(client.WithNameServer(ns.Addr()), client.WithLogger(testLogger()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	require.Eventually(t, func() bool {
		ci, err := a.ClusterInfo(testCtx(t))
		return err == nil && len(ci.ClusterAddrTable["DefaultCluster"]) == 1
	}, 10*time.Second, 20*time.Millisecond, "broker registration")
	return &cluster{ns: ns.Addr(), broker: b, addr: b.Addr(), admin: a}
}

// result is one mqadmin run.
type result struct {
	code     int
	out, err string
}

// mqadmin runs the command in process; NAMESRV_ADDR is env["NAMESRV_ADDR"]
// (nil env: unset) and message bodies go to a temp dir.
func mqadmin(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errw bytes.Buffer
	a := newApp(&out, &errw)
	a.getenv = func(k string) string { return env[k] }
	a.bodyDir = filepath.Join(t.TempDir(), "msgbodys")
	code := a.run(args)
	return result{code: code, out: out.String(), err: errw.String()}
}

// ok runs a command against c and requires it to succeed.
func (c *cluster) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := mqadmin(t, nil, append(args, "-n", c.ns)...)
	require.Equal(t, 0, r.code, "mqadmin %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out, r.err)
	return r.out
}

// fail runs a command against c and requires it to fail; it returns stderr.
func (c *cluster) fail(t *testing.T, args ...string) result {
	t.Helper()
	r := mqadmin(t, nil, append(args, "-n", c.ns)...)
	require.NotEqual(t, 0, r.code, "mqadmin %s unexpectedly succeeded:\n%s", strings.Join(args, " "), r.out)
	return r
}

// createTopic makes a topic with 4 queues and waits for its route.
func (c *cluster) createTopic(t *testing.T, topic string) {
	t.Helper()
	c.ok(t, "updateTopic", "-b", c.addr, "-t", topic, "-r", "4", "-w", "4")
	c.waitRoute(t, topic)
}

func (c *cluster) waitRoute(t *testing.T, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := c.admin.TopicRoute(testCtx(t), topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "route of %s", topic)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string // substrings expected
	}{
		{"no args lists commands", nil, 0, "The most commonly used mqadmin commands are:", ""},
		{"help alone lists commands", []string{"help"}, 0, "   updateTopic", ""},
		{"help of a command", []string{"help", "updateTopic"}, 0, " -t,--topic <arg>", ""},
		{"help of unknown", []string{"help", "nope"}, exitUsage, "", "The sub command nope not exist."},
		{"unknown command", []string{"nope"}, exitUsage, "", "The sub command nope not exist."},
		{"-h", []string{"topicRoute", "-h"}, 0, "usage: mqadmin topicRoute", ""},
		{"missing required", []string{"topicRoute"}, exitUsage, "", "Missing required option: t"},
		{"missing several", []string{"queryMsgByOffset", "-t", "T"}, exitUsage, "", "Missing required options: b, i, o"},
		{"missing -b or -c", []string{"updateTopic", "-t", "T"}, exitUsage, "", "one of -b, -c"},
		{"unknown option", []string{"topicRoute", "-t", "T", "-z"}, exitUsage, "", "Unrecognized option: -z"},
		{"unknown long option", []string{"topicRoute", "--nope=1"}, exitUsage, "", "Unrecognized option: --nope=1"},
		{"missing argument", []string{"topicRoute", "-t"}, exitUsage, "", "Missing argument for option: t"},
		{"stray argument", []string{"topicRoute", "-t", "T", "extra"}, exitUsage, "", "Unrecognized argument: extra"},
		{"value on a flag", []string{"topicList", "--clusterModel=x"}, exitUsage, "", "Unrecognized option"},
		{"bad integer", []string{"updateTopic", "-b", "127.0.0.1:1", "-t", "T", "-r", "abc"}, exitUsage, "", "option -r wants an integer"},
		{"integer out of range", []string{"updateTopic", "-b", "127.0.0.1:1", "-t", "T", "-w", "0"}, exitUsage, "", "option -w out of range"},
		{"bad perm", []string{"updateTopicPerm", "-b", "127.0.0.1:1", "-t", "T", "-p", "5"}, exitUsage, "", "must be 2, 4 or 6"},
		{"bad timestamp", []string{"resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday"}, exitUsage, "", "yyyy-MM-dd#HH:mm:ss:SSS"},
		{"no name server", []string{"topicList"}, exitFail, "", "NAMESRV_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mqadmin(t, nil, tt.args...)
			assert.Equal(t, tt.code, r.code, "stdout:\n%s\nstderr:\n%s", r.out, r.err)
			assert.Contains(t, r.out, tt.out)
			assert.Contains(t, r.err, tt.err)
			if tt.code == exitUsage && tt.err != "" && !strings.Contains(tt.err, "not exist") {
				assert.Contains(t, r.err, "usage: mqadmin "+tt.args[0], "usage follows a bad command line")
			}
		})
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range allCommands() {
		r := mqadmin(t, nil, "help", c.name)
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.out, "usage: mqadmin "+c.name)
		assert.Contains(t, r.out, "-n,--namesrvAddr <arg>", c.name)
		for _, o := range c.opts {
			assert.Contains(t, r.out, "-"+o.short+",--"+o.long, c.name)
		}
	}
}

func TestParse(t *testing.T) {
	c := topicListCmd()
	c.opts = append(c.opts, option{short: "t", long: "topic", hasArg: true, required: true})
	tests := []struct {
		args []string
		want values
	}{
		{[]string{"-t", "T"}, values{"t": "T"}},
		{[]string{"-tT"}, values{"t": "T"}},
		{[]string{"--topic", "T"}, values{"t": "T"}},
		{[]string{"--topic=T", "-c"}, values{"t": "T", "c": ""}},
		{[]string{"-t", "-x", "--clusterModel"}, values{"t": "-x", "c": ""}}, // an option's value may start with '-'
		{[]string{"-n", "a:1;b:2", "-t", "T"}, values{"n": "a:1;b:2", "t": "T"}},
		{[]string{"-h"}, values{"h": ""}}, // -h skips the required check
	}
	for _, tt := range tests {
		got, err := c.parse(tt.args)
		require.NoError(t, err, tt.args)
		assert.Equal(t, tt.want, got, tt.args)
	}
}

func TestVersionDesc(t *testing.T) {
	for v, want := range map[int32]string{
		212: "V4_0_0_SNAPSHOT", 213: "V4_0_0", 401: "V4_9_4", 407: "V4_9_7", 409: "V4_9_8",
		413: "V5_0_0", 412: "V5_0_0_SNAPSHOT", 5: "UNKNOWN_VERSION(5)",
	} {
		assert.Equal(t, want, versionDesc(v), v)
	}
}

func TestParseResetTime(t *testing.T) {
	now := time.Now()
	got, err := parseResetTime("now", now)
	require.NoError(t, err)
	assert.Equal(t, now, got)
	got, err = parseResetTime("1700000000123", now)
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000123), got.UnixMilli())
	got, err = parseResetTime("2024-03-05#06:07:08:009", now)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2024, 3, 5, 6, 7, 8, 9e6, time.Local), got)
	for _, bad := range []string{"", "-5", "2024-03-05 06:07:08", "tomorrow"} {
		_, err := parseResetTime(bad, now)
		assert.ErrorIs(t, err, errUsage, bad)
	}
}

func TestNameServerFromEnv(t *testing.T) {
	c := MustStartCluster(t)
	c.createTopic(t, "EnvTopic")
	r := mqadmin(t, map[string]string{"NAMESRV_ADDR": c.ns}, "topicList")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, strings.Split(r.out, "\n"), "EnvTopic")
	// -n wins over the environment.
	r = mqadmin(t, map[string]string{"NAMESRV_ADDR": "127.0.0.1:1"}, "topicList", "-n", c.ns)
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "EnvTopic")
	// A ';' list reaches every name server.
	r = mqadmin(t, nil, "getNamesrvConfig", "-n", c.ns+";"+c.ns)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, 2, strings.Count(r.out, "============"+c.ns+"============"))
	r = mqadmin(t, nil, "getNamesrvConfig", "-n", c.ns+";127.0.0.1:1")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.err, "getNamesrvConfig command failed")
}
