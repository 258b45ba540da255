package client

import (
	"errors"
	"fmt"

	"github.com/gorocketmq/gorocketmq/remoting"
)

var (
	// ErrNoNameServer means no nameserver address was configured and
	// NAMESRV_ADDR is empty.
	ErrNoNameServer = errors.New("client: no nameserver address (WithNameServer or NAMESRV_ADDR)")
	// ErrNotStarted means a method that needs a running client was called
	// before Start or after Shutdown.
	ErrNotStarted = errors.New("client: not started")
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("client: already started")
	// ErrNoRoute means no nameserver knows the topic, or its route has no
	// usable queue.
	ErrNoRoute = errors.New("client: no route for topic")
	// ErrNoMessage means a send was called without messages.
	ErrNoMessage = errors.New("client: no message to send")
	// ErrEmptyBody means a message has no body; brokers refuse them.
	ErrEmptyBody = errors.New("client: message body is empty")
	// ErrMixedTopics means a batch holds messages of different topics.
	ErrMixedTopics = errors.New("client: batch messages must share one topic")
	// ErrBadTopic means a topic name is empty, too long or has characters
	// RocketMQ refuses.
	ErrBadTopic = errors.New("client: bad topic name")
	// ErrMessageTooLarge means a message (or batch) body is over the
	// configured maximum (4 MiB by default, the broker's default).
	ErrMessageTooLarge = errors.New("client: message too large")
	// ErrBrokerNotFound means the address of a broker named in a route or a
	// queue is unknown.
	ErrBrokerNotFound = errors.New("client: broker address not found")
	// ErrBadSubscription means a subscription expression does not parse.
	ErrBadSubscription = errors.New("client: bad subscription expression")
	// ErrBadOption means an option value is out of range; the text names it.
	ErrBadOption = errors.New("client: bad option")
	// ErrNotAssigned means a pull-consumer call named a queue that is not
	// assigned to it.
	ErrNotAssigned = errors.New("client: queue not assigned")
	// ErrTransactionListener means a transaction producer has no listener.
	ErrTransactionListener = errors.New("client: transaction listener is nil")
	// ErrMessageNotFound means an admin lookup found no message by that id.
	ErrMessageNotFound = errors.New("client: message not found")
)

// BrokerError is a response code other than success from a nameserver or a
// broker. errors.As extracts it; Code is RocketMQ's response code.
type BrokerError struct {
	Code   remoting.ResponseCode
	Remark string
	Addr   string
}

// Error renders the code and the server's remark.
func (e *BrokerError) Error() string {
	return fmt.Sprintf("client: %s answered code %d: %s", e.Addr, int32(e.Code), e.Remark)
}

func brokerError(addr string, resp *remoting.Command) error {
	return &BrokerError{Code: resp.ResponseCode(), Remark: resp.Remark, Addr: addr}
}

// responseCode returns the broker response code carried by err, or -1.
func responseCode(err error) remoting.ResponseCode {
	var be *BrokerError
	if errors.As(err, &be) {
		return be.Code
	}
	return -1
}
