package raft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	// ID is the local node's raft id.
	ID uint64
	// Listener is where peers connect. Required; the transport serves on it
	// and closes it in Close. Tests pass net.Listen("tcp", "127.0.0.1:0").
	Listener net.Listener
	// Peers maps the other members' ids to their raft addresses. More can
	// be set later (SetPeer); a Node does so as membership changes commit.
	// Only the members set here or by SetPeer may connect: a member that
	// joins must be given the current ones (Config.Peers does it).
	Peers map[uint64]string

	// Secret is the cluster secret, the same on every member (as
	// RabbitMQ's Erlang cookie is): members prove to each other that they
	// hold it, without sending it, before anything else is read, and seal
	// every frame with a key derived from it and the handshake (see
	// handshake.go). At least 16 bytes; LoadSecret keeps one in a member's
	// directory. Either Secret or mutual TLS (or both) is required, unless
	// Insecure.
	Secret []byte
	// ServerTLS, when set, wraps accepted connections in TLS; ClientTLS,
	// when set, is used to dial. Without Secret they must be mutual TLS:
	// ServerTLS requires and verifies client certificates
	// (tls.RequireAndVerifyClientCert, or RequireAnyClientCert with a
	// VerifyPeerCertificate or VerifyConnection of its own) and ClientTLS
	// presents one. Any holder of a certificate the CAs accept is then
	// taken for the member whose id it names.
	ServerTLS *tls.Config
	ClientTLS *tls.Config
	// Insecure turns member authentication off: whoever reaches Listener is
	// taken for the member whose id it names, and can forge raft messages
	// that stop the cluster. Only for a network nobody else reaches; it
	// excludes Secret and TLS, and NewTCPTransport logs a warning.
	Insecure bool

	// DialTimeout bounds one connection attempt, the handshake included.
	// Default 2s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds how long an accepted connection may take to
	// authenticate before it is closed. Default 5s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the accepted connections that have not
	// authenticated yet; past it the oldest of them is closed, so sockets
	// that never speak cannot keep members out for longer than the time
	// between a member's connect and its proof. Default 64.
	MaxHandshakes int
	// MaxMessageBytes bounds an incoming message (snapshots included);
	// a larger frame closes the connection. Memory follows what arrives:
	// a frame's buffer grows with its bytes, never to the length its header
	// announces. Default 1 GiB, also for 2 GiB or more.
	MaxMessageBytes int
	// WriteTimeout bounds one Send's writes to a peer that does not read
	// (stopped, or on a dead link); the connection is then closed and
	// redialed at the next Send. Default 5s.
	WriteTimeout time.Duration
	// Logger receives the connections refused (at most one line every 10
	// seconds) and the warning of Insecure. Default: slog.Default(), so
	// that they are not lost.
	Logger *slog.Logger
}

// validate reports every bad field at once.
func (c *TCPConfig) validate() error {
	return errors.Join(raftlink.CheckTransport("raft: TCPConfig", c.Listener, c.ID, c.Secret, minSecretBytes, c.ServerTLS, c.ClientTLS, c.Insecure)...)
}

// TCPTransport sends raft messages to each peer over one TCP connection
// (dialed on demand, redialed after an error), framed as a 4-byte
// big-endian length and the protobuf-encoded raftpb.Message. Send encodes
// and writes on the caller's goroutine (the Node's sender for that peer),
// so a peer that does not read blocks only its own sender, for at most
// WriteTimeout. It is safe for concurrent use; Close stops its goroutines
// and closes its listener and connections.
//
// Every connection starts with the members' handshake (handshake.go): the
// dialer names itself and the member it wants, and with the cluster
// secret both prove they hold it and every frame after is sealed. An
// accepted connection is read only once its dialer proved to be a member
// this one knows, and then every raft message on it must be from that
// member and to this one; anything else closes it. At most MaxHandshakes
// accepted connections wait to authenticate, each at most
// HandshakeTimeout.
//
// Messages (Messenger) go to each peer over a second connection of their
// own (its handshake says which kind it is), so they never wait behind
// raft's appends nor raft behind them. A Message frame is its data, with
// the sender's id from the handshake. A reader of Messages that falls
// behind stops the reading of that connection only.
type TCPTransport struct {
	cfg   TCPConfig
	hs    raftlink.Handshaker
	inbox chan *raftpb.Message
	msgs  chan Message
	stop  chan struct{}
	wg    sync.WaitGroup

	// refused and unreached log failed handshakes, accepted and dialed.
	refused, unreached raftlink.RateLog

	// conns holds every open connection and bounds the accepted ones
	// waiting to authenticate.
	conns raftlink.Conns

	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	mpeers map[uint64]*tcpPeer // the Message connections
	closed bool
}

