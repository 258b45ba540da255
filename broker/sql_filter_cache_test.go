package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestFilterCacheBoundsBytes: the cache of compiled expressions is bounded
// in bytes, not only in entries: clients sending distinct expressions near
// the frame size (heartbeats, pulls) must not make the broker keep
// maxCachedFilters of them (16 GB).
func TestFilterCacheBoundsBytes(t *testing.T) {
	var c filterCache
	big := maxCachedFilterBytes / 4
	for i := range 10 {
		expr := "a = '" + strings.Repeat(string(rune('a'+i)), big) + "'"
		cs := c.get(protocol.ExpressionSQL92, expr)
		require.NoError(t, cs.err)
		held := 0
		c.m.Range(func(k, _ any) bool {
			held += len(k.(filterKey).expr)
			return true
		})
		assert.LessOrEqual(t, held, maxCachedFilterBytes+len(expr), "after %d expressions", i+1)
	}
	assert.Same(t, c.get(protocol.ExpressionSQL92, "a = 1"), c.get(protocol.ExpressionSQL92, "a = 1"), "small expressions are cached")
}
