package raft

import "go.etcd.io/raft/v3/raftpb"

// Transport carries raft messages between the members of one group. A Node
// calls Send from its Ready loop only, and reads Receive from one goroutine;
// it never closes the transport: whoever created it closes it after
// Node.Stop.
//
// Raft tolerates lost, duplicated and reordered messages, so a transport is
// best effort: Send must not block on the network (queue, or drop when a
// peer is slow or gone) and may drop messages to unknown peers.
type Transport interface {
	// Send hands msgs to the network. The transport must not keep or
	// modify them after Send returns unless it copied them (raft owns
	// them).
	Send(msgs []*raftpb.Message)
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
