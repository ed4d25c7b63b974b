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
	// defaultMaxFrame bounds a frame; larger messages are dropped by the
	// sender and refused by the receiver, except snapshot messages, which
	// go in chunks (appendChunks) whatever their size.
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
	after   map[[2]uint64]int // frames to deliver before the link is cut
	max     int               // the frame limit; 0: defaultMaxFrame
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

// CutAfter cuts the link from a to b (one way) once n more snapshot
// chunks went from a to b: a transfer dropped midway. Heal undoes it.
func (n *MemNetwork) CutAfter(a, b uint64, frames int) {
	n.mu.Lock()
	if n.after == nil {
		n.after = map[[2]uint64]int{}
	}
	n.after[[2]uint64{a, b}] = frames
	n.mu.Unlock()
}

// SetMaxFrame sets the frame limit of every member's sending (0: the
// default, 64 MiB), as TCPConfig.MaxFrameBytes does over TCP.
func (n *MemNetwork) SetMaxFrame(max int) {
	n.mu.Lock()
	n.max = max
	n.mu.Unlock()
}

// pass counts one frame of kind from a to b against CutAfter, and
// reports whether it may go.
func (n *MemNetwork) pass(a, b uint64, kind byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]uint64{a, b}
	if n.cut[k] {
		return false
	}
	left, ok := n.after[k]
	if !ok || kind != frameChunk {
		return true
	}
	if left <= 0 {
		delete(n.after, k)
		n.cut[k] = true
		return false
	}
	n.after[k] = left - 1
	return true
}

// Heal undoes Cut.
func (n *MemNetwork) Heal(a, b uint64) {
	n.mu.Lock()
	delete(n.cut, [2]uint64{a, b})
	delete(n.cut, [2]uint64{b, a})
	delete(n.after, [2]uint64{a, b})
	delete(n.after, [2]uint64{b, a})
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
	max := t.n.max
	t.n.mu.Unlock()
	if dst == nil || cut {
		return false
	}
	if max <= 0 {
		max = defaultMaxFrame
	}
	t.buf, _ = appendFrames(t.buf[:0], o.f, max)
	for b := t.buf; len(b) > 0; {
		size := int(binary.BigEndian.Uint32(b))
		if !t.n.pass(t.id, o.to, b[4]) {
			return false
		}
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