var (
	_ Transport  = (*TCPTransport)(nil)
	_ PeerSetter = (*TCPTransport)(nil)
	_ Messenger  = (*TCPTransport)(nil)
)

// NewTCPTransport starts serving on cfg.Listener.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	raftlink.SetDefaults(&cfg.DialTimeout, &cfg.HandshakeTimeout, &cfg.WriteTimeout, &cfg.MaxHandshakes)
	if cfg.MaxMessageBytes <= 0 || cfg.MaxMessageBytes >= 1<<31 {
		cfg.MaxMessageBytes = 1 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	t := &TCPTransport{
		cfg:    cfg,
		hs:     raftlink.Handshaker{Proto: &protocol, Self: cfg.ID, Secret: cfg.Secret, Rand: rand.Reader},
		inbox:  make(chan *raftpb.Message, 4096),
		msgs:   make(chan Message, 1024),
		stop:   make(chan struct{}),
		peers:  map[uint64]*tcpPeer{},
		mpeers: map[uint64]*tcpPeer{},
	}
	t.conns.MaxHandshakes = cfg.MaxHandshakes
	if cfg.Insecure {
		cfg.Logger.Warn("raft: members are NOT authenticated (TCPConfig.Insecure): anyone who reaches the raft address "+
			"can forge raft messages and stop or corrupt the cluster; use a cluster secret or mutual TLS",
			"id", cfg.ID, "addr", cfg.Listener.Addr().String())
	}
	for id, addr := range cfg.Peers {
		t.SetPeer(id, addr)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.conns.Accept(cfg.Listener, cfg.ServerTLS, t.stop, &t.wg, func(c net.Conn) {
			defer t.conns.Untrack(c)
			t.serve(c)
		})
	}()
	return t, nil
}

// Addr returns the listener's address.
func (t *TCPTransport) Addr() net.Addr { return t.cfg.Listener.Addr() }

// Receive returns the channel of incoming messages.
func (t *TCPTransport) Receive() <-chan *raftpb.Message { return t.inbox }

// Send writes msgs, all to one peer, to its connection, dialing it first
// when there is none. While a dial to the peer failed in the last 100ms it
// fails at once rather than dial per call. It returns the first error;
// the connection is then closed and the rest of msgs not sent.
func (t *TCPTransport) Send(ctx context.Context, msgs []*raftpb.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	t.mu.Lock()
	p := t.peers[msgs[0].GetTo()]
	t.mu.Unlock()
	if p == nil {
		return fmt.Errorf("raft: no address for peer %d", msgs[0].GetTo())
	}
	return p.send(ctx, msgs)
}

// Messages returns the channel of incoming Messages.
func (t *TCPTransport) Messages() <-chan Message { return t.msgs }

