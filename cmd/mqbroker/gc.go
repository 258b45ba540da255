package main

import (
	"runtime/debug"
)

// Garbage collector defaults for a broker, used unless GOGC or GOMEMLIMIT
// is set in the environment.
//
// A broker's live heap is small (tens of MiB: the messages live in mapped
// files, not on the heap) while it allocates per request, so with Go's
// default GOGC=100 it collects several times a second: measured at 15-20%
// of the broker's CPU under 1 KiB sends (mqbench, pprof). A higher GOGC
// trades a few tens of MiB of heap for most of that; the soft memory limit
// makes the collector work harder again before the heap could approach the
// 1 GiB RSS budget the benchmark issue sets, whatever the live heap does.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 768 << 20
)

// tuneGC applies the defaults above where the environment did not choose.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
