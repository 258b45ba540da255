//go:build !unix

package remoting

import "time"

// processCPU is not measured here; benchmarks then report 0 cpu-ns/op.
func processCPU() time.Duration { return 0 }
