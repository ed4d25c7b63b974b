package multiraft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/raftlink"
)

// protocol is this transport's members' handshake: raftlink's, under its
// own magic "WRNM" and label, so a connection meant for meta/raft's
// transport (magic "WRNR") fails here at its first bytes and the other
// way round. Its one kind of connection carries every group's frames,
// both ways.
var protocol = raftlink.Protocol{Magic: "WRNM", Label: "warren-multiraft-v1", Name: "multiraft", MaxKind: kindGroups}

const kindGroups byte = 1

// TCPConfig configures NewTCP. Authentication is meta/raft's TCPConfig's:
// a cluster secret, mutual TLS, or Insecure.
type TCPConfig struct {
	// ID is this member's id.
	ID uint64
	// Listener is where the members with lower ids connect; the transport
	// closes it in Close.
	Listener net.Listener
	// Peers maps every other member's id to its address. Only they may
	// connect, each only from a lower id than this member's.
	Peers map[uint64]string
	// Secret is the cluster secret (at least 16 bytes), the same on every
	// member: both sides prove they hold it and every frame is sealed
	// under a key derived from it and the handshake.
	Secret []byte
	// ServerTLS and ClientTLS, when set, wrap accepted and dialed
	// connections in TLS; without Secret they must be mutual TLS.
	ServerTLS, ClientTLS *tls.Config
	// Insecure turns member authentication off (tests, or a network
	// nobody else reaches); it excludes Secret and TLS.
	Insecure bool
	// DialTimeout (default 2s) bounds a connection attempt with its
	// handshake, HandshakeTimeout (default 5s) an accepted one's,
	// WriteTimeout (default 5s) one frame's writes to a peer that does
	// not read.
	DialTimeout, HandshakeTimeout, WriteTimeout time.Duration
	// MaxHandshakes (default 64) bounds the accepted connections that have
	// not authenticated yet; past it the oldest is closed.
	MaxHandshakes int
	// MaxFrameBytes bounds a frame (default 64 MiB): a larger one closes
	// the connection; a buffer grows with a frame's bytes as they arrive.
	MaxFrameBytes int
	// Logger gets refused connections and frames (at most a line every 10
	// seconds of each kind); nil: slog.Default().
	Logger *slog.Logger
}

func (c *TCPConfig) validate() error {
	var errs []error
	if c.Listener == nil {
		errs = append(errs, errors.New("multiraft: TCPConfig.Listener is required"))
	}
	if c.ID == 0 {
		errs = append(errs, errors.New("multiraft: TCPConfig.ID must not be 0"))
	}
	for id := range c.Peers {
		if id == 0 || id == c.ID {
			errs = append(errs, fmt.Errorf("multiraft: TCPConfig.Peers names member %d (this member is %d)", id, c.ID))
		}
	}
	if c.Secret != nil && len(c.Secret) < 16 {
		errs = append(errs, fmt.Errorf("multiraft: TCPConfig.Secret has %d bytes, fewer than 16", len(c.Secret)))
	}
	switch {
	case c.Insecure:
		if c.Secret != nil || c.ServerTLS != nil || c.ClientTLS != nil {
			errs = append(errs, errors.New("multiraft: TCPConfig.Insecure turns authentication off: it excludes Secret, ServerTLS and ClientTLS"))
		}
	case c.Secret == nil && !raftlink.MutualTLS(c.ServerTLS, c.ClientTLS):
		errs = append(errs, errors.New("multiraft: TCPConfig needs Secret (the cluster secret) or mutual TLS to authenticate members; Insecure turns authentication off"))
	}
	return errors.Join(errs...)
}

// TCPTransport is the Transport between members over TCP: one connection
// per member pair, dialed by the lower id and written by both sides, that
// starts with raftlink's handshake and then carries every group's frames.
// Each peer has one goroutine that owns its connection's writing side
// (encoding frames off the raft loop) and one that reads it.
type TCPTransport struct {
	cfg     TCPConfig
	hs      raftlink.Handshaker
	inbox   chan inbound
	stop    chan struct{}
	ctx     context.Context // ends in Close: cuts dials short
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	peers   map[uint64]*tcpPeer
	ids     []uint64
	refused atomic.Uint64

	refusedLog, unreachedLog raftlink.RateLog

	mu      sync.Mutex
	pending map[net.Conn]time.Time // accepted, not authenticated yet
	conns   map[net.Conn]bool
	closed  bool
}

var _ Transport = (*TCPTransport)(nil)

