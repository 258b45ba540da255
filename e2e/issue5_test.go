package e2e

// Issue 5 end to end: delay levels, arbitrary delivery times, consumer
// retries into the dead-letter queue, and transactions, driven by the
// official Go client. The client runs in a child process of this test
// binary (as BE's driver does, so its own data races do not fail a -race
// run); the child plays one scenario, chosen by envIssue5, and reports what
// it sent and received as JSON lines on stdout. It is started from init, so
// it needs nothing of TestMain.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

const (
	envIssue5      = "E2E_ISSUE5_SCENARIO" // set: run as the issue-5 client child
	envIssue5NS    = "E2E_ISSUE5_NAMESRV"
	envIssue5Topic = "E2E_ISSUE5_TOPIC"
	envIssue5Group = "E2E_ISSUE5_GROUP"
)

func init() {
	if sc := os.Getenv(envIssue5); sc != "" {
		os.Exit(runIssue5Child(sc))
	}
}

// i5Event is one line of the child's report.
type i5Event struct {
	Ev        string `json:"ev"` // ready, sent, recv, checked, error
	Body      string `json:"body,omitempty"`
	Ms        int64  `json:"ms"` // when it happened (sent: just before the send call)
	Reconsume int32  `json:"reconsume,omitempty"`
	Err       string `json:"err,omitempty"`
}

