package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/message"
)

// errNoMessage is Java's answer when an index query finds nothing.
var errNoMessage = errors.New("mqadmin: query message by key finished, but no message")

// writeBody stores a message body under the body directory, named by its
// message id, as Java's mqadmin does, and returns the path.
func (e *env) writeBody(m *client.MessageExt) (string, error) {
	if err := os.MkdirAll(e.bodyDir, 0o755); err != nil {
		return "", err
	}
	// Ids are hex, but never let one escape the directory.
	p := filepath.Join(e.bodyDir, filepath.Base(m.MsgID()))
	if err := os.WriteFile(p, m.Body, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// printMsg prints a message the way QueryMsgByIdSubCommand.printMsg does.
// The consume-track section that follows in Java is not printed: the SDK
// does not expose messageTrackDetail.
func printMsg(e *env, m *client.MessageExt, withOffsetID bool) {
	path, err := e.writeBody(m)
	if err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	row := func(k string, v any) { e.printf("%-20s %v\n", k, v) }
	if withOffsetID {
		row("OffsetID:", m.OffsetMsgID())
	}
	row("Topic:", m.Topic)
	row("Tags:", "["+m.Tags()+"]")
	row("Keys:", "["+m.Keys()+"]")
	row("Queue ID:", m.QueueID)
	row("Queue Offset:", m.QueueOffset)
	row("CommitLog Offset:", m.CommitLogOffset)
	row("Reconsume Times:", m.ReconsumeTimes)
	row("Born Timestamp:", humanMillis(m.BornTimestamp))
	row("Store Timestamp:", humanMillis(m.StoreTimestamp))
	row("Born Host:", m.BornHost)
	row("Store Host:", m.StoreHost)
	row("System Flag:", m.SysFlag)
	row("Properties:", javaProps(m.Properties))
	row("Message Body Path:", path)
}

// javaProps renders properties as Java's Map.toString, sorted by key.
func javaProps(p map[string]string) string {
	keys := sortedKeys(p)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func queryMsgByIDCmd() *command {
	return &command{
		name: "queryMsgById", desc: "Query Message by Id",
		opts: []option{
			{short: "i", long: "msgId", hasArg: true, required: true, desc: "Message Id"},
			{short: "g", long: "consumerGroup", hasArg: true, desc: "consumer group name"},
			{short: "d", long: "clientId", hasArg: true, desc: "The consumer's client id"},
			{short: "s", long: "sendMessage", hasArg: true, desc: "resend message"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			var ids []string
			for _, id := range strings.Split(e.vals.get("i"), ",") {
				if id = strings.TrimSpace(id); id != "" {
					ids = append(ids, id)
				}
			}
			switch {
			case e.vals.has("g") && e.vals.has("d"):
				return pushMsgs(e, a, ids)
			case e.vals.has("s"):
				if !e.vals.bool("s", false) {
					return nil
				}
				return resendMsgs(e, a, ids)
			}
			for _, id := range ids {
				m, err := a.ViewMessage(e.ctx, id)
				if err != nil {
					return fmt.Errorf("message %s: %w", id, err)
				}
				printMsg(e, m, true)
			}
			return nil
		},
	}
}

func queryMsgByKeyCmd() *command {
	return &command{
		name: "queryMsgByKey", desc: "Query Message by Key",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "k", long: "msgKey", hasArg: true, required: true, desc: "Message Key"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			msgs, err := a.QueryMessageByKey(e.ctx, e.vals.get("t"), e.vals.get("k"), 64, time.UnixMilli(0), time.Now().Add(24*time.Hour))
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return errNoMessage
			}
			e.printf("%-50s %4s %40s\n", "#Message ID", "#QID", "#Offset")
			for _, m := range msgs {
				e.printf("%-50s %4d %40d\n", m.MsgID(), m.QueueID, m.QueueOffset)
			}
			return nil
		},
	}
}

func queryMsgByUniqueKeyCmd() *command {
	return &command{
		name: "queryMsgByUniqueKey", desc: "Query Message by Unique key",
		opts: []option{
			{short: "i", long: "msgId", hasArg: true, required: true, desc: "Message Id"},
			{short: "t", long: "topic", hasArg: true, required: true, desc: "The topic of msg"},
			{short: "a", long: "showAll", desc: "Print all message, the limit is 32"},
		},
		run: func(e *env) error {
			a, err := e.Admin()
			if err != nil {
				return err
			}
			msgs, err := a.QueryMessageByUniqKey(e.ctx, e.vals.get("t"), e.vals.get("i"))
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return errNoMessage
			}
			if !e.vals.has("a") {
				msgs = msgs[:1]
			}
			for i, m := range msgs {
				if i > 0 {
					e.printf("\n")
				}
				printMsg(e, m, false)
			}
			return nil
		},
	}
}

func queryMsgByOffsetCmd() *command {
	return &command{
		name: "queryMsgByOffset", desc: "Query Message by offset",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "topic name"},
			{short: "b", long: "brokerName", hasArg: true, required: true, desc: "Broker Name"},
			{short: "i", long: "queueId", hasArg: true, required: true, desc: "Queue Id"},
			{short: "o", long: "offset", hasArg: true, required: true, desc: "Queue Offset"},
		},
		run: func(e *env) error {
			qid, err := e.vals.int("i", 0)
			if err != nil {
				return err
			}
			off, err := e.vals.int("o", 0)
			if err != nil {
				return err
			}
			if qid < 0 || qid > 1<<16 || off < 0 {
				return fmt.Errorf("%w: -i and -o must not be negative", errUsage)
			}
			a, err := e.Admin()
			if err != nil {
				return err
			}
			mq := client.MessageQueue{Topic: e.vals.get("t"), BrokerName: e.vals.get("b"), QueueID: int32(qid)}
			// Resolve the route first so an unknown topic says so plainly.
			if _, err := a.TopicRoute(e.ctx, mq.Topic); err != nil {
				return err
			}
			m, err := a.QueryMessageByQueueOffset(e.ctx, mq, off)
			if err != nil {
				return err
			}
			printMsg(e, m, true)
			return nil
		},
	}
}

