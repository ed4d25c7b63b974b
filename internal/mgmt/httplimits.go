package mgmt

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPLimits bound what HTTP clients of the management API and metrics
// may hold. The root package's HTTPLimits, which embedders use, documents
// each field and converts to this type; the two must keep the same
// fields (the conversion does not compile otherwise).
type HTTPLimits struct {
	MaxConnections              int
	MaxUnauthenticatedPerSource int
	ReadHeaderTimeout           time.Duration
	ReadTimeout                 time.Duration
	WriteTimeout                time.Duration
	IdleTimeout                 time.Duration
	MaxHeaderBytes              int
}

// Defaults, after RabbitMQ's management listener (Cowboy), whose
// documented long-request settings are 120 s. Cowboy has no share per
// source; Warren's default lets one source hold an eighth of the cap
// before it logs in, and at least minPerSource (a browser opens six
// connections to a host at once).
const (
	defaultMaxConnections    = 256
	defaultPerSourceDivisor  = 8
	minPerSource             = 8
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 60 * time.Second
	defaultWriteTimeout      = 120 * time.Second
	defaultIdleTimeout       = 60 * time.Second
	defaultMaxHeaderBytes    = 64 << 10
)

// newConnGrace is how long a connection may stay silent after it was
// accepted before it counts as idle and may be closed to make room. A
// client sends its request as soon as it has connected; the grace keeps a
// request whose first bytes are on their way from being cut (Go's
// http.Server.Shutdown waits 5 s for the same reason, but it closes every
// such connection, where this closes one at a time and only at the cap).
const newConnGrace = time.Second

// withDefaults fills the zero fields.
func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = defaultMaxConnections
	}
	if l.MaxUnauthenticatedPerSource <= 0 {
		l.MaxUnauthenticatedPerSource = max(l.MaxConnections/defaultPerSourceDivisor, min(minPerSource, l.MaxConnections))
	}
	def(&l.ReadHeaderTimeout, defaultReadHeaderTimeout)
	def(&l.ReadTimeout, defaultReadTimeout)
	def(&l.WriteTimeout, defaultWriteTimeout)
	def(&l.IdleTimeout, defaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	return l
}

// Server returns an http.Server for h with the limits' timeouts and
// header bound set. Serve it on Listener's listener for the connection
// limit: the server tells the listener which of its connections are idle
// and which have logged in (ConnState, ConnContext and Authenticate),
// which the listener's share per source and its reclaiming need.
func (l HTTPLimits) Server(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState: func(nc net.Conn, st http.ConnState) {
			if c := asLimitConn(nc); c != nil {
				c.setState(st)
			}
		},
		ConnContext: func(ctx context.Context, nc net.Conn) context.Context {
			if c := asLimitConn(nc); c != nil {
				return context.WithValue(ctx, limitConnKey{}, c)
			}
			return ctx
		},
	}
}

// Listener wraps ln so that at most MaxConnections of its connections are
// open at once, and at most MaxUnauthenticatedPerSource of one source's
// before any of them has logged in. A connection beyond either bound
// takes the place of an idle one (see reclaimLocked) or, when none is
// idle, is closed at once. A connection counts until it is closed.
//
// Idleness and logins are what Server's server reports; served by
// another http.Server, the listener knows neither and keeps to the total
// bound alone, closing every connection beyond it.
func (l HTTPLimits) Listener(ln net.Listener) net.Listener {
	l = l.withDefaults()
	ll := &limitListener{Listener: ln, max: l.MaxConnections, perSource: l.MaxUnauthenticatedPerSource}
	ll.mu.sources = make(map[netip.Prefix]*source)
	return ll
}

type limitListener struct {
	net.Listener
	max, perSource int
	// observed: a server reported the state of one of the listener's
	// connections, so states and logins are known (Server's ConnState).
	observed atomic.Bool
	mu       struct {
		sync.Mutex
		// conns are the open connections, in no order (each knows its
		// index): a slice, as reclaiming scans them all, and a slice
		// scans fastest.
		conns []*limitConn
		// sources are the sources with connections that have not logged
		// in.
		sources map[netip.Prefix]*source
	}
}

// source is what the listener counts of one source's connections, those
// that have not logged in; guarded by the listener's mu.
type source struct{ unauth int }

// Accept returns the next connection that fits (admitLocked). One that
// does not fit is closed unserved rather than left waiting: waiting ones
// would sit in the kernel's backlog, and the client would hang instead
// of being told.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &limitConn{Conn: nc, l: l, source: sourceOf(nc.RemoteAddr())}
		c.setState(http.StateNew)
		l.mu.Lock()
		victim, ok := l.admitLocked(c, time.Now())
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Conn.Close() // its server goroutine sees the close and ends
		}
		if !ok {
			_ = nc.Close()
			continue
		}
		return c, nil
	}
}

// admitLocked counts c in if it fits, making room by releasing an idle
// connection (returned, for the caller to close outside the lock) when
// c's source is at its share or the listener at its bound.
func (l *limitListener) admitLocked(c *limitConn, now time.Time) (victim *limitConn, ok bool) {
	known := l.observed.Load()
	switch {
	case known && l.unauthLocked(c.source) >= l.perSource:
		// The source's own idle anonymous connections make room; no
		// one else's do.
		victim = l.oldestIdleLocked(now, func(o *limitConn) bool { return o.source == c.source && !o.authed.Load() })
	case len(l.mu.conns) >= l.max && known:
		victim = l.reclaimLocked(now)
	case len(l.mu.conns) >= l.max:
		return nil, false
	default:
		l.addLocked(c)
		return nil, true
	}
	if victim == nil {
		return nil, false
	}
	l.releaseLocked(victim)
	l.addLocked(c)
	return victim, true
}

