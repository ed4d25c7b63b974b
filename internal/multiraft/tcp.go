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
// both ways. The label's version went to 2 with entries carrying a
// proposal identity, which an earlier member would misread: the two
// fail each other's handshake rather than exchange them.
var protocol = raftlink.Protocol{Magic: "WRNM", Label: "warren-multiraft-v2", Name: "multiraft", MaxKind: kindGroups}

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
	// connect, each only from a lower id than this member's. AddPeer and
	// RemovePeer change the set at run time.
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
	errs := raftlink.CheckTransport("multiraft: TCPConfig", c.Listener, c.ID, c.Secret, 16, c.ServerTLS, c.ClientTLS, c.Insecure)
	for id := range c.Peers {
		if id == 0 || id == c.ID {
			errs = append(errs, fmt.Errorf("multiraft: TCPConfig.Peers names member %d (this member is %d)", id, c.ID))
		}
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
	refused atomic.Uint64
	// conns holds every open connection and bounds the accepted ones
	// waiting to authenticate.
	conns raftlink.Conns

	refusedLog, unreachedLog raftlink.RateLog

	// peers is the current peer set, replaced whole (under mu) when a
	// peer is added or removed, so the raft loop's sends read it without
	// a lock.
	peers  atomic.Pointer[peerSet]
	mu     sync.Mutex
	closed bool
}

// peerSet is the transport's peers at one time, never changed once
// published.
type peerSet struct {
	byID map[uint64]*tcpPeer
	ids  []uint64 // sorted
}

func (ps *peerSet) with(p *tcpPeer) *peerSet {
	n := &peerSet{byID: make(map[uint64]*tcpPeer, len(ps.byID)+1)}
	for id, q := range ps.byID {
		n.byID[id] = q
	}
	n.byID[p.id] = p
	n.sort()
	return n
}

func (ps *peerSet) without(id uint64) *peerSet {
	n := &peerSet{byID: make(map[uint64]*tcpPeer, len(ps.byID))}
	for pid, q := range ps.byID {
		if pid != id {
			n.byID[pid] = q
		}
	}
	n.sort()
	return n
}

func (ps *peerSet) sort() {
	for id := range ps.byID {
		ps.ids = append(ps.ids, id)
	}
	slices.Sort(ps.ids)
}

var _ Transport = (*TCPTransport)(nil)

// NewTCP starts the transport: it serves on cfg.Listener and starts a
// goroutine per peer.
func NewTCP(cfg TCPConfig) (*TCPTransport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	raftlink.SetDefaults(&cfg.DialTimeout, &cfg.HandshakeTimeout, &cfg.WriteTimeout, &cfg.MaxHandshakes)
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = defaultMaxFrame
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	t := &TCPTransport{
		cfg:   cfg,
		hs:    raftlink.Handshaker{Proto: &protocol, Self: cfg.ID, Secret: cfg.Secret, Rand: rand.Reader},
		inbox: make(chan inbound, inboxSize),
		stop:  make(chan struct{}),
	}
	t.conns.MaxHandshakes = cfg.MaxHandshakes
	t.peers.Store(&peerSet{byID: map[uint64]*tcpPeer{}})
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if cfg.Insecure {
		cfg.Logger.Warn("multiraft: members are NOT authenticated (TCPConfig.Insecure)", "id", cfg.ID)
	}
	for id, addr := range cfg.Peers {
		t.AddPeer(id, addr)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.conns.Accept(cfg.Listener, cfg.ServerTLS, t.stop, &t.wg, t.handshake)
	}()
	return t, nil
}

// AddPeer adds member id at addr to the peers (or moves it to addr): its
// goroutine starts connecting, it may connect to this member, and the
// engine sees it among the members at its next tick. Member 0 and this
// member are ignored.
func (t *TCPTransport) AddPeer(id uint64, addr string) {
	if id == 0 || id == t.cfg.ID {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	ps := t.peers.Load()
	old := ps.byID[id]
	if old != nil && old.addr == addr {
		t.mu.Unlock()
		return
	}
	p := &tcpPeer{t: t, id: id, addr: addr, queue: make(chan outgoing, queueSize), accepted: make(chan tcpConn, 1)}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	t.peers.Store(ps.with(p))
	t.wg.Add(1)
	go func() { defer t.wg.Done(); p.run() }()
	t.mu.Unlock()
	if old != nil {
		old.close()
		t.conns.ClosePeer(id)
	}
}

// RemovePeer takes member id out of the peers: its connection closes, it
// may no longer connect, and frames for it are dropped. The engine keeps
// the groups it replicated until their configurations drop it.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	ps := t.peers.Load()
	p := ps.byID[id]
	if p != nil {
		t.peers.Store(ps.without(id))
	}
	t.mu.Unlock()
	if p != nil {
		p.close()
		t.conns.ClosePeer(id)
	}
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
	t.mu.Unlock()
	t.conns.Close()
	err := t.cfg.Listener.Close()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("multiraft: close listener: %w", err)
	}
	return nil
}

