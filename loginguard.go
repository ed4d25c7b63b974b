package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/meta"
)

// Login guards, shared by AMQP logins (PLAIN, AMQPLAIN, EXTERNAL) and the
// management API's basic auth:
//
//   - The user store is read within Options.LoginTimeout. A clustered
//     member without a raft leader, or still catching up, cannot answer a
//     consistent read at once; a login must not hang until the client's
//     own timeout, which amqp091-go and others then report as bad
//     credentials (403), a failure they treat as permanent. When the store
//     does not answer in time the login is closed with 320
//     CONNECTION_FORCED (the spec's "the client may retry"), or HTTP 503,
//     never with 403: the credentials were not checked. (RabbitMQ 4.x
//     turns an auth backend error into a 403 refusal, and its members in a
//     minority stop listening altogether; the first is what this avoids,
//     the second is cluster.Config.PauseAfter.)
//   - Failed logins are throttled per source address, not per user name, so
//     an attacker can slow down only itself (and whoever shares its
//     address), never lock a user out. RabbitMQ has no such throttle; it
//     copes with brute force through its auth backends.

// DefaultLoginTimeout is the default of Options.LoginTimeout.
const DefaultLoginTimeout = 5 * time.Second

// errLoginUnavailable is what a login answers when the user store did not
// answer within the login timeout.
func errLoginUnavailable(err error, cls, mth uint16) *amqp.Error {
	return amqp.NewError(amqp.ConnectionForced, cls, mth,
		"cannot authenticate now: the user store did not answer (%v); try again, or another cluster member", err)
}

// lookupUser reads a login's user within the login timeout.
func (b *Broker) lookupUser(ctx context.Context, name string) (meta.User, error) {
	if len(name) > 255 {
		// AddUser refuses such names: nobody to read, and no reason to
		// send a 120 KB key through the store.
		return meta.User{}, fmt.Errorf("broker: user name of %d bytes: %w", len(name), meta.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.LoginTimeout)
	defer cancel()
	return b.stores.meta.GetUser(ctx, name)
}

// unavailable reports whether a user-store error means the store could not
// answer (rather than that the user does not exist).
func unavailable(err error) bool { return err != nil && !errors.Is(err, meta.ErrNotFound) }

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

// loginThrottle slows down logins from sources that failed too often. Safe
// for concurrent use.
type loginThrottle struct {
	clock clock.Clock
	mu    sync.Mutex
	srcs  map[string]*throttleState
}

type throttleState struct {
	failures float64   // forgiven over time
	at       time.Time // when failures was last brought up to date
	next     time.Time // the earliest time the next login is answered
}

func newLoginThrottle(c clock.Clock) *loginThrottle {
	return &loginThrottle{clock: c, srcs: make(map[string]*throttleState)}
}

// throttleKey names the source of a login: its IP address, an IPv6
// address by its /64 (one host's share), or "" for an in-process or
// unknown peer, which is not throttled (the embedding program is trusted).
func throttleKey(a net.Addr) string {
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
	return throttleKeyIP(ip)
}

func throttleKeyIP(ip netip.Addr) string {
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

// admit reserves the answer of one login from src and returns how long to
// wait before answering it: zero unless src failed too often.
func (t *loginThrottle) admit(src string) time.Duration {
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

// failed records a failed login from src.
func (t *loginThrottle) failed(src string) {
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
func (t *loginThrottle) pruneLocked(now time.Time) {
	for k, s := range t.srcs {
		if s.settleLocked(now); s.failures == 0 && !s.next.After(now) {
			delete(t.srcs, k)
		}
	}
}

// throttleWait waits d before a login is answered, or until the broker or
// ctx ends; it reports false when the login should not be answered.
func (b *Broker) throttleWait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-b.quit:
		return false
	}
}
