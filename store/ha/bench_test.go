package ha

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/store"
)

// jsonBody returns a JSON-like body of about size bytes, varied per i as
// order events are.
func jsonBody(r *rand.Rand, i, size int) []byte {
	b := fmt.Appendf(nil, `{"orderId":%d,"userId":"user-%06d","status":"%s","createdAt":"2024-03-%02dT%02d:%02d:%02d.%03dZ","items":[`,
		1_000_000+i, r.IntN(1_000_000), []string{"CREATED", "PAID", "SHIPPED", "DELIVERED"}[r.IntN(4)],
		1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
	for n := 0; len(b) < size-40; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"sku":"SKU-%05d","name":"item %d","qty":%d,"price":%d.%02d}`,
			r.IntN(100000), r.IntN(1000), 1+r.IntN(9), r.IntN(500), r.IntN(100))
	}
	return fmt.Appendf(b, `],"total":%d.%02d}`, r.IntN(10000), r.IntN(100))
}

// processCPU returns the CPU time (user + system) of the whole process.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMiB is the commitlog size the catch-up benchmarks replicate
// (HA_BENCH_MIB, default 256; the figure is for 1024).
func benchMiB() int {
	if v, err := strconv.Atoi(os.Getenv("HA_BENCH_MIB")); err == nil && v > 0 {
		return v
	}
	return 256
}

func benchStoreConfig(dir string) *store.Config {
	cfg := store.DefaultConfig(dir) // RocketMQ's flush intervals
	cfg.MappedFileSizeCommitLog = 256 << 20
	cfg.MaxHashSlotNum = 500000
	cfg.MaxIndexNum = 2000000
	cfg.CleanResourceInterval = time.Hour
	return cfg
}

func benchOpen(b *testing.B, dir string) *store.Store {
	s, err := store.Open(benchStoreConfig(dir), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// fillJSON puts 1 KiB JSON-like messages until the commitlog holds mib MiB.
func fillJSON(b *testing.B, st *store.Store, mib int) int64 {
	r := rand.New(rand.NewPCG(1, 2))
	m := &message.MessageExt{BornHost: bornHost}
	m.Topic = "BenchTopic"
	for i := 0; st.CommitLog().MaxOffset() < int64(mib)<<20; i++ {
		m.QueueID = int32(i % 8)
		m.Body = jsonBody(r, i, 1024)
		m.Properties = nil
		m.SetProperty(message.PropKeys, "order-"+strconv.Itoa(1_000_000+i))
		res := st.PutMessage(context.Background(), m)
		require.Equal(b, store.PutOK, res.Status, "%v", res.Err)
	}
	return st.CommitLog().MaxOffset()
}

// BenchmarkCatchUp measures a slave catching up on the master's whole
// commitlog over loopback (MB/s), and the bytes it took on the wire.
func BenchmarkCatchUp(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compress=%v", compress), func(b *testing.B) {
			mst := benchOpen(b, b.TempDir())
			end := fillJSON(b, mst, benchMiB())
			cfg := DefaultConfig()
			cfg.Compress = compress
			m, err := NewMaster(mst, cfg, nil)
			require.NoError(b, err)
			require.NoError(b, m.Start("127.0.0.1:0"))
			defer m.Shutdown(context.Background())
			first, ok := mst.CommitLog().GetMessage(0, 4)
			require.True(b, ok)
			firstLen := int(binary.BigEndian.Uint32(first.Bytes))
			first.Release()
			seed, ok := mst.CommitLog().GetMessage(0, int32(firstLen))
			require.True(b, ok)
			defer seed.Release()

			b.SetBytes(end)
			b.ReportAllocs()
			var wire int64
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				sst := benchOpen(b, b.TempDir())
				// Seeded with the first record, the slave asks for the whole
				// log (a new one would start at the newest file).
				_, err := sst.AppendReplica(0, seed.Bytes)
				require.NoError(b, err)
				sl, err := NewSlave(sst, cfg, nil)
				require.NoError(b, err)
				b.StartTimer()
				cpu0 := processCPU(b)
				sl.Start()
				sl.SetMasterAddress(m.Addr().String())
				for sst.CommitLog().MaxOffset() < end {
					time.Sleep(100 * time.Microsecond)
				}
				b.StopTimer()
				cpu += processCPU(b) - cpu0
				for _, s := range m.Status().Slaves {
					wire = s.SentBytes
				}
				require.NoError(b, sl.Shutdown(context.Background()))
				require.NoError(b, sst.Shutdown(context.Background()))
				b.StartTimer()
			}
			b.ReportMetric(float64(wire)/float64(end), "wire/log")
			// What the replication would reach with the CPU to itself: the
			// machine these were measured on is shared.
			b.ReportMetric(float64(end)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
		})
	}
}

// BenchmarkReplicationLag sends 10,000 messages a second of 1 KiB to a
// master with one slave and reports the time from each put's return to
// the slave's ack of it (p50, p99, max), as a SYNC_MASTER send waits.
func BenchmarkReplicationLag(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compress=%v", compress), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Compress = compress
			mst := benchOpen(b, b.TempDir())
			m, err := NewMaster(mst, cfg, nil)
			require.NoError(b, err)
			require.NoError(b, m.Start("127.0.0.1:0"))
			defer m.Shutdown(context.Background())
			sst := benchOpen(b, b.TempDir())
			sl, err := NewSlave(sst, cfg, nil)
			require.NoError(b, err)
			sl.Start()
			sl.SetMasterAddress(m.Addr().String())
			defer sl.Shutdown(context.Background())
			for len(m.Status().Slaves) == 0 {
				time.Sleep(time.Millisecond)
			}
			r := rand.New(rand.NewPCG(3, 4))
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			wg.Add(b.N)
			msg := &message.MessageExt{BornHost: bornHost}
			msg.Topic = "BenchTopic"
			const perMs = 10 // 10,000 a second
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if i%perMs == 0 {
					// Pace: message i is due at i/10 ms after the start.
					if d := time.Until(start.Add(time.Duration(i/perMs) * time.Millisecond)); d > 0 {
						time.Sleep(d)
					}
				}
				msg.QueueID = int32(i % 8)
				msg.Body = jsonBody(r, i, 1024)
				res := mst.PutMessage(context.Background(), msg)
				if res.Status != store.PutOK {
					b.Fatal(res.Err)
				}
				t0 := time.Now()
				m.WaitReplicated(res.WroteOffset+int64(res.WroteBytes), func(r Result) {
					if r.Status != store.PutOK {
						panic(r.Err)
					}
					lat[i] = time.Since(t0)
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
		})
	}
}
