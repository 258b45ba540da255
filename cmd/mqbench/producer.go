package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting"
)

// producerFlags are the producer command's flags, after RocketMQ's
// benchmark Producer (-w threads, -s size, -k keys...).
type producerFlags struct {
	commonFlags
	senders    int
	size       int
	mode       string
	batch      int
	delayLevel int
	keys       bool
	inflight   int
	queues     int
	timeout    time.Duration
}

func (f *producerFlags) register(fs *flag.FlagSet) {
	f.commonFlags.register(fs)
	fs.IntVar(&f.senders, "w", 64, "concurrent senders")
	fs.IntVar(&f.size, "s", 1024, "message body size in bytes")
	fs.StringVar(&f.mode, "mode", "sync", "send mode: sync, async or oneway")
	fs.IntVar(&f.batch, "batch", 1, "messages per send (> 1 sends SEND_BATCH_MESSAGE)")
	fs.IntVar(&f.delayLevel, "delay-level", 0, "delay level 1..18 on every message (0: none)")
	fs.BoolVar(&f.keys, "keys", false, "give every message a unique key (the broker indexes it)")
	fs.IntVar(&f.inflight, "inflight", 1024, "async mode: most sends in flight at once")
	fs.IntVar(&f.queues, "queues", 0, "create the topic with this many queues first (0: rely on auto-creation)")
	fs.DurationVar(&f.timeout, "send-timeout", 3*time.Second, "timeout of one send")
}

func (f *producerFlags) validate() error {
	if err := f.commonFlags.validate(); err != nil {
		return err
	}
	switch {
	case f.senders < 1 || f.senders > 10000:
		return fmt.Errorf("%w: -w must be 1..10000", errBadFlag)
	case f.size < 1 || f.size > 4<<20:
		return fmt.Errorf("%w: -s must be 1..4194304", errBadFlag)
	case f.mode != "sync" && f.mode != "async" && f.mode != "oneway":
		return fmt.Errorf("%w: --mode must be sync, async or oneway", errBadFlag)
	case f.batch < 1 || f.batch > 1024:
		return fmt.Errorf("%w: --batch must be 1..1024", errBadFlag)
	case f.batch > 1 && f.delayLevel > 0:
		return fmt.Errorf("%w: --delay-level does not apply to batches (RocketMQ refuses delayed batch messages)", errBadFlag)
	case f.delayLevel < 0 || f.delayLevel > 18:
		return fmt.Errorf("%w: --delay-level must be 0..18", errBadFlag)
	case f.inflight < 1:
		return fmt.Errorf("%w: --inflight must be >= 1", errBadFlag)
	case f.queues < 0 || f.queues > 1024:
		return fmt.Errorf("%w: --queues must be 0..1024", errBadFlag)
	case f.timeout <= 0:
		return fmt.Errorf("%w: --send-timeout must be > 0", errBadFlag)
	}
	return nil
}