// NewTCP starts the transport: it serves on cfg.Listener and starts a
// goroutine per peer.
func NewTCP(cfg TCPConfig) (*TCPTransport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = 64
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = defaultMaxFrame
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	t := &TCPTransport{
		cfg:     cfg,
		hs:      raftlink.Handshaker{Proto: &protocol, Self: cfg.ID, Secret: cfg.Secret, Rand: rand.Reader},
		inbox:   make(chan inbound, inboxSize),
		stop:    make(chan struct{}),
		peers:   map[uint64]*tcpPeer{},
		pending: map[net.Conn]time.Time{},
		conns:   map[net.Conn]bool{},
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if cfg.Insecure {
		cfg.Logger.Warn("multiraft: members are NOT authenticated (TCPConfig.Insecure)", "id", cfg.ID)
	}
	for id, addr := range cfg.Peers {
		p := &tcpPeer{t: t, id: id, addr: addr, queue: make(chan outgoing, queueSize), accepted: make(chan tcpConn, 1)}
		t.peers[id] = p
		t.ids = append(t.ids, id)
	}
	slices.Sort(t.ids)
	for _, p := range t.peers {
		t.wg.Add(1)
		go func() { defer t.wg.Done(); p.run() }()
	}
	t.wg.Add(1)
	go func() { defer t.wg.Done(); t.accept() }()
	return t, nil
}

// Addr is the listener's address.
func (t *TCPTransport) Addr() net.Addr { return t.cfg.Listener.Addr() }

// Refused counts the connections and frames refused.
func (t *TCPTransport) Refused() uint64 { return t.refused.Load() }

// Close stops every goroutine and closes the listener and connections.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	t.cancel()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.cfg.Listener.Close()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("multiraft: close listener: %w", err)
	}
	return nil
}

func (t *TCPTransport) receive() <-chan inbound { return t.inbox }
func (t *TCPTransport) members() []uint64       { return t.ids }

func (t *TCPTransport) send(to uint64, f *frame, sent func(bool)) bool {
	p := t.peers[to]
	if p == nil {
		return false
	}
	select {
	case p.queue <- outgoing{to: to, f: f, sent: sent}:
		return true
	default:
		return false
	}
}

// track registers c; false once the transport closed.
func (t *TCPTransport) track(c net.Conn, pending bool) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.conns[c] = true
	var evict net.Conn
	if pending {
		if len(t.pending) >= t.cfg.MaxHandshakes {
			var oldest time.Time
			for pc, since := range t.pending {
				if evict == nil || since.Before(oldest) {
					evict, oldest = pc, since
				}
			}
			delete(t.pending, evict)
		}
		t.pending[c] = time.Now()
	}
	t.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	return true
}

// authenticated moves accepted c out of the pending ones; false when it
// was evicted meanwhile.
func (t *TCPTransport) authenticated(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.pending[c]
	delete(t.pending, c)
	return ok && !t.closed
}

func (t *TCPTransport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	delete(t.pending, c)
	t.mu.Unlock()
	c.Close()
}

// Pending returns how many accepted connections wait to authenticate.
func (t *TCPTransport) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

func (t *TCPTransport) accept() {
	var backoff time.Duration
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-t.stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if t.cfg.ServerTLS != nil {
			c = tls.Server(c, t.cfg.ServerTLS)
		}
		if !t.track(c, true) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go func() { defer t.wg.Done(); t.handshake(c) }()
	}
}

// isDialer reports whether id may connect to this member: a peer with a
// lower id (the lower id of a pair dials).
func (t *TCPTransport) isDialer(id uint64) bool { return t.peers[id] != nil && id < t.cfg.ID }

// handshake authenticates an accepted connection within HandshakeTimeout
// and hands it to its peer's goroutine.
func (t *TCPTransport) handshake(c net.Conn) {
	br := bufio.NewReaderSize(c, raftlink.MaxRecordPlain+raftlink.RecordTag+2)
	err := c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	var h raftlink.Hello
	var r io.Reader
	var w io.Writer
	if err == nil {
		h, r, w, err = t.hs.AcceptDuplex(br, c, t.isDialer)
	}
	if err == nil && !t.authenticated(c) {
		err = errors.New("multiraft: evicted while authenticating")
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		t.refused.Add(1)
		t.refusedLog.Warn(t.cfg.Logger, "multiraft: refused a connection that did not authenticate as a member",
			"id", t.cfg.ID, "remote", c.RemoteAddr().String(), "err", err)
		t.untrack(c)
		return
	}
	p := t.peers[h.From]
	tc := tcpConn{c: c, r: r, w: bufio.NewWriterSize(w, 64<<10)}
	for {
		select {
		case p.accepted <- tc:
			return
		case <-t.stop:
			t.untrack(c)
			return
		case old := <-p.accepted: // a newer connection replaces one not taken yet
			t.untrack(old.c)
		}
	}
}

// tcpConn is an authenticated connection to one peer.
type tcpConn struct {
	c net.Conn
	r io.Reader
	w *bufio.Writer
}

// tcpPeer is one other member: its goroutine owns the connection's
// writing side and starts a reader for each connection.
type tcpPeer struct {
	t        *TCPTransport
	id       uint64
	addr     string
	queue    chan outgoing
	accepted chan tcpConn
	buf      []byte
}

