// Package interop holds the interoperability tests between our SDK (package
// client) and the official apache/rocketmq-client-go/v2 client, both
// against our nameserver and broker. They live apart from package client
// because the official client leaks goroutines (client's tests verify none
// leak) and has data races, so they build only without -race:
//
//	go test ./client/interop/
package interop