func sendMessageCmd() *command {
	return &command{
		name: "sendMessage", desc: "Send a message",
		opts: []option{
			{short: "t", long: "topic", hasArg: true, required: true, desc: "Topic name"},
			{short: "p", long: "body", hasArg: true, required: true, desc: "UTF-8 string format of the message body"},
			{short: "k", long: "key", hasArg: true, desc: "Message keys"},
			{short: "c", long: "tags", hasArg: true, desc: "Message tags"},
			{short: "b", long: "broker", hasArg: true, desc: "Send message to target broker"},
			{short: "i", long: "qid", hasArg: true, desc: "Send message to target queue"},
		},
		run: runSendMessage,
	}
}

// runSendMessage sends with the SDK's producer (the one command here that
// is not an admin call, as in Java).
func runSendMessage(e *env) error {
	qid, err := e.vals.int("i", -1)
	if err != nil {
		return err
	}
	if e.vals.has("i") && (!e.vals.has("b") || qid < 0 || qid > 1<<16) {
		return fmt.Errorf("%w: broker name must be set if the queue is chosen, and the queue id must not be negative", errUsage)
	}
	ns := e.nameServers()
	if len(ns) == 0 {
		return client.ErrNoNameServer
	}
	msg := client.NewMessage(e.vals.get("t"), []byte(e.vals.get("p")))
	if e.vals.has("c") {
		msg.WithTag(e.vals.get("c"))
	}
	if e.vals.has("k") {
		msg.WithKeys(strings.Fields(e.vals.get("k"))...)
	}
	opts := []client.Option{client.WithNameServer(strings.Join(ns, ";")), client.WithLogger(e.logger()),
		client.WithGroupName(fmt.Sprintf("mqadmin-%d", time.Now().UnixMilli()))}
	if qid >= 0 {
		msg.Queue = &client.MessageQueue{Topic: msg.Topic, BrokerName: e.vals.get("b"), QueueID: int32(qid)}
		opts = append(opts, client.WithQueueSelector(client.NewManualSelector()))
	}
	p, err := client.NewProducer(opts...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer func() { _ = p.Shutdown() }()
	res, err := p.SendSync(e.ctx, msg)
	if err != nil {
		return err
	}
	e.printf("%-32s  %-4s  %-20s    %s\n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
	e.printf("%-32s  %-4d  %-20s    %s\n", res.Queue.BrokerName, res.Queue.QueueID, res.Status, res.MsgID)
	return nil
}

// pushMsgs has one client of a group run its listener on each message
// (CONSUME_MESSAGE_DIRECTLY), printing each result as Java's toString.
func pushMsgs(e *env, a *client.Admin, ids []string) error {
	group, clientID := e.vals.get("g"), e.vals.get("d")
	var failed error
	for _, id := range ids {
		r, err := a.ConsumeMessageDirectly(e.ctx, group, clientID, "", id)
		if err != nil {
			fmt.Fprintf(e.app.err, "message %s: %v\n", id, describe(err))
			failed = err
			continue
		}
		e.printf("ConsumeMessageDirectlyResult [order=%t, autoCommit=%t, consumeResult=%s, remark=%s, spentTimeMills=%d]\n",
			r.Order, r.AutoCommit, r.ConsumeResult, r.Remark, r.SpentTimeMills)
	}
	return failed
}

// resendMsgs sends each message again, as it is stored (its topic, tags,
// keys, properties and body), with a new producer (queryMsgById -s true).
func resendMsgs(e *env, a *client.Admin, ids []string) error {
	p, err := e.producer()
	if err != nil {
		return err
	}
	defer func() { _ = p.Shutdown() }()
	for _, id := range ids {
		m, err := a.ViewMessage(e.ctx, id)
		if err != nil {
			return fmt.Errorf("message %s: %w", id, err)
		}
		e.printf("prepare resend msg. originalMsgId=%s\n", id)
		res, err := p.SendSync(e.ctx, resendable(m))
		if err != nil {
			return err
		}
		e.printf("SendResult [sendStatus=%s, msgId=%s, offsetMsgId=%s, messageQueue=%s, queueOffset=%d]\n",
			res.Status, res.MsgID, res.OffsetMsgID, mqString(res.Queue), res.QueueOffset)
	}
	return nil
}

// resendable is a stored message as a new one: its topic, flag, body and
// properties, without the ones the broker and the producer set themselves.
func resendable(m *client.MessageExt) *client.Message {
	out := client.NewMessage(m.Topic, m.Body)
	out.Flag = m.Flag
	for k, v := range m.Properties {
		switch k {
		case message.PropUniqKey, message.PropCluster, message.PropMsgRegion, message.PropTraceSwitch:
			continue
		}
		out.WithProperty(k, v)
	}
	return out
}

// producer starts a producer for commands that send.
func (e *env) producer() (*client.Producer, error) {
	ns := e.nameServers()
	if len(ns) == 0 {
		return nil, client.ErrNoNameServer
	}
	opts := []client.Option{client.WithNameServer(strings.Join(ns, ";")), client.WithLogger(e.logger()),
		client.WithGroupName(fmt.Sprintf("mqadmin-%d", time.Now().UnixMilli()))}
	if tlsOpt, err := e.tlsOption(); err != nil {
		return nil, err
	} else if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	cred, err := e.toolsCredentials()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithCredentials(cred))
	p, err := client.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}
