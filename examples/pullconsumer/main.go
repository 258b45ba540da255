// Command pullconsumer polls TopicTest and commits after each batch.
package main

import (
	"context"
	"errors"
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
	c, err := client.NewPullConsumer(client.WithNameServer(ns), client.WithGroupName("example-pull"),
		client.WithAutoCommit(false), client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("TopicTest", client.MessageSelector{}); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	defer c.Shutdown()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := c.Poll(pctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			break
		}
		for _, m := range msgs {
			fmt.Printf("queue %d offset %d: %q\n", m.QueueID, m.QueueOffset, m.Body)
		}
		if err := c.Commit(ctx); err != nil {
			log.Print(err)
		}
	}
}