func (p *tcpPeer) dials() bool { return p.t.cfg.ID < p.id }

// run gets a connection (dialed, or accepted from the lower id), writes
// the queued frames on it until it fails, and again, until the transport
// stops. Without a connection, what is queued is dropped and reported.
func (p *tcpPeer) run() {
	backoff := 20 * time.Millisecond
	for {
		conn, ok := p.connect()
		if !ok {
			select {
			case <-p.t.stop:
				return
			default:
			}
			if !p.idle(backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 20 * time.Millisecond
		done := make(chan struct{})
		p.t.wg.Add(1)
		go func() { defer p.t.wg.Done(); defer close(done); p.read(conn) }()
		p.write(conn, done)
		p.t.untrack(conn.c)
		<-done
	}
}

// connect dials the peer (when this member's id is the lower) or takes
// the connection it dialed; false after a failure or a wait without one.
func (p *tcpPeer) connect() (tcpConn, bool) {
	if !p.dials() {
		t := time.NewTimer(p.t.cfg.DialTimeout)
		defer t.Stop()
		for {
			select {
			case c := <-p.accepted:
				return c, true
			case <-p.t.stop:
				return tcpConn{}, false
			case <-t.C:
				return tcpConn{}, false
			case o := <-p.queue:
				p.report(o, false)
			}
		}
	}
	ctx, cancel := context.WithTimeout(p.t.ctx, p.t.cfg.DialTimeout)
	defer cancel()
	var c net.Conn
	var err error
	if p.t.cfg.ClientTLS != nil {
		d := tls.Dialer{Config: p.t.cfg.ClientTLS}
		c, err = d.DialContext(ctx, "tcp", p.addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", p.addr)
	}
	if err != nil {
		return tcpConn{}, false
	}
	if !p.t.track(c, false) {
		c.Close()
		return tcpConn{}, false
	}
	deadline, _ := ctx.Deadline()
	br := bufio.NewReaderSize(c, raftlink.MaxRecordPlain+raftlink.RecordTag+2)
	err = c.SetDeadline(deadline)
	var r io.Reader
	var w io.Writer
	if err == nil {
		r, w, err = p.t.hs.DialDuplex(c, br, kindGroups, p.id)
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		p.t.unreachedLog.Warn(p.t.cfg.Logger, "multiraft: could not authenticate to a member", "id", p.t.cfg.ID, "peer", p.id, "addr", p.addr, "err", err)
		p.t.untrack(c)
		return tcpConn{}, false
	}
	return tcpConn{c: c, r: r, w: bufio.NewWriterSize(w, 64<<10)}, true
}

// idle waits d, dropping what is queued meanwhile; false when the
// transport stops.
func (p *tcpPeer) idle(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-p.t.stop:
			return false
		case o := <-p.queue:
			p.report(o, false)
		}
	}
}

func (p *tcpPeer) report(o outgoing, ok bool) {
	if o.sent != nil {
		o.sent(ok)
	}
}

// write encodes and writes queued frames on conn until a write fails,
// the reader ends or the transport stops.
func (p *tcpPeer) write(conn tcpConn, readerDone <-chan struct{}) {
	for {
		var o outgoing
		select {
		case <-p.t.stop:
			return
		case <-readerDone:
			return
		case o = <-p.queue:
		}
		p.buf, _ = appendFrames(p.buf[:0], o.f, p.t.cfg.MaxFrameBytes)
		err := conn.c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		if err == nil {
			_, err = conn.w.Write(p.buf)
		}
		// Flush when nothing else waits: frames queued together go out in
		// one write.
		if err == nil && len(p.queue) == 0 {
			err = conn.w.Flush()
		}
		if cap(p.buf) > 1<<20 {
			p.buf = nil
		}
		p.report(o, err == nil)
		if err != nil {
			return
		}
	}
}

// read decodes conn's frames into the inbox until one fails to decode
// (the connection is then closed: a member never sends one) or the
// connection ends.
func (p *tcpPeer) read(conn tcpConn) {
	var buf []byte
	for {
		b, err := raftlink.ReadFrame(conn.r, p.t.cfg.MaxFrameBytes, buf)
		if err == nil && len(b) == 0 {
			err = fmt.Errorf("%w: empty", errFrame)
		}
		var f frame
		if err == nil {
			f, err = decodeFrame(b, p.id, p.t.cfg.ID)
		}
		if err != nil {
			select {
			case <-p.t.stop:
			default:
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					p.t.refused.Add(1)
					p.t.refusedLog.Warn(p.t.cfg.Logger, "multiraft: closed a member's connection", "id", p.t.cfg.ID, "peer", p.id, "err", err)
				}
			}
			conn.c.Close()
			return
		}
		if buf = b[:0]; cap(buf) > 1<<20 {
			buf = nil
		}
		select {
		case p.t.inbox <- inbound{from: p.id, f: f}:
		case <-p.t.stop:
			return
		}
	}
}
