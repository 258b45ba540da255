// Command pushconsumer prints TopicTest's TagA and TagB messages until
// interrupted.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/gorocketmq/gorocketmq/client"
)

func main() {
	ns := os.Getenv("NAMESRV_ADDR")
	if ns == "" {
		ns = "127.0.0.1:9876"
	}
	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("example-consumer"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("TopicTest", client.MessageSelector{Expression: "TagA || TagB"},
		func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
			for _, m := range msgs {
				fmt.Printf("%s %s %q\n", m.MsgID(), m.Tags(), m.Body)
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
