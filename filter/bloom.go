package filter

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
)

// ErrBloomParams means a bloom filter's error rate or expected count is out
// of range.
var ErrBloomParams = errors.New("filter: bad bloom filter parameters")

// Bloom is the bloom filter a broker's filter bitmaps use (RocketMQ's
// filter/util/BloomFilter, enableCalcFilterBitMap): every SQL92 filter of a
// topic gets K bit positions in an M-bit bitmap from the hash of its group
// and topic, and a message's bitmap has the bits of the filters it matches.
// A filter whose bits are all set may have matched (other filters' bits
// can cover it: a false positive, at most the error rate for N filters);
// one with a bit missing did not.
type Bloom struct {
	K int // bits per filter
	M int // bits in a bitmap, a multiple of 8
}

// NewBloom sizes the filter as RocketMQ does for an error rate of
// errorRatePercent (1-99, maxErrorRateOfBloomFilter) with n filters
// (expectConsumerNumUseFilter): K = ceil(log_0.5(f)), M = n*log2(1/f)*log2(e)
// rounded up to a whole byte.
func NewBloom(errorRatePercent, n int) (Bloom, error) {
	if errorRatePercent < 1 || errorRatePercent >= 100 {
		return Bloom{}, fmt.Errorf("%w: error rate %d%% is not within 1-99", ErrBloomParams, errorRatePercent)
	}
	if n < 1 {
		return Bloom{}, fmt.Errorf("%w: expected filter count %d is below 1", ErrBloomParams, n)
	}
	f := float64(errorRatePercent) / 100
	k := int(math.Ceil(math.Log(f) / math.Log(0.5)))
	m := int(math.Ceil(float64(n) * math.Log2(1/f) * math.Log2(math.E)))
	m = (m + 7) / 8 * 8
	return Bloom{K: max(k, 1), M: m}, nil
}

// BitPositions returns the K bit positions of key (RocketMQ hashes
// "group#topic"), by double hashing one 64-bit hash as Kirsch and
// Mitzenmacher describe. RocketMQ takes the hash from murmur3; here it is
// FNV-1a, from the standard library: the positions never leave the broker
// (its bitmaps are its own files), they only have to be stable.
func (b Bloom) BitPositions(key string) []uint32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	sum := h.Sum64()
	h1, h2 := int32(sum), int32(sum>>32)
	out := make([]uint32, b.K)
	for i := range out {
		c := h1 + int32(i+1)*h2
		if c < 0 {
			c = ^c
		}
		out[i] = uint32(c) % uint32(b.M)
	}
	return out
}
