package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// consumeWait bounds how long a test waits for a consumer to receive what it
// expects. The official push consumer starts pulling right after Start, but a
// rebalance triggered by a membership change takes a heartbeat round trip and
// a NOTIFY_CONSUMER_IDS_CHANGED; 30 s leaves room for -race on 2 cores.
const consumeWait = 30 * time.Second

// pollEvery is the require.Eventually tick of these tests.
const pollEvery = 20 * time.Millisecond

// nsAddr is the official client's form of the nameserver address.
func (c *Cluster) nsAddr() primitive.NamesrvAddr { return primitive.NamesrvAddr{c.NamesrvAddr} }

// NewInProcessProducer starts an official producer in this process, with a
// unique group and instance name, shut down when the test ends. Only the
// benchmark uses it (no -race there); tests go through the Driver.
func (c *Cluster) NewInProcessProducer(t testing.TB, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	all := append([]producer.Option{
		producer.WithNameServer(c.nsAddr()),
		producer.WithGroupName(uniq("PG")),
		producer.WithInstanceName(uniq("prod")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}, opts...)
	p, err := rocketmq.NewProducer(all...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// bodies returns n distinct bodies "prefix-0" ... "prefix-(n-1)".
func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}

// Got is a message as a consumer received it.
type Got struct {
	Body     string    `json:"body"`
	Tag      string    `json:"tag,omitempty"`
	Key      string    `json:"key,omitempty"` // sharding key
	UniqKey  string    `json:"uniqKey,omitempty"`
	QueueID  int       `json:"queueId"`
	Broker   string    `json:"broker,omitempty"` // the queue's brokerName
	Offset   int64     `json:"offset"`
	Received time.Time `json:"received"`
}

// Inbox records what one consumer received, safe for the client's consume
// goroutines.
type Inbox struct {
	mu   sync.Mutex
	msgs []Got
	seen map[string]int
}

// NewInbox returns an empty inbox.
func NewInbox() *Inbox { return &Inbox{seen: make(map[string]int)} }

// addGot records deliveries.
func (in *Inbox) addGot(gs ...Got) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, g := range gs {
		in.msgs = append(in.msgs, g)
		in.seen[g.Body]++
	}
}

// Msgs is a copy of everything received, in arrival order.
func (in *Inbox) Msgs() []Got {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Got(nil), in.msgs...)
}

// Len is the number of deliveries (repeats included).
func (in *Inbox) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

// Count is how many times body was delivered.
func (in *Inbox) Count(body string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.seen[body]
}

// Missing lists the bodies of want not received yet (at most 10, for messages).
func (in *Inbox) Missing(want []string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, b := range want {
		if in.seen[b] == 0 {
			out = append(out, b)
			if len(out) == 10 {
				break
			}
		}
	}
	return out
}

// HasAll reports whether every body of want was received.
func (in *Inbox) HasAll(want []string) bool { return len(in.Missing(want)) == 0 }

// Queues is the sorted set of queue ids messages came from.
func (in *Inbox) Queues() []int {
	in.mu.Lock()
	defer in.mu.Unlock()
	set := map[int]bool{}
	for _, g := range in.msgs {
		set[g.QueueID] = true
	}
	out := make([]int, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	sort.Ints(out)
	return out
}

// WaitAll waits until every body of want has arrived in each inbox.
func WaitAll(t testing.TB, want []string, inboxes ...*Inbox) {
	t.Helper()
	WaitAllWithin(t, consumeWait, want, inboxes...)
}

// WaitAllWithin is WaitAll with its own bound.
func WaitAllWithin(t testing.TB, within time.Duration, want []string, inboxes ...*Inbox) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, in := range inboxes {
			if !in.HasAll(want) {
				return false
			}
		}
		return true
	}, within, pollEvery, "messages never arrived; first missing per inbox: %v", missingReport(want, inboxes))
}

// missingReport is evaluated when require.Eventually builds its message,
// i.e. once before waiting; it returns a Stringer so the final state shows.
func missingReport(want []string, inboxes []*Inbox) fmt.Stringer {
	return stringerFunc(func() string {
		var sb strings.Builder
		for i, in := range inboxes {
			fmt.Fprintf(&sb, "[inbox %d: %d/%d received, missing %v] ", i, len(want)-countMissing(in, want), len(want), in.Missing(want))
		}
		return sb.String()
	})
}

func countMissing(in *Inbox, want []string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, b := range want {
		if in.seen[b] == 0 {
			n++
		}
	}
	return n
}

type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

// ReadAll reads every message stored in topic, queue by queue from offset 0
// to the queue's max, with our own remoting client (plain PULL_MESSAGE, no
// suspension), so it checks the store independently of any consumer.
func (c *Cluster) ReadAll(t testing.TB, topic string) []*primitive.MessageExt {
	t.Helper()
	// A send is acknowledged before dispatch writes its consume-queue entry
	// (as in RocketMQ): read only once dispatch has caught up.
	require.Eventually(t, func() bool { return c.Broker.Store().DispatchBehindBytes() == 0 }, opTimeout, pollEvery,
		"dispatch did not catch up with the commitlog")
	rd := c.route(t, topic)
	require.NotNil(t, rd, "no route for %s", topic)
	require.Len(t, rd.QueueDatas, 1)
	group := uniq("READALL")
	var out []*primitive.MessageExt
	for q := range int(rd.QueueDatas[0].ReadQueueNums) {
		maxOff := c.MaxOffset(t, topic, q)
		for off := int64(0); off < maxOff; {
			h := pullHeader(group, topic, off, 0, "*")
			h.QueueID = int32(q)
			resp, _ := rawPull(t, c, h)
			require.Equal(t, int32(remoting.Success), resp.Code, "pull %s/%d at %d of %d: %s", topic, q, off, maxOff, resp.Remark)
			msgs := primitive.DecodeMessage(resp.Body)
			require.NotEmpty(t, msgs, "pull %s/%d at %d: empty body", topic, q, off)
			next := pullResponseHeader(t, resp).NextBeginOffset
			require.Equal(t, off+int64(len(msgs)), next, "pull %s/%d at %d", topic, q, off)
			for i, m := range msgs {
				require.Equal(t, off+int64(i), m.QueueOffset, "pull %s/%d at %d", topic, q, off)
			}
			out = append(out, msgs...)
			off = next
		}
	}
	return out
}

// bodySet is the set of bodies of msgs.
func bodySet(msgs []*primitive.MessageExt) map[string]int {
	out := make(map[string]int, len(msgs))
	for _, m := range msgs {
		out[string(m.Body)]++
	}
	return out
}
