package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// driverCallTimeout bounds one driver command (a send retried by the
// client, a consumer start with its first rebalance).
const driverCallTimeout = 45 * time.Second

// Driver is the parent side of the client driver (see driverchild_test.go):
// a child process running the official Go client against this cluster.
type Driver struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	wmu   sync.Mutex // serializes commands on stdin
	next  atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan driverLine
	inboxes map[string]*Inbox
	closed  bool
	readErr error
	done    chan struct{} // closed when the child's stdout ends
	racelog string
}

// StartDriver starts a client driver for this cluster, stopped (its clients
// shut down first) when the test ends.
func (c *Cluster) StartDriver(t testing.TB) *Driver {
	t.Helper()
	return startDriver(t, c.NamesrvAddr)
}

// startDriver starts a client driver whose clients use the nameserver at
// namesrvAddr (an in-process Cluster's or a binCluster's).
func startDriver(t testing.TB, namesrvAddr string) *Driver {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	raceDir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		envDriver+"=1",
		envNamesrv+"="+namesrvAddr,
		// In a -race build the official client's own races go to a file and
		// do not change the exit code; the child hosts no code of ours
		// besides this driver.
		"GORACE=log_path="+filepath.Join(raceDir, "client-race")+" exitcode=0",
		// Broadcasting consumers keep their offsets in local files.
		"rocketmq.client.localOffsetStoreDir="+filepath.Join(raceDir, "offsets"),
	)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &lineLogger{t: t, prefix: "client: "}
	require.NoError(t, cmd.Start())
	d := &Driver{
		t: t, cmd: cmd, stdin: stdin,
		pending: map[int64]chan driverLine{},
		inboxes: map[string]*Inbox{},
		done:    make(chan struct{}),
		racelog: raceDir,
	}
	go d.readLoop(stdout)
	t.Cleanup(d.stop)
	return d
}

// readLoop routes the child's lines: replies to their callers, events to
// their inboxes.
func (d *Driver) readLoop(r io.Reader) {
	defer close(d.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l driverLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			d.fail(fmt.Errorf("driver: bad line %q: %w", sc.Text(), err))
			return
		}
		d.mu.Lock()
		if l.Event != "" {
			in := d.inboxes[l.Handle]
			d.mu.Unlock()
			if in != nil {
				in.addGot(l.Msgs...)
			}
			continue
		}
		ch := d.pending[l.ID]
		delete(d.pending, l.ID)
		d.mu.Unlock()
		if ch != nil {
			ch <- l
		}
	}
	d.fail(errors.Join(errors.New("driver: child closed its output"), sc.Err()))
}

// fail ends every pending call with err.
func (d *Driver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readErr == nil {
		d.readErr = err
	}
	for id, ch := range d.pending {
		ch <- driverLine{ID: id, Err: err.Error()}
		delete(d.pending, id)
	}
}

// call runs one command and decodes its result into out (may be nil).
func (d *Driver) call(t testing.TB, op string, args, out any) error {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	id := d.next.Add(1)
	ch := make(chan driverLine, 1)
	d.mu.Lock()
	if d.readErr != nil || d.closed {
		err := d.readErr
		d.mu.Unlock()
		require.FailNow(t, "driver is gone", "%s: %v", op, err)
	}
	d.pending[id] = ch
	d.mu.Unlock()

	line, err := json.Marshal(driverRequest{ID: id, Op: op, Args: raw})
	require.NoError(t, err)
	d.wmu.Lock()
	_, err = d.stdin.Write(append(line, '\n'))
	d.wmu.Unlock()
	require.NoError(t, err, "driver %s", op)

	select {
	case l := <-ch:
		if l.Err != "" {
			return fmt.Errorf("%s: %s", op, l.Err)
		}
		if out != nil {
			require.NoError(t, json.Unmarshal(l.Result, out), "driver %s result %s", op, l.Result)
		}
		return nil
	case <-time.After(driverCallTimeout):
		require.FailNow(t, "driver call timed out", "%s after %v", op, driverCallTimeout)
		return nil
	}
}

