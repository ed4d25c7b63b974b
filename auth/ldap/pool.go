package ldap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	goldap "github.com/go-ldap/ldap/v3"
)

// pool holds the backend's connections: at most size open at once
// (slots), the unused ones in idle. Both are channels, so no lock guards
// them; a connection belongs to the one call that took it until put.
type pool struct {
	cfg    *compiled
	slots  chan struct{}
	idle   chan *pconn
	closed atomic.Bool
	// dials counts connections opened, for tests and benchmarks.
	dials atomic.Int64
}

// pconn is one connection and whom it is bound as, so that a call binding
// as the same identity again skips the round trip.
type pconn struct {
	c        *goldap.Conn
	lastUsed time.Time
	bound    bool
	anon     bool
	dn, pw   string
}

// newPool is an empty pool of cfg.PoolSize connections.
func newPool(cfg *compiled) *pool {
	return &pool{cfg: cfg, slots: make(chan struct{}, cfg.PoolSize), idle: make(chan *pconn, cfg.PoolSize)}
}

var errClosed = errors.New("ldap: backend closed")

// get takes a slot (waiting within ctx) and an idle connection that is
// still fresh (reused), or dials one.
func (p *pool) get(ctx context.Context) (pc *pconn, reused bool, err error) {
	if p.closed.Load() {
		return nil, false, errClosed
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("ldap: all %d connections busy: %w", cap(p.slots), ctx.Err())
	}
	for {
		pc = nil
		select {
		case pc = <-p.idle:
		default:
		}
		if pc == nil {
			break
		}
		if pc.c.IsClosing() || (p.cfg.IdleTimeout > 0 && time.Since(pc.lastUsed) > p.cfg.IdleTimeout) {
			_ = pc.c.Close()
			continue
		}
		return pc, true, nil
	}
	c, err := p.dial(ctx)
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return &pconn{c: c}, false, nil
}

// put gives back the connection taken by get: kept for the next call
// when reusable, else closed.
func (p *pool) put(pc *pconn, reusable bool) {
	if reusable && !p.closed.Load() && !pc.c.IsClosing() {
		pc.lastUsed = time.Now()
		select {
		case p.idle <- pc:
			<-p.slots
			return
		default:
		}
	}
	_ = pc.c.Close()
	<-p.slots
}

// close closes the idle connections and makes get fail; connections in
// use are closed when they are put back.
func (p *pool) close() {
	p.closed.Store(true)
	for {
		select {
		case pc := <-p.idle:
			_ = pc.c.Close()
		default:
			return
		}
	}
}

// dial connects to the first server that answers, within ctx: TCP, then
// TLS (use_ssl) or StartTLS (use_starttls). The raw connection is closed
// if ctx ends meanwhile, so a server that accepts and never answers
// cannot hold the call.
func (p *pool) dial(ctx context.Context) (*goldap.Conn, error) {
	var errs []error
	for _, server := range p.cfg.Servers {
		c, err := p.dialOne(ctx, server)
		if err == nil {
			p.dials.Add(1)
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", server, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("ldap: no server reachable: %w", errors.Join(errs...))
}

// dialOne connects to server (host, or host:port) as dial describes.
func (p *pool) dialOne(ctx context.Context, server string) (*goldap.Conn, error) {
	host, addr := server, server
	if h, _, err := net.SplitHostPort(server); err == nil {
		host = h
	} else {
		addr = net.JoinHostPort(server, strconv.Itoa(p.cfg.Port))
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	tlsCfg := p.cfg.tls
	if tlsCfg != nil && tlsCfg.ServerName == "" && !tlsCfg.InsecureSkipVerify {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.ServerName = host
	}
	conn := raw
	if p.cfg.UseSSL {
		tc := tls.Client(raw, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		conn = tc
	}
	c := goldap.NewConn(conn, p.cfg.UseSSL)
	// No request timeout of go-ldap's own: Backend.with closes the
	// connection when the call's context ends, one clock for everything.
	c.Start()
	if p.cfg.UseStartTLS {
		if err := c.StartTLS(tlsCfg); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("starttls: %w", err)
		}
	}
	if ctx.Err() != nil {
		_ = c.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

// bindAs binds pc as dn with pw, or anonymously, unless it already is.
// An empty password is never sent as a simple bind: LDAP would take it
// as an unauthenticated bind and succeed (RFC 4513 section 5.1.2).
func (pc *pconn) bindAs(anon bool, dn, pw string) error {
	if pc.bound && pc.anon == anon && pc.dn == dn && pc.pw == pw {
		return nil
	}
	pc.bound = false
	var err error
	switch {
	case anon:
		err = pc.c.UnauthenticatedBind("")
	case pw == "":
		return errors.New("ldap: refusing to bind with an empty password")
	default:
		err = pc.c.Bind(dn, pw)
	}
	if err != nil {
		return err
	}
	pc.bound, pc.anon, pc.dn, pc.pw = true, anon, dn, pw
	return nil
}
