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
	// a larger frame closes the connection. Default 1 GiB.
	MaxMessageBytes int
	// QueueLen is how many messages wait per peer before new ones are
	// dropped. Default 4096.
	QueueLen int
}

// TCPTransport sends raft messages to each peer over one TCP connection
// (dialed on demand, redialed after an error), framed as a 4-byte
// big-endian length and the protobuf-encoded raftpb.Message. It is safe
// for concurrent use; Close stops its goroutines and closes its listener
// and connections.
type TCPTransport struct {
	cfg   TCPConfig
	inbox chan *raftpb.Message
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	conns  map[net.Conn]struct{}
	closed bool
}

var (
	_ Transport  = (*TCPTransport)(nil)
	_ PeerSetter = (*TCPTransport)(nil)
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
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 1 << 30
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 4096
	}
	t := &TCPTransport{
		cfg:   cfg,
		inbox: make(chan *raftpb.Message, 4096),
		stop:  make(chan struct{}),
		peers: map[uint64]*tcpPeer{},
		conns: map[net.Conn]struct{}{},
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

// Send queues each message for its peer; messages to unknown peers, or to
// peers whose queue is full, are dropped (raft resends).
func (t *TCPTransport) Send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		t.mu.Lock()
		p := t.peers[m.GetTo()]
		t.mu.Unlock()
		if p == nil {
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil || len(b) > t.cfg.MaxMessageBytes || len(b) > 1<<32-1 {
			continue
		}
		select {
		case p.q <- b:
		default:
		}
	}
}

// SetPeer sets (or changes) the address of peer id.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	if id == t.cfg.ID {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if old := t.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		old.cancel()
	}
	p := &tcpPeer{t: t, addr: addr, q: make(chan []byte, t.cfg.QueueLen)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	t.peers[id] = p
	t.wg.Add(1)
	go func() { defer t.wg.Done(); p.run() }()
}

// RemovePeer forgets peer id and closes its connection.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		p.cancel()
		delete(t.peers, id)
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
		p.cancel()
		delete(t.peers, id)
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
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-t.stop:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
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
		if uint64(size) > uint64(t.cfg.MaxMessageBytes) {
			return // not a peer speaking our protocol, or a bug: drop it
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return
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
	q    chan []byte
	// ctx ends when the peer is removed or the transport closes.
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *tcpPeer) run() {
	var conn net.Conn
	var w *bufio.Writer
	var retryAt time.Time
	defer func() {
		if conn != nil {
			p.t.untrack(conn)
		}
	}()
	for {
		var b []byte
		select {
		case b = <-p.q:
		case <-p.ctx.Done():
			return
		}
		if conn == nil {
			if time.Now().Before(retryAt) {
				continue // peer down: drop rather than dial per message
			}
			c, err := p.dial()
			if err != nil {
				retryAt = time.Now().Add(100 * time.Millisecond)
				continue
			}
			if !p.t.track(c) {
				c.Close()
				return
			}
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
		}
		err := p.write(conn, w, b)
		// Write what else is queued before flushing: one syscall per
		// burst, not per message.
	drain:
		for err == nil {
			select {
			case b = <-p.q:
				err = p.write(conn, w, b)
			default:
				break drain
			}
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			p.t.untrack(conn)
			conn, w = nil, nil
		}
	}
}

func (p *tcpPeer) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.t.cfg.DialTimeout)
	defer cancel()
	if p.t.cfg.ClientTLS != nil {
		d := tls.Dialer{Config: p.t.cfg.ClientTLS}
		return d.DialContext(ctx, "tcp", p.addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.addr)
}

func (p *tcpPeer) write(c net.Conn, w *bufio.Writer, b []byte) error {
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}
