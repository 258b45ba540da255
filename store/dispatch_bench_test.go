package store

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
)

// processCPU returns the CPU time (user + system) of the whole process, so
// a benchmark can report what dispatch costs wherever it runs.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchStore(b *testing.B) *Store {
	cfg := testConfig(b.TempDir(), AsyncFlush)
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MappedFileSizeConsumeQ = 300000 * CQStoreUnitSize
	cfg.MaxHashSlotNum = 1 << 16
	cfg.MaxIndexNum = 1 << 18
	return MustOpen(b, cfg)
}

// BenchmarkStoreAppendDispatch appends 1 KiB messages the way the broker
// does (AppendMessage, ASYNC_FLUSH) from 1 and 8 goroutines and stops the
// clock once every consume-queue and index entry is built. cpu-ns/op is
// the process's CPU time per message, wherever dispatch ran.
func BenchmarkStoreAppendDispatch(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := benchStore(b)
			msgs := make([]*message.MessageExt, writers)
			for w := range msgs {
				msgs[w] = newTestMessage("T", int32(w%4), body(w, 1024), "TagA", "k1")
			}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU(b)
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Add(1)
				go func(m *message.MessageExt, n int) {
					defer wg.Done()
					for i := 0; i < n; i++ {
						if r, _ := s.AppendMessage(m); r.Status != PutOK {
							b.Error(r.Err)
							return
						}
					}
				}(msgs[w], n)
			}
			wg.Wait()
			for deadline := time.Now().Add(10 * time.Second); s.DispatchBehindBytes() > 0 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			if s.DispatchBehindBytes() > 0 {
				b.Fatal("dispatch did not catch up")
			}
		})
	}
}

// BenchmarkStoreAppendUntilArrived is one synchronous sender: each op
// appends a message and waits until the arrival listener (long polling's
// trigger) has been told of it, so ns/op is publish-to-dispatch latency.
func BenchmarkStoreAppendUntilArrived(b *testing.B) {
	s := benchStore(b)
	var arrived atomic.Int64
	s.SetArrivingListener(func(string, int32, int64, int64, int64) { arrived.Add(1) })
	m := newTestMessage("T", 0, body(0, 1024), "TagA", "k1")
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	for i := 0; i < b.N; i++ {
		if r, _ := s.AppendMessage(m); r.Status != PutOK {
			b.Fatal(r.Err)
		}
		for deadline := time.Now().Add(10 * time.Second); arrived.Load() <= int64(i); runtime.Gosched() {
			if time.Now().After(deadline) {
				b.Fatal("message never arrived")
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}
