package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/broker"
	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/nameserver"
)

// startExampleCluster runs a nameserver and a broker in process, so the
// examples run as tests; real programs point WithNameServer at a cluster.
func startExampleCluster(topic string) (nsAddr string, stop func()) {
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	quiet.SetLevel(logrus.PanicLevel)
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	ncfg := conf.DefaultNamesrvConfig()
	ncfg.BindAddress, ncfg.ListenPort = "127.0.0.1", 0
	ncfg.KvConfigPath = filepath.Join(dir, "kv.json")
	ns, err := nameserver.New(ncfg, quiet)
	if err != nil {
		log.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		log.Fatal(err)
	}
	bcfg := conf.DefaultBrokerConfig()
	bcfg.BrokerIP1, bcfg.BindAddress, bcfg.ListenPort = "127.0.0.1", "127.0.0.1", 0
	bcfg.NamesrvAddr = ns.Addr()
	bcfg.StorePathRootDir = filepath.Join(dir, "store")
	bcfg.MappedFileSizeCommitLog = 1 << 20
	b, err := broker.New(&bcfg, quiet)
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Start(); err != nil {
		log.Fatal(err)
	}
	admin, err := client.NewAdmin(client.WithNameServer(ns.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.CreateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4}); err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		if _, err := admin.TopicRoute(ctx, topic); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = admin.Close()
	return ns.Addr(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		_ = ns.Shutdown(ctx)
		_ = os.RemoveAll(dir)
	}
}

func ExampleProducer() {
	nsAddr, stop := startExampleCluster("Greetings")
	defer stop()

	p, err := client.NewProducer(client.WithNameServer(nsAddr), client.WithGroupName("greeter"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := client.NewMessage("Greetings", []byte("hello")).WithTag("morning").WithKeys("greeting-1")
	res, err := p.SendSync(ctx, msg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Queue.Topic, len(res.MsgID))
	// Output: SEND_OK Greetings 32
}

func ExamplePushConsumer() {
	nsAddr, stop := startExampleCluster("Greetings")
	defer stop()

	got := make(chan string, 1)
	c, err := client.NewPushConsumer(client.WithNameServer(nsAddr), client.WithGroupName("listener"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("Greetings", client.MessageSelector{Expression: "morning || evening"},
		func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				got <- m.Tags() + ": " + string(m.Body)
			}
			return client.ConsumeSuccess, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	defer c.Shutdown()

	p, _ := client.NewProducer(client.WithNameServer(nsAddr))
	_ = p.Start()
	defer p.Shutdown()
	_, _ = p.SendSync(context.Background(), client.NewMessage("Greetings", []byte("good morning")).WithTag("morning"))
	fmt.Println(<-got)
	// Output: morning: good morning
}

func ExamplePullConsumer() {
	nsAddr, stop := startExampleCluster("Greetings")
	defer stop()

	p, _ := client.NewProducer(client.WithNameServer(nsAddr))
	_ = p.Start()
	defer p.Shutdown()
	_, _ = p.SendSync(context.Background(), client.NewMessage("Greetings", []byte("hi")))

	c, err := client.NewPullConsumer(client.WithNameServer(nsAddr), client.WithGroupName("poller"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset), client.WithAutoCommit(false))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("Greetings", client.MessageSelector{}); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	defer c.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := c.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(msgs), string(msgs[0].Body))
	if err := c.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: 1 hi
}