func (t *TCPTransport) receive() <-chan inbound { return t.inbox }
func (t *TCPTransport) members() []uint64       { return t.peers.Load().ids }

func (t *TCPTransport) send(to uint64, f *frame, sent func(bool)) bool {
	p := t.peers.Load().byID[to]
	if p == nil {
		return false
	}
	select {
	case <-p.stopped():
		return false
	case p.queue <- outgoing{to: to, f: f, sent: sent}:
		return true
	default:
		return false
	}
}

// Pending returns how many accepted connections wait to authenticate.
func (t *TCPTransport) Pending() int { return t.conns.Pending() }

// isDialer reports whether id may connect to this member: a peer with a
// lower id (the lower id of a pair dials).
func (t *TCPTransport) isDialer(id uint64) bool {
	return t.peers.Load().byID[id] != nil && id < t.cfg.ID
}

// isPeer reports whether id is one of the peers now.
func (t *TCPTransport) isPeer(id uint64) bool { return t.peers.Load().byID[id] != nil }

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
	if err == nil && !t.conns.Authenticated(c, h.From, t.isPeer) {
		err = errors.New("multiraft: evicted while authenticating, or no longer a peer")
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		t.refused.Add(1)
		t.refusedLog.Warn(t.cfg.Logger, "multiraft: refused a connection that did not authenticate as a member",
			"id", t.cfg.ID, "remote", c.RemoteAddr().String(), "err", err)
		t.conns.Untrack(c)
		return
	}
	p := t.peers.Load().byID[h.From]
	if p == nil { // removed since
		t.conns.Untrack(c)
		return
	}
	tc := tcpConn{c: c, r: r, w: bufio.NewWriterSize(w, 64<<10)}
	for {
		select {
		case p.accepted <- tc:
			return
		case <-p.stopped():
			t.conns.Untrack(c)
			return
		case old := <-p.accepted: // a newer connection replaces one not taken yet
			t.conns.Untrack(old.c)
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
	// ctx ends when the peer is removed or replaced, or the transport
	// closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// close ends the peer's goroutines: its connection closes, what is
// queued is dropped.
func (p *tcpPeer) close() { p.cancel() }

// stopped is closed when the peer or the transport stops.
func (p *tcpPeer) stopped() <-chan struct{} { return p.ctx.Done() }

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
			case <-p.stopped():
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
		p.t.conns.Untrack(conn.c)
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
			case <-p.stopped():
				return tcpConn{}, false
			case <-t.C:
				return tcpConn{}, false
			case o := <-p.queue:
				p.report(o, false)
			}
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.t.cfg.DialTimeout)
	defer cancel()
	var r io.Reader
	var w io.Writer
	c, err := raftlink.DialMember(ctx, p.addr, p.t.cfg.ClientTLS, func(c net.Conn) error {
		br := bufio.NewReaderSize(c, raftlink.MaxRecordPlain+raftlink.RecordTag+2)
		var err error
		if r, w, err = p.t.hs.DialDuplex(c, br, kindGroups, p.id); err != nil && ctx.Err() == nil {
			p.t.unreachedLog.Warn(p.t.cfg.Logger, "multiraft: could not authenticate to a member", "id", p.t.cfg.ID, "peer", p.id, "addr", p.addr, "err", err)
		}
		return err
	})
	if err != nil {
		return tcpConn{}, false
	}
	if !p.t.conns.Track(c) {
		c.Close()
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
		case <-p.stopped():
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
		case <-p.stopped():
			return
		case <-readerDone:
			return
		case o = <-p.queue:
		}
		p.buf, _ = appendFrames(p.buf[:0], o.f, p.t.cfg.MaxFrameBytes)
		// WriteTimeout bounds each 4 MiB, not the whole: a snapshot's
		// chunks may be many times that.
		var err error
		for b := p.buf; len(b) > 0 && err == nil; {
			n := framesWithin(b, 4<<20)
			if err = conn.c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout)); err == nil {
				_, err = conn.w.Write(b[:n])
			}
			b = b[n:]
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
			case <-p.stopped():
			default:
				if !raftlink.Closed(err) {
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
		case <-p.stopped():
			return
		}
	}
}
