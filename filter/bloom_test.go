package filter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewBloomSizesAsRocketMQ(t *testing.T) {
	b, err := NewBloom(20, 32) // RocketMQ's defaults
	require.NoError(t, err)
	assert.Equal(t, Bloom{K: 3, M: 112}, b)
	b, err = NewBloom(10, 128) // BloomFilter's own defaults
	require.NoError(t, err)
	assert.Equal(t, Bloom{K: 4, M: 616}, b)
	for _, bad := range [][2]int{{0, 32}, {100, 32}, {20, 0}} {
		_, err := NewBloom(bad[0], bad[1])
		assert.ErrorIs(t, err, ErrBloomParams, "%v", bad)
	}
}

func TestBloomBitPositions(t *testing.T) {
	b, err := NewBloom(20, 32)
	require.NoError(t, err)
	p := b.BitPositions("group#topic")
	require.Len(t, p, 3)
	for _, x := range p {
		assert.Less(t, x, uint32(b.M))
	}
	assert.Equal(t, p, b.BitPositions("group#topic"), "stable")
	assert.NotEqual(t, p, b.BitPositions("group2#topic"))
	// Spread: 32 filters leave most bitmaps with room to tell them apart.
	seen := map[uint32]bool{}
	for i := range 32 {
		for _, x := range b.BitPositions("g" + string(rune('a'+i)) + "#t") {
			seen[x] = true
		}
	}
	assert.Greater(t, len(seen), 40)
}
