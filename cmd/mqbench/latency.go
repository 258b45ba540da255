package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
)

// A latency message's body starts with the send time (Unix ns) and the
// run's id, so the receiver in the same process measures publish-to-receive
// on one clock, and ignores messages of other runs.
const latencyHeader = 16

// latencyFlags are the latency command's flags.
type latencyFlags struct {
	commonFlags
	senders int
	size    int
	rate    int
}

func (f *latencyFlags) register(fs *flag.FlagSet) {
	f.commonFlags.register(fs)
	fs.IntVar(&f.senders, "w", 8, "concurrent senders sharing the rate")
	fs.IntVar(&f.size, "s", 1024, "message body size in bytes (>= 16)")
	fs.IntVar(&f.rate, "rate", 5000, "messages per second")
}

func (f *latencyFlags) validate() error {
	if err := f.commonFlags.validate(); err != nil {
		return err
	}
	switch {
	case f.senders < 1 || f.senders > 10000:
		return fmt.Errorf("%w: -w must be 1..10000", errBadFlag)
	case f.size < latencyHeader || f.size > 4<<20:
		return fmt.Errorf("%w: -s must be %d..4194304", errBadFlag, latencyHeader)
	case f.rate < 1 || f.rate > 1_000_000:
		return fmt.Errorf("%w: --rate must be 1..1000000", errBadFlag)
	}
	return nil
}