// reclaimLocked picks the connection to close for a newcomer when every
// slot is taken: an idle one that never logged in, of the source that
// holds the most of those (the oldest of them), so a flood from one
// source makes room from itself first; else the idle logged-in
// connection that has waited longest (a keep-alive its client may reopen
// at any time). nil when none is idle: every slot is in use.
func (l *limitListener) reclaimLocked(now time.Time) *limitConn {
	var best *limitConn
	bestCount := 0
	for _, o := range l.mu.conns {
		if o.authed.Load() || !o.idle(now) {
			continue
		}
		n := o.src.unauth
		if best == nil || n > bestCount || n == bestCount && o.changed() < best.changed() {
			best, bestCount = o, n
		}
	}
	if best != nil {
		return best
	}
	return l.oldestIdleLocked(now, func(o *limitConn) bool { return true })
}

// oldestIdleLocked is the idle connection among those match accepts that
// has been in its state longest, nil when none is idle.
func (l *limitListener) oldestIdleLocked(now time.Time, match func(*limitConn) bool) *limitConn {
	var best *limitConn
	for _, o := range l.mu.conns {
		if o.idle(now) && match(o) && (best == nil || o.changed() < best.changed()) {
			best = o
		}
	}
	return best
}

// unauthLocked is how many of src's connections have not logged in.
func (l *limitListener) unauthLocked(src netip.Prefix) int {
	if s := l.mu.sources[src]; s != nil {
		return s.unauth
	}
	return 0
}

func (l *limitListener) addLocked(c *limitConn) {
	c.listed = true
	c.index = len(l.mu.conns)
	l.mu.conns = append(l.mu.conns, c)
	c.src = l.mu.sources[c.source]
	if c.src == nil {
		c.src = new(source)
		l.mu.sources[c.source] = c.src
	}
	if !c.authed.Load() {
		c.src.unauth++
	}
}

// logInLocked takes c out of its source's count of connections that
// have not logged in.
func (l *limitListener) logInLocked(c *limitConn) {
	if c.src.unauth--; c.src.unauth <= 0 {
		delete(l.mu.sources, c.source)
	}
}

// releaseLocked gives c's slot back, once.
func (l *limitListener) releaseLocked(c *limitConn) {
	if !c.listed {
		return
	}
	c.listed = false
	last := len(l.mu.conns) - 1
	l.mu.conns[c.index] = l.mu.conns[last]
	l.mu.conns[c.index].index = c.index
	l.mu.conns[last] = nil
	l.mu.conns = l.mu.conns[:last]
	if !c.authed.Load() {
		l.logInLocked(c)
	}
}

// sourceOf is the source a connection's share is counted under: its
// IPv4 address, or its IPv6 address's /64 (one host's usual allocation,
// whose addresses cost an attacker nothing). Connections that are not
// TCP share the zero prefix.
func sourceOf(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Prefix{}
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// limitConn is one counted connection. Its state comes from the server
// (setState); listed, index, and authed's changes, are guarded by l.mu.
type limitConn struct {
	net.Conn
	l      *limitListener
	source netip.Prefix
	// state packs the http.ConnState into the low 3 bits of the
	// UnixNano time it was entered, so readers see the two together.
	state  atomic.Int64
	authed atomic.Bool
	listed bool
	index  int     // in l.mu.conns while listed
	src    *source // its source's count while listed
}

// limitConnKey is the request context key of the limitConn a request
// arrived on (Server's ConnContext).
type limitConnKey struct{}

// asLimitConn finds the limitConn under nc, through a TLS connection's
// NetConn; nil when nc did not come from a limitListener.
func asLimitConn(nc net.Conn) *limitConn {
	for {
		switch v := nc.(type) {
		case *limitConn:
			return v
		case interface{ NetConn() net.Conn }:
			nc = v.NetConn()
		default:
			return nil
		}
	}
}

func (c *limitConn) setState(st http.ConnState) {
	c.l.observed.Store(true)
	c.state.Store(time.Now().UnixNano()&^7 | int64(st))
}

// changed is when the connection entered its state, in UnixNano.
func (c *limitConn) changed() int64 { return c.state.Load() &^ 7 }

// idle reports whether closing c costs its client no request: between
// requests on a keep-alive connection, or accepted and silent for
// newConnGrace.
func (c *limitConn) idle(now time.Time) bool {
	v := c.state.Load()
	switch http.ConnState(v & 7) {
	case http.StateIdle:
		return true
	case http.StateNew:
		return now.UnixNano()-(v&^7) >= int64(newConnGrace)
	}
	return false
}

// loggedIn records that a request on c carried valid credentials: c no
// longer counts against its source's share.
func (c *limitConn) loggedIn() {
	if c.authed.Load() {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.authed.Load() {
		return
	}
	if c.listed {
		c.l.logInLocked(c)
	}
	c.authed.Store(true)
}

// markLoggedIn tells the listener r arrived on, if it is a limitListener
// served by Server's server, that r carried valid credentials.
func markLoggedIn(r *http.Request) {
	if c, ok := r.Context().Value(limitConnKey{}).(*limitConn); ok {
		c.loggedIn()
	}
}

// Close closes the connection and gives its slot back the first time.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// CloseWrite half-closes a TCP connection, which http.Server uses to let
// the client read a last response before the close.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
