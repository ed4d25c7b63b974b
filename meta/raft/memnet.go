package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Network connects Nodes in one process, for tests. Messages are copied
// through their wire encoding, as TCP would, and can be dropped or delayed
// per direction between chosen nodes, which is how tests partition a
// cluster, and a node's traffic can be paused (Pause, Resume) as a
// SIGSTOPped process's. Messages (Messenger) travel the same links, with
// an inbox of their own. A Network is safe for concurrent use; Close stops
// its delivery goroutines.
type Network struct {
	mu    sync.Mutex
	ends  map[uint64]*MemTransport
	links map[[2]uint64]Link // from, to
	// paused holds the nodes under Pause.
	paused map[uint64]*pauseState
	// closed is set by Close; later sends are dropped.
	closed bool
	wg     sync.WaitGroup
}

// Link describes what happens to messages in one direction between two
// nodes. The zero Link delivers at once.
type Link struct {
	Drop  bool
	Delay time.Duration
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{ends: map[uint64]*MemTransport{}, links: map[[2]uint64]Link{}, paused: map[uint64]*pauseState{}}
}

// Transport returns the transport of node id, replacing (and closing) an
// earlier one with the same id: a restarted node gets a fresh inbox.
func (n *Network) Transport(id uint64) *MemTransport {
	t := &MemTransport{net: n, id: id, inbox: make(chan *raftpb.Message, 4096), msgs: make(chan Message, memMessages), stop: make(chan struct{})}
	n.mu.Lock()
	old := n.ends[id]
	n.ends[id] = t
	closed := n.closed
	if !closed {
		n.wg.Add(1)
	}
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	if closed {
		close(t.stop)
		return t
	}
	go func() {
		defer n.wg.Done()
		t.deliverDelayed()
	}()
	return t
}

// SetLink sets what happens to messages from one node to another.
func (n *Network) SetLink(from, to uint64, l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l == (Link{}) {
		delete(n.links, [2]uint64{from, to})
		return
	}
	n.links[[2]uint64{from, to}] = l
}

// Partition drops every message between nodes of different groups, in
// both directions; nodes in no group keep their links.
func (n *Network) Partition(groups ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, a := range groups {
		for j, b := range groups {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					n.links[[2]uint64{x, y}] = Link{Drop: true}
				}
			}
		}
	}
}

// Heal restores every link to immediate delivery.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.links)
}

// Close stops delivery and waits for the network's goroutines.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	for id, p := range n.paused {
		close(p.resumed)
		delete(n.paused, id)
	}
	ends := make([]*MemTransport, 0, len(n.ends))
	for _, t := range n.ends {
		ends = append(ends, t)
	}
	n.mu.Unlock()
	for _, t := range ends {
		t.close()
	}
	n.wg.Wait()
}

// memMessages is how many Messages a node's inbox holds; past it they are
// dropped, as raft's are past the raft inbox.
const memMessages = 1024

// MemTransport is one node's end of a Network.
type MemTransport struct {
	net   *Network
	id    uint64
	inbox chan *raftpb.Message
	msgs  chan Message // Messenger's inbox

	mu      sync.Mutex
	delayed []delayedMsg
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once
}

type delayedMsg struct {
	at time.Time
	m  envelope
}

// envelope is what the network carries: a raft message or a Message.
type envelope struct {
	raft *raftpb.Message
	msg  Message
}

var (
	_ Transport = (*MemTransport)(nil)
	_ Messenger = (*MemTransport)(nil)
)

// Messages returns the node's inbox of Messages.
func (t *MemTransport) Messages() <-chan Message { return t.msgs }

// SendMessages copies each Message to its destination's inbox, with From
// set, under the same links and pauses as raft's messages (Send).
func (t *MemTransport) SendMessages(ctx context.Context, msgs []Message) error {
	for _, m := range msgs {
		c := Message{From: t.id, To: m.To, Data: append([]byte(nil), m.Data...)}
		if err := t.route(ctx, m.To, envelope{msg: c}, len(c.Data)); err != nil {
			return err
		}
	}
	return nil
}

// Receive returns the node's inbox.
func (t *MemTransport) Receive() <-chan *raftpb.Message { return t.inbox }

