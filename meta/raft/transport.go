package raft

import (
	"context"

	"go.etcd.io/raft/v3/raftpb"
)

// Transport carries raft messages between the members of one group. A Node
// calls Send from one goroutine per peer, never from its Ready loop, with
// messages to that peer only, in the order raft produced them; it reads
// Receive from one goroutine. It never closes the transport: whoever
// created it closes it after Node.Stop.
//
// Raft tolerates lost, duplicated and reordered messages, so a transport is
// best effort. Because each peer has its own sending goroutine, Send may
// block on that peer's connection (a full socket, a dial): that delays only
// the messages to that peer, and the Node's bounded queue in front of it
// drops what no longer fits and tells raft the peer is unreachable. Send
// must return once ctx is done (the Node is stopping).
type Transport interface {
	// Send hands msgs, all addressed to the same peer, to the network. It
	// returns an error when some of them were not handed over (the peer
	// is unknown or its connection failed). The transport may read msgs
	// only until Send returns and must not modify them (raft owns them).
	Send(ctx context.Context, msgs []*raftpb.Message) error
	// Receive is where messages addressed to this node arrive.
	Receive() <-chan *raftpb.Message
}

// PeerSetter is implemented by transports that need to be told a member's
// raft address (TCP does; the in-memory network does not). A Node calls it
// from its Ready loop when a membership change commits and, at start, for
// every member it knows.
type PeerSetter interface {
	SetPeer(id uint64, raftAddr string)
	RemovePeer(id uint64)
}
