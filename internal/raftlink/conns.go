package raftlink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// CheckTransport reports what is wrong with a member transport's
// settings, each error prefixed with prefix (the config's name): a
// listener and a member id are required, and a secret of at least
// minSecret bytes or mutual TLS, unless insecure, which excludes both.
func CheckTransport(prefix string, l net.Listener, id uint64, secret []byte, minSecret int, server, client *tls.Config, insecure bool) []error {
	var errs []error
	if l == nil {
		errs = append(errs, fmt.Errorf("%s.Listener is required", prefix))
	}
	if id == 0 {
		errs = append(errs, fmt.Errorf("%s.ID must not be 0", prefix))
	}
	if secret != nil && len(secret) < minSecret {
		errs = append(errs, fmt.Errorf("%s.Secret has %d bytes, fewer than %d", prefix, len(secret), minSecret))
	}
	switch {
	case insecure:
		if secret != nil || server != nil || client != nil {
			errs = append(errs, fmt.Errorf("%s.Insecure turns authentication off: it excludes Secret, ServerTLS and ClientTLS", prefix))
		}
	case secret == nil && !MutualTLS(server, client):
		errs = append(errs, fmt.Errorf("%s needs Secret (the cluster secret) or mutual TLS (ServerTLS requiring client certificates, "+
			"ClientTLS presenting one) to authenticate members; Insecure turns authentication off", prefix))
	}
	return errs
}

// SetDefaults fills a transport's unset limits with the members'
// defaults: 2 s to dial a member and authenticate to it, 5 s for an
// accepted connection to authenticate and for one write to a member,
// 64 accepted connections waiting to authenticate.
func SetDefaults(dial, handshake, write *time.Duration, maxHandshakes *int) {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{dial, 2 * time.Second}, {handshake, 5 * time.Second}, {write, 5 * time.Second}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if *maxHandshakes <= 0 {
		*maxHandshakes = 64
	}
}

// DialMember connects to addr, over TLS when client is set, and runs
// handshake on the connection, both within ctx: its deadline bounds
// them and its end cuts them short. It returns the connection without a
// deadline, or closes it and returns why not.
func DialMember(ctx context.Context, addr string, client *tls.Config, handshake func(net.Conn) error) (net.Conn, error) {
	var c net.Conn
	var err error
	if client != nil {
		d := tls.Dialer{Config: client}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	err = c.SetDeadline(deadline)
	cut := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	if err == nil {
		err = handshake(c)
	}
	if cut() && err == nil {
		err = c.SetDeadline(time.Time{})
	} else if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Closed reports whether a read's error is only the connection's end
// (EOF, or closed on this side), not worth a warning.
func Closed(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) }

// Conns is the set of a transport's open connections, dialed and
// accepted: at most MaxHandshakes accepted ones wait to authenticate
// (past it the one waiting longest is closed, so sockets that never
// speak cannot keep members out), and Close closes every one. Under TLS
// it closes the TCP connection beneath, which never blocks. Safe for
// concurrent use.
type Conns struct {
	// MaxHandshakes bounds the accepted connections not authenticated
	// yet (at least 1).
	MaxHandshakes int

	mu      sync.Mutex
	conns   map[net.Conn]*connState
	pending int
	closed  bool
}

// connState is what Conns knows of an open connection.
type connState struct {
	raw      net.Conn
	accepted bool
	since    time.Time
	pending  bool   // accepted, not authenticated yet
	peer     uint64 // accepted and authenticated: the member it is from
}

func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// Track registers dialed connection c; false once Close ran.
func (cs *Conns) Track(c net.Conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return false
	}
	if cs.conns == nil {
		cs.conns = map[net.Conn]*connState{}
	}
	cs.conns[c] = &connState{raw: rawConn(c)}
	return true
}

// admit registers accepted connection c as waiting to authenticate;
// false once Close ran.
func (cs *Conns) admit(c net.Conn) bool {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return false
	}
	if cs.conns == nil {
		cs.conns = map[net.Conn]*connState{}
	}
	var evict *connState
	if cs.pending >= max(cs.MaxHandshakes, 1) {
		for _, st := range cs.conns {
			if st.pending && (evict == nil || st.since.Before(evict.since)) {
				evict = st
			}
		}
		evict.pending = false
		cs.pending--
	}
	cs.conns[c] = &connState{raw: rawConn(c), accepted: true, since: time.Now(), pending: true}
	cs.pending++
	cs.mu.Unlock()
	if evict != nil {
		evict.raw.Close()
	}
	return true
}

// Authenticated records that accepted connection c proved to be from
// member peer, if isMember(peer) still holds (called under Conns' lock,
// so ClosePeer after a member's removal cannot miss c); false when c was
// closed meanwhile (evicted, Close ran) or peer is no member: the caller
// then drops it.
func (cs *Conns) Authenticated(c net.Conn, peer uint64, isMember func(uint64) bool) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.conns[c]
	if st == nil || !st.pending || cs.closed || !isMember(peer) {
		return false
	}
	st.pending, st.peer = false, peer
	cs.pending--
	return true
}

// Untrack forgets c and closes it.
func (cs *Conns) Untrack(c net.Conn) {
	cs.mu.Lock()
	if st := cs.conns[c]; st != nil && st.pending {
		cs.pending--
	}
	delete(cs.conns, c)
	cs.mu.Unlock()
	c.Close()
}

// Pending returns how many accepted connections wait to authenticate.
func (cs *Conns) Pending() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.pending
}

// ClosePeer closes the accepted connections authenticated as from peer
// (a member removed).
func (cs *Conns) ClosePeer(peer uint64) {
	cs.mu.Lock()
	var in []net.Conn
	for _, st := range cs.conns {
		if st.accepted && !st.pending && st.peer == peer {
			in = append(in, st.raw)
		}
	}
	cs.mu.Unlock()
	for _, c := range in {
		c.Close()
	}
}

// Close closes every connection and makes Track and the accept loop
// refuse new ones.
func (cs *Conns) Close() {
	cs.mu.Lock()
	cs.closed = true
	var all []net.Conn
	for _, st := range cs.conns {
		all = append(all, st.raw)
	}
	cs.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

// Accept accepts on l until l closes or stop closes, wraps each
// connection in TLS when server is set, registers it as waiting to
// authenticate and runs handle(c) on a goroutine of its own counted in
// wg. handle owns c: it calls Authenticated once c proved itself and
// Untrack when it is done with c. An accept error other than l's closing
// (out of file descriptors, say) is retried with a backoff, as net/http
// does: a member that stopped accepting would never hear its peers again.
func (cs *Conns) Accept(l net.Listener, server *tls.Config, stop <-chan struct{}, wg *sync.WaitGroup, handle func(net.Conn)) {
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if server != nil {
			c = tls.Server(c, server)
		}
		if !cs.admit(c) {
			c.Close()
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); handle(c) }()
	}
}
