package nameserver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// BenchmarkRouteRoundTrip measures GET_ROUTEINFO_BY_TOPIC over loopback: the
// client's encode, the gnet server's decode and dispatch, the route lookup
// and its JSON, and the response back. Parallel, as many clients query at once.
func BenchmarkRouteRoundTrip(b *testing.B) {
	cfg := testConfig(b)
	ns, err := New(cfg, nil)
	require.NoError(b, err)
	require.NoError(b, ns.Start())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ns.Shutdown(ctx)
	}()
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	a := brokerA()
	ctx := context.Background()
	resp, err := cl.InvokeSync(ctx, ns.Addr(), a.registerRequest(b))
	require.NoError(b, err)
	require.Equal(b, remoting.Success, resp.ResponseCode())

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := cl.InvokeSync(ctx, ns.Addr(), routeRequest("TopicA"))
			if err != nil || resp.ResponseCode() != remoting.Success {
				b.Errorf("route: %v %v", err, resp)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
}
