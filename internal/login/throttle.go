package login

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/warrenmq/broker/clock"
)

// FreeFailures is how many logins a source may fail at full speed before
// the Throttle slows it down.
const FreeFailures = throttleFree

// Throttle parameters. A source may fail throttleFree logins at full speed;
// one failure is forgiven every throttleForgive. Beyond that every login
// from the source, right or wrong, is answered only after a delay that
// doubles with each further failure from throttleBase up to throttleMax,
// and the source's logins are answered one delay apart, however many it
// makes at once. Answering right passwords late too keeps the delay from
// telling an attacker which guess was right. At the defaults a source
// sustains about one guess per throttleForgive (the delay settles where
// failures are forgiven as fast as they come), instead of thousands per
// second.
const (
	throttleFree    = 10
	throttleForgive = 2 * time.Second
	throttleBase    = 100 * time.Millisecond
	throttleMax     = 5 * time.Second
	// throttleSources bounds the sources remembered; sources beyond it
	// (an attacker rotating addresses) share one bucket.
	throttleSources = 1 << 16
)

// Throttle slows down logins from sources that failed too often. Sources
// are named by SourceKey; the empty source (an in-process peer) is never
// throttled. Safe for concurrent use.
type Throttle struct {
	clock clock.Clock
	mu    sync.Mutex
	srcs  map[string]*throttleState
}

type throttleState struct {
	failures float64   // forgiven over time
	at       time.Time // when failures was last brought up to date
	next     time.Time // the earliest time the next login is answered
}

// NewThrottle returns a Throttle that reads time from c.
func NewThrottle(c clock.Clock) *Throttle {
	return &Throttle{clock: c, srcs: make(map[string]*throttleState)}
}

// SourceKey names the source of a login for the Throttle: its IP address,
// an IPv6 address by its /64 (one host's share), or "" for an in-process
// or unknown peer, which is not throttled (the embedding program is
// trusted).
func SourceKey(a net.Addr) string {
	if a == nil {
		return ""
	}
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return ""
		}
		ip, _ = netip.ParseAddr(host)
	}
	return sourceKeyIP(ip)
}

func sourceKeyIP(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// settleLocked brings s's failures up to now.
func (s *throttleState) settleLocked(now time.Time) {
	if el := now.Sub(s.at); el > 0 {
		s.failures = max(0, s.failures-float64(el)/float64(throttleForgive))
		s.at = now
	}
}

// delayFor is the delay a source with this many failures earns.
func delayFor(failures float64) time.Duration {
	excess := int(math.Ceil(failures)) - throttleFree // a failure partly forgiven still counts
	if excess <= 0 {
		return 0
	}
	d := throttleBase << min(excess-1, 16)
	return min(d, throttleMax)
}

// Admit reserves the answer of one login from src and returns how long to
// wait before answering it: zero unless src failed too often.
func (t *Throttle) Admit(src string) time.Duration {
	if src == "" {
		return 0
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.srcs[src]
	if s == nil && len(t.srcs) >= throttleSources {
		s = t.srcs["*"] // the table is full: src may be in the shared bucket
	}
	if s == nil {
		return 0
	}
	s.settleLocked(now)
	d := delayFor(s.failures)
	if d == 0 {
		return 0
	}
	at := now
	if s.next.After(at) {
		at = s.next // answer one delay after the previous login
	}
	at = at.Add(d)
	if limit := now.Add(throttleMax); at.After(limit) {
		at = limit
	}
	s.next = at
	return at.Sub(now)
}

// Failed records a failed login from src.
func (t *Throttle) Failed(src string) {
	if src == "" {
		return
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.srcs[src]
	if s == nil {
		if len(t.srcs) >= throttleSources {
			t.pruneLocked(now)
		}
		if len(t.srcs) >= throttleSources {
			src = "*"
			s = t.srcs[src]
		}
		if s == nil {
			s = &throttleState{at: now}
			t.srcs[src] = s
		}
	}
	s.settleLocked(now)
	s.failures++
}

// pruneLocked forgets the sources whose failures were all forgiven.
func (t *Throttle) pruneLocked(now time.Time) {
	for k, s := range t.srcs {
		if s.settleLocked(now); s.failures == 0 && !s.next.After(now) {
			delete(t.srcs, k)
		}
	}
}