func runProducer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f producerFlags
	log, stopProfile, err := setupRun("producer", &f, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.queues > 0 {
		if err := createTopic(ctx, &f.commonFlags, f.topic, f.queues, log); err != nil {
			return err
		}
	}
	p, err := client.NewProducer(f.withTLS(
		client.WithNameServer(splitAddrs(f.namesrv)...),
		client.WithGroupName(fmt.Sprintf("benchmark_producer_%d", os.Getpid())),
		client.WithSendTimeout(f.timeout),
		client.WithMaxAsyncInFlight(f.inflight),
		client.WithLogger(log),
	)...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown()

	body := make([]byte, f.size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	fmt.Fprintf(stdout, "mqbench producer: topic=%s senders=%d size=%d mode=%s batch=%d duration=%s count=%d\n",
		f.topic, f.senders, f.size, f.mode, f.batch, f.duration, f.count)
	if err := warmUp(ctx, p, f.topic, body, 15*time.Second); err != nil {
		return err
	}

	b := &sendBench{f: &f, p: p, body: body, errs: newErrorLog(stderr, 10)}
	lw := newLiveWriter(stdout, isTerminal(stdout))
	rep := newReporter(&b.c, lw, sendLine)
	cpu := startCPUClock()
	start := time.Now()
	if lw.inPlace {
		lw.setProgress(start, f.duration, f.count, (&b.c).OK.Load)
	}
	rep.start(start)
	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	b.run(runCtx)
	cancel()
	end := time.Now()
	share := cpu.Since()
	s := rep.finish(start, end)
	lw.Line(completeLine(s))
	lw.Line(percentileLine("RT", s))
	lw.Line(cpuLine(share))
	return nil
}

// splitAddrs splits a ';'-separated address list.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// createTopic creates topic with n read and write queues on every master.
func createTopic(ctx context.Context, f *commonFlags, topic string, n int, log logrus.FieldLogger) error {
	a, err := client.NewAdmin(f.withTLS(client.WithNameServer(splitAddrs(f.namesrv)...), client.WithLogger(log))...)
	if err != nil {
		return err
	}
	defer a.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.CreateTopic(cctx, client.TopicConfig{Topic: topic, ReadQueueNums: int32(n), WriteQueueNums: int32(n)}); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// warmUp sends one message until it succeeds: the route is known and the
// connection open before the clock starts. A new topic takes a moment to
// reach the nameserver.
func warmUp(ctx context.Context, p *client.Producer, topic string, body []byte, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		_, err := p.SendSync(ctx, client.NewMessage(topic, body))
		if err == nil {
			return nil
		}
		last = err
		// NO_PERMISSION (ACL, or a topic or broker without write
		// permission) does not go away by waiting.
		var be *client.BrokerError
		if errors.As(err, &be) && be.Code == remoting.NoPermission {
			return fmt.Errorf("warm-up send to %s refused: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm-up send to %s failed for %s: %w", topic, limit, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sendBench is one producer run: f.senders goroutines (sendLoop) sending
// until the context ends or --count messages have been claimed.
type sendBench struct {
	f    *producerFlags
	p    *client.Producer
	body []byte
	c    Counters

	claimed atomic.Int64 // messages handed to senders, for --count
	seq     atomic.Int64 // key numbering
	pending sync.WaitGroup
	errs    *errorLog
}

func (b *sendBench) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range b.f.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.sendLoop(ctx)
		}()
	}
	wg.Wait()
	// Async callbacks still due: each is bounded by the send timeout.
	b.pending.Wait()
}

// claim reserves the next send's messages: f.batch, fewer for the last
// send under --count, 0 once --count is reached.
func (b *sendBench) claim() int {
	n := int64(b.f.batch)
	if b.f.count == 0 {
		return int(n)
	}
	end := b.claimed.Add(n)
	if end <= b.f.count {
		return int(n)
	}
	return int(max(0, b.f.count-(end-n)))
}

// messages builds the next send's n messages. They are new each time: the
// client stamps a unique id into each message's properties.
func (b *sendBench) messages(n int) []*client.Message {
	msgs := make([]*client.Message, n)
	for i := range msgs {
		m := client.NewMessage(b.f.topic, b.body)
		if b.f.keys {
			m.WithKeys("k" + strconv.FormatInt(b.seq.Add(1), 10))
		}
		if b.f.delayLevel > 0 {
			m.WithDelayTimeLevel(b.f.delayLevel)
		}
		msgs[i] = m
	}
	return msgs
}

// account records the outcome of one send of n messages.
func (b *sendBench) account(n int, rt time.Duration, res *client.SendResult, err error) {
	var be *client.BrokerError
	switch {
	case err == nil && (res == nil || res.Status == client.SendOK):
		b.c.RecordSend(n, rt)
	case err == nil:
		// Stored but not as asked (flush or slave timeout): not a success
		// for a durability benchmark.
		b.c.RespFail.Add(int64(n))
	case errors.As(err, &be):
		b.c.RespFail.Add(int64(n))
		b.errs.report(err)
	default:
		b.c.Failed.Add(int64(n))
		b.errs.report(err)
	}
}

func (b *sendBench) sendLoop(ctx context.Context) {
	// Sends run to completion on their own timeout once started: a send cut
	// short by the end of the run would count as a failure it is not.
	sendCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		n := b.claim()
		if n == 0 {
			return
		}
		msgs := b.messages(n)
		t0 := time.Now()
		switch b.f.mode {
		case "sync":
			res, err := b.p.SendSync(sendCtx, msgs...)
			b.account(len(msgs), time.Since(t0), res, err)
		case "oneway":
			err := b.p.SendOneWay(sendCtx, msgs...)
			b.account(len(msgs), time.Since(t0), nil, err)
		case "async":
			b.pending.Add(1)
			// sendCtx: the run's end must not cancel sends in flight (the
			// client's ctx bounds the whole send, retries included); the
			// wait for a free slot is bounded by the sends' own timeout.
			err := b.p.SendAsync(sendCtx, func(_ context.Context, res *client.SendResult, err error) {
				b.account(n, time.Since(t0), res, err)
				b.pending.Done()
			}, msgs...)
			if err != nil {
				b.pending.Done()
				b.account(n, time.Since(t0), nil, err)
			}
		}
	}
}
