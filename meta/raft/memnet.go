package raft

import (
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Network connects Nodes in one process, for tests. Messages are copied
// through their wire encoding, as TCP would, and can be dropped or delayed
// per direction between chosen nodes, which is how tests partition a
// cluster. A Network is safe for concurrent use; Close stops its delivery
// goroutines.
type Network struct {
	mu    sync.Mutex
	ends  map[uint64]*MemTransport
	links map[[2]uint64]Link // from, to
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
	return &Network{ends: map[uint64]*MemTransport{}, links: map[[2]uint64]Link{}}
}

// Transport returns the transport of node id, replacing (and closing) an
// earlier one with the same id: a restarted node gets a fresh inbox.
func (n *Network) Transport(id uint64) *MemTransport {
	t := &MemTransport{net: n, id: id, inbox: make(chan *raftpb.Message, 4096), stop: make(chan struct{})}
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

// MemTransport is one node's end of a Network.
type MemTransport struct {
	net   *Network
	id    uint64
	inbox chan *raftpb.Message

	mu      sync.Mutex
	delayed []delayedMsg
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once
}

type delayedMsg struct {
	at time.Time
	m  *raftpb.Message
}

var _ Transport = (*MemTransport)(nil)

// Receive returns the node's inbox.
func (t *MemTransport) Receive() <-chan *raftpb.Message { return t.inbox }

// Send copies each message to its destination's inbox, dropping it when
// the destination is unknown, its link drops, or its inbox is full.
func (t *MemTransport) Send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		t.net.mu.Lock()
		dst := t.net.ends[m.GetTo()]
		link := t.net.links[[2]uint64{t.id, m.GetTo()}]
		if t.net.closed {
			dst = nil
		}
		t.net.mu.Unlock()
		if dst == nil || link.Drop {
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil {
			continue
		}
		c := &raftpb.Message{}
		if err := proto.Unmarshal(b, c); err != nil {
			continue
		}
		if link.Delay > 0 {
			dst.enqueueDelayed(time.Now().Add(link.Delay), c)
			continue
		}
		dst.deliver(c)
	}
}

func (t *MemTransport) deliver(m *raftpb.Message) {
	select {
	case <-t.stop:
	case t.inbox <- m:
	default: // full: raft will retry
	}
}

func (t *MemTransport) enqueueDelayed(at time.Time, m *raftpb.Message) {
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
