package e2e

// This file runs the real mqnamesrv and mqbroker binaries as child processes,
// so tests can kill -9 them, damage their files and start them again on the
// same store, as an operator's process supervisor would.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

const (
	// binStartWait bounds a child's start: a broker recovering its store
	// under a loaded 2-core box included.
	binStartWait = 20 * time.Second
	// binExitWait bounds the wait for a killed or stopped child to be reaped.
	binExitWait = 10 * time.Second
	// binBuildParent holds the per-run build directories; stale ones are
	// removed by the next run, so repeated runs do not fill /tmp.
	binBuildParent = "gorocketmq-e2e-bin"
)

var (
	binOnce        sync.Once
	binNamesrvPath string
	binBrokerPath  string
	binBuildErr    error
)

// builtBinaries builds cmd/mqnamesrv and cmd/mqbroker once per test binary
// and returns their paths. When the test binary runs with -race they are
// built with -race too (the packages are in the build cache already, and a
// data race in a server shows in its log, which reap checks).
func builtBinaries(t testing.TB) (namesrv, broker string) {
	t.Helper()
	binOnce.Do(func() {
		parent := filepath.Join(os.TempDir(), binBuildParent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			binBuildErr = err
			return
		}
		removeStaleBuilds(parent, time.Hour)
		dir, err := os.MkdirTemp(parent, "run-")
		if err != nil {
			binBuildErr = err
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			binBuildErr = fmt.Errorf("go tool not found: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		args := []string{"build", "-o", dir + string(os.PathSeparator)}
		if raceEnabled() {
			args = append(args, "-race")
		}
		cmd := exec.CommandContext(ctx, goTool, append(args, "../cmd/mqnamesrv", "../cmd/mqbroker")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binBuildErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		binNamesrvPath = filepath.Join(dir, "mqnamesrv")
		binBrokerPath = filepath.Join(dir, "mqbroker")
	})
	require.NoError(t, binBuildErr)
	return binNamesrvPath, binBrokerPath
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// removeStaleBuilds deletes build directories older than age (left by
// earlier runs; a running test binary's own is younger).
func removeStaleBuilds(parent string, age time.Duration) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && e.IsDir() && time.Since(info.ModTime()) > age {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// binProc is one child process; its stdout and stderr are appended to a log
// file that outlives restarts, so a test can read what every run logged.
type binProc struct {
	t       testing.TB
	name    string
	path    string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}    // closed once cmd has been reaped
	last *os.ProcessState // how the previous process ended
	runs int
}

func newBinProc(t testing.TB, name, path, logPath string, args ...string) *binProc {
	p := &binProc{t: t, name: name, path: path, args: args, logPath: logPath}
	t.Cleanup(p.reap)
	return p
}

// start launches the process; it does not wait for it to serve.
func (p *binProc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Nil(p.t, p.cmd, "%s already running", p.name)
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(p.t, err)
	p.runs++
	fmt.Fprintf(f, "==== e2e: start #%d of %s %v\n", p.runs, p.name, p.args)
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C to `go test` must not reach it before
	// the test's cleanup does, and the kill is for this pid only.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		require.NoError(p.t, err, "start %s", p.name)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go p.waitLoop(cmd, f, done)
}

// waitLoop reaps the process and records how it ended.
func (p *binProc) waitLoop(cmd *exec.Cmd, f *os.File, done chan struct{}) {
	_ = cmd.Wait() // the exit status stays in cmd.ProcessState
	_ = f.Close()
	close(done)
}

// running reports whether the process has been started and not reaped.
func (p *binProc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exited returns a channel closed when the current process has been reaped.
func (p *binProc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// exitCode is the exit code of the current process once reaped, else of
// the last one; -1 when killed by a signal or none ended yet.
func (p *binProc) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.last
	if p.cmd != nil {
		select {
		case <-p.done: // Wait has returned: ProcessState is set
			st = p.cmd.ProcessState
		default:
			return -1 // still running
		}
	}
	if st == nil {
		return -1
	}
	return st.ExitCode()
}

// signal sends sig and waits until the process is reaped.
func (p *binProc) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	require.NotNil(p.t, cmd, "%s not started", p.name)
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(binExitWait):
		_ = cmd.Process.Kill()
		<-done
		require.Failf(p.t, "child did not exit", "%s ignored signal %v for %v", p.name, sig, binExitWait)
	}
	p.forget()
}

// forget drops the reaped process, keeping how it ended for exitCode.
func (p *binProc) forget() {
	p.mu.Lock()
	if p.cmd != nil {
		p.last = p.cmd.ProcessState
	}
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
}

// kill9 kills the process with SIGKILL (no shutdown code runs) and reaps it.
func (p *binProc) kill9() { p.t.Helper(); p.signal(syscall.SIGKILL) }

// stop asks for a graceful shutdown with SIGTERM and reaps the process.
func (p *binProc) stop() { p.t.Helper(); p.signal(syscall.SIGTERM) }

// waitExit waits up to d for the process to end by itself and returns its
// exit code; it fails the test if it is still running.
func (p *binProc) waitExit(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited():
	case <-time.After(d):
		require.Failf(p.t, "child still running", "%s did not exit within %v", p.name, d)
	}
	p.forget()
	return p.exitCode()
}

// reap kills a still-running process at test end, so no child outlives its test.
func (p *binProc) reap() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
	default:
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(binExitWait):
			p.t.Errorf("%s (pid %d) not reaped after SIGKILL", p.name, cmd.Process.Pid)
		}
	}
	if races := scanLog(strings.NewReader(p.log()), "WARNING: DATA RACE"); len(races) > 0 {
		p.t.Errorf("%s reported %d data races; its log: %s", p.name, len(races), p.logPath)
	}
	if p.t.Failed() {
		p.t.Logf("last lines of %s's log:\n%s", p.name, tailLines(p.log(), 60))
	}
}

