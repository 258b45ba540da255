// Package metrics serves Prometheus metrics for brokers and nameservers.
//
// The counting is done by the packages that own the work (broker's
// brokerStats, store's Metrics, remoting's pools, nameserver's request
// counters), with atomics on the send and pull paths and no locks there;
// this package only reads them when Prometheus scrapes, through the
// servers' Stats methods, and turns them into series. Names and labels
// follow rocketmq-exporter where it has one (rocketmq_producer_tps,
// rocketmq_consumer_tps, rocketmq_group_diff, rocketmq_broker_tps,
// rocketmq_brokeruntime_*...) and RocketMQ 5's broker metrics otherwise
// (rocketmq_messages_in_total, rocketmq_processor_watermark,
// rocketmq_storage_dispatch_behind_bytes...); figures only the inside can
// see (latency histograms, page-cache hits of pulls, long-polling holds,
// replication lag, busy rejections) get names of their own under
// rocketmq_. See README.md for the list.
//
// An Exporter is switched on by the servers' RocketMQ 5 keys
// (metricsExporterType=PROM, metricsPromExporterHost,
// metricsPromExporterPort); cmd/mqbroker and cmd/mqnamesrv start one
// beside the server.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrExporterStarted means Start was called twice.
var ErrExporterStarted = errors.New("metrics: exporter already started")

// Exporter serves one registry's metrics over HTTP at /metrics.
type Exporter struct {
	addr string
	reg  *prometheus.Registry

	mu      sync.Mutex // guards srv, ln and started
	srv     *http.Server
	ln      net.Listener
	started bool
	wg      sync.WaitGroup // owns serveLoop
}

// NewExporter returns an exporter for addr (host:port; port 0 picks one)
// serving the given collectors plus the Go runtime's and the process's.
func NewExporter(addr string, cs ...prometheus.Collector) (*Exporter, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register collector: %w", err)
		}
	}
	return &Exporter{addr: addr, reg: reg}, nil
}

// Registry is the exporter's registry (tests gather from it directly).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Start listens and serves; it returns once the port is open.
func (e *Exporter) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return ErrExporterStarted
	}
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s (metricsPromExporterHost:metricsPromExporterPort): %w", e.addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "gorocketmq metrics: GET /metrics")
	})
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	e.ln = ln
	e.started = true
	e.wg.Add(1)
	go e.serveLoop(e.srv, ln)
	return nil
}

func (e *Exporter) serveLoop(srv *http.Server, ln net.Listener) {
	defer e.wg.Done()
	_ = srv.Serve(ln) // ends with Shutdown
}

// Addr is the address served (the real port once started).
func (e *Exporter) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln != nil {
		return e.ln.Addr().String()
	}
	return e.addr
}

// Shutdown stops serving, letting running scrapes finish within ctx. Safe
// to call twice and before Start.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	e.wg.Wait()
	return err
}
