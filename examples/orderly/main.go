// Command orderly sends order events with the order id as sharding key, and
// consumes them orderly: the events of one order arrive in send order.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

func main() {
	ns := os.Getenv("NAMESRV_ADDR")
	if ns == "" {
		ns = "127.0.0.1:9876"
	}
	p, err := client.NewProducer(client.WithNameServer(ns), client.WithGroupName("example-order-producer"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for order := 0; order < 3; order++ {
		for _, step := range []string{"created", "paid", "shipped"} {
			msg := client.NewMessage("OrderTopic", []byte(fmt.Sprintf("order %d %s", order, step))).
				WithShardingKey(fmt.Sprint("order-", order)) // same key, same queue
			if _, err := p.SendSync(ctx, msg); err != nil {
				log.Fatal(err)
			}
		}
	}

	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("example-order-consumer"),
		client.WithConsumerOrder(true), client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("OrderTopic", client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		for _, m := range msgs {
			fmt.Printf("queue %d: %s\n", m.QueueID, m.Body)
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
}