// SendMessages writes msgs, all to one peer, to its Message connection,
// as Send does raft's.
func (t *TCPTransport) SendMessages(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	t.mu.Lock()
	p := t.mpeers[msgs[0].To]
	t.mu.Unlock()
	if p == nil {
		return fmt.Errorf("raft: no address for peer %d", msgs[0].To)
	}
	return p.sendFrames(ctx, func() error {
		for _, m := range msgs {
			if err := p.writeMessage(m); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetPeer sets (or changes) the address of peer id, and lets it connect.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	if id == t.cfg.ID {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	old, oldm := t.peers[id], t.mpeers[id]
	if old != nil && old.addr == addr {
		t.mu.Unlock()
		return
	}
	t.peers[id], t.mpeers[id] = t.newPeer(id, addr, kindRaft), t.newPeer(id, addr, kindMessages)
	t.mu.Unlock()
	// Not under t.mu: closing a TLS connection may wait on a write in
	// progress.
	for _, p := range []*tcpPeer{old, oldm} {
		if p != nil {
			p.close()
		}
	}
}

func (t *TCPTransport) newPeer(id uint64, addr string, kind byte) *tcpPeer {
	p := &tcpPeer{t: t, id: id, addr: addr, kind: kind}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// RemovePeer forgets peer id, closes its connections and refuses it from
// now on.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	p, pm := t.peers[id], t.mpeers[id]
	delete(t.peers, id)
	delete(t.mpeers, id)
	t.mu.Unlock()
	for _, p := range []*tcpPeer{p, pm} {
		if p != nil {
			p.close()
		}
	}
	t.conns.ClosePeer(id)
}

// isMember reports whether id may connect: a member this one knows.
func (t *TCPTransport) isMember(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[id] != nil
}

// Close stops the transport: the listener, every connection, every
// goroutine. It is idempotent.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	for id, p := range t.peers {
		p.cancel() // its connection is closed with the others below
		delete(t.peers, id)
	}
	for id, p := range t.mpeers {
		p.cancel()
		delete(t.mpeers, id)
	}
	t.mu.Unlock()
	t.conns.Close()
	err := t.cfg.Listener.Close()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("raft: close listener: %w", err)
	}
	return nil
}

// Pending returns how many accepted connections wait to authenticate.
func (t *TCPTransport) Pending() int { return t.conns.Pending() }

// serve authenticates an accepted connection, within HandshakeTimeout,
// and then reads it until it fails.
func (t *TCPTransport) serve(c net.Conn) {
	if err := c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return
	}
	// Under TLS the TLS handshake runs in the first read, within the
	// same deadline.
	br := bufio.NewReaderSize(c, raftlink.MaxRecordPlain+raftlink.RecordTag+2)
	h, r, err := t.hs.Accept(br, c, t.isMember)
	if err != nil {
		t.refused.Warn(t.cfg.Logger, "raft: refused a connection that did not authenticate as a member",
			"id", t.cfg.ID, "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	if !t.conns.Authenticated(c, h.From, t.isMember) || c.SetDeadline(time.Time{}) != nil {
		return
	}
	if h.Kind == kindMessages {
		t.readMessages(r, h.From)
	} else {
		t.readRaft(r, h.From)
	}
}

// readFailed logs why the connection of member peer ended, unless it just
// closed.
func (t *TCPTransport) readFailed(peer uint64, err error) {
	select {
	case <-t.stop:
		return
	default:
	}
	if raftlink.Closed(err) {
		return
	}
	t.refused.Warn(t.cfg.Logger, "raft: closed a member's connection", "id", t.cfg.ID, "peer", peer, "err", err)
}

// readRaft delivers the raft messages of member peer's connection until
// it fails or carries a message that is not from peer to this member.
func (t *TCPTransport) readRaft(r io.Reader, peer uint64) {
	var buf []byte
	for {
		b, err := raftlink.ReadFrame(r, t.cfg.MaxMessageBytes, buf)
		if err != nil {
			t.readFailed(peer, err)
			return
		}
		m, err := decodeRaft(b, peer, t.cfg.ID)
		if err != nil {
			t.readFailed(peer, err)
			return
		}
		if buf = b[:0]; cap(buf) > 1<<20 {
			buf = nil // a snapshot's buffer is not kept
		}
		select {
		case t.inbox <- m:
		case <-t.stop:
			return
		}
	}
}

// decodeRaft decodes a raft frame of member peer's connection to member
// self: a message that is not from peer to self is refused.
func decodeRaft(b []byte, peer, self uint64) (*raftpb.Message, error) {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("raft: undecodable message: %w", err)
	}
	if m.GetFrom() != peer || m.GetTo() != self {
		return nil, fmt.Errorf("raft: a message from %d to %d on the connection of member %d", m.GetFrom(), m.GetTo(), peer)
	}
	return m, nil
}

// readMessages delivers the Messages of member peer's connection until it
// fails.
func (t *TCPTransport) readMessages(r io.Reader, peer uint64) {
	for {
		b, err := raftlink.ReadFrame(r, t.cfg.MaxMessageBytes, nil)
		if err != nil {
			t.readFailed(peer, err)
			return
		}
		select {
		case t.msgs <- Message{From: peer, To: t.cfg.ID, Data: b}:
		case <-t.stop:
			return
		}
	}
}

