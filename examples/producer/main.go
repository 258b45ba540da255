// Command producer sends ten messages synchronously, one batch, one
// asynchronous and one one-way message to TopicTest.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

func main() {
	ns := os.Getenv("NAMESRV_ADDR")
	if ns == "" {
		ns = "127.0.0.1:9876"
	}
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithGroupName("example-producer"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for i := 0; i < 10; i++ {
		msg := client.NewMessage("TopicTest", []byte(fmt.Sprintf("hello %d", i))).WithTag("TagA").WithKeys(fmt.Sprint("order-", i))
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("sent %s to %s/%d at offset %d\n", res.MsgID, res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset)
	}
	// Several messages of one topic go as one batch.
	if _, err := p.SendSync(ctx, client.NewMessage("TopicTest", []byte("b1")), client.NewMessage("TopicTest", []byte("b2"))); err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = p.SendAsync(ctx, func(_ context.Context, res *client.SendResult, err error) {
		defer close(done)
		if err != nil {
			log.Print(err)
			return
		}
		fmt.Println("async sent", res.MsgID)
	}, client.NewMessage("TopicTest", []byte("async")))
	if err != nil {
		log.Fatal(err)
	}
	<-done
	if err := p.SendOneWay(ctx, client.NewMessage("TopicTest", []byte("fire and forget"))); err != nil {
		log.Fatal(err)
	}
}
