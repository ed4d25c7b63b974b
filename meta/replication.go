package meta

import "context"

// Replicated is implemented by a Store that replicates through a
// consensus group (meta/raft). ReplicationStatus reports this member's view
// of the group; QueueReplications lists this member's view of every queue
// that has a consensus group of its own (cluster's queue groups) in vhost
// (every vhost when vhost is ""), sorted by vhost and name, and
// QueueReplication finds one queue's (false when it has no group of its
// own); a store whose queues live in its one group lists none. They feed
// the management API and metrics, and none of them blocks for long.
// Optional: found by type assertion.
type Replicated interface {
	ReplicationStatus() ReplicationStatus
	QueueReplications(ctx context.Context, vhost string) []QueueReplication
	QueueReplication(ctx context.Context, q QueueKey) (QueueReplication, bool)
}

// ReplicationStatus is one member's view of its consensus group.
type ReplicationStatus struct {
	// ID is this member's id.
	ID uint64
	// Role is "leader", "follower", "candidate" or "pre-candidate".
	Role string
	// Leader is the id of the leader this member knows, 0 when none.
	Leader uint64
	// Term is the current election term.
	Term uint64
	// Commit is the highest log index this member knows to be committed;
	// Applied the highest it applied to its state.
	Commit, Applied uint64
	// Peers is the leader's record of every member's replication
	// progress, itself included, by ascending id; empty on other members.
	Peers []PeerStatus
}

// PeerStatus is the leader's record of one member's replication.
type PeerStatus struct {
	ID uint64
	// Match is the highest log index known to be replicated on the member;
	// Next the index of the next entry the leader sends it.
	Match, Next uint64
	// State is "probe" (finding where the member's log ends), "replicate"
	// (streaming entries) or "snapshot" (sending it a snapshot).
	State string
	// RecentActive reports whether the leader heard from the member within
	// the last election timeout.
	RecentActive bool
}

// QueueReplication is one member's view of a queue's consensus group, with
// members named as the management API names nodes.
type QueueReplication struct {
	Queue QueueKey
	// Leader is the leading member's node name, "" when none is known.
	Leader string
	// Members are the voters' node names, sorted; Online those of them
	// this member hears from (itself included).
	Members, Online []string
	// Leading reports whether this member leads the group.
	Leading      bool
	Term, Commit uint64
}
