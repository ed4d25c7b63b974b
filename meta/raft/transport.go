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

// Message is a member-to-member message that is not raft's: traffic of the
// application running on the group (package cluster forwards direct
// reply-to replies with it). The transport carries its bytes beside raft's
// messages and never looks inside.
type Message struct {
	// From and To are raft ids; a transport sets From on arrival from
	// what it knows of the sender, so a receiver can answer.
	From, To uint64
	Data     []byte
}

// Messenger is implemented by transports that carry Messages besides raft's
// (TCPTransport and the in-memory Network both do). It is the Node's
// caller's, not the Node's: a Node never sends or reads Messages.
//
// Messages are best effort, like raft's: they may be lost (a dropped
// link, a full inbox, a connection that failed), so whoever needs an
// answer waits for one with a bound. Within one peer they arrive in the
// order sent. They never share a connection or a queue with raft's
// messages, so a flood of them, or a receiver that reads them slowly,
// does not delay raft.
type Messenger interface {
	// SendMessages hands msgs, all addressed to the same peer, to the
	// network; like Transport.Send it may block on that peer's
	// connection, returns an error when some were not handed over, and
	// returns once ctx is done. The transport reads msgs only until it
	// returns.
	SendMessages(ctx context.Context, msgs []Message) error
	// Messages is where Messages addressed to this node arrive. When the
	// reader falls behind, the transport drops (in memory) or stops
	// reading that peer's message connection (TCP), never raft's.
	Messages() <-chan Message
}