// must is call that requires success.
func (d *Driver) must(t testing.TB, op string, args, out any) {
	t.Helper()
	require.NoError(t, d.call(t, op, args, out))
}

// stop asks the child to shut its clients down and exit, and waits for it.
func (d *Driver) stop() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wmu.Lock()
	_, _ = d.stdin.Write([]byte(`{"op":"exit"}` + "\n"))
	_ = d.stdin.Close()
	d.wmu.Unlock()
	// Read the child's output to its end before Wait closes the pipe.
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("client driver did not exit within 30s; killed")
	}
	if err := d.cmd.Wait(); err != nil {
		d.t.Errorf("client driver exited: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(d.racelog, "client-race*")); len(files) > 0 {
		n := 0
		for _, f := range files {
			b, _ := os.ReadFile(f)
			n += strings.Count(string(b), "WARNING: DATA RACE")
		}
		d.t.Logf("the official client reported %d data race(s) in its own code (child process, not ours)", n)
	}
}

// CreateTopic creates topic with the official admin client and waits until
// the nameserver routes it with that many queues. The admin client does not
// look at the response code, so the route is the proof.
func (d *Driver) CreateTopic(t testing.TB, c *Cluster, topic string, queues int) {
	t.Helper()
	d.must(t, "admin.createTopic", topicArgs{Topic: topic, Queues: queues, BrokerAddr: c.BrokerAddr}, nil)
	require.Eventually(t, func() bool {
		rd := c.route(t, topic)
		return rd != nil && len(rd.QueueDatas) == 1 && int(rd.QueueDatas[0].WriteQueueNums) == queues
	}, 10*time.Second, pollEvery, "topic %s never routed with %d queues", topic, queues)
}

// RemoteProducer is an official producer in the driver.
type RemoteProducer struct {
	d *Driver
	h string
}

// NewProducer starts a producer; selector is "", "hash" or "manual".
func (d *Driver) NewProducer(t testing.TB, selector string) *RemoteProducer {
	t.Helper()
	return d.NewProducerSpec(t, ProducerSpec{Selector: selector})
}

// NewProducerSpec starts a producer as spec says.
func (d *Driver) NewProducerSpec(t testing.TB, spec ProducerSpec) *RemoteProducer {
	t.Helper()
	var h string
	d.must(t, "producer.new", spec, &h)
	return &RemoteProducer{d: d, h: h}
}

// Msg is a message for topic with body and no queue choice.
func Msg(topic, body string) MsgSpec { return MsgSpec{Topic: topic, Body: body, QueueID: -1} }

// SendSync sends msgs in one SendSync call (several = a batch) and requires SEND_OK.
func (p *RemoteProducer) SendSync(t testing.TB, msgs ...MsgSpec) SendRes {
	t.Helper()
	var r SendRes
	p.d.must(t, "producer.sendSync", sendArgs{Handle: p.h, Msgs: msgs}, &r)
	require.Equal(t, primitive.SendOK, r.Status, "send %v: %+v", msgs, r)
	return r
}

// TrySendSync is SendSync returning the client's error instead of requiring success.
func (p *RemoteProducer) TrySendSync(t testing.TB, msgs ...MsgSpec) (SendRes, error) {
	t.Helper()
	var r SendRes
	err := p.d.call(t, "producer.sendSync", sendArgs{Handle: p.h, Msgs: msgs}, &r)
	return r, err
}

// SendAsync sends each message with SendAsync and returns every callback's result.
func (p *RemoteProducer) SendAsync(t testing.TB, msgs ...MsgSpec) []SendRes {
	t.Helper()
	var r []SendRes
	p.d.must(t, "producer.sendAsync", sendArgs{Handle: p.h, Msgs: msgs}, &r)
	return r
}

// SendOneWay sends each message oneway.
func (p *RemoteProducer) SendOneWay(t testing.TB, msgs ...MsgSpec) {
	t.Helper()
	p.d.must(t, "producer.sendOneway", sendArgs{Handle: p.h, Msgs: msgs}, nil)
}

