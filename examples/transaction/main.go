// Command transaction sends a transaction message whose local transaction
// commits, and one whose outcome is decided later when the broker asks.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/gorocketmq/gorocketmq/client"
)

// orders is a stand-in for a database: the local transaction records the
// order, and the check looks it up.
type orders struct {
	mu   sync.Mutex
	done map[string]bool
}

func (o *orders) ExecuteLocalTransaction(_ context.Context, msg *client.Message) client.LocalTransactionState {
	o.mu.Lock()
	defer o.mu.Unlock()
	if string(msg.Body) == "slow" {
		return client.UnknownState // decided later, in CheckLocalTransaction
	}
	o.done[msg.UniqKey()] = true
	return client.CommitMessageState
}

func (o *orders) CheckLocalTransaction(msg *client.MessageExt) client.LocalTransactionState {
	fmt.Println("broker asks about", msg.MsgID())
	return client.CommitMessageState
}

func main() {
	ns := os.Getenv("NAMESRV_ADDR")
	if ns == "" {
		ns = "127.0.0.1:9876"
	}
	tp, err := client.NewTransactionProducer(&orders{done: map[string]bool{}}, client.WithNameServer(ns),
		client.WithGroupName("example-tx-producer"))
	if err != nil {
		log.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		log.Fatal(err)
	}
	defer tp.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, body := range []string{"fast", "slow"} {
		res, err := tp.SendMessageInTransaction(ctx, client.NewMessage("TxTopic", []byte(body)))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.MsgID, "local transaction:", res.State)
	}
	// Stay up long enough for the broker's check of the "slow" one.
	time.Sleep(90 * time.Second)
}
