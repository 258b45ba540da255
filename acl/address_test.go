package acl

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddressPatternMatches(t *testing.T) {
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"", nil, []string{"127.0.0.1", "::1"}},
		{"   ", nil, []string{"127.0.0.1"}},
		{"*", []string{"127.0.0.1", "10.1.2.3", "::1", "1050::5"}, nil},
		{"*.*.*.*", []string{"127.0.0.1", "::1"}, nil},
		{"*:*:*:*:*:*:*:*", []string{"::1", "8.8.8.8"}, nil},
		{"127.0.0.1", []string{"127.0.0.1", "::ffff:127.0.0.1"}, []string{"127.0.0.2", "::1"}},
		{"127.0.0.1,127.0.0.2, 127.0.0.3", []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, []string{"127.0.0.4", "127.0.0.0"}},
		{"127.0.0.{1,2,3}", []string{"127.0.0.1", "127.0.0.3"}, []string{"127.0.0.4", "127.0.1.1"}},
		{"192.168.0.{100,101}", []string{"192.168.0.100", "192.168.0.101"}, []string{"192.168.0.102"}},
		{"127.0.0.1-200", []string{"127.0.0.1", "127.0.0.100", "127.0.0.200"}, []string{"127.0.0.0", "127.0.0.201", "127.0.1.1"}},
		{"192.168.1.100-200", []string{"192.168.1.150"}, []string{"192.168.1.99", "192.168.2.150"}},
		{"127.0.0.*", []string{"127.0.0.0", "127.0.0.255"}, []string{"127.0.1.0"}},
		{"127.0.1-20.*", []string{"127.0.1.9", "127.0.20.255"}, []string{"127.0.0.1", "127.0.21.1"}},
		{"127.*.*.*", []string{"127.5.6.7"}, []string{"128.0.0.1"}},
		{"127.1-150.*.*", []string{"127.150.0.1"}, []string{"127.151.0.1", "127.0.0.1"}},
		{"192.100-150.*.*", []string{"192.130.0.2"}, []string{"192.151.0.2"}},
		{"192.168.*", []string{"192.168.0.1", "192.168.255.255"}, []string{"192.169.0.1", "::1"}},
		{"10.*", []string{"10.0.0.1", "10.255.1.2"}, []string{"11.0.0.1"}},
		// Every segment must match (RocketMQ ignores the ones after a range).
		{"192.168.1-10.5", []string{"192.168.3.5"}, []string{"192.168.3.77"}},
		{"::1", []string{"::1", "0000:0000:0000:0000:0000:0000:0000:0001"}, []string{"::2", "127.0.0.1"}},
		{"1050:0000:0000:0000:0005:0600:300c:326b", []string{"1050::5:600:300c:326b", "1050:0:0:0:5:600:300C:326B"}, []string{"1050::5:600:300c:326c"}},
		{"1050::0005:0600:300c:3261,1050::0005:0600:300c:3262", []string{"1050::5:600:300c:3262"}, []string{"1050::5:600:300c:3263"}},
		{"1050::0005:0600:300c:{1,2,3}", []string{"1050::5:600:300c:1", "1050::5:600:300c:3"}, []string{"1050::5:600:300c:4"}},
		{"1050::0005:0600:300c:3261:{1,2,3}", []string{"1050::5:600:300c:3261:2"}, []string{"1050::5:600:300c:3261:4"}},
		{"1050::0005:0600:300c:1-200", []string{"1050::5:600:300c:1", "1050::5:600:300c:200"}, []string{"1050::5:600:300c:0", "1050::5:600:300c:201", "1050::5:600:300d:1"}},
		{"1050::0005:0600:300c:*", []string{"1050::5:600:300c:0", "1050::5:600:300c:ffff"}, []string{"1050::5:600:3001:1"}},
		{"1050::0005:0600:300c:1-200:*", []string{"1050::5:600:300c:1:0", "1050::5:600:300c:200:ffff"}, []string{"1050::5:600:300c:201:1"}},
		{"1050::0005:0600:300c:3261:1-20:*", []string{"1050::5:600:300c:3261:14:77"}, []string{"1050::5:600:300c:3261:21:77"}},
		// A prefix without "::" leaves the groups it omits free.
		{"1050:0005:0600:300c:3261:*", []string{"1050:5:600:300c:3261:1:2:3"}, []string{"1050:5:600:300c:3262:1:2:3"}},
		{"fe80::*", []string{"fe80::1", "fe80::ffff"}, []string{"fe80::1:1", "fe81::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p, err := ParseAddressPattern(tt.pattern)
			require.NoError(t, err)
			for _, a := range tt.yes {
				assert.True(t, p.Match(netip.MustParseAddr(a)), "%s should match %s", tt.pattern, a)
			}
			for _, a := range tt.no {
				assert.False(t, p.Match(netip.MustParseAddr(a)), "%s should not match %s", tt.pattern, a)
			}
		})
	}
}

func TestAddressPatternRejects(t *testing.T) {
	for _, s := range []string{
		"256.0.0.1", "::1ggg", "127.0.0.1,2,3}", "::1,2,3}", "192.168.{1}", "{192.168.1}", "{192.168.1.1}",
		"127.0.0.2-1", "127.0.0.-1-200", "127.0.0.0-256", "*.168.1.1", "1-5.2.3.4", "1.2.3.4.5-6", "1.2..*",
		"1050::*:5", "1050::1-5:6", "1050::5:*:*", "1050:::*", "1:2:3:4:5:6:7:8:*", "1::2::*", "1.2.3.x",
		"127.0.0.1,", "1.2.3.{a,b}", "1.2.3.{1,2}x}", "1050::g-h",
	} {
		_, err := ParseAddressPattern(s)
		assert.ErrorIs(t, err, ErrBadAddressPattern, "%q", s)
	}
}

// TestAddressPatternZone: a link-local peer's zone does not stop a match.
func TestAddressPatternZone(t *testing.T) {
	p, err := ParseAddressPattern("fe80::1")
	require.NoError(t, err)
	assert.True(t, p.Match(netip.MustParseAddr("fe80::1%eth0")))
	assert.False(t, p.Match(netip.Addr{}))
}

func FuzzAddressPattern(f *testing.F) {
	for _, s := range []string{"*", "192.168.0.{100,101}", "192.168.1.100-200", "192.168.*", "1050::5:600:300c:1-20:*",
		"1050:5:600:300c:3261:*", "::1", "1.2.3.4,5.6.7.8", "fe80::*", "10.0-255.*.1"} {
		f.Add(s, "192.168.1.150")
		f.Add(s, "1050::5:600:300c:14:1")
	}
	f.Fuzz(func(t *testing.T, pattern, addr string) {
		p, err := ParseAddressPattern(pattern)
		if err != nil {
			return
		}
		a, err := netip.ParseAddr(addr)
		if err != nil {
			a = netip.Addr{}
		}
		m := p.Match(a)
		if p.MatchesAll() && a.IsValid() && !m {
			t.Fatalf("%q matches all but not %s", pattern, a)
		}
		// A literal address always matches itself.
		if lit, err := netip.ParseAddr(pattern); err == nil && !p.Match(lit) {
			t.Fatalf("%q does not match itself", pattern)
		}
		_ = fmt.Sprint(p)
	})
}