// log returns everything the process logged over all its runs.
func (p *binProc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// lastRunLog returns what the current (or last) run logged.
func (p *binProc) lastRunLog() string {
	l := p.log()
	if i := strings.LastIndex(l, "==== e2e: start #"); i >= 0 {
		return l[i:]
	}
	return l
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePortPair returns a loopback port p with p+1 free too (the broker
// listens on listenPort and its HA port listenPort+1). The pair is drawn
// below the kernel's ephemeral range: the test kills and restarts brokers on
// the same ports, and in between any outgoing connection on the machine may
// be given an ephemeral source port, so a pair inside that range can be
// taken while the broker is down ("address already in use" on restart).
func freePortPair(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		p := 10000 + rand.IntN(low-10000-1)
		if portPairFree(p) {
			return p
		}
	}
	require.FailNow(t, "no free port pair on 127.0.0.1 below the ephemeral range", "below %d", low)
	return 0
}

// portPairFree reports whether 127.0.0.1:p and :p+1 can both be bound now.
func portPairFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	defer l.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
	if err != nil {
		return false
	}
	return l2.Close() == nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 when it cannot be read), kept above 20000 so the range
// below it leaves room to draw from.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	return max(low, 20000)
}

// writeProps writes a properties-style config file, keys sorted.
func writeProps(t testing.TB, path string, kv map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("# written by the e2e test\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

// binCluster is a nameserver and one master broker, each a child process of
// the test, on loopback ports, with data under the test's temp directory.
type binCluster struct {
	t           testing.TB
	dir         string
	NamesrvAddr string
	BrokerAddr  string
	BrokerName  string
	StoreDir    string
	brokerConf  map[string]string
	ns, broker  *binProc
	raw         *remoting.Client
}

// startBinCluster builds the binaries (once), starts a nameserver and a
// broker whose config is the defaults below overlaid with extra, and waits
// until the nameserver routes the broker's default topic.
func startBinCluster(t testing.TB, extra map[string]string) *binCluster {
	t.Helper()
	c := startBinNamesrv(t)
	c.configureBroker("broker-bin", 0, "", extra)
	c.startBroker()
	return c
}

// newRawClient is a remoting client for the tests' own requests to child
// processes, logging warnings to t, closed when the test ends.
func newRawClient(t testing.TB) *remoting.Client {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	log.SetOutput(testWriter{t})
	raw := remoting.NewClient(remoting.ClientConfig{Logger: log, DialTimeout: time.Second})
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

// startBinNamesrv builds the binaries (once) and starts a nameserver; the
// returned cluster has no broker yet (configureBroker, addBroker).
func startBinNamesrv(t testing.TB) *binCluster {
	t.Helper()
	nsBin, _ := builtBinaries(t)
	dir := t.TempDir()
	c := &binCluster{t: t, dir: dir, raw: newRawClient(t)}

	nsPort := freePortPair(t)
	nsConf := filepath.Join(dir, "namesrv.conf")
	writeProps(t, nsConf, map[string]string{
		"bindAddress":           "127.0.0.1",
		"listenPort":            strconv.Itoa(nsPort),
		"kvConfigPath":          filepath.Join(dir, "namesrv", "kvConfig.json"),
		"serverWorkerThreads":   "4",
		"serverSelectorThreads": "1",
	})
	c.NamesrvAddr = "127.0.0.1:" + strconv.Itoa(nsPort)
	c.ns = newBinProc(t, "mqnamesrv", nsBin, filepath.Join(dir, "namesrv.log"), "-c", nsConf)
	c.ns.start()
	c.waitServing(c.ns, c.NamesrvAddr)
	return c
}

// addBroker starts one more broker process registered with c's nameserver
// and returns a view of the cluster whose broker is that one (its helpers,
// send, pullAll, maxOffset..., talk to it). label names its directory
// under the test's temp dir and its log. A slave (brokerId > 0) must be
// given brokerRole=SLAVE in extra; its master must be running.
func (c *binCluster) addBroker(label, brokerName string, brokerID int, extra map[string]string) *binCluster {
	c.t.Helper()
	v := &binCluster{t: c.t, dir: c.dir, NamesrvAddr: c.NamesrvAddr, ns: c.ns, raw: c.raw}
	v.configureBroker(brokerName, brokerID, label, extra)
	v.startBroker()
	return v
}

// configureBroker writes the config of c's broker (the defaults below
// overlaid with extra) on a free port pair and prepares its process; label
// "" puts its store, config and log at the top of c's directory.
func (c *binCluster) configureBroker(brokerName string, brokerID int, label string, extra map[string]string) {
	c.t.Helper()
	_, brokerBin := builtBinaries(c.t)
	dir := c.dir
	procName := "mqbroker"
	if label != "" {
		dir = filepath.Join(c.dir, label)
		require.NoError(c.t, os.MkdirAll(dir, 0o755))
		procName += " " + label
	}
	c.BrokerName = brokerName
	c.StoreDir = filepath.Join(dir, "store")
	brokerPort := freePortPair(c.t)
	c.BrokerAddr = "127.0.0.1:" + strconv.Itoa(brokerPort)
	c.brokerConf = map[string]string{
		"brokerClusterName":           "BinCluster",
		"brokerName":                  brokerName,
		"brokerId":                    strconv.Itoa(brokerID),
		"namesrvAddr":                 c.NamesrvAddr,
		"brokerIP1":                   "127.0.0.1",
		"bindAddress":                 "127.0.0.1",
		"listenPort":                  strconv.Itoa(brokerPort),
		"storePathRootDir":            c.StoreDir,
		"mappedFileSizeCommitLog":     strconv.Itoa(1 << 20), // small: sends cross file boundaries
		"mappedFileSizeConsumeQueue":  strconv.Itoa(6000 * 20),
		"maxHashSlotNum":              "5000",
		"maxIndexNum":                 "20000",
		"serverSelectorThreads":       "2",
		"registerNameServerPeriod":    "2000",
		"flushConsumerOffsetInterval": "1000",
		"autoCreateTopicEnable":       "true",
		"flushDiskType":               "SYNC_FLUSH",
	}
	for k, v := range extra {
		c.brokerConf[k] = v
	}
	brokerConf := filepath.Join(dir, "broker.conf")
	writeProps(c.t, brokerConf, c.brokerConf)
	c.broker = newBinProc(c.t, procName, brokerBin, filepath.Join(dir, "broker.log"), "-c", brokerConf)
}

// startBroker starts the broker process and waits until it serves and the
// nameserver routes it.
func (c *binCluster) startBroker() {
	c.t.Helper()
	c.broker.start()
	c.waitServing(c.broker, c.BrokerAddr)
	c.waitRoute("TBW102")
}

// killBroker kill -9s the broker and drops our connection to it.
func (c *binCluster) killBroker() {
	c.t.Helper()
	c.broker.kill9()
	c.raw.CloseConn(c.BrokerAddr)
}

// stopBroker shuts the broker down gracefully (SIGTERM).
func (c *binCluster) stopBroker() {
	c.t.Helper()
	c.broker.stop()
	c.raw.CloseConn(c.BrokerAddr)
}

// restartBroker kill -9s the broker and starts it again on the same port
// and store.
func (c *binCluster) restartBroker() {
	c.t.Helper()
	c.killBroker()
	c.startBroker()
}

// killNamesrv kill -9s the nameserver and drops our connection to it.
func (c *binCluster) killNamesrv() {
	c.t.Helper()
	c.ns.kill9()
	c.raw.CloseConn(c.NamesrvAddr)
}

// startNamesrv starts the nameserver again on the same port and waits until
// it serves; it knows no route (they live in memory) until brokers register
// again.
func (c *binCluster) startNamesrv() {
	c.t.Helper()
	c.ns.start()
	c.waitServing(c.ns, c.NamesrvAddr)
}

// waitServing waits until p answers a request on addr (any response code:
// the port is open and the request loop runs). It fails at once if p exits.
func (c *binCluster) waitServing(p *binProc, addr string) {
	c.t.Helper()
	deadline := time.Now().Add(binStartWait)
	for time.Now().Before(deadline) {
		if !p.running() {
			require.FailNow(c.t, "child exited during start", "%s exit code %d:\n%s", p.name, p.exitCode(), tailLines(p.lastRunLog(), 40))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		// Code 9999 is unknown to both servers: any answer proves they serve.
		_, err := c.raw.InvokeSync(ctx, addr, remoting.NewRequest(9999, nil, nil))
		cancel()
		if err == nil {
			return
		}
		c.raw.CloseConn(addr)
		time.Sleep(50 * time.Millisecond)
	}
	require.FailNow(c.t, "child not serving", "%s did not serve on %s within %v:\n%s", p.name, addr, binStartWait, tailLines(p.lastRunLog(), 40))
}

// waitRoute waits until the nameserver routes topic to the broker (under
// its brokerId: a slave is listed beside its master).
func (c *binCluster) waitRoute(topic string) {
	c.t.Helper()
	id, err := strconv.ParseInt(c.brokerConf["brokerId"], 10, 64)
	require.NoError(c.t, err)
	require.Eventually(c.t, func() bool {
		resp, err := c.invoke(c.NamesrvAddr, remoting.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
		if err != nil || resp.Code != int32(remoting.Success) {
			return false
		}
		rd, err := protocol.DecodeTopicRouteData(resp.Body)
		if err != nil {
			return false
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == c.BrokerName && bd.BrokerAddrs[id] == c.BrokerAddr {
				return true
			}
		}
		return false
	}, binStartWait, 50*time.Millisecond, "nameserver never routed %s to %s", topic, c.BrokerAddr)
}

// invoke sends one request with our remoting client, bounded by opTimeout.
func (c *binCluster) invoke(addr string, code remoting.RequestCode, header any, body []byte) (*remoting.Command, error) {
	var ext map[string]string
	if header != nil {
		ext = protocol.EncodeHeader(header, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return c.raw.InvokeSync(ctx, addr, remoting.NewRequest(code, ext, body))
}

// mustInvoke is invoke for requests that must get a response.
func (c *binCluster) mustInvoke(addr string, code remoting.RequestCode, header any, body []byte) *remoting.Command {
	c.t.Helper()
	resp, err := c.invoke(addr, code, header, body)
	require.NoError(c.t, err, "request code %d to %s", code, addr)
	return resp
}

// createTopic creates topic with queues read/write queues on the broker.
func (c *binCluster) createTopic(topic string, queues int32) {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{
		Topic: topic, DefaultTopic: "TBW102", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6,
		TopicFilterType: string(protocol.SingleTag),
	}, nil)
	require.Equal(c.t, int32(remoting.Success), resp.Code, resp.Remark)
}

// sendResult is a SEND_OK acknowledgement.
type sendResult struct {
	QueueID     int32
	QueueOffset int64
	// CommitLogOffset is where the record starts in the commitlog, from the
	// acknowledgement's offsetMsgId.
	CommitLogOffset int64
}

// errNotOK is a send answered with another code than SUCCESS.
var errNotOK = errors.New("e2e: send not acknowledged SEND_OK")

// send sends one message with SEND_MESSAGE (WAIT=true) to queue queueID;
// props are added to UNIQ_KEY=uniq. It returns the acknowledgement, or an
// error for a transport failure or any response but SUCCESS (FLUSH_DISK_TIMEOUT
// included: only SEND_OK counts as acknowledged).
func (c *binCluster) send(topic string, queueID int32, uniq string, body []byte, props map[string]string) (sendResult, error) {
	r, code, remark, err := c.sendCode(topic, queueID, uniq, body, props)
	if err == nil && code != remoting.Success {
		return sendResult{}, fmt.Errorf("%w: code %d %s", errNotOK, code, remark)
	}
	return r, err
}

// sendCode is send that returns the response code instead of failing on
// one that is not SUCCESS; the result is filled for every code that stored
// the message (SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
// SLAVE_NOT_AVAILABLE). err is a transport failure or a bad answer.
func (c *binCluster) sendCode(topic string, queueID int32, uniq string, body []byte, props map[string]string) (
	_ sendResult, _ remoting.ResponseCode, remark string, _ error,
) {
	p := map[string]string{message.PropUniqKey: uniq, message.PropWaitStoreMsgOK: "true"}
	for k, v := range props {
		p[k] = v
	}
	resp, err := c.invoke(c.BrokerAddr, remoting.SendMessage, &protocol.SendMessageRequestHeader{
		ProducerGroup: "PG_BIN", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: queueID, BornTimestamp: time.Now().UnixMilli(), Properties: string(message.MarshalProperties(p)),
	}, body)
	if err != nil {
		return sendResult{}, 0, "", err
	}
	code := remoting.ResponseCode(resp.Code)
	switch code {
	case remoting.Success, remoting.FlushDiskTimeout, remoting.FlushSlaveTimeout, remoting.SlaveNotAvailable:
	default:
		return sendResult{}, code, resp.Remark, nil
	}
	var h protocol.SendMessageResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return sendResult{}, code, resp.Remark, err
	}
	_, phy, err := message.ParseOffsetMsgID(h.MsgID)
	if err != nil {
		return sendResult{}, code, resp.Remark, fmt.Errorf("e2e: acknowledgement's msgId: %w", err)
	}
	return sendResult{QueueID: h.QueueID, QueueOffset: h.QueueOffset, CommitLogOffset: phy}, code, resp.Remark, nil
}

// maxOffset is GET_MAX_OFFSET of one queue.
func (c *binCluster) maxOffset(topic string, queueID int32) int64 {
	c.t.Helper()
	resp := c.mustInvoke(c.BrokerAddr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: topic, QueueID: queueID}, nil)
	require.Equal(c.t, int32(remoting.Success), resp.Code, "GET_MAX_OFFSET %s/%d: %s", topic, queueID, resp.Remark)
	var h protocol.OffsetResponseHeader
	require.NoError(c.t, protocol.DecodeHeader(resp.ExtFields, &h))
	return h.Offset
}

// pullAll pulls queue queueID of topic from offset 0 to its max offset and
// returns the messages in order. It fails the test on a record that does not
// decode, a queue offset out of sequence, or a message of another topic:
// those would be garbage served to a consumer.
func (c *binCluster) pullAll(topic string, queueID int32) []*message.MessageExt {
	c.t.Helper()
	return c.pullQueue(topic, queueID, false)
}

// pullAllGaps is pullAll that accepts gaps in the queue offsets: messages a
// recovery found damaged and skipped (a torn record among intact later
// ones) leave their offsets empty. Offsets must still increase.
func (c *binCluster) pullAllGaps(topic string, queueID int32) []*message.MessageExt {
	c.t.Helper()
	return c.pullQueue(topic, queueID, true)
}

func (c *binCluster) pullQueue(topic string, queueID int32, gaps bool) []*message.MessageExt {
	c.t.Helper()
	maxOff := c.maxOffset(topic, queueID)
	var out []*message.MessageExt
	next := int64(0)
	for round := 0; next < maxOff && round < 10000; round++ {
		resp := c.mustInvoke(c.BrokerAddr, remoting.PullMessage, &protocol.PullMessageRequestHeader{
			ConsumerGroup: "CG_BIN_CHECK", Topic: topic, QueueID: queueID, QueueOffset: next, MaxMsgNums: 32,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTag,
		}, nil)
		if gaps && resp.Code == int32(remoting.PullRetryImmediately) {
			// Damaged entries with no intact record after them (a torn
			// tail): the broker skips them and answers with no message
			// and a later next offset, as RocketMQ's NO_MATCHED_MESSAGE.
			var h protocol.PullMessageResponseHeader
			require.NoError(c.t, protocol.DecodeHeader(resp.FieldMap(), &h))
			require.Greater(c.t, h.NextBeginOffset, next, "pull %s/%d at %d (max %d): retry without moving on", topic, queueID, next, maxOff)
			c.t.Logf("pull %s/%d: entries [%d,%d) skipped by the broker (no intact record after them)", topic, queueID, next, h.NextBeginOffset)
			next = h.NextBeginOffset
			continue
		}
		require.Equal(c.t, int32(remoting.Success), resp.Code, "pull %s/%d at %d (max %d): code %d %s",
			topic, queueID, next, maxOff, resp.Code, resp.Remark)
		msgs, err := message.DecodeRecords(resp.Body)
		require.NoError(c.t, err, "pull %s/%d at %d served a record that does not decode", topic, queueID, next)
		require.NotEmpty(c.t, msgs, "pull %s/%d at %d: SUCCESS with no message", topic, queueID, next)
		for _, m := range msgs {
			if gaps && m.QueueOffset > next {
				next = m.QueueOffset
			}
			require.Equal(c.t, next, m.QueueOffset, "pull %s/%d: queue offsets not contiguous", topic, queueID)
			require.Equal(c.t, topic, m.Topic, "pull %s/%d at %d: a record of another topic", topic, queueID, next)
			require.Equal(c.t, message.BodyCRC(m.Body), m.BodyCRC, "pull %s/%d at %d: body does not match its CRC", topic, queueID, next)
			next++
		}
		out = append(out, msgs...)
	}
	require.Equal(c.t, maxOff, next, "pull %s/%d stopped short", topic, queueID)
	return out
}

// scanLog reports the lines of r that contain any of words.
func scanLog(r io.Reader, words ...string) []string {
	var hits []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, w := range words {
			if strings.Contains(sc.Text(), w) {
				hits = append(hits, sc.Text())
				break
			}
		}
	}
	return hits
}
