package remoting

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Concurrent callers share writes (one flusher writes the frames others
// queued); every frame must still arrive whole and be answered to its own
// caller.
func TestClientConcurrentWritesStayFramed(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	const callers, each = 32, 50
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Bodies of different sizes, so a torn frame could not parse.
				body := make([]byte, 8+(g*each+i)%700)
				binary.BigEndian.PutUint32(body, uint32(g))
				binary.BigEndian.PutUint32(body[4:], uint32(i))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := cl.InvokeSync(ctx, s.Addr(), NewRequest(echoCode, map[string]string{"g": "x"}, body))
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				if !assert.Equal(t, body, resp.Body) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// After the connection breaks, queued and new writes fail instead of
// hanging, and a new call dials again.
func TestClientWriteAfterBrokenConnection(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	_, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(echoCode, nil, []byte("a")))
	require.NoError(t, err)
	cl.mu.Lock()
	cc := cl.conns[s.Addr()]
	cl.mu.Unlock()
	require.NotNil(t, cc)
	_ = cc.nc.Close() // the peer is gone as far as writes go
	err = cc.write(context.Background(), NewRequest(echoCode, nil, []byte("b")), false)
	require.Error(t, err)
	err = cc.write(context.Background(), NewRequest(echoCode, nil, []byte("c")), false)
	assert.Error(t, err, "the first write error sticks")
	require.Eventually(t, func() bool {
		resp, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(echoCode, nil, []byte("d")))
		return err == nil && string(resp.Body) == "d"
	}, 5*time.Second, 20*time.Millisecond)
}

// A sync caller that finds an async flusher yielding (letting other senders
// queue) writes at once, the async frames included, instead of waiting for
// the flusher to be scheduled again; the flusher then leaves it alone.
func TestClientSyncWriterTakesOverYieldingFlush(t *testing.T) {
	s := MustStartServer(t, ServerConfig{}, nil)
	cl := MustNewClient(t, ClientConfig{})
	_, err := cl.InvokeSync(context.Background(), s.Addr(), NewRequest(echoCode, nil, nil)) // dial
	require.NoError(t, err)

	yielding, resume := make(chan struct{}), make(chan struct{})
	yieldToSenders = func() {
		close(yielding)
		<-resume
	}
	defer func() { yieldToSenders = runtime.Gosched }()

	asyncDone := make(chan *Command, 1)
	var sender sync.WaitGroup
	sender.Add(1)
	go func() {
		defer sender.Done()
		err := cl.InvokeAsync(context.Background(), s.Addr(), NewRequest(echoCode, nil, []byte("async")), 5*time.Second,
			func(resp *Command, err error) {
				assert.NoError(t, err)
				asyncDone <- resp
			})
		assert.NoError(t, err)
	}()
	<-yielding // the async flusher holds its frame and waits
	resp := invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, []byte("sync")))
	assert.Equal(t, []byte("sync"), resp.Body, "answered while the async flusher still yields")
	select {
	case resp := <-asyncDone:
		assert.Equal(t, []byte("async"), resp.Body, "the taker wrote the async frame too")
	case <-time.After(5 * time.Second):
		t.Fatal("the async frame was not written by the sync writer")
	}
	close(resume)
	sender.Wait() // the yielder found the flush taken and left
	resp = invoke(t, cl, s.Addr(), NewRequest(echoCode, nil, []byte("after")))
	assert.Equal(t, []byte("after"), resp.Body)
}
