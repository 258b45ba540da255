package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrBadAddressPattern means a globalWhiteRemoteAddresses or
// whiteRemoteAddress entry that is not one of the forms RocketMQ accepts.
var ErrBadAddressPattern = errors.New("acl: bad address pattern")

// AddressPattern is one compiled whiteRemoteAddress or
// globalWhiteRemoteAddresses entry. The forms, as RocketMQ's
// RemoteAddressStrategyFactory accepts them:
//
//	(blank)                       matches nothing
//	*   *.*.*.*   *:*:*:*:*:*:*:*  matches every address, IPv4 and IPv6
//	192.168.0.1   ::1             one address
//	192.168.0.1,192.168.0.7       a list of addresses
//	192.168.0.{100,101}           a list sharing a prefix (also IPv6: 1050::5:{1,2})
//	192.168.1.100-200             a range in one segment
//	192.168.*   192.168.*.*       a wildcard segment; missing trailing segments are wildcards
//	192.100-150.*.*               a range followed by wildcards
//	1050::5:600:300c:1-200        IPv6: a range or * in the last group, or a range
//	1050::5:600:300c:1-20:*       in the second-last group followed by *; a prefix
//	1050:5:600:300c:3261:*        without :: is a prefix, the groups it omits wildcards
//
// Where RocketMQ's matcher ignores every segment after the first range or
// wildcard (192.168.1-10.5 matches 192.168.3.77 there), every segment here
// must match: the pattern means what it says. A first IPv4 segment that is
// a wildcard or range (other than the match-all forms) is refused: RocketMQ
// accepts it but then fails on every request it checks.
type AddressPattern struct {
	text string
	kind patternKind
	set  []netip.Addr // patternSet: unmapped, zoneless
	// lo and hi bound each segment of patternRange4 (4 octets) or
	// patternRange6 (8 groups), inclusive.
	lo, hi [8]uint16
}

type patternKind uint8

const (
	patternNone patternKind = iota
	patternAny
	patternSet
	patternRange4
	patternRange6
)

// ParseAddressPattern compiles one address pattern.
func ParseAddressPattern(s string) (AddressPattern, error) {
	s = strings.TrimSpace(s)
	p := AddressPattern{text: s}
	bad := func(why string) (AddressPattern, error) {
		return AddressPattern{}, fmt.Errorf("%w %q: %s", ErrBadAddressPattern, s, why)
	}
	switch {
	case s == "":
		p.kind = patternNone
		return p, nil
	case s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*":
		p.kind = patternAny
		return p, nil
	case strings.HasSuffix(s, "}"):
		open := strings.LastIndexByte(s, '{')
		prefix := s[:max(open, 0)]
		if open <= 0 || strings.ContainsAny(prefix, "{}*,-") || !strings.ContainsAny(prefix[len(prefix)-1:], ".:") {
			return bad("a {a,b} list must close an address prefix ending in '.' or ':'")
		}
		if !strings.Contains(prefix, ":") && strings.Count(prefix, ".") != 3 {
			return bad("a {a,b} list of IPv4 addresses must be the fourth segment")
		}
		p.kind = patternSet
		for _, item := range strings.Split(s[open+1:len(s)-1], ",") {
			a, err := parseAddr(prefix + strings.TrimSpace(item))
			if err != nil {
				return bad(err.Error())
			}
			p.set = append(p.set, a)
		}
		return p, nil
	case strings.Contains(s, ","):
		p.kind = patternSet
		for _, item := range strings.Split(s, ",") {
			a, err := parseAddr(strings.TrimSpace(item))
			if err != nil {
				return bad(err.Error())
			}
			p.set = append(p.set, a)
		}
		return p, nil
	case strings.ContainsAny(s, "*-"):
		var err error
		if strings.Contains(s, ":") {
			p.kind = patternRange6
			err = p.parseRange6(s)
		} else {
			p.kind = patternRange4
			err = p.parseRange4(s)
		}
		if err != nil {
			return bad(err.Error())
		}
		return p, nil
	}
	a, err := parseAddr(s)
	if err != nil {
		return bad(err.Error())
	}
	p.kind = patternSet
	p.set = []netip.Addr{a}
	return p, nil
}

// parseAddr parses one literal address, unmapped and without its zone, as
// Match compares them.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return a.Unmap().WithZone(""), nil
}

// parseRange4 reads 2 to 4 dot-separated segments, each a number, * or a-b;
// the first must be a number, missing ones are wildcards.
func (p *AddressPattern) parseRange4(s string) error {
	segs := strings.Split(s, ".")
	if len(segs) < 2 || len(segs) > 4 {
		return errors.New("an IPv4 range pattern has 2 to 4 segments")
	}
	for i := range 4 {
		p.lo[i], p.hi[i] = 0, 255
		if i >= len(segs) {
			continue
		}
		lo, hi, err := parseSegment(strings.TrimSpace(segs[i]), 10, 255)
		if err != nil {
			return err
		}
		if i == 0 && lo != hi {
			return errors.New("the first segment must be a number")
		}
		p.lo[i], p.hi[i] = lo, hi
	}
	return nil
}

