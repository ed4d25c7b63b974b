// Package multiraft runs many etcd raft groups (go.etcd.io/raft/v3) on one
// member, the way CockroachDB's MultiRaft does: the engine under one raft
// group per replicated queue.
//
// An Engine is one member. It keeps every group's log, hard state and
// snapshot in one Pebble database, and writes the Ready of every group
// that has one in one batch with one fsync per cycle. One goroutine, the
// loop, drives every group's raft state; committed entries go to a few
// appliers (Config.Appliers), which run each group's StateMachine in log
// order off the loop; a group checkpoints its state machine every
// Config.SnapshotEntries entries, one checkpoint per
// Config.SnapshotInterval on the member, and sends at most
// Config.MaxSnapshotsInFlight snapshots at once. No goroutine is per
// group.
//
// Between two members there is one connection (NewTCP: the lower id dials,
// both write on it) carrying every group's messages tagged with the
// group's id, authenticated and sealed with internal/raftlink's handshake
// under this package's magic "WRNM". Heartbeats are coalesced per member
// pair into one beats frame per cycle, a few bytes a group. A group whose
// leader has nothing in flight quiesces after its next heartbeat tick: no
// member ticks it or sends it heartbeats until a proposal or a message
// wakes it; a liveness ping per member pair each heartbeat interval
// replaces them, and when a member goes silent for an election timeout
// the quiesced groups it led wake, forget it and elect among the others.
// Idle groups therefore cost no CPU, whatever their number.
//
// A LinkTransport carries the same frames over a member link someone else
// owns and authenticates (package cluster: the metadata group's member
// messages), for an engine that needs no listener of its own.
//
// It promises: a proposal returns once its entry is committed by a quorum
// of its group's voters (each voter fsyncs before acknowledging) and
// applied on the member that proposed; one raft drops for want of a
// leader is parked and proposed again once the group has one; one a
// leader change loses fails with ErrLeaderChanged, and one neither applied
// nor known lost within Config.ProposalTimeout with ErrProposalLost (both:
// outcome unknown), so no proposal waits forever or is reported committed
// when it was not; what waits to apply is bounded per applier
// (Config.MaxApplyBytes); a frame that does not decode, or carries a
// message raftlink.CheckMessage refuses or one not from the connection's
// member, is dropped (TCP closes the connection) and the engine runs on;
// an engine stops its goroutines in Close. Groups may have learners from
// their creation (CreateGroupWithLearners). It knows nothing of queues:
// internal/qgroup maps queues onto groups.
package multiraft
