package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

// consumerFlags are the consumer command's flags.
type consumerFlags struct {
	commonFlags
	group string
	from  string
	idle  time.Duration
	batch int
}

func (f *consumerFlags) register(fs *flag.FlagSet) {
	f.commonFlags.register(fs)
	fs.StringVar(&f.group, "g", "", "consumer group (default benchmark_consumer_<pid>, a new group each run)")
	fs.StringVar(&f.from, "from", "last", "where a group without an offset starts: first or last")
	fs.DurationVar(&f.idle, "idle", 0, "stop when nothing arrived for this long after the first message (0: never)")
	fs.IntVar(&f.batch, "pull-batch", 32, "messages per pull request")
}

func (f *consumerFlags) validate() error {
	if err := f.commonFlags.validate(); err != nil {
		return err
	}
	switch {
	case f.from != "first" && f.from != "last":
		return fmt.Errorf("%w: --from must be first or last", errBadFlag)
	case f.idle < 0:
		return fmt.Errorf("%w: --idle must be >= 0", errBadFlag)
	case f.batch < 1 || f.batch > 1024:
		return fmt.Errorf("%w: --pull-batch must be 1..1024", errBadFlag)
	}
	return nil
}

func runConsumer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f consumerFlags
	log, stopProfile, err := setupRun("consumer", &f, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.group == "" {
		f.group = fmt.Sprintf("benchmark_consumer_%d", os.Getpid())
	}
	from := client.ConsumeFromLastOffset
	if f.from == "first" {
		from = client.ConsumeFromFirstOffset
	}
	pc, err := client.NewPullConsumer(f.withTLS(
		client.WithNameServer(splitAddrs(f.namesrv)...),
		client.WithGroupName(f.group),
		client.WithConsumeFromWhere(from),
		client.WithPullBatchSize(int32(f.batch)),
		client.WithLogger(log),
	)...)
	if err != nil {
		return err
	}
	if err := pc.Subscribe(f.topic, client.MessageSelector{}); err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	defer pc.Shutdown()
	fmt.Fprintf(stdout, "mqbench consumer: topic=%s group=%s from=%s duration=%s count=%d\n",
		f.topic, f.group, f.from, f.duration, f.count)

	var c Counters
	lw := newLiveWriter(stdout, isTerminal(stdout))
	rep := newReporter(&c, lw, consumeLine)
	cpu := startCPUClock()
	start := time.Now()
	if lw.inPlace {
		lw.setProgress(start, f.duration, f.count, (&c).OK.Load)
	}
	rep.start(start)
	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	first, last := consumeLoop(runCtx, pc, &c, f.count, f.idle)
	cancel()
	end := time.Now()
	share := cpu.Since()
	// Consume TPS spans first to last message: the time before the first
	// (rebalance, the first pull) is start-up, not consumption.
	if first.IsZero() {
		first, last = start, end
	}
	s := rep.finish(first, last)
	lw.Line(consumeCompleteLine(s))
	lw.Line(cpuLine(share))
	return nil
}

// consumeLoop polls until ctx ends, count messages arrived, or nothing came
// for idle; it returns when the first and the last message arrived.
func consumeLoop(ctx context.Context, pc *client.PullConsumer, c *Counters, count int64, idle time.Duration) (first, last time.Time) {
	var n int64
	for {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if idle > 0 && !first.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, last.Add(idle))
		}
		msgs, err := pc.Poll(pctx)
		cancel()
		if err != nil {
			// The run's end, the idle limit, or the consumer stopping:
			// nothing more will be counted either way.
			return first, last
		}
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		last = now
		nowMs := now.UnixMilli()
		for _, m := range msgs {
			c.RecordConsume(max(0, nowMs-m.BornTimestamp), max(0, nowMs-m.StoreTimestamp))
		}
		n += int64(len(msgs))
		if count > 0 && n >= count {
			return first, last
		}
	}
}
