package message

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOffsetMsgIDMatchesOfficial(t *testing.T) {
	cases := []struct {
		host string
		off  int64
	}{
		{"192.168.1.10:10911", 0},
		{"127.0.0.1:10911", 1<<40 + 12345},
		{"[2001:db8::1]:10911", 987654321},
		{"[::1]:65535", 1<<63 - 1},
	}
	for _, tc := range cases {
		ap := netip.MustParseAddrPort(tc.host)
		id := CreateOffsetMsgID(ap, tc.off)
		a := ap.Addr().AsSlice()
		assert.Equal(t, primitive.CreateMessageId(a, int32(ap.Port()), tc.off), id)
		if ap.Addr().Is4() {
			assert.Len(t, id, 32)
		} else {
			assert.Len(t, id, 56)
		}
		assert.Equal(t, strings.ToUpper(id), id)

		gotHost, gotOff, err := ParseOffsetMsgID(id)
		require.NoError(t, err)
		assert.Equal(t, ap, gotHost)
		assert.Equal(t, tc.off, gotOff)
		gotHost, _, err = ParseOffsetMsgID(strings.ToLower(id))
		require.NoError(t, err)
		assert.Equal(t, ap, gotHost)

		official, err := primitive.UnmarshalMsgID([]byte(id))
		require.NoError(t, err)
		assert.Equal(t, int(ap.Port()), official.Port)
		assert.Equal(t, tc.off, official.Offset)
	}
	for _, bad := range []string{"", "ABC", strings.Repeat("Z", 32), strings.Repeat("0", 33), "0A000001" + "00010000" + "0000000000000001"} {
		_, _, err := ParseOffsetMsgID(bad)
		assert.ErrorIs(t, err, ErrBadMsgID, bad)
	}
}

// officialHash recovers utils.HashString (internal to the client module) through
// MessageQueue.HashCode: with an empty broker name and queue 0 it is
// 31*31*31 + HashString(topic).
func officialHash(s string) int64 {
	mq := primitive.MessageQueue{Topic: s}
	return int64(mq.HashCode() - 29791)
}

func TestTagsHashCode(t *testing.T) {
	// Values computed with Java's String.hashCode rules (UTF-16 units).
	java := map[string]int64{
		"":        0,
		"hello":   99162322,
		"TagA":    2598919,
		"中文":      646394,
		"😀":       1772899,
		"a😀b":     57849694,
		"Ünïcödé": 1055431381,
		"tag-with-long-name-overflowing-int32-xxxxxxxxxxxxxxx": 579654087,
	}
	for s, want := range java {
		assert.Equal(t, want, TagsHashCode(s), s)
	}
	// ASCII tags (the official client hashes bytes, which agrees for ASCII).
	for _, s := range []string{"TagA", "TagB", "*", "a||b", "order-created", strings.Repeat("z", 300)} {
		assert.Equal(t, officialHash(s), TagsHashCode(s), s)
	}
	assert.Less(t, TagsHashCode("tag-with-long-name-overflowing-int32-xxxxxxxxxxxxxxx"), int64(1)<<31)
}

func TestUniqIDLayout(t *testing.T) {
	now := time.Date(2026, 11, 3, 4, 5, 6, 789e6, time.Local)
	g := newUniqIDGenerator(netip.MustParseAddr("10.1.2.3"), 0x1234, func() time.Time { return now })
	id := g.Next()
	require.Len(t, id, 32)
	assert.Equal(t, len(primitive.CreateUniqID()), len(id), "same length as the official client's")
	assert.Equal(t, "0A010203"+"1234"+"00000000", id[:20])
	raw, err := hex.DecodeString(id[20:])
	require.NoError(t, err)
	sinceMonth := time.Duration(uint32(raw[0])<<24|uint32(raw[1])<<16|uint32(raw[2])<<8|uint32(raw[3])) * time.Millisecond
	assert.Equal(t, now.Sub(time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local)), sinceMonth)
	assert.Equal(t, strings.ToUpper(id), id)

	g6 := newUniqIDGenerator(netip.MustParseAddr("2001:db8::1"), 1, time.Now)
	assert.Len(t, g6.Next(), 56)
}

func TestUniqIDUniqueUnderConcurrencyAndFrozenClock(t *testing.T) {
	now := time.Now()
	g := newUniqIDGenerator(netip.MustParseAddr("10.0.0.1"), 1, func() time.Time { return now })
	const workers, each = 8, 20000 // 160,000 ids in one frozen ms: the counter must carry
	var mu sync.Mutex
	seen := make(map[string]struct{}, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, 0, each)
			for range each {
				local = append(local, g.Next())
			}
			mu.Lock()
			for _, id := range local {
				seen[id] = struct{}{}
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Len(t, seen, workers*each)
}
