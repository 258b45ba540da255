// Package examples holds runnable programs showing the Go SDK (package
// client): each directory is a main package. Point them at a cluster with
// NAMESRV_ADDR (default 127.0.0.1:9876) and run, e.g.
//
//	NAMESRV_ADDR=127.0.0.1:9876 go run ./examples/producer
package examples