// tcpPeer owns the outgoing connection of one kind to one peer.
type tcpPeer struct {
	t    *TCPTransport
	id   uint64
	addr string
	kind byte
	// ctx ends when the peer is removed or the transport closes.
	ctx    context.Context
	cancel context.CancelFunc

	// mu is held by send, which owns the fields below.
	mu      sync.Mutex
	w       *bufio.Writer
	buf     []byte // encoding buffer, reused
	retryAt time.Time
	// conn is also read by close, under connMu.
	connMu sync.Mutex
	conn   net.Conn
}

// close ends the peer: a send in progress fails at once.
func (p *tcpPeer) close() {
	p.cancel()
	p.connMu.Lock()
	c := p.conn
	p.connMu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (p *tcpPeer) setConn(c net.Conn) {
	p.connMu.Lock()
	p.conn = c
	p.connMu.Unlock()
}

func (p *tcpPeer) send(ctx context.Context, msgs []*raftpb.Message) error {
	return p.sendFrames(ctx, func() error {
		for _, m := range msgs {
			if err := p.write(m); err != nil {
				return err
			}
		}
		return nil
	})
}

// sendFrames runs write, which writes frames to p.w, on the peer's
// connection, dialing it first when there is none, and flushes.
func (p *tcpPeer) sendFrames(ctx context.Context, write func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ctx.Err(); err != nil {
		return fmt.Errorf("raft: peer %s removed: %w", p.addr, err)
	}
	if p.conn == nil {
		if time.Now().Before(p.retryAt) {
			return fmt.Errorf("raft: peer %s unreachable", p.addr)
		}
		c, w, err := p.dial(ctx)
		if err != nil {
			p.retryAt = time.Now().Add(100 * time.Millisecond)
			return fmt.Errorf("raft: dial peer %s: %w", p.addr, err)
		}
		if !p.t.conns.Track(c) {
			c.Close()
			return errors.New("raft: transport closed")
		}
		p.setConn(c)
		p.w = bufio.NewWriterSize(w, 64<<10)
	}
	conn := p.conn
	err := conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
	// The caller stopping cuts a write short (removing the peer closes
	// the connection).
	stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Now()) })
	defer stop()
	if err == nil {
		err = write()
	}
	if err == nil {
		err = p.w.Flush()
	}
	if cap(p.buf) > 1<<20 {
		p.buf = nil // a snapshot's buffer is not kept
	}
	if err != nil {
		p.setConn(nil)
		p.w = nil
		p.t.conns.Untrack(conn)
		return fmt.Errorf("raft: send to peer %s: %w", p.addr, err)
	}
	return nil
}

// dial connects to the peer and runs the handshake, both within
// DialTimeout, and returns the connection and what frames are written to.
func (p *tcpPeer) dial(ctx context.Context) (net.Conn, io.Writer, error) {
	ctx, cancel := context.WithTimeout(ctx, p.t.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	var w io.Writer
	c, err := raftlink.DialMember(ctx, p.addr, p.t.cfg.ClientTLS, func(c net.Conn) error {
		var err error
		if w, err = p.t.hs.Dial(c, p.kind, p.id); err != nil && ctx.Err() == nil {
			p.t.unreached.Warn(p.t.cfg.Logger, "raft: could not authenticate to a member", "id", p.t.cfg.ID, "peer", p.id, "addr", p.addr, "err", err)
		}
		return err
	})
	return c, w, err
}

// writeMessage writes m as one Message frame. One the peer would refuse is
// dropped, as an oversized raft message is.
func (p *tcpPeer) writeMessage(m Message) error {
	if len(m.Data) > p.t.cfg.MaxMessageBytes {
		return nil
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(m.Data)))
	if _, err := p.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := p.w.Write(m.Data)
	return err
}

// write encodes m and writes it as one frame.
func (p *tcpPeer) write(m *raftpb.Message) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(p.buf[:0], m)
	if err != nil {
		return fmt.Errorf("raft: encode message: %w", err)
	}
	p.buf = b
	if len(b) > p.t.cfg.MaxMessageBytes {
		return nil // the peer would refuse it: drop it, raft recovers
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := p.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err = p.w.Write(b)
	return err
}
