package main

// Replication measurements from outside the brokers, over their remoting
// ports: how fast a slave catches up (hacatchup) and how far behind its
// master it serves messages under a steady rate (replag).

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// adminTimeout bounds one admin request to a broker.
const adminTimeout = 3 * time.Second

// brokerAdmin sends admin requests to brokers by address.
type brokerAdmin struct {
	cl *remoting.Client
}

// newBrokerAdmin dials with tlsCfg (nil: plain) and signs its requests
// with -ak/-sk when c has them.
func newBrokerAdmin(log logrus.FieldLogger, c *commonFlags, tlsCfg *tls.Config) *brokerAdmin {
	cfg := remoting.ClientConfig{Logger: log, DialTimeout: time.Second, TLS: tlsCfg}
	if cred := c.credentials(); cred.AccessKey != "" && cred.SecretKey != "" {
		cfg.BeforeRequest = func(_ string, req *remoting.Command) { client.Sign(cred, req) }
	}
	return &brokerAdmin{cl: remoting.NewClient(cfg)}
}

func (a *brokerAdmin) close() { _ = a.cl.Close() }

// invoke sends one request and returns the body of its SUCCESS answer.
func (a *brokerAdmin) invoke(ctx context.Context, addr string, code remoting.RequestCode, header any) (*remoting.Command, error) {
	var ext map[string]string
	if header != nil {
		ext = protocol.EncodeHeader(header, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	resp, err := a.cl.InvokeSync(ctx, addr, remoting.NewRequest(code, ext, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(remoting.Success) {
		return nil, fmt.Errorf("%s: request %d answered %d: %s", addr, code, resp.Code, resp.Remark)
	}
	return resp, nil
}

// maxOffset is the commitlog max offset in addr's runtime info.
func (a *brokerAdmin) maxOffset(ctx context.Context, addr string) (int64, error) {
	resp, err := a.invoke(ctx, addr, remoting.GetBrokerRuntimeInfo, nil)
	if err != nil {
		return 0, err
	}
	kv, err := protocol.DecodeKVTable(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(kv.Table["commitLogMaxOffset"], 10, 64)
}

// inSyncSlaves is the master's in-sync slave count (GET_BROKER_HA_STATUS).
func (a *brokerAdmin) inSyncSlaves(ctx context.Context, addr string) (int, error) {
	resp, err := a.invoke(ctx, addr, remoting.GetBrokerHAStatus, nil)
	if err != nil {
		return 0, err
	}
	var st struct {
		InSyncSlaveNums int `json:"inSyncSlaveNums"`
	}
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return 0, fmt.Errorf("%s: HA status: %w", addr, err)
	}
	return st.InSyncSlaveNums, nil
}

// topicQueues is topic's read queue count at addr (0 when it has no such topic).
func (a *brokerAdmin) topicQueues(ctx context.Context, addr, topic string) (int, error) {
	resp, err := a.invoke(ctx, addr, remoting.GetAllTopicConfig, nil)
	if err != nil {
		return 0, err
	}
	w, err := protocol.DecodeTopicConfigSerializeWrapper(resp.Body)
	if err != nil {
		return 0, err
	}
	if tc := w.TopicConfigTable[topic]; tc != nil {
		return int(tc.ReadQueueNums), nil
	}
	return 0, nil
}

// queueMaxOffset is GET_MAX_OFFSET of one queue at addr.
func (a *brokerAdmin) queueMaxOffset(ctx context.Context, addr, topic string, queue int32) (int64, error) {
	resp, err := a.invoke(ctx, addr, remoting.GetMaxOffset, &protocol.TopicQueueRequestHeader{Topic: topic, QueueID: queue})
	if err != nil {
		return 0, err
	}
	var h protocol.OffsetResponseHeader
	if err := protocol.DecodeHeader(resp.ExtFields, &h); err != nil {
		return 0, err
	}
	return h.Offset, nil
}

// pairFlags name a master and its slave by remoting address.
type pairFlags struct {
	master, slave string
}

func (f *pairFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.master, "master", "", "the master's remoting address (ip:port)")
	fs.StringVar(&f.slave, "slave", "", "the slave's remoting address (ip:port)")
}

func (f *pairFlags) validate() error {
	if f.master == "" || f.slave == "" {
		return fmt.Errorf("%w: --master and --slave are required", errBadFlag)
	}
	return nil
}

// hacatchupFlags are the hacatchup command's flags.
type hacatchupFlags struct {
	commonFlags
	pairFlags
	from int64
	poll time.Duration
}

func (f *hacatchupFlags) register(fs *flag.FlagSet) {
	f.commonFlags.register(fs)
	f.pairFlags.register(fs)
	fs.Int64Var(&f.from, "from-offset", -1, "the slave's commitlog offset when it started (-1: the first one seen)")
	fs.DurationVar(&f.poll, "poll", 5*time.Millisecond, "how often both offsets are read")
}

func (f *hacatchupFlags) validate() error {
	if err := f.commonFlags.validate(); err != nil {
		return err
	}
	if err := f.pairFlags.validate(); err != nil {
		return err
	}
	if f.poll <= 0 {
		return fmt.Errorf("%w: --poll must be > 0", errBadFlag)
	}
	return nil
}

// runHACatchup times a slave catching up with its master: started right
// after the slave process, it polls both commitlog max offsets (runtime
// info) until the slave's equals the master's and the master counts an
// in-sync slave. The time runs from the command's start, so it includes the
// slave's own start-up (store recovery, the HA dial): a conservative rate.
// The master must take no sends meanwhile.
func runHACatchup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f hacatchupFlags
	log, stopProfile, err := setupRun("hacatchup", &f, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	start := time.Now()
	a := newBrokerAdmin(log, &f.commonFlags, nil)
	defer a.close()
	ctx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	fmt.Fprintf(stdout, "mqbench hacatchup: master=%s slave=%s limit=%s\n", f.master, f.slave, f.duration)

	from := f.from
	var firstByte time.Time
	var m, s int64
	var lastErr error
	t := time.NewTicker(f.poll)
	defer t.Stop()
	for {
		if m, err = a.maxOffset(ctx, f.master); err == nil {
			s, err = a.maxOffset(ctx, f.slave)
		}
		now := time.Now()
		switch {
		case err != nil:
			lastErr = err // the slave is still starting
		default:
			if from < 0 {
				from = s
			}
			if firstByte.IsZero() && s > from {
				firstByte = now
			}
			if s == m {
				n, err := a.inSyncSlaves(ctx, f.master)
				if err == nil && n > 0 {
					return reportCatchup(stdout, from, m, start, firstByte, now)
				}
				lastErr = err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the slave did not catch up within %s (slave %d, master %d): %w", f.duration, s, m, errors.Join(ctx.Err(), lastErr))
		case <-t.C:
		}
	}
}

func reportCatchup(w io.Writer, from, to int64, start, firstByte, end time.Time) error {
	took := end.Sub(start)
	bytes := to - from
	rate := float64(bytes) / took.Seconds() / 1e6
	first := "-"
	if !firstByte.IsZero() {
		first = fmt.Sprintf("%.3f s", firstByte.Sub(start).Seconds())
	}
	_, err := fmt.Fprintf(w, "[Complete] Catch-up: %d bytes from offset %d to %d in %.3f s: %.1f MB/s (the first byte seen after %s)\n",
		bytes, from, to, took.Seconds(), rate, first)
	return err
}

// replagFlags are the replag command's flags.
type replagFlags struct {
	latencyFlags
	pairFlags
	queues int
	sample time.Duration
}

func (f *replagFlags) register(fs *flag.FlagSet) {
	f.latencyFlags.register(fs)
	f.pairFlags.register(fs)
	fs.IntVar(&f.queues, "queues", 8, "create the topic with this many queues first")
	fs.DurationVar(&f.sample, "sample", 500*time.Microsecond, "how often the master's HA status is read")
}

func (f *replagFlags) validate() error {
	if err := f.latencyFlags.validate(); err != nil {
		return err
	}
	if err := f.pairFlags.validate(); err != nil {
		return err
	}
	if f.queues < 1 || f.queues > 1024 {
		return fmt.Errorf("%w: --queues must be 1..1024", errBadFlag)
	}
	if f.sample <= 0 {
		return fmt.Errorf("%w: --sample must be > 0", errBadFlag)
	}
	return nil
}

// pulled is one message as a puller received it.
type pulled struct {
	offset  int64
	arrival int64 // Unix ns, when its pull answer was read
	storeMs int64 // STORETIMESTAMP, set by the master (ms)
	end     int64 // where its record ends in the commitlog
}

// haSample is one reading of the master's HA status: its commitlog max
// offset and its slave's acknowledged offset.
type haSample struct {
	at        int64 // Unix ns, when the answer was read
	maxOffset int64
	acked     int64
}

// replagRun is a replag measurement: paced sends to the master (through
// the nameserver, as the latency command sends) and, for every queue, one
// long-polling puller on the master and one on the slave.
type replagRun struct {
	f     *replagFlags
	a     *brokerAdmin
	group string
	runID uint64

	mu  sync.Mutex
	got [2]map[int32][]pulled // by side (0 master, 1 slave), then queue
	// seen counts, by side, the measured messages the pullers received,
	// including those still in a puller's buffer (not yet in got).
	seen [2]atomic.Int64

	samples []haSample // owned by sampleLoop until it returns
}

// runReplag measures replication lag at a steady rate, two ways.
//
// Ack lag (the headline): a sampler reads the master's HA status
// (GET_BROKER_HA_STATUS: its commitlog max offset and the slave's acked
// offset, one answer) every --sample interval; for each message, the lag is
// (the first sample whose ack covers its record's end) - (the first sample
// whose max offset does). That is the time from "the master has stored it"
// to "the slave has appended it and said so", what a SYNC_MASTER send
// waits for, to the sampling interval's resolution (both ends are rounded
// up to a sample, so the error is within one interval either way).
//
// Served lag: for each message, (when a puller on the slave received it) -
// (when an identical puller on the master received it), both on this
// process's clock. Both include a long-poll wake-up and a pull answer, so
// the difference is what replication adds for a consumer reading the
// slave: the HA push, the slave's append and dispatch; scheduling noise of
// either side shows as spread (a negative value: the slave's answer came
// first). The slave's arrival minus the message's STORETIMESTAMP (the
// master's store time, ms resolution) is printed too.
func runReplag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f replagFlags
	log, stopProfile, err := setupRun("replag", &f, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if o, ok := f.tlsOptions(); ok {
		if tlsCfg, err = remoting.ClientTLSConfig(o); err != nil {
			return err
		}
	}
	r := &replagRun{f: &f, a: newBrokerAdmin(log, &f.commonFlags, tlsCfg), group: fmt.Sprintf("benchmark_replag_%d", os.Getpid()),
		runID: binary.BigEndian.Uint64(id[:])}
	defer r.a.close()
	r.got[0], r.got[1] = map[int32][]pulled{}, map[int32][]pulled{}

	if err := createTopic(ctx, &f.commonFlags, f.topic, f.queues, log); err != nil {
		return err
	}
	p, err := client.NewProducer(f.withTLS(client.WithNameServer(splitAddrs(f.namesrv)...),
		client.WithGroupName(fmt.Sprintf("benchmark_replag_producer_%d", os.Getpid())), client.WithLogger(log))...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown()
	if err := warmUp(ctx, p, f.topic, make([]byte, f.size), 15*time.Second); err != nil {
		return err
	}
	// The slave copies new topics from its master every 10 s.
	queues, err := r.waitSlaveTopic(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	pctx, stopPull := context.WithCancel(ctx)
	defer stopPull()
	var pullWG sync.WaitGroup
	ready := make(chan error, 2*queues)
	for side, addr := range []string{f.master, f.slave} {
		for q := range int32(queues) {
			// Both start at the master's end: what comes next is measured.
			from, err := r.a.queueMaxOffset(ctx, f.master, f.topic, q)
			if err != nil {
				return err
			}
			pullWG.Add(1)
			go func() {
				defer pullWG.Done()
				r.pullLoop(pctx, side, addr, q, from, ready)
			}()
		}
	}
	defer pullWG.Wait()
	for range 2 * queues {
		if err := <-ready; err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "mqbench replag: topic=%s queues=%d rate=%d/s senders=%d size=%d duration=%s master=%s slave=%s\n",
		f.topic, queues, f.rate, f.senders, f.size, f.duration, f.master, f.slave)

	sctx, stopSample := context.WithCancel(ctx)
	defer stopSample()
	var sampleWG sync.WaitGroup
	sampleWG.Add(1)
	go func() {
		defer sampleWG.Done()
		r.sampleLoop(sctx)
	}()
	defer sampleWG.Wait()

	lb := &latencyBench{f: &f.latencyFlags, p: p, runID: r.runID}
	cpu := startCPUClock()
	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	lb.sendAll(runCtx)
	cancel()
	sent := lb.send.OK.Load()
	// Let the last messages reach both sides (bounded).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, s := r.counts()
		if m >= int(sent) && s >= int(sent) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	share := cpu.Since()
	stopPull()
	pullWG.Wait()
	stopSample()
	sampleWG.Wait()
	return r.report(stdout, sent, lb.send.Failed.Load()+lb.send.RespFail.Load(), lb.behind.Load(), share)
}

// waitSlaveTopic waits until the slave has the topic and returns its queue
// count at the master.
func (r *replagRun) waitSlaveTopic(ctx context.Context, limit time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := r.a.topicQueues(ctx, r.f.slave, r.f.topic)
		if err == nil && n > 0 {
			return r.a.topicQueues(ctx, r.f.master, r.f.topic)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the slave %s has no topic %s after %s (it copies topics every 10 s): %w", r.f.slave, r.f.topic, limit, errors.Join(ctx.Err(), err))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sampleLoop reads the master's HA status every f.sample until ctx ends.
func (r *replagRun) sampleLoop(ctx context.Context) {
	t := time.NewTicker(r.f.sample)
	defer t.Stop()
	for {
		resp, err := r.a.invoke(ctx, r.f.master, remoting.GetBrokerHAStatus, nil)
		at := time.Now().UnixNano()
		if err == nil {
			var st struct {
				Max   int64 `json:"masterCommitLogMaxOffset"`
				Conns []struct {
					Ack int64 `json:"slaveAckOffset"`
				} `json:"haConnectionInfo"`
			}
			if json.Unmarshal(resp.Body, &st) == nil && len(st.Conns) > 0 {
				acked := st.Conns[0].Ack
				for _, c := range st.Conns[1:] {
					acked = max(acked, c.Ack)
				}
				r.samples = append(r.samples, haSample{at: at, maxOffset: st.Max, acked: acked})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ackLags is, for each message the master's puller got, the ack lag in ms
// (see runReplag), and the mean interval between samples.
func (r *replagRun) ackLags() (lags []float64, interval time.Duration) {
	s := r.samples
	if len(s) < 2 {
		return nil, 0
	}
	interval = time.Duration((s[len(s)-1].at - s[0].at) / int64(len(s)-1))
	for _, l := range r.got[0] {
		for _, p := range l {
			i := sort.Search(len(s), func(i int) bool { return s[i].maxOffset >= p.end })
			j := sort.Search(len(s), func(i int) bool { return s[i].acked >= p.end })
			if i == len(s) || j == len(s) {
				continue // stored or acked after the sampling stopped
			}
			lags = append(lags, float64(s[j].at-s[i].at)/1e6)
		}
	}
	return lags, interval
}

// counts is how many measured messages each side received.
func (r *replagRun) counts() (master, slave int) {
	return int(r.seen[0].Load()), int(r.seen[1].Load())
}

// pullLoop long-polls one queue at addr from offset from until ctx ends,
// recording when each of this run's messages arrived. It reports on ready
// once its first pull was answered (the broker knows the group and topic).
func (r *replagRun) pullLoop(ctx context.Context, side int, addr string, queue int32, from int64, ready chan<- error) {
	next := from
	first := true
	var buf []pulled
	flush := func() {
		if len(buf) > 0 {
			r.mu.Lock()
			r.got[side][queue] = append(r.got[side][queue], buf...)
			r.mu.Unlock()
			buf = buf[:0]
		}
	}
	defer flush()
	for ctx.Err() == nil {
		h := &protocol.PullMessageRequestHeader{
			ConsumerGroup: r.group, Topic: r.f.topic, QueueID: queue, QueueOffset: next, MaxMsgNums: 32,
			SysFlag: protocol.PullFlagSuspend | protocol.PullFlagSubscription, SuspendTimeoutMillis: 1000,
			Subscription: "*", ExpressionType: protocol.ExpressionTag,
		}
		if first {
			h.SysFlag &^= protocol.PullFlagSuspend // answered at once
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.a.cl.InvokeSync(rctx, addr, remoting.NewRequest(remoting.PullMessage, protocol.EncodeHeader(h, nil), nil))
		arrival := time.Now().UnixNano()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if first {
				ready <- fmt.Errorf("pull %s/%d from %s: %w", r.f.topic, queue, addr, err)
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var rh protocol.PullMessageResponseHeader
		_ = protocol.DecodeHeader(resp.ExtFields, &rh)
		switch remoting.ResponseCode(resp.Code) {
		case remoting.Success:
			msgs, err := message.DecodeRecords(resp.Body)
			if err != nil {
				if first {
					ready <- fmt.Errorf("pull %s/%d from %s: %w", r.f.topic, queue, addr, err)
				}
				return
			}
			for _, m := range msgs {
				if len(m.Body) >= latencyHeader && binary.BigEndian.Uint64(m.Body[8:16]) == r.runID {
					buf = append(buf, pulled{offset: m.QueueOffset, arrival: arrival, storeMs: m.StoreTimestamp,
						end: m.CommitLogOffset + int64(m.StoreSize)})
					r.seen[side].Add(1)
				}
			}
			next = rh.NextBeginOffset
			if len(buf) >= 1024 {
				flush()
			}
		case remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
			if rh.NextBeginOffset > next {
				next = rh.NextBeginOffset
			}
		default:
			if first {
				ready <- fmt.Errorf("pull %s/%d from %s: code %d: %s", r.f.topic, queue, addr, resp.Code, resp.Remark)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		if first {
			first = false
			ready <- nil
		}
	}
}

// report prints the run's figures.
func (r *replagRun) report(w io.Writer, sent, failed, behind int64, share CPUShare) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	type key struct {
		q   int32
		off int64
	}
	master := map[key]pulled{}
	for q, l := range r.got[0] {
		for _, p := range l {
			master[key{q, p.offset}] = p
		}
	}
	var lag, slaveStore, masterStore []float64 // ms
	negative, slaveOnly := 0, 0
	for q, l := range r.got[1] {
		for _, p := range l {
			slaveStore = append(slaveStore, float64(p.arrival/1e6-p.storeMs))
			m, ok := master[key{q, p.offset}]
			if !ok {
				slaveOnly++
				continue
			}
			d := float64(p.arrival-m.arrival) / 1e6
			if d < 0 {
				negative++ // the slave's puller was answered first
			}
			lag = append(lag, d)
		}
	}
	for _, p := range master {
		masterStore = append(masterStore, float64(p.arrival/1e6-p.storeMs))
	}
	missing := sent - int64(len(slaveStore))
	ack, interval := r.ackLags()
	avg, mx := 0.0, 0.0
	for _, d := range ack {
		avg += d
		mx = max(mx, d)
	}
	if len(ack) > 0 {
		avg /= float64(len(ack))
	}
	lines := []string{
		fmt.Sprintf("[Complete] Send Total: %d Replicated: %d Missing: %d Behind Schedule: %d Send Failed: %d Max Lag(ms): %.3f Average Lag(ms): %.3f",
			sent, len(slaveStore), max(0, missing), behind, failed, mx, avg),
		fmt.Sprintf("p50/p99/p999 Lag(ms): %s", pcts(ack)),
		fmt.Sprintf("lag = slave acked - master stored, from %d samples of the master's HA status every %v on average (%d messages placed)",
			len(r.samples), interval.Round(time.Microsecond), len(ack)),
		fmt.Sprintf("served lag = slave receive - master receive (identical long-polling pullers) p50/p99/p999 (ms): %s; %d of %d negative (the slave's answer came first), %d seen on the slave only",
			pcts(lag), negative, len(lag), slaveOnly),
		fmt.Sprintf("slave receive - store timestamp p50/p99/p999 (ms, 1 ms resolution): %s; master receive - store timestamp: %s",
			pcts(slaveStore), pcts(masterStore)),
		cpuLine(share),
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// pcts formats the 50th, 99th and 99.9th percentiles of v (ms).
func pcts(v []float64) string {
	if len(v) == 0 {
		return "- - -"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return fmt.Sprintf("%.3f %.3f %.3f", at(0.50), at(0.99), at(0.999))
}