// parseRange6 reads an IPv6 pattern whose last group is * or a-b, or whose
// second-last is a-b and last is *. The groups before them are a prefix: with
// :: it is expanded to fill the address, without it the groups it lacks are
// wildcards.
func (p *AddressPattern) parseRange6(s string) error {
	errPlace := errors.New("in IPv6, * may only be the last group, and a range the last or the second-last before *")
	// lastGroup splits off rest's last group; a cut through "::" leaves
	// rest ending in "::" still.
	lastGroup := func(rest string) (string, string) {
		i := strings.LastIndexByte(rest, ':')
		g := rest[i+1:]
		rest = rest[:max(i, 0)]
		if strings.HasSuffix(rest, ":") {
			rest += ":"
		}
		return rest, g
	}
	var tail []string // the pattern groups at the end, in order
	rest := s
	if strings.HasSuffix(rest, ":*") {
		tail = []string{"*"}
		rest = strings.TrimSuffix(rest, ":*")
		if strings.HasSuffix(rest, ":") {
			rest += ":" // "::*"
		}
		if r, g := lastGroup(rest); strings.Contains(g, "-") {
			tail = []string{g, "*"}
			rest = r
		}
	} else {
		r, g := lastGroup(rest)
		if !strings.Contains(g, "-") {
			return errPlace
		}
		tail = []string{g}
		rest = r
	}
	if strings.ContainsAny(rest, "*-") {
		return errPlace
	}
	prefix, err := expandGroups(rest, 8-len(tail))
	if err != nil {
		return err
	}
	for i := range 8 {
		p.lo[i], p.hi[i] = 0, 0xffff
	}
	for i, g := range prefix {
		p.lo[i], p.hi[i] = g, g
	}
	// With "::" the prefix fills everything before the tail; without it
	// the tail follows the prefix and the groups after the tail are wildcards.
	at := len(prefix)
	for i, g := range tail {
		lo, hi, err := parseSegment(g, 16, 0xffff)
		if err != nil {
			return err
		}
		p.lo[at+i], p.hi[at+i] = lo, hi
	}
	return nil
}

// expandGroups parses the colon-separated hex groups of an IPv6 prefix. One
// :: stands for as many zero groups as make want groups; without :: the
// prefix may have at most want groups.
func expandGroups(s string, want int) ([]uint16, error) {
	parse := func(part string) ([]uint16, error) {
		if part == "" {
			return nil, nil
		}
		var out []uint16
		for _, g := range strings.Split(part, ":") {
			lo, hi, err := parseSegment(g, 16, 0xffff)
			if err != nil || lo != hi {
				return nil, fmt.Errorf("%q is not an IPv6 group", g)
			}
			out = append(out, lo)
		}
		return out, nil
	}
	left, right, double := strings.Cut(s, "::")
	if !double {
		gs, err := parse(s)
		if err != nil {
			return nil, err
		}
		if len(gs) > want {
			return nil, errors.New("too many IPv6 groups")
		}
		return gs, nil
	}
	if strings.Contains(right, "::") {
		return nil, errors.New("more than one :: in an IPv6 pattern")
	}
	l, err := parse(left)
	if err != nil {
		return nil, err
	}
	r, err := parse(right)
	if err != nil {
		return nil, err
	}
	if len(l)+len(r) > want {
		return nil, errors.New("too many IPv6 groups")
	}
	out := append(l, make([]uint16, want-len(l)-len(r))...)
	return append(out, r...), nil
}

// parseSegment reads one segment: *, a number, or lo-hi, in base (10 for
// IPv4 octets, 16 for IPv6 groups), each at most limit.
func parseSegment(s string, base int, limit uint64) (lo, hi uint16, err error) {
	if s == "*" {
		return 0, uint16(limit), nil
	}
	num := func(t string) (uint16, error) {
		if t == "" || len(t) > 5 || strings.ContainsAny(t, "+-") {
			return 0, fmt.Errorf("%q is not a number", t)
		}
		n, err := strconv.ParseUint(t, base, 32)
		if err != nil || n > limit {
			return 0, fmt.Errorf("%q is not a number from 0 to %d", t, limit)
		}
		return uint16(n), nil
	}
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = num(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = num(b); err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %q ends before it starts", s)
	}
	return lo, hi, nil
}

// String is the pattern as written.
func (p AddressPattern) String() string { return p.text }

// MatchesAll reports whether the pattern is one of the match-all forms.
func (p AddressPattern) MatchesAll() bool { return p.kind == patternAny }

// Match reports whether a is one of the pattern's addresses. An IPv4
// address mapped into IPv6 is matched as IPv4.
func (p AddressPattern) Match(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	switch p.kind {
	case patternAny:
		return true
	case patternSet:
		for _, s := range p.set {
			if s == a {
				return true
			}
		}
	case patternRange4:
		if !a.Is4() {
			return false
		}
		b := a.As4()
		for i, o := range b {
			if uint16(o) < p.lo[i] || uint16(o) > p.hi[i] {
				return false
			}
		}
		return true
	case patternRange6:
		if !a.Is6() {
			return false
		}
		b := a.As16()
		for i := range 8 {
			g := uint16(b[2*i])<<8 | uint16(b[2*i+1])
			if g < p.lo[i] || g > p.hi[i] {
				return false
			}
		}
		return true
	}
	return false
}