func runLatency(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f latencyFlags
	log, stopProfile, err := setupRun("latency", &f, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	var runID [8]byte
	if _, err := rand.Read(runID[:]); err != nil {
		return err
	}
	addrs := splitAddrs(f.namesrv)
	p, err := client.NewProducer(f.withTLS(client.WithNameServer(addrs...),
		client.WithGroupName(fmt.Sprintf("benchmark_latency_producer_%d", os.Getpid())), client.WithLogger(log))...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown()
	// The topic must exist before the consumer subscribes.
	if err := warmUp(ctx, p, f.topic, make([]byte, f.size), 15*time.Second); err != nil {
		return err
	}
	pc, err := startLatencyConsumer(ctx, &f.commonFlags, f.topic,
		fmt.Sprintf("benchmark_latency_%d_%x", os.Getpid(), runID[:4]), log, 15*time.Second)
	if err != nil {
		return err
	}
	defer pc.Shutdown()

	lb := &latencyBench{f: &f, p: p, pc: pc, runID: binary.BigEndian.Uint64(runID[:])}
	rctx, cancelRecv := context.WithCancel(ctx)
	defer cancelRecv()
	var recvWG sync.WaitGroup
	recvWG.Add(1)
	go func() {
		defer recvWG.Done()
		lb.receiveLoop(rctx)
	}()
	defer recvWG.Wait()
	// Until a probe makes the round trip the consumer is still joining: a
	// measured message sent before would be missed or late.
	if err := lb.probe(ctx, 15*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mqbench latency: topic=%s rate=%d/s senders=%d size=%d duration=%s\n",
		f.topic, f.rate, f.senders, f.size, f.duration)

	lw := newLiveWriter(stdout, isTerminal(stdout))
	rep := newReporter(&lb.recv, lw, func(now time.Time, iv Interval) string {
		return fmt.Sprintf("Current Time: %s Send Total: %d Receive TPS: %d Max E2E(ms): %.3f Average E2E(ms): %7.3f",
			now.Format(timeLayout), lb.send.OK.Load(), int64(iv.TPS+0.5), ms(iv.MaxRT), ms(iv.AvgRT))
	})
	lb.measuring.Store(true)
	cpu := startCPUClock()
	start := time.Now()
	if lw.inPlace {
		lw.setProgress(start, f.duration, 0, func() int64 { return 0 })
	}
	rep.start(start)
	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	lb.sendAll(runCtx)
	cancel()
	sendEnd := time.Now()
	// Let the last messages arrive (bounded), so none counts as lost early.
	deadline := time.Now().Add(5 * time.Second)
	for lb.recv.OK.Load() < lb.send.OK.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	share := cpu.Since()
	cancelRecv()
	s := rep.finish(start, sendEnd)
	sent := lb.send.OK.Load()
	lw.Line(fmt.Sprintf("[Complete] Send Total: %d Receive Total: %d Lost: %d Behind Schedule: %d Send Failed: %d Max E2E(ms): %.3f Average E2E(ms): %.3f",
		sent, s.Total, max(0, sent-s.Total), lb.behind.Load(), lb.send.Failed.Load()+lb.send.RespFail.Load(), ms(s.MaxRT), ms(s.AvgRT)))
	lw.Line(percentileLine("E2E", s))
	lw.Line(cpuLine(share))
	return nil
}

// startLatencyConsumer starts a pull consumer of topic, retrying while the
// nameserver has no route yet: an auto-created topic reaches it with the
// broker's next registration.
func startLatencyConsumer(ctx context.Context, f *commonFlags, topic, group string, log logrus.FieldLogger, limit time.Duration) (*client.PullConsumer, error) {
	addrs := splitAddrs(f.namesrv)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		pc, err := client.NewPullConsumer(f.withTLS(client.WithNameServer(addrs...), client.WithGroupName(group),
			client.WithConsumeFromWhere(client.ConsumeFromLastOffset), client.WithLogger(log))...)
		if err != nil {
			return nil, err
		}
		if err = pc.Subscribe(topic, client.MessageSelector{}); err == nil {
			if err = pc.Start(); err == nil {
				return pc, nil
			}
		}
		_ = pc.Shutdown()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start consumer of %s: %w", topic, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// latencyBench sends at a fixed rate and receives in the same process.
type latencyBench struct {
	f     *latencyFlags
	p     *client.Producer
	pc    *client.PullConsumer
	runID uint64

	send      Counters     // send outcomes (RT unused in the report)
	recv      Counters     // publish-to-receive, one RecordSend per message
	probes    atomic.Int64 // probe messages received
	measuring atomic.Bool
	behind    atomic.Int64 // ticks the senders could not take in time
}

// body returns a new body stamped with the run id and seq (-1 for probes)
// and, at send time, the clock.
func (lb *latencyBench) body(probe bool) []byte {
	b := make([]byte, lb.f.size)
	binary.BigEndian.PutUint64(b[8:16], lb.runID)
	if probe {
		// A zero timestamp marks a probe.
		return b
	}
	for i := latencyHeader; i < len(b); i++ {
		b[i] = 'x'
	}
	return b
}

func (lb *latencyBench) probe(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for lb.probes.Load() == 0 {
		if _, err := lb.p.SendSync(ctx, client.NewMessage(lb.f.topic, lb.body(true))); err != nil && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no probe message came back through %s within %s", lb.f.topic, limit)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (lb *latencyBench) receiveLoop(ctx context.Context) {
	for {
		msgs, err := lb.pc.Poll(ctx)
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		for _, m := range msgs {
			if len(m.Body) < latencyHeader || binary.BigEndian.Uint64(m.Body[8:16]) != lb.runID {
				continue
			}
			sent := int64(binary.BigEndian.Uint64(m.Body[0:8]))
			if sent == 0 {
				lb.probes.Add(1)
				continue
			}
			if lb.measuring.Load() {
				lb.recv.RecordSend(1, time.Duration(max(0, now-sent)))
			}
		}
	}
}

// sendAll paces sends at f.rate across f.senders goroutines until ctx ends.
// Up to 100 ms of ticks may queue for the senders (a scheduling hiccup
// releases several at once); a tick beyond that is counted as behind
// schedule, and the rate was not reached.
func (lb *latencyBench) sendAll(ctx context.Context) {
	ticks := make(chan struct{}, max(lb.f.senders, lb.f.rate/10))
	var wg sync.WaitGroup
	for range lb.f.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lb.sendLoop(ctx, ticks)
		}()
	}
	lb.paceLoop(ctx, ticks)
	close(ticks)
	wg.Wait()
}

// paceLoop releases one tick per message on the schedule start + i/rate.
func (lb *latencyBench) paceLoop(ctx context.Context, ticks chan<- struct{}) {
	start := time.Now()
	interval := time.Second / time.Duration(lb.f.rate)
	var issued int64
	t := time.NewTicker(max(interval, 200*time.Microsecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int64(now.Sub(start) / interval)
			for ; issued < due; issued++ {
				if lb.f.count > 0 && issued >= lb.f.count {
					return
				}
				select {
				case ticks <- struct{}{}:
				default:
					lb.behind.Add(1)
				}
			}
		}
	}
}

func (lb *latencyBench) sendLoop(ctx context.Context, ticks <-chan struct{}) {
	sendCtx := context.WithoutCancel(ctx)
	for range ticks {
		b := lb.body(false)
		t0 := time.Now()
		binary.BigEndian.PutUint64(b[0:8], uint64(t0.UnixNano()))
		res, err := lb.p.SendSync(sendCtx, client.NewMessage(lb.f.topic, b))
		switch {
		case err != nil:
			lb.send.Failed.Add(1)
		case res.Status != client.SendOK:
			lb.send.RespFail.Add(1)
		default:
			lb.send.RecordSend(1, time.Since(t0))
		}
	}
}
