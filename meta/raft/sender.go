package raft

import (
	"sync"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// The limits of one peer's outgoing queue. Raft's own flow control
// (maxInflightBytes of appends per follower) keeps a healthy peer's queue
// well below them; they are what stops a peer that does not read (paused,
// or on a congested link) from holding more: past them appends are dropped
// and raft is told the peer is unreachable, which makes the leader probe it
// with one append per heartbeat until it answers again.
const (
	maxQueueMsgs  = 1024
	maxQueueBytes = 2 * maxInflightBytes
	// msgOverhead is what a message or an entry costs beyond its data,
	// roughly, in the queue's accounting.
	msgOverhead = 64
)

// peerQueue is the outgoing queue of one peer. The Ready loop pushes to it
// without waiting; the peer's own goroutine (run) hands what is queued to
// the Transport, so a peer whose connection blocks delays nobody else, and
// marshalling happens off the Ready loop.
type peerQueue struct {
	n    *Node
	to   uint64
	wake chan struct{} // capacity 1: "the queue is not empty"
	quit chan struct{} // closed when the peer is removed

	mu    sync.Mutex
	msgs  []*raftpb.Message
	bytes int
	snap  bool // a snapshot is queued (at most one is)
	// unreachable is set once a drop was reported to raft, until the
	// queue drains, so a burst of drops costs one report.
	unreachable bool
	// For tests: the most bytes ever queued, and how many messages were
	// dropped.
	highBytes int
	drops     int
}

// msgBytes is a message's size in the queue's accounting: its entries'
// and snapshot's data plus a fixed overhead per message and entry.
func msgBytes(m *raftpb.Message) int {
	size := msgOverhead + len(m.GetSnapshot().GetData())
	for _, e := range m.GetEntries() {
		size += msgOverhead + len(e.GetData())
	}
	return size
}

// send queues the messages of one Ready, each for its peer. It is called
// by the Ready loop, after what they acknowledge is persisted.
func (n *Node) send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		n.queues.Lock()
		q := n.queues.m[m.GetTo()]
		if q == nil {
			q = &peerQueue{n: n, to: m.GetTo(), wake: make(chan struct{}, 1), quit: make(chan struct{})}
			n.queues.m[m.GetTo()] = q
			n.wg.Add(1)
			go func() { defer n.wg.Done(); q.run() }()
		}
		n.queues.Unlock()
		q.push(m)
	}
}

// removeQueue stops the queue of a removed peer.
func (n *Node) removeQueue(id uint64) {
	n.queues.Lock()
	defer n.queues.Unlock()
	if q := n.queues.m[id]; q != nil {
		close(q.quit)
		delete(n.queues.m, id)
	}
}

// push queues m, or drops it when the queue is full: a snapshot when one
// is already queued, anything else past the message or byte limit (small
// messages such as heartbeats and votes only past the message limit).
func (q *peerQueue) push(m *raftpb.Message) {
	size := msgBytes(m)
	q.mu.Lock()
	var full bool
	switch {
	case m.GetType() == raftpb.MsgSnap:
		full = q.snap
	case len(q.msgs) >= maxQueueMsgs:
		full = true
	default:
		full = size > msgOverhead && q.bytes+size > maxQueueBytes
	}
	report := false
	if full {
		q.drops++
		report = !q.unreachable && m.GetType() == raftpb.MsgApp
		q.unreachable = q.unreachable || report
	} else {
		q.msgs = append(q.msgs, m)
		q.bytes += size
		q.highBytes = max(q.highBytes, q.bytes)
		q.snap = q.snap || m.GetType() == raftpb.MsgSnap
	}
	q.mu.Unlock()
	if !full {
		select {
		case q.wake <- struct{}{}:
		default:
		}
		return
	}
	switch m.GetType() {
	case raftpb.MsgApp:
		if report {
			// The leader stops streaming appends to the peer and
			// probes it instead, one append per heartbeat.
			q.n.raft.ReportUnreachable(q.to)
		}
	case raftpb.MsgSnap:
		q.n.raft.ReportSnapshot(q.to, etcdraft.SnapshotFailure)
	case raftpb.MsgProp:
		// Never sent, so never stored: its writers may retry.
		q.n.failProposed(m, ErrNotProposed)
	}
}

// run hands the queued messages to the transport, all that are queued at
// once, until the node stops or the peer is removed.
func (q *peerQueue) run() {
	n := q.n
	for {
		select {
		case <-q.wake:
		case <-q.quit:
			return
		case <-n.stopc:
			return
		}
		q.mu.Lock()
		batch := q.msgs
		q.msgs, q.bytes, q.snap = nil, 0, false
		q.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := n.cfg.Transport.Send(n.stopCtx, batch)
		if n.stopCtx.Err() != nil {
			return
		}
		for _, m := range batch {
			switch m.GetType() {
			case raftpb.MsgSnap:
				// The snapshot was written to the connection, or not;
				// raft sends it again after a failure.
				st := etcdraft.SnapshotFinish
				if err != nil {
					st = etcdraft.SnapshotFailure
				}
				n.raft.ReportSnapshot(q.to, st)
			case raftpb.MsgProp:
				if err != nil {
					// Part of the batch may have gone out.
					n.failProposed(m, ErrProposalLost)
				}
			}
		}
		q.mu.Lock()
		if err != nil && !q.unreachable {
			q.unreachable = true
			q.mu.Unlock()
			n.raft.ReportUnreachable(q.to)
			q.mu.Lock()
		}
		if len(q.msgs) == 0 && err == nil {
			q.unreachable = false
		}
		q.mu.Unlock()
	}
}

// failProposed resolves with err the writes of this node in a proposal
// message that did not reach the leader.
func (n *Node) failProposed(m *raftpb.Message, err error) {
	for _, e := range m.GetEntries() {
		for _, id := range commandIDs(e.GetData()) {
			n.resolve(id, result{err: err})
		}
	}
}

// commandIDs returns the request ids of the commands in an entry's data,
// as far as it decodes.
func commandIDs(data []byte) []uint64 {
	d := decoder{b: data}
	if v := d.byte1("entry version"); d.err != nil || v != entryVersion {
		return nil
	}
	count := d.count("command count", commandHeader+1)
	var ids []uint64
	for range count {
		id := d.u64("request id")
		nops := d.count("op count", minOpSize)
		if d.err != nil {
			return ids
		}
		ids = append(ids, id)
		if _, err := runOps(nil, &d, nops, nil); err != nil || d.err != nil {
			return ids
		}
	}
	return ids
}