// SendBodies sends one message per body synchronously, each keyed by its
// body and tagged with tag (none when empty).
func (p *RemoteProducer) SendBodies(t testing.TB, topic, tag string, bodies []string) []SendRes {
	t.Helper()
	out := make([]SendRes, 0, len(bodies))
	for _, b := range bodies {
		m := Msg(topic, b)
		m.Tag, m.Keys = tag, []string{b}
		out = append(out, p.SendSync(t, m))
	}
	return out
}

// RemotePush is an official push consumer in the driver.
type RemotePush struct {
	d    *Driver
	h    string
	once sync.Once
}

// StartPush starts a push consumer whose deliveries land in in.
func (d *Driver) StartPush(t testing.TB, spec PushSpec, in *Inbox) *RemotePush {
	t.Helper()
	// The handle is chosen here and the inbox registered first: deliveries
	// may reach us before the reply to push.start does.
	spec.Handle = uniq("c")
	d.mu.Lock()
	d.inboxes[spec.Handle] = in
	d.mu.Unlock()
	var h string
	d.must(t, "push.start", spec, &h)
	require.Equal(t, spec.Handle, h)
	return &RemotePush{d: d, h: h}
}

// Suspend pauses the consumer (rocketmq.PushConsumer.Suspend): it issues
// no new pull, though a pull already parked at a broker may still bring
// messages that are then consumed.
func (c *RemotePush) Suspend(t testing.TB) {
	t.Helper()
	c.d.must(t, "push.suspend", handleArgs{Handle: c.h}, nil)
}

// Resume undoes Suspend (and rebalances, as the client does).
func (c *RemotePush) Resume(t testing.TB) {
	t.Helper()
	c.d.must(t, "push.resume", handleArgs{Handle: c.h}, nil)
}

// Stop shuts the consumer down (its offsets are committed); safe twice.
func (c *RemotePush) Stop(t testing.TB) {
	t.Helper()
	c.once.Do(func() { c.d.must(t, "push.shutdown", handleArgs{Handle: c.h}, nil) })
}

// RemotePull is an official lite-pull consumer in the driver, assigned one queue.
type RemotePull struct {
	d *Driver
	h string
}

// StartPull starts a pull consumer.
func (d *Driver) StartPull(t testing.TB, spec PullSpec) *RemotePull {
	t.Helper()
	var h string
	d.must(t, "pull.start", spec, &h)
	return &RemotePull{d: d, h: h}
}

// Poll polls once (acknowledging what it returns).
func (p *RemotePull) Poll(t testing.TB, timeout time.Duration) []Got {
	t.Helper()
	var got []Got
	p.d.must(t, "pull.poll", pollArgs{Handle: p.h, TimeoutMs: timeout.Milliseconds()}, &got)
	return got
}

// PullFrom pulls up to n messages at offset.
func (p *RemotePull) PullFrom(t testing.TB, offset int64, n int) PullFromRes {
	t.Helper()
	var r PullFromRes
	p.d.must(t, "pull.pullFrom", pullFromArgs{Handle: p.h, Offset: offset, N: n}, &r)
	return r
}

// TryPullFrom is PullFrom returning the client's error instead of
// requiring success.
func (p *RemotePull) TryPullFrom(t testing.TB, offset int64, n int) (PullFromRes, error) {
	t.Helper()
	var r PullFromRes
	err := p.d.call(t, "pull.pullFrom", pullFromArgs{Handle: p.h, Offset: offset, N: n}, &r)
	return r, err
}

// Persist commits the acknowledged offsets to the broker.
func (p *RemotePull) Persist(t testing.TB) {
	t.Helper()
	p.d.must(t, "pull.persist", handleArgs{Handle: p.h}, nil)
}

// lineLogger writes a child's stderr to the test log line by line.
type lineLogger struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.Reset()
			w.buf.WriteString(line) // keep the partial line
			break
		}
		logSafely(w.t, w.prefix+strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

// logSafely logs unless the test is over (logging then panics).
func logSafely(t testing.TB, s string) {
	defer func() { _ = recover() }()
	t.Log(s)
}
