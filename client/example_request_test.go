package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

// A requester asks and waits; a replier (a push consumer with a producer)
// answers with CreateReplyMessage. Both could run the official client.
func ExampleProducer_Request() {
	nsAddr, stop := startExampleCluster("Prices")
	defer stop()

	replier, err := client.NewProducer(client.WithNameServer(nsAddr), client.WithGroupName("price-replier"))
	if err != nil {
		log.Fatal(err)
	}
	if err := replier.Start(); err != nil {
		log.Fatal(err)
	}
	defer replier.Shutdown()
	c, err := client.NewPushConsumer(client.WithNameServer(nsAddr), client.WithGroupName("price-service"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("Prices", client.MessageSelector{Expression: "*"},
		func(ctx context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := client.CreateReplyMessage(m, []byte("42 EUR for "+string(m.Body)))
				if err != nil {
					return client.ConsumeRetryLater, err
				}
				if _, err := replier.SendSync(ctx, reply); err != nil {
					return client.ConsumeRetryLater, err
				}
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

	p, err := client.NewProducer(client.WithNameServer(nsAddr), client.WithGroupName("shop"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := p.Request(ctx, 20*time.Second, client.NewMessage("Prices", []byte("book-7")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply.Body))
	// Output: 42 EUR for book-7
}
