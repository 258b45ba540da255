// Command delay sends a message delivered ten seconds later (delay level 3)
// and waits for it.
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
	// Send first: on a broker with autoCreateTopicEnable the send creates
	// the topic, which the consumer needs to start.
	p, err := client.NewProducer(client.WithNameServer(ns))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown()
	sent := time.Now()
	if _, err := p.SendSync(context.Background(), client.NewMessage("DelayTopic", []byte("later")).WithDelayTimeLevel(3)); err != nil {
		log.Fatal(err)
	}

	got := make(chan time.Time, 1)
	c, err := client.NewPushConsumer(client.WithNameServer(ns), client.WithGroupName("example-delay-consumer"),
		client.WithConsumeFromWhere(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("DelayTopic", client.MessageSelector{}, func(_ context.Context, msgs ...*client.MessageExt) (client.ConsumeResult, error) {
		select {
		case got <- time.Now():
		default:
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
	select {
	case at := <-got:
		fmt.Println("delivered after", at.Sub(sent).Round(time.Second))
	case <-time.After(time.Minute):
		log.Print("not delivered within a minute")
	}
}
