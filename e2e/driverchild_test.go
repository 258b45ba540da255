package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The client driver is the official client running in a child process (this
// test binary re-executed with envDriver set), driven over stdin/stdout with
// one JSON object per line. Why a child: rocketmq-client-go has data races
// of its own (rmqClient.close written by Shutdown while its rebalance
// goroutine reads it, processQueue.takeMessages reading the orderly cache
// unlocked, PullFrom rewriting the queue and group it shares with its pull
// loop). Under -race they would fail our tests at random. In the child they
// are logged to a file instead, while the nameserver and broker, the code
// under test, stay in the test process under the race detector.

const (
	envDriver  = "E2E_CLIENT_DRIVER" // set: run as the client driver
	envNamesrv = "E2E_NAMESRV"       // the nameserver the driver's clients use
)

// driverRequest is one command to the driver.
type driverRequest struct {
	ID   int64           `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// driverLine is what the driver writes: the reply to a command (ID > 0) or
// an event (Event set).
type driverLine struct {
	ID     int64           `json:"id,omitempty"`
	Err    string          `json:"err,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Event  string          `json:"event,omitempty"`
	Handle string          `json:"handle,omitempty"`
	Msgs   []Got           `json:"msgs,omitempty"`
}

// MsgSpec describes one message to send.
type MsgSpec struct {
	Topic       string   `json:"topic"`
	Body        string   `json:"body"`
	Tag         string   `json:"tag,omitempty"`
	Keys        []string `json:"keys,omitempty"`
	ShardingKey string   `json:"shardingKey,omitempty"`
	// QueueID and BrokerName pick the queue with the manual selector;
	// QueueID -1 leaves it unset.
	QueueID    int    `json:"queueId"`
	BrokerName string `json:"brokerName,omitempty"`
}

// SendRes is a send result, with when the send call started and returned.
type SendRes struct {
	Status      primitive.SendStatus `json:"status"`
	MsgID       string               `json:"msgId"`
	OffsetMsgID string               `json:"offsetMsgId"`
	Topic       string               `json:"topic"`
	BrokerName  string               `json:"brokerName"`
	QueueID     int                  `json:"queueId"`
	QueueOffset int64                `json:"queueOffset"`
	Start       time.Time            `json:"start"`
	End         time.Time            `json:"end"`
}

// ProducerSpec configures a driver producer.
type ProducerSpec struct {
	// Selector is "" (the default round robin), "hash" or "manual".
	Selector string `json:"selector,omitempty"`
	// TLS dials nameservers and brokers with WithTls(true).
	TLS bool `json:"tls,omitempty"`
	// Credentials sign every request (ACL); none when nil.
	Credentials *primitive.Credentials `json:"credentials,omitempty"`
}

// PushSpec configures a driver push consumer.
type PushSpec struct {
	// Handle names the consumer in events; the parent picks it.
	Handle string `json:"handle"`
	Group  string `json:"group"`
	Topic  string `json:"topic"`
	// Expr is the tag expression ("" = all).
	Expr      string `json:"expr,omitempty"`
	Broadcast bool   `json:"broadcast,omitempty"`
	Orderly   bool   `json:"orderly,omitempty"`
	// FromLast uses CONSUME_FROM_LAST_OFFSET (the client's default); tests
	// otherwise start a new group at the first offset.
	FromLast bool  `json:"fromLast,omitempty"`
	BatchMax int   `json:"batchMax,omitempty"`
	PullSize int32 `json:"pullSize,omitempty"`
	// TLS dials nameservers and brokers with WithTls(true).
	TLS bool `json:"tls,omitempty"`
	// Credentials sign every request (ACL); none when nil.
	Credentials *primitive.Credentials `json:"credentials,omitempty"`
	// Goroutines bounds concurrent consume calls (client default 20).
	// With 20, the offset of a queue stays at its oldest message still in
	// a callback, so a shutdown right after the last delivery can leave a
	// whole queue's worth uncommitted; 1 leaves at most one message.
	Goroutines int `json:"goroutines,omitempty"`
}

// PullSpec configures a driver lite-pull consumer assigned one queue.
type PullSpec struct {
	Group      string `json:"group"`
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	// Seek is the offset to start at (-1: the group's committed offset).
	Seek      int64 `json:"seek"`
	BatchSize int32 `json:"batchSize,omitempty"`
	// Credentials sign every request (ACL); none when nil.
	Credentials *primitive.Credentials `json:"credentials,omitempty"`
}

// PullFromRes is the result of PullFrom.
type PullFromRes struct {
	Status          primitive.PullStatus `json:"status"`
	NextBeginOffset int64                `json:"nextBeginOffset"`
	MinOffset       int64                `json:"minOffset"`
	MaxOffset       int64                `json:"maxOffset"`
	Msgs            []Got                `json:"msgs"`
}

type handleArgs struct {
	Handle string `json:"handle"`
}

type sendArgs struct {
	Handle string    `json:"handle"`
	Msgs   []MsgSpec `json:"msgs"`
}

type pollArgs struct {
	Handle    string `json:"handle"`
	TimeoutMs int64  `json:"timeoutMs"`
}

type pullFromArgs struct {
	Handle string `json:"handle"`
	Offset int64  `json:"offset"`
	N      int    `json:"n"`
}

type topicArgs struct {
	Topic      string `json:"topic"`
	Queues     int    `json:"queues,omitempty"`
	BrokerAddr string `json:"brokerAddr,omitempty"`
}

// QueueRef names a message queue in driver answers.
type QueueRef struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// driver is the child side: the official clients it holds by handle.
type driver struct {
	ns  primitive.NamesrvAddr
	out *json.Encoder
	wmu sync.Mutex // serializes lines on stdout

	mu        sync.Mutex
	producers map[string]rocketmq.Producer
	pushes    map[string]rocketmq.PushConsumer
	pulls     map[string]*driverPull
	adm       admin.Admin
	wg        sync.WaitGroup // running commands
}

type driverPull struct {
	pc rocketmq.PullConsumer
	mq *primitive.MessageQueue
}

// runDriver serves commands from in until it closes or says "exit", then
// shuts every client down. It returns the process exit code.
func runDriver(in io.Reader, out io.Writer) int {
	d := &driver{
		ns:        primitive.NamesrvAddr(strings.Split(os.Getenv(envNamesrv), ";")), // several: "a;b;c"
		out:       json.NewEncoder(out),
		producers: map[string]rocketmq.Producer{},
		pushes:    map[string]rocketmq.PushConsumer{},
		pulls:     map[string]*driverPull{},
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var req driverRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "driver: bad command %q: %v\n", sc.Text(), err)
			return 2
		}
		if req.Op == "exit" {
			break
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			res, err := d.handle(req)
			line := driverLine{ID: req.ID}
			if err != nil {
				line.Err = err.Error()
			} else if res != nil {
				b, mErr := json.Marshal(res)
				if mErr != nil {
					line.Err = mErr.Error()
				}
				line.Result = b
			}
			d.write(line)
		}()
	}
	d.wg.Wait()
	d.closeAll()
	return 0
}

