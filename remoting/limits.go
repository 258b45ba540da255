package remoting

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// refusalLogInterval is how often at most a refusal is logged for one peer
// address and reason; the line says how many were refused since the last.
const refusalLogInterval = 10 * time.Second

// connLimits caps the connections open at once, in total and per remote
// address, so one client (or one host's many) cannot take every descriptor
// of the server. Every connection, plain or TLS, is counted from accept
// (OnOpen) until its close. It is touched once per connection, never per
// request.
type connLimits struct {
	max, perAddr int // 0: no limit

	mu     sync.Mutex // guards total and byAddr
	total  int
	byAddr map[netip.Addr]int
}

// acquire counts a new connection from addr, or reports which limit it
// would break ("" when it is admitted).
func (l *connLimits) acquire(addr netip.Addr) (refused string) {
	if l.max <= 0 && l.perAddr <= 0 {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.total >= l.max:
		return "serverMaxConnections"
	case l.perAddr > 0 && l.byAddr[addr] >= l.perAddr:
		return "serverMaxConnectionsPerAddress"
	}
	l.total++
	if l.byAddr == nil {
		l.byAddr = make(map[netip.Addr]int)
	}
	l.byAddr[addr]++
	return ""
}

// release uncounts a connection acquire admitted.
func (l *connLimits) release(addr netip.Addr) {
	if l.max <= 0 && l.perAddr <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.byAddr[addr] - 1; n > 0 {
		l.byAddr[addr] = n
	} else {
		delete(l.byAddr, addr)
	}
}

// count returns the connections counted in total and from addr.
func (l *connLimits) count(addr netip.Addr) (total, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.byAddr[addr]
}

// refusalLog logs refused connections at most once per refusalLogInterval
// for each peer address and reason, so a client reconnecting in a loop
// cannot flood the log.
type refusalLog struct {
	log logrus.FieldLogger

	mu   sync.Mutex // guards seen
	seen map[refusalKey]*refusalEntry
}

type refusalKey struct {
	addr   netip.Addr
	reason string
}

type refusalEntry struct {
	logged     time.Time // when the last line was written
	suppressed int       // refusals since then that wrote no line
}

// refused records one refusal of peer (host:port) and logs it with fields,
// unless a line for the same address and reason was written within the
// interval.
func (r *refusalLog) refused(addr netip.Addr, peer, reason, msg string, fields logrus.Fields) {
	now := time.Now()
	k := refusalKey{addr: addr, reason: reason}
	r.mu.Lock()
	e := r.seen[k]
	if e != nil && now.Sub(e.logged) < refusalLogInterval {
		e.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := 0
	if e == nil {
		if r.seen == nil {
			r.seen = make(map[refusalKey]*refusalEntry)
		}
		e = &refusalEntry{}
		r.seen[k] = e
	} else {
		suppressed = e.suppressed
	}
	e.logged, e.suppressed = now, 0
	r.mu.Unlock()
	f := logrus.Fields{"peer": peer, "reason": reason}
	for k, v := range fields {
		f[k] = v
	}
	if suppressed > 0 {
		f["alsoRefusedSinceLastLine"] = suppressed
	}
	r.log.WithFields(f).Warn(msg)
}

// prune forgets peers with no line logged within the interval (OnTick), so
// the map holds only the addresses refused lately; refusals that wrote no
// line get one now, with their count.
func (r *refusalLog) prune() {
	now := time.Now()
	type summary struct {
		k refusalKey
		n int
	}
	var pending []summary
	r.mu.Lock()
	for k, e := range r.seen {
		if now.Sub(e.logged) >= refusalLogInterval {
			if e.suppressed > 0 {
				pending = append(pending, summary{k, e.suppressed})
			}
			delete(r.seen, k)
		}
	}
	r.mu.Unlock()
	for _, p := range pending {
		r.log.WithFields(logrus.Fields{"peerAddr": p.k.addr.String(), "reason": p.k.reason, "refused": p.n}).
			Warn("more connections refused since the last line")
	}
}

// peerAddr is the IP of a connection's remote address, IPv4-mapped IPv6
// addresses unmapped, for counting connections per host.
func peerAddr(a net.Addr) netip.Addr {
	switch t := a.(type) {
	case *net.TCPAddr:
		return t.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
