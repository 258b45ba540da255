package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
)

// errPprofNotLoopback refuses a profiling listener reachable from other
// hosts: the endpoints expose memory contents and cost CPU on demand.
var errPprofNotLoopback = errors.New("pprof address must be a loopback ip:port")

// startPprof serves net/http/pprof's handlers on addr (a loopback ip:port)
// on a mux of its own, so nothing else registered on http.DefaultServeMux
// is exposed. It returns the address it listens on and a func that stops
// the listener and waits for its goroutine.
func startPprof(addr string) (string, func(), error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return "", nil, fmt.Errorf("%w: %q", errPprofNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // pprofServeLoop: ends when Close is called
		defer wg.Done()
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		_ = srv.Close()
		wg.Wait()
	}, nil
}