// runIssue5Child plays scenario sc against the nameserver in the
// environment until its stdin closes.
func runIssue5Child(sc string) int {
	emit, fail := childReport()
	ns := primitive.NamesrvAddr{os.Getenv(envIssue5NS)}
	topic, group := os.Getenv(envIssue5Topic), os.Getenv(envIssue5Group)

	opts := []consumer.Option{
		consumer.WithNameServer(ns),
		consumer.WithGroupName(group),
		consumer.WithInstance(group + "_c"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	retry := sc == "retry"
	if retry {
		opts = append(opts, consumer.WithMaxReconsumeTimes(2))
	}
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return fail(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit(i5Event{Ev: "recv", Body: string(m.Body), Reconsume: m.ReconsumeTimes})
		}
		if retry {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return fail(err)
	}
	if err := c.Start(); err != nil {
		return fail(err)
	}
	defer func() { _ = c.Shutdown() }()
	emit(i5Event{Ev: "ready"})

	ctx := context.Background()
	switch sc {
	case "delay", "retry":
		p, err := startChildProducer(ns, group+"_p")
		if err != nil {
			return fail(err)
		}
		defer func() { _ = p.Shutdown() }()
		msgs := []*primitive.Message{primitive.NewMessage(topic, []byte("plain"))}
		if sc == "delay" {
			// The plain message first: the producer's route lookup and
			// connection are not part of the delays the parent measures
			// from "sent".
			msgs = []*primitive.Message{
				primitive.NewMessage(topic, []byte("warmup")),
				primitive.NewMessage(topic, []byte("level2")).WithDelayTimeLevel(2),
				primitive.NewMessage(topic, []byte("timer3s")),
			}
		}
		for _, m := range msgs {
			start := time.Now()
			if string(m.Body) == "timer3s" {
				m.WithDelayTimestamp(start.Add(3 * time.Second))
			}
			res, err := p.SendSync(ctx, m)
			if err != nil {
				return fail(err)
			}
			if res.Status != primitive.SendOK {
				return fail(fmt.Errorf("send %s: status %d", m.Body, res.Status))
			}
			emit(i5Event{Ev: "sent", Body: string(m.Body), Ms: start.UnixMilli()})
		}
	case "tx":
		listener := &i5Listener{emit: emit}
		p, err := rocketmq.NewTransactionProducer(listener, producer.WithNameServer(ns), producer.WithGroupName(group+"_tp"),
			producer.WithInstanceName(group+"_tp"), producer.WithRetry(2))
		if err != nil {
			return fail(err)
		}
		if err := p.Start(); err != nil {
			return fail(err)
		}
		defer func() { _ = p.Shutdown() }()
		half := func(body string) error {
			res, err := p.SendMessageInTransaction(ctx, primitive.NewMessage(topic, []byte(body)))
			if err != nil {
				return err
			}
			if res.Status != primitive.SendOK {
				return fmt.Errorf("half %s: status %d", body, res.Status)
			}
			emit(i5Event{Ev: "sent", Body: body})
			return nil
		}
		for _, body := range []string{"commit", "rollback", "unknown"} {
			if err := half(body); err != nil {
				return fail(err)
			}
		}
		emit(i5Event{Ev: "done"})
		// Phase 2, when the parent asks: what must survive the broker
		// restart it does next.
		in := bufio.NewScanner(os.Stdin)
		if !in.Scan() || in.Text() != "more" {
			return 0
		}
		if err := half("unknown2"); err != nil {
			return fail(err)
		}
		np, err := startChildProducer(ns, group+"_p")
		if err != nil {
			return fail(err)
		}
		defer func() { _ = np.Shutdown() }()
		for _, m := range []*primitive.Message{
			primitive.NewMessage(topic, []byte("delayed")).WithDelayTimeLevel(1),
			primitive.NewMessage(topic, []byte("timed")).WithDelayTimestamp(time.Now().Add(3 * time.Second)),
		} {
			if _, err := np.SendSync(ctx, m); err != nil {
				return fail(err)
			}
			emit(i5Event{Ev: "sent", Body: string(m.Body)})
		}
		emit(i5Event{Ev: "done2"})
	default:
		return fail(fmt.Errorf("unknown scenario %q", sc))
	}
	emit(i5Event{Ev: "done"})
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	return 0
}

// childReport is a client child's report to its parent, JSON lines of
// i5Event on stdout: emit writes one, stamped with the time unless it has
// one; fail reports err and returns the child's exit code.
func childReport() (emit func(i5Event), fail func(error) int) {
	rlog.SetLogLevel("error")
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit = func(e i5Event) {
		if e.Ms == 0 {
			e.Ms = time.Now().UnixMilli()
		}
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	fail = func(err error) int {
		emit(i5Event{Ev: "error", Err: err.Error()})
		return 1
	}
	return emit, fail
}

// startChildProducer starts a child's producer of the official client,
// its group and instance both named name.
func startChildProducer(ns primitive.NamesrvAddr, name string) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName(name),
		producer.WithInstanceName(name), producer.WithRetry(2))
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// i5Listener decides by body: commit, rollback, or unknown until checked.
type i5Listener struct{ emit func(i5Event) }

func (l *i5Listener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	default:
		return primitive.UnkonwnState
	}
}

func (l *i5Listener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.emit(i5Event{Ev: "checked", Body: string(m.Body)})
	if strings.HasPrefix(string(m.Body), "unknown") {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

// i5Child is the parent's handle on a scenario child.
type i5Child struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	evs   []i5Event
	done  chan struct{}
}

// startIssue5Child runs scenario sc against c on topic for group.
func startIssue5Child(t *testing.T, c *Cluster, sc, topic, group string) *i5Child {
	t.Helper()
	return startClientChild(t, "issue5 client: ",
		envIssue5+"="+sc, envIssue5NS+"="+c.NamesrvAddr, envIssue5Topic+"="+topic, envIssue5Group+"="+group)
}

// startClientChild runs this test binary as a child with env added to
// ours (the variables that make its init run a client scenario), its race
// reports and the official client's local offsets under a temp dir, and
// its stderr logged with prefix; it is stopped when the test ends.
func startClientChild(t *testing.T, prefix string, env ...string) *i5Child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), env...),
		"GORACE=log_path="+filepath.Join(dir, "client-race")+" exitcode=0",
		"rocketmq.client.localOffsetStoreDir="+filepath.Join(dir, "offsets"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &lineLogger{t: t, prefix: prefix}
	require.NoError(t, cmd.Start())
	ch := &i5Child{t: t, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go ch.readLoop(stdout)
	t.Cleanup(ch.stop)
	return ch
}

func (ch *i5Child) readLoop(r io.Reader) {
	defer close(ch.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var e i5Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		ch.mu.Lock()
		ch.evs = append(ch.evs, e)
		ch.mu.Unlock()
	}
}

// stop closes the child's stdin and waits for it (killing it after 20 s).
func (ch *i5Child) stop() {
	_ = ch.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- ch.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-exited
	}
}

