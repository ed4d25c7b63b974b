package raft

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
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
	Peers map[uint64]string
	// ServerTLS, when set, wraps accepted connections in TLS (peers must
	// present what it requires). ClientTLS, when set, is used to dial.
	ServerTLS *tls.Config
	ClientTLS *tls.Config
	// DialTimeout bounds one connection attempt. Default 2s.
	DialTimeout time.Duration
	// MaxMessageBytes bounds an incoming message (snapshots included);
	// a larger frame closes the connection. Default 1 GiB, also for 2 GiB
	// or more (a frame's length has 31 bits).
	MaxMessageBytes int
	// WriteTimeout bounds one Send's writes to a peer that does not read
	// (stopped, or on a dead link); the connection is then closed and
	// redialed at the next Send. Default 5s.
	WriteTimeout time.Duration
}

// TCPTransport sends raft messages to each peer over one TCP connection
// (dialed on demand, redialed after an error), framed as a 4-byte
// big-endian length and the protobuf-encoded raftpb.Message. Send encodes
// and writes on the caller's goroutine (the Node's sender for that peer),
// so a peer that does not read blocks only its own sender, for at most
// WriteTimeout. It is safe for concurrent use; Close stops its goroutines
// and closes its listener and connections.
//
// Messages (Messenger) go to each peer over a second connection of their
// own, so they never wait behind raft's appends nor raft behind them. A
// Message frame has the top bit of its length set (raft frames are at
// most MaxMessageBytes, below 2^31) and carries the sender's raft id (8
// bytes, big-endian) before the data. A reader of Messages that falls
// behind stops the reading of that connection only.
type TCPTransport struct {
	cfg   TCPConfig
	inbox chan *raftpb.Message
	msgs  chan Message
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	mpeers map[uint64]*tcpPeer // the Message connections
	conns  map[net.Conn]struct{}
	closed bool
}

var (
	_ Transport  = (*TCPTransport)(nil)
	_ PeerSetter = (*TCPTransport)(nil)
	_ Messenger  = (*TCPTransport)(nil)
)

// messageFrame marks a Message frame's length; messageHeader is the sender
// id that starts its payload.
const (
	messageFrame  = 1 << 31
	messageHeader = 8
)

// NewTCPTransport starts serving on cfg.Listener.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.Listener == nil {
		return nil, errors.New("raft: TCPConfig.Listener is required")
	}
	if cfg.ID == 0 {
		return nil, errors.New("raft: TCPConfig.ID must not be 0")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.MaxMessageBytes <= 0 || cfg.MaxMessageBytes >= messageFrame {
		cfg.MaxMessageBytes = 1 << 30
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	t := &TCPTransport{
		cfg:    cfg,
		inbox:  make(chan *raftpb.Message, 4096),
		msgs:   make(chan Message, 1024),
		stop:   make(chan struct{}),
		peers:  map[uint64]*tcpPeer{},
		mpeers: map[uint64]*tcpPeer{},
		conns:  map[net.Conn]struct{}{},
	}
	for id, addr := range cfg.Peers {
		t.SetPeer(id, addr)
	}
	t.wg.Add(1)
	go func() { defer t.wg.Done(); t.accept() }()
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

// SetPeer sets (or changes) the address of peer id.
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
	t.peers[id], t.mpeers[id] = t.newPeer(addr), t.newPeer(addr)
	t.mu.Unlock()
	// Not under t.mu: closing a TLS connection may wait on a write in
	// progress.
	for _, p := range []*tcpPeer{old, oldm} {
		if p != nil {
			p.close()
		}
	}
}

func (t *TCPTransport) newPeer(addr string) *tcpPeer {
	p := &tcpPeer{t: t, addr: addr}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// RemovePeer forgets peer id and closes its connections.
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
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.cfg.Listener.Close()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("raft: close listener: %w", err)
	}
	return nil
}

func (t *TCPTransport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCPTransport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

func (t *TCPTransport) accept() {
	var backoff time.Duration
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Anything else (out of file descriptors, say) passes:
			// a member that stopped accepting would never hear its
			// peers again. Back off as net/http does.
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
		if !t.track(c) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer t.untrack(c)
			t.read(c)
		}()
	}
}

// read delivers the frames of one incoming connection until it fails.
func (t *TCPTransport) read(c net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(hdr[:])
		isMsg := size&messageFrame != 0
		size &^= messageFrame
		if uint64(size) > uint64(t.cfg.MaxMessageBytes) || isMsg && size < messageHeader {
			return // not a peer speaking our protocol, or a bug: drop it
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		if isMsg {
			m := Message{From: binary.BigEndian.Uint64(buf), To: t.cfg.ID, Data: buf[messageHeader:]}
			select {
			case t.msgs <- m:
			case <-t.stop:
				return
			}
			continue
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(buf, m); err != nil {
			return
		}
		select {
		case t.inbox <- m:
		case <-t.stop:
			return
		}
	}
}

// tcpPeer owns the outgoing connection to one peer.
type tcpPeer struct {
	t    *TCPTransport
	addr string
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
		c, err := p.dial(ctx)
		if err != nil {
			p.retryAt = time.Now().Add(100 * time.Millisecond)
			return fmt.Errorf("raft: dial peer %s: %w", p.addr, err)
		}
		if !p.t.track(c) {
			c.Close()
			return errors.New("raft: transport closed")
		}
		p.setConn(c)
		p.w = bufio.NewWriterSize(c, 64<<10)
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
		p.t.untrack(conn)
		return fmt.Errorf("raft: send to peer %s: %w", p.addr, err)
	}
	return nil
}

func (p *tcpPeer) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.t.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	if p.t.cfg.ClientTLS != nil {
		d := tls.Dialer{Config: p.t.cfg.ClientTLS}
		return d.DialContext(ctx, "tcp", p.addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.addr)
}

// writeMessage writes m as one Message frame. One the peer would refuse is
// dropped, as an oversized raft message is.
func (p *tcpPeer) writeMessage(m Message) error {
	size := messageHeader + len(m.Data)
	if size > p.t.cfg.MaxMessageBytes {
		return nil
	}
	var hdr [4 + messageHeader]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(size)|messageFrame)
	binary.BigEndian.PutUint64(hdr[4:], p.t.cfg.ID)
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
	if len(b) > p.t.cfg.MaxMessageBytes || len(b) > 1<<32-1 {
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
