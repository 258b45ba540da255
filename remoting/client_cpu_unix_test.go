//go:build unix

package remoting

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process used so far.
// Benchmarks report it per op: on a shared machine it moves far less than
// wall time, and the client's per-call savings show up in it directly.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
