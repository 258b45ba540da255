// Package e2e holds the end-to-end tests: an in-process nameserver and broker
// on loopback, driven by the official RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2) and, where that client cannot
// express a check, by our own remoting client. It has no non-test code; this
// file only documents it.
package e2e
