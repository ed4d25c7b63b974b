package multiraft

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/internal/raftlink"
)

// Transport carries the frames between this member and the others: one
// connection (or, in memory, one queue) per member pair carries every
// group's messages and beats. Its implementations are this package's:
// NewTCP, and MemNetwork's for tests. An engine never closes its
// transport; whoever made it closes it after Engine.Close.
type Transport interface {
	// send queues f for member to and returns at once: false when to is
	// unknown or its queue is full, and f is dropped. The transport's
	// goroutine for that peer encodes f, off the raft loop; sent, when
	// not nil, is told whether it was written.
	send(to uint64, f *frame, sent func(ok bool)) bool
	// receive is where the frames from the other members arrive, decoded
	// and checked (decodeFrame), with the member they are from.
	receive() <-chan inbound
	// members are the other members this transport reaches.
	members() []uint64
}

// inbound is a frame a member sent.
type inbound struct {
	from uint64
	f    frame
}

// outgoing is a frame queued for a peer.
type outgoing struct {
	to   uint64
	f    *frame
	sent func(bool)
}

const (
	// inboxSize and queueSize are the frames a transport holds for the
	// loop and for each peer.
	inboxSize = 1024
	queueSize = 256
	// defaultMaxFrame bounds a frame (a snapshot included); larger
	// messages are dropped by the sender and refused by the receiver.
	defaultMaxFrame = 64 << 20
)

// MemNetwork connects engines in one process: each member's transport
// (Transport) encodes every frame on its sending goroutine and decodes and
// checks it as TCP's reader does, so tests exercise the wire format. Links
// can be cut, and raw bytes injected as a member's frames.
type MemNetwork struct {
	mu      sync.Mutex
	nodes   map[uint64]*memTransport
	cut     map[[2]uint64]bool
	refused atomic.Uint64
	log     raftlink.RateLog
	logger  *slog.Logger
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: map[uint64]*memTransport{}, cut: map[[2]uint64]bool{}, logger: slog.New(slog.DiscardHandler)}
}

// Transport returns member id's transport, replacing (and closing) one it
// had: a restarted member gets a fresh one.
func (n *MemNetwork) Transport(id uint64) Transport {
	t := &memTransport{n: n, id: id, inbox: make(chan inbound, inboxSize), queue: make(chan outgoing, queueSize), stop: make(chan struct{})}
	n.mu.Lock()
	old := n.nodes[id]
	n.nodes[id] = t
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	t.wg.Add(1)
	go func() { defer t.wg.Done(); t.run() }()
	return t
}

// Remove takes member id off the network (its process died): frames to
// it are lost, and its transport's goroutine stops.
func (n *MemNetwork) Remove(id uint64) {
	n.mu.Lock()
	t := n.nodes[id]
	delete(n.nodes, id)
	n.mu.Unlock()
	if t != nil {
		t.close()
	}
}

// Close removes every member.
func (n *MemNetwork) Close() {
	n.mu.Lock()
	ids := make([]uint64, 0, len(n.nodes))
	for id := range n.nodes {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	for _, id := range ids {
		n.Remove(id)
	}
}

// Cut drops every frame between a and b, both ways, until Heal.
func (n *MemNetwork) Cut(a, b uint64) {
	n.mu.Lock()
	n.cut[[2]uint64{a, b}], n.cut[[2]uint64{b, a}] = true, true
	n.mu.Unlock()
}

// Heal undoes Cut.
func (n *MemNetwork) Heal(a, b uint64) {
	n.mu.Lock()
	delete(n.cut, [2]uint64{a, b})
	delete(n.cut, [2]uint64{b, a})
	n.mu.Unlock()
}

// Inject delivers raw, a frame's type and body as member from would have
// sent them, to member to: decoded and checked as any frame. It returns
// the error a refused frame got (the frame is then dropped and counted
// in Refused), nil when it was delivered.
func (n *MemNetwork) Inject(from, to uint64, raw []byte) error {
	n.mu.Lock()
	t := n.nodes[to]
	n.mu.Unlock()
	if t == nil {
		return errors.New("multiraft: no such member on the network")
	}
	f, err := decodeFrame(raw, from, to)
	if err != nil {
		n.refused.Add(1)
		return err
	}
	select {
	case t.inbox <- inbound{from: from, f: f}:
	default:
	}
	return nil
}

// Refused counts the frames the network's receivers refused.
func (n *MemNetwork) Refused() uint64 { return n.refused.Load() }

type memTransport struct {
	n     *MemNetwork
	id    uint64
	inbox chan inbound
	queue chan outgoing
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	buf   []byte
}

func (t *memTransport) close() {
	t.once.Do(func() { close(t.stop) })
	t.wg.Wait()
}

func (t *memTransport) receive() <-chan inbound { return t.inbox }

func (t *memTransport) members() []uint64 {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	var ids []uint64
	for id := range t.n.nodes {
		if id != t.id {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (t *memTransport) send(to uint64, f *frame, sent func(bool)) bool {
	select {
	case <-t.stop:
		return false
	case t.queue <- outgoing{to: to, f: f, sent: sent}:
		return true
	default:
		return false
	}
}

// run encodes each queued frame, as TCP's writer does, and delivers what
// the receiver decodes of it.
func (t *memTransport) run() {
	for {
		select {
		case <-t.stop:
			return
		case o := <-t.queue:
			ok := t.deliver(o)
			if o.sent != nil {
				o.sent(ok)
			}
		}
	}
}

func (t *memTransport) deliver(o outgoing) bool {
	t.n.mu.Lock()
	dst := t.n.nodes[o.to]
	cut := t.n.cut[[2]uint64{t.id, o.to}]
	t.n.mu.Unlock()
	if dst == nil || cut {
		return false
	}
	t.buf, _ = appendFrames(t.buf[:0], o.f, defaultMaxFrame)
	for b := t.buf; len(b) > 0; {
		size := int(binary.BigEndian.Uint32(b))
		f, err := decodeFrame(b[4:4+size], t.id, o.to)
		b = b[4+size:]
		if err != nil {
			t.n.refused.Add(1)
			t.n.log.Warn(t.n.logger, "multiraft: refused a frame", "from", t.id, "to", o.to, "err", err)
			return false
		}
		select {
		case dst.inbox <- inbound{from: t.id, f: f}:
		case <-dst.stop:
			return false
		default:
			return false // the receiver is behind: lost, as on a full socket
		}
	}
	if cap(t.buf) > 1<<20 {
		t.buf = nil
	}
	return true
}