func (d *driver) write(l driverLine) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.out.Encode(l); err != nil {
		fmt.Fprintf(os.Stderr, "driver: write: %v\n", err)
	}
}

// closeAll shuts consumers down before producers, so their offsets reach the
// broker while it is still up.
func (d *driver) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, pc := range d.pushes {
		_ = pc.Shutdown()
	}
	for _, p := range d.pulls {
		_ = p.pc.Shutdown()
	}
	for _, p := range d.producers {
		_ = p.Shutdown()
	}
	if d.adm != nil {
		_ = d.adm.Close()
	}
}

func decodeArgs[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

func (d *driver) handle(req driverRequest) (any, error) {
	switch req.Op {
	case "producer.new":
		spec, err := decodeArgs[ProducerSpec](req.Args)
		if err != nil {
			return nil, err
		}
		return d.newProducer(spec)
	case "producer.sendSync", "producer.sendAsync", "producer.sendOneway":
		a, err := decodeArgs[sendArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := lookup(d, d.producers, a.Handle)
		if err != nil {
			return nil, err
		}
		switch req.Op {
		case "producer.sendSync":
			return sendSync(p, a.Msgs)
		case "producer.sendAsync":
			return sendAsync(p, a.Msgs)
		default:
			return nil, sendOneway(p, a.Msgs)
		}
	case "producer.shutdown":
		a, err := decodeArgs[handleArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := remove(d, d.producers, a.Handle)
		if err != nil {
			return nil, err
		}
		return nil, p.Shutdown()
	case "push.start":
		spec, err := decodeArgs[PushSpec](req.Args)
		if err != nil {
			return nil, err
		}
		return d.startPush(spec)
	case "push.shutdown":
		a, err := decodeArgs[handleArgs](req.Args)
		if err != nil {
			return nil, err
		}
		pc, err := remove(d, d.pushes, a.Handle)
		if err != nil {
			return nil, err
		}
		return nil, pc.Shutdown()
	case "push.suspend", "push.resume":
		a, err := decodeArgs[handleArgs](req.Args)
		if err != nil {
			return nil, err
		}
		pc, err := lookup(d, d.pushes, a.Handle)
		if err != nil {
			return nil, err
		}
		if req.Op == "push.suspend" {
			pc.Suspend()
		} else {
			pc.Resume()
		}
		return nil, nil
	case "pull.start":
		spec, err := decodeArgs[PullSpec](req.Args)
		if err != nil {
			return nil, err
		}
		return d.startPull(spec)
	case "pull.poll":
		a, err := decodeArgs[pollArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := lookup(d, d.pulls, a.Handle)
		if err != nil {
			return nil, err
		}
		cr, err := p.pc.Poll(context.Background(), time.Duration(a.TimeoutMs)*time.Millisecond)
		if consumer.IsNoNewMsgError(err) {
			return []Got{}, nil
		}
		if err != nil {
			return nil, err
		}
		got := gotOf(time.Now(), cr.GetMsgList())
		p.pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		return got, nil
	case "pull.pullFrom":
		a, err := decodeArgs[pullFromArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := lookup(d, d.pulls, a.Handle)
		if err != nil {
			return nil, err
		}
		mq := *p.mq // PullFrom rewrites the queue it is given
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := p.pc.PullFrom(ctx, &mq, a.Offset, a.N)
		if err != nil {
			return nil, err
		}
		return PullFromRes{Status: r.Status, NextBeginOffset: r.NextBeginOffset, MinOffset: r.MinOffset,
			MaxOffset: r.MaxOffset, Msgs: gotOf(time.Now(), r.GetMessageExts())}, nil
	case "pull.persist":
		a, err := decodeArgs[handleArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := lookup(d, d.pulls, a.Handle)
		if err != nil {
			return nil, err
		}
		return nil, p.pc.PersistOffset(context.Background(), p.mq.Topic)
	case "pull.shutdown":
		a, err := decodeArgs[handleArgs](req.Args)
		if err != nil {
			return nil, err
		}
		p, err := remove(d, d.pulls, a.Handle)
		if err != nil {
			return nil, err
		}
		return nil, p.pc.Shutdown()
	case "admin.createTopic", "admin.fetchPublishQueues", "admin.fetchAllTopics":
		a, err := decodeArgs[topicArgs](req.Args)
		if err != nil {
			return nil, err
		}
		return d.admin(req.Op, a)
	}
	return nil, fmt.Errorf("driver: unknown op %q", req.Op)
}

var errNoHandle = errors.New("driver: no such handle")

func lookup[T any](d *driver, m map[string]T, h string) (T, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := m[h]
	if !ok {
		return v, fmt.Errorf("%w: %s", errNoHandle, h)
	}
	return v, nil
}

func remove[T any](d *driver, m map[string]T, h string) (T, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := m[h]
	if !ok {
		return v, fmt.Errorf("%w: %s", errNoHandle, h)
	}
	delete(m, h)
	return v, nil
}

func (d *driver) newProducer(spec ProducerSpec) (string, error) {
	opts := []producer.Option{
		producer.WithNameServer(d.ns),
		producer.WithGroupName(uniq("PG")),
		producer.WithInstanceName(uniq("prod")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}
	if spec.TLS {
		opts = append(opts, producer.WithTls(true))
	}
	switch spec.Selector {
	case "":
	case "hash":
		opts = append(opts, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	case "manual":
		opts = append(opts, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	default:
		return "", fmt.Errorf("driver: unknown selector %q", spec.Selector)
	}
	if spec.Credentials != nil {
		opts = append(opts, producer.WithCredentials(*spec.Credentials))
	}
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return "", err
	}
	if err := p.Start(); err != nil {
		return "", err
	}
	h := uniq("p")
	d.mu.Lock()
	d.producers[h] = p
	d.mu.Unlock()
	return h, nil
}

func toMessages(specs []MsgSpec) []*primitive.Message {
	out := make([]*primitive.Message, len(specs))
	for i, s := range specs {
		m := primitive.NewMessage(s.Topic, []byte(s.Body))
		if s.Tag != "" {
			m.WithTag(s.Tag)
		}
		if len(s.Keys) > 0 {
			m.WithKeys(s.Keys)
		}
		if s.ShardingKey != "" {
			m.WithShardingKey(s.ShardingKey)
		}
		if s.QueueID >= 0 {
			m.Queue = &primitive.MessageQueue{Topic: s.Topic, BrokerName: s.BrokerName, QueueId: s.QueueID}
		}
		out[i] = m
	}
	return out
}

func sendResOf(r *primitive.SendResult, start, end time.Time) SendRes {
	res := SendRes{Status: r.Status, MsgID: r.MsgID, OffsetMsgID: r.OffsetMsgID, QueueOffset: r.QueueOffset, Start: start, End: end}
	if r.MessageQueue != nil {
		res.Topic, res.BrokerName, res.QueueID = r.MessageQueue.Topic, r.MessageQueue.BrokerName, r.MessageQueue.QueueId
	}
	return res
}

// sendSync sends specs as one SendSync call: one message, or a batch.
func sendSync(p rocketmq.Producer, specs []MsgSpec) (SendRes, error) {
	msgs := toMessages(specs)
	// The manual selector reads msg.Queue, which a batch takes from its first member.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	r, err := p.SendSync(ctx, msgs...)
	if err != nil {
		return SendRes{}, err
	}
	return sendResOf(r, start, time.Now()), nil
}

// sendAsync sends each spec with SendAsync and waits for every callback.
func sendAsync(p rocketmq.Producer, specs []MsgSpec) ([]SendRes, error) {
	msgs := toMessages(specs)
	type outcome struct {
		res SendRes
		err error
	}
	done := make(chan outcome, len(msgs))
	for _, m := range msgs {
		start := time.Now()
		err := p.SendAsync(context.Background(), func(_ context.Context, r *primitive.SendResult, err error) {
			if err != nil {
				done <- outcome{err: err}
				return
			}
			done <- outcome{res: sendResOf(r, start, time.Now())}
		}, m)
		if err != nil {
			done <- outcome{err: err}
		}
	}
	var out []SendRes
	var errs []error
	timeout := time.After(30 * time.Second)
	for range msgs {
		select {
		case o := <-done:
			if o.err != nil {
				errs = append(errs, o.err)
			} else {
				out = append(out, o.res)
			}
		case <-timeout:
			return out, errors.New("driver: async send callbacks missing after 30s")
		}
	}
	return out, errors.Join(errs...)
}

func sendOneway(p rocketmq.Producer, specs []MsgSpec) error {
	for _, m := range toMessages(specs) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := p.SendOneWay(ctx, m)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

func gotOf(now time.Time, msgs []*primitive.MessageExt) []Got {
	out := make([]Got, 0, len(msgs))
	for _, m := range msgs {
		g := Got{
			Body: string(m.Body), Tag: m.GetTags(), Key: m.GetShardingKey(), Offset: m.QueueOffset,
			UniqKey: m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), Received: now,
		}
		if m.Queue != nil {
			g.QueueID, g.Broker = m.Queue.QueueId, m.Queue.BrokerName
		}
		out = append(out, g)
	}
	return out
}

func (d *driver) startPush(spec PushSpec) (string, error) {
	h := spec.Handle
	if h == "" {
		h = uniq("c")
	}
	opts := []consumer.Option{
		consumer.WithNameServer(d.ns),
		consumer.WithGroupName(spec.Group),
		consumer.WithInstance(uniq("cons")),
		consumer.WithRetry(2),
	}
	if !spec.FromLast {
		opts = append(opts, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	}
	if spec.TLS {
		opts = append(opts, consumer.WithTls(true))
	}
	if spec.Broadcast {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	if spec.Orderly {
		// Relock every second instead of 20 s, so a queue moves quickly.
		opts = append(opts, consumer.WithConsumerOrder(true), consumer.WithRebalanceLockInterval(time.Second))
	}
	if spec.BatchMax > 0 {
		opts = append(opts, consumer.WithConsumeMessageBatchMaxSize(spec.BatchMax))
	}
	if spec.PullSize > 0 {
		opts = append(opts, consumer.WithPullBatchSize(spec.PullSize))
	}
	if spec.Goroutines > 0 {
		opts = append(opts, consumer.WithConsumeGoroutineNums(spec.Goroutines))
	}
	if spec.Credentials != nil {
		opts = append(opts, consumer.WithCredentials(*spec.Credentials))
	}
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return "", err
	}
	sel := consumer.MessageSelector{}
	if spec.Expr != "" {
		sel = consumer.MessageSelector{Type: consumer.TAG, Expression: spec.Expr}
	}
	err = pc.Subscribe(spec.Topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		d.write(driverLine{Event: "msgs", Handle: h, Msgs: gotOf(time.Now(), msgs)})
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return "", err
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	d.mu.Lock()
	d.pushes[h] = pc
	d.mu.Unlock()
	return h, nil
}

func (d *driver) startPull(spec PullSpec) (string, error) {
	opts := []consumer.Option{
		consumer.WithNameServer(d.ns),
		consumer.WithGroupName(spec.Group),
		consumer.WithInstance(uniq("puller")),
	}
	if spec.BatchSize > 0 {
		opts = append(opts, consumer.WithPullBatchSize(spec.BatchSize))
	}
	if spec.Credentials != nil {
		opts = append(opts, consumer.WithCredentials(*spec.Credentials))
	}
	pc, err := rocketmq.NewPullConsumer(opts...)
	if err != nil {
		return "", err
	}
	mq := &primitive.MessageQueue{Topic: spec.Topic, BrokerName: spec.BrokerName, QueueId: spec.QueueID}
	if err := pc.Assign(spec.Topic, []*primitive.MessageQueue{mq}); err != nil {
		return "", err
	}
	if spec.Seek >= 0 {
		pc.SeekOffset(mq, spec.Seek)
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	h := uniq("l")
	d.mu.Lock()
	d.pulls[h] = &driverPull{pc: pc, mq: &primitive.MessageQueue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueId: mq.QueueId}}
	d.mu.Unlock()
	return h, nil
}

func (d *driver) admin(op string, a topicArgs) (any, error) {
	d.mu.Lock()
	if d.adm == nil {
		adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(d.ns)))
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.adm = adm
	}
	adm := d.adm
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	switch op {
	case "admin.createTopic":
		return nil, adm.CreateTopic(ctx,
			admin.WithTopicCreate(a.Topic),
			admin.WithBrokerAddrCreate(a.BrokerAddr),
			admin.WithReadQueueNums(a.Queues),
			admin.WithWriteQueueNums(a.Queues),
		)
	case "admin.fetchPublishQueues":
		mqs, err := adm.FetchPublishMessageQueues(ctx, a.Topic)
		if err != nil {
			return nil, err
		}
		out := make([]QueueRef, len(mqs))
		for i, mq := range mqs {
			out[i] = QueueRef{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueId}
		}
		return out, nil
	default:
		list, err := adm.FetchAllTopicList(ctx)
		if err != nil {
			return nil, err
		}
		return list.TopicList, nil
	}
}
