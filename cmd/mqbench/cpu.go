package main

import (
	"runtime"
	"syscall"
	"time"
)

// CPUShare is how much processor time this process used over a wall-clock
// span: the evidence that the tool was not the bottleneck.
type CPUShare struct {
	Used  time.Duration // user + system time of the whole process
	Wall  time.Duration
	Cores int
}

// OfOneCore is Used/Wall: 1.0 means one core busy the whole time.
func (c CPUShare) OfOneCore() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return c.Used.Seconds() / c.Wall.Seconds()
}

// OfMachine is the share of all cores.
func (c CPUShare) OfMachine() float64 {
	if c.Cores <= 0 {
		return 0
	}
	return c.OfOneCore() / float64(c.Cores)
}

// cpuClock marks the start of a measured span.
type cpuClock struct {
	used time.Duration
	wall time.Time
}

// processCPU returns the user+system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPUClock() cpuClock {
	return cpuClock{used: processCPU(), wall: time.Now()}
}

// Since returns the share used from the mark until now.
func (c cpuClock) Since() CPUShare {
	return CPUShare{Used: processCPU() - c.used, Wall: time.Since(c.wall), Cores: runtime.NumCPU()}
}