// events returns the events named ev (all when ev is "").
func (ch *i5Child) events(ev string) []i5Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var out []i5Event
	for _, e := range ch.evs {
		if ev == "" || e.Ev == ev {
			out = append(out, e)
		}
	}
	return out
}

// find returns the first event ev with body.
func (ch *i5Child) find(ev, body string) (i5Event, bool) {
	for _, e := range ch.events(ev) {
		if e.Body == body {
			return e, true
		}
	}
	return i5Event{}, false
}

// wait waits for event ev with body, failing on a child error.
func (ch *i5Child) wait(ev, body string, within time.Duration) i5Event {
	ch.t.Helper()
	var got i5Event
	require.Eventually(ch.t, func() bool {
		if errs := ch.events("error"); len(errs) > 0 {
			require.FailNow(ch.t, "client child failed", errs[0].Err)
		}
		var ok bool
		got, ok = ch.find(ev, body)
		return ok
	}, within, 5*time.Millisecond, "no %s event for %q; events so far: %+v", ev, body, stringerFunc(func() string { return fmt.Sprint(ch.events("")) }))
	return got
}

// i5CreateTopic creates topic with queues queues on the broker and waits
// for its route.
func i5CreateTopic(t *testing.T, c *Cluster, topic string, queues int32) {
	t.Helper()
	resp := c.Invoke(t, c.BrokerAddr, remoting.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{
		Topic: topic, DefaultTopic: "TBW102", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6, TopicFilterType: string(protocol.SingleTag),
	}, nil)
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	c.WaitRoute(t, topic)
}

// TestIssue5DelayLevelAndTimer: a DelayTimeLevel 2 message (5 s) arrives no
// earlier than 5 s and within 5.5 s after it was sent; a message with a
// delivery time 3 s ahead arrives within [3 s, 3.2 s]. Not parallel, so
// the timing is measured without the other e2e tests' load.
func TestIssue5DelayLevelAndTimer(t *testing.T) {
	c := MustStartCluster(t)
	topic, group := uniq("I5Delay"), uniq("GI5Delay")
	i5CreateTopic(t, c, topic, 4)
	ch := startIssue5Child(t, c, "delay", topic, group)
	ch.wait("done", "", 30*time.Second)

	sent := ch.wait("sent", "level2", time.Second)
	got := ch.wait("recv", "level2", 10*time.Second)
	levelLat := time.Duration(got.Ms-sent.Ms) * time.Millisecond
	assert.GreaterOrEqual(t, levelLat, 5*time.Second, "delay level 2 delivered early")
	assert.LessOrEqual(t, levelLat, 5500*time.Millisecond, "delay level 2 delivered late")

	sent = ch.wait("sent", "timer3s", time.Second)
	got = ch.wait("recv", "timer3s", 10*time.Second)
	timerLat := time.Duration(got.Ms-sent.Ms) * time.Millisecond
	assert.GreaterOrEqual(t, timerLat, 3*time.Second, "timer message delivered early")
	assert.LessOrEqual(t, timerLat, 3200*time.Millisecond, "timer message delivered late")
	t.Logf("received %v (level 2) and %v (3 s timer) after the send call started", levelLat, timerLat)
}