// Send copies each message to its destination's inbox, dropping it when
// its link drops or the destination's inbox is full. A paused sender
// waits until it is resumed; a message to a paused destination is held
// for it, and once pauseBuffer bytes are held for it the sender waits, as
// a write to a process that does not read waits once the socket buffers
// are full. It returns an error for an unknown destination and when ctx
// ends while it waits.
func (t *MemTransport) Send(ctx context.Context, msgs []*raftpb.Message) error {
	for _, m := range msgs {
		if err := t.send(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (t *MemTransport) send(ctx context.Context, m *raftpb.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	c := &raftpb.Message{}
	if err := proto.Unmarshal(b, c); err != nil {
		return err
	}
	return t.route(ctx, m.GetTo(), envelope{raft: c}, len(b))
}

// route delivers e, of size bytes, to node to as the links and pauses
// between the two nodes say.
func (t *MemTransport) route(ctx context.Context, to uint64, e envelope, size int) error {
	n := t.net
	n.mu.Lock()
	for {
		if n.closed {
			n.mu.Unlock()
			return errNetworkClosed
		}
		dst := n.ends[to]
		if dst == nil {
			n.mu.Unlock()
			return fmt.Errorf("raft: memory network: no node %d", to)
		}
		// The sender is stopped, or the destination's buffer is full:
		// wait for a resume.
		p := n.paused[t.id]
		if p == nil {
			if p = n.paused[to]; p != nil && p.bytes+size <= pauseBuffer {
				p.held = append(p.held, heldMsg{dst: dst, m: e})
				p.bytes += size
				n.mu.Unlock()
				return nil
			}
		}
		if p != nil {
			resumed := p.resumed
			n.mu.Unlock()
			select {
			case <-resumed:
			case <-ctx.Done():
				return ctx.Err()
			}
			n.mu.Lock()
			continue
		}
		link := n.links[[2]uint64{t.id, to}]
		n.mu.Unlock()
		switch {
		case link.Drop:
		case link.Delay > 0:
			dst.enqueueDelayed(time.Now().Add(link.Delay), e)
		default:
			dst.deliver(e)
		}
		return nil
	}
}

var errNetworkClosed = errors.New("raft: memory network closed")

// pauseBuffer is how many bytes of messages a paused node's peers can send
// it before their sends block: about what the socket buffers of a TCP
// connection hold.
const pauseBuffer = 2 << 20

type pauseState struct {
	resumed chan struct{} // closed by Resume
	held    []heldMsg
	bytes   int
}

type heldMsg struct {
	dst *MemTransport
	m   envelope
}

// Pause stops node id's traffic as a stopped process's (SIGSTOP): what it
// sends waits until Resume, and what is sent to it is held, up to
// pauseBuffer bytes, after which its senders wait too. Its goroutines keep
// running (a test that needs a frozen node stops it instead).
func (n *Network) Pause(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused[id] == nil {
		n.paused[id] = &pauseState{resumed: make(chan struct{})}
	}
}

// Resume ends Pause: node id gets what was held for it, in order, and
// every sender waiting on it carries on.
func (n *Network) Resume(id uint64) {
	n.mu.Lock()
	p := n.paused[id]
	delete(n.paused, id)
	closed := n.closed
	if p != nil && !closed {
		n.wg.Add(1)
	}
	n.mu.Unlock()
	if p == nil {
		return
	}
	close(p.resumed)
	if closed {
		return
	}
	go func() {
		defer n.wg.Done()
		for _, h := range p.held {
			// A resumed process reads its whole socket backlog.
			if h.m.raft == nil {
				h.dst.deliver(h.m) // Messages have their own inbox
				continue
			}
			select {
			case h.dst.inbox <- h.m.raft:
			case <-h.dst.stop:
			}
		}
	}()
}

func (t *MemTransport) deliver(e envelope) {
	if e.raft == nil {
		select {
		case <-t.stop:
		case t.msgs <- e.msg:
		default: // full: Messages are best effort too
		}
		return
	}
	select {
	case <-t.stop:
	case t.inbox <- e.raft:
	default: // full: raft will retry
	}
}

func (t *MemTransport) enqueueDelayed(at time.Time, m envelope) {
	t.mu.Lock()
	t.delayed = append(t.delayed, delayedMsg{at: at, m: m})
	w := t.wake
	t.wake = nil
	t.mu.Unlock()
	if w != nil {
		close(w)
	}
}

// deliverDelayed delivers delayed messages in the order they were sent,
// each no earlier than its time.
func (t *MemTransport) deliverDelayed() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		var next *delayedMsg
		if len(t.delayed) > 0 {
			next = &t.delayed[0]
		}
		wake := make(chan struct{})
		t.wake = wake
		t.mu.Unlock()
		if next != nil {
			d := time.Until(next.at)
			if d <= 0 {
				t.mu.Lock()
				m := t.delayed[0].m
				t.delayed = t.delayed[1:]
				t.mu.Unlock()
				t.deliver(m)
				continue
			}
			timer.Reset(d)
		}
		select {
		case <-t.stop:
			return
		case <-wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (t *MemTransport) close() { t.once.Do(func() { close(t.stop) }) }
