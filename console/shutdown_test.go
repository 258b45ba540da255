package console

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/client"
)

// TestNoProducerAfterShutdown: a write action still running when Shutdown
// gave up waiting for it (its context ran out, and the HTTP server was
// closed under it) must not start a producer nobody will shut down.
func TestNoProducerAfterShutdown(t *testing.T) {
	c, err := New(Config{ClientOptions: []client.Option{client.WithNameServer("127.0.0.1:9876"), client.WithLogger(quietLog())}, Log: quietLog()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Shutdown(ctx))
	p, err := c.getProducer()
	if p != nil {
		_ = p.Shutdown()
	}
	assert.ErrorIs(t, err, ErrClosed)
	assert.Nil(t, p)
}