// TestIssue5RetryLaterEndsInDLQ: a consumer that always returns
// ConsumeRetryLater gets the message again from %RETRY%<group> with
// ReconsumeTimes 1 and 2 (maxReconsumeTimes 2), then it is in %DLQ%<group>.
func TestIssue5RetryLaterEndsInDLQ(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, WithBrokerConfig(func(cfg *conf.BrokerConfig) {
		cfg.MessageDelayLevel = "200ms 200ms 200ms 200ms 200ms 200ms"
	}))
	topic, group := uniq("I5Retry"), uniq("GI5Retry")
	i5CreateTopic(t, c, topic, 4)
	// The broker creates %RETRY%<group> at the group's first heartbeat, as
	// RocketMQ does, but the client looks its route up before that and
	// again only every 30 s (as Java's does): created first, the retries
	// flow at once.
	i5CreateTopic(t, c, protocol.RetryTopic(group), 1)
	ch := startIssue5Child(t, c, "retry", topic, group)
	st := c.Broker.Store()
	require.Eventually(t, func() bool { return len(ch.events("recv")) >= 3 }, consumeWait, pollEvery, "events: %v",
		stringerFunc(func() string {
			return fmt.Sprintf("%v; stored: retry %d, schedule level 3-4 %d/%d", ch.events(""), st.MaxOffsetInQueue(protocol.RetryTopic(group), 0),
				st.MaxOffsetInQueue("SCHEDULE_TOPIC_XXXX", 2), st.MaxOffsetInQueue("SCHEDULE_TOPIC_XXXX", 3))
		}))
	dlq := protocol.DLQTopic(group)
	require.Eventually(t, func() bool {
		return c.Broker.Store().MaxOffsetInQueue(dlq, 0) == 1
	}, consumeWait, pollEvery, "the message never reached %s", dlq)
	time.Sleep(time.Second) // a fourth delivery would come now
	recv := ch.events("recv")
	require.Len(t, recv, 3, "delivered once and retried twice: %+v", recv)
	for i, e := range recv {
		assert.Equal(t, "plain", e.Body)
		assert.Equal(t, int32(i), e.Reconsume, "delivery %d", i)
	}
	assert.Equal(t, int64(2), c.Broker.Store().MaxOffsetInQueue(protocol.RetryTopic(group), 0), "two retries stored")
}

// TestIssue5Transactions: Commit is delivered, Rollback never, Unknown is
// resolved by the broker's check-back; then a broker restart while an
// unknown half message, a delay-level message and a timer message are
// pending loses none of them (the half message is checked back once the
// producer's next heartbeat, at most 30 s later, tells the new broker
// process about it).
func TestIssue5Transactions(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, WithBrokerConfig(func(cfg *conf.BrokerConfig) {
		cfg.MessageDelayLevel = "3s"
		cfg.TransactionTimeOut = 1000
		cfg.TransactionCheckInterval = 300
	}))
	topic, group := uniq("I5Tx"), uniq("GI5Tx")
	i5CreateTopic(t, c, topic, 4)
	ch := startIssue5Child(t, c, "tx", topic, group)
	ch.wait("done", "", 30*time.Second)
	ch.wait("recv", "commit", consumeWait)
	ch.wait("checked", "unknown", 10*time.Second)
	ch.wait("recv", "unknown", 10*time.Second)

	_, err := io.WriteString(ch.stdin, "more\n")
	require.NoError(t, err)
	ch.wait("done2", "", 30*time.Second)
	c.RestartBroker(t)
	want := map[string]int{"commit": 1, "unknown": 1, "delayed": 1, "timed": 1, "unknown2": 1}
	var stored map[string]int
	require.Eventually(t, func() bool {
		stored = bodySet(c.ReadAll(t, topic))
		return len(stored) == len(want)
	}, 45*time.Second, 100*time.Millisecond, "stored after the restart: %v", stringerFunc(func() string { return fmt.Sprint(stored) }))
	assert.Equal(t, want, stored, "each stored once, the rolled back one never")
	_, rolledBackDelivered := ch.find("recv", "rollback")
	assert.False(t, rolledBackDelivered, "a rolled back message was delivered")
}
