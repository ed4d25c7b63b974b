// Package multiraft runs many etcd raft groups (go.etcd.io/raft/v3) on one
// member, the way CockroachDB's MultiRaft does: the engine under one raft
// group per replicated queue.
//
// An Engine is one member. It keeps every group's log, hard state and
// snapshot in one Pebble database, and writes the Ready of every group
// that has one in one batch with one fsync per cycle. One goroutine, the
// loop, drives every group's raft state; committed entries go to a few
// appliers (Config.Appliers), which run each group's StateMachine in log
// order off the loop. No goroutine is per group.
//
// A group's state machine keeps its state in the same database, in the
// group's own key range (Data; the layout is in store.go): the applier
// hands it a Batch per hand-off of committed entries and commits what it
// wrote together with the group's applied record (index, term,
// configuration) without an fsync of its own — the raft log, synced
// before the entries were handed off, is the durable copy. A checkpoint,
// every Config.SnapshotEntries entries or Config.SnapshotBytes of them
// (one per Config.SnapshotInterval on the member), copies nothing: it
// records that the state on disk is complete up to its index and drops
// the log before it, in a commit after the state's own in the same
// write-ahead log, so a crash that keeps the checkpoint keeps the state.
// A restart loads each state machine from disk and applies only the
// committed entries after its applied record, whatever the backlog. A
// snapshot sent to a lagging or new replica (at most
// Config.MaxSnapshotsInFlight at once) is built by the group's applier
// from its state on disk, as of its last applied index, and goes in
// chunk frames of at most 1 MiB when it is larger, whatever its size; the
// replica's loop reassembles one transfer per group, in order, within
// Config.MaxSnapshotStaging bytes over all groups, abandoning one that is
// replaced by a newer snapshot or silent for Config.SnapshotChunkTimeout,
// and steps only the whole message into raft. The replica restores it in
// one batch that replaces its range, and until then keeps it in its
// stored snapshot, so a crash in between restores it on restart.
// Removing a group deletes its range. A directory of format 1 (every
// checkpoint the whole state) is converted when opened, one of format 2
// (no proposal identities) reopened as format 3.
//
// The database is tuned for data that dies young (dbOptions in store.go):
// a group's log lives until its next checkpoint and a queue's record
// until its ack, so tables are written uncompressed (compressing what a
// compaction or the next read decompresses and then drops is wasted
// CPU), each carries a bloom filter for the point reads, memtables are
// large enough that most entries meet their checkpoint's range deletion
// before a flush and are dropped by it, and L0 takes more tables before
// compacting. The options are per table: a directory written with other
// ones opens as it is. The write-ahead log and its syncs are unchanged.
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
// applied on the member that proposed, its state writes readable there; one raft drops for want of a
// leader is parked and proposed again once the group has one; one a
// leader change may have lost (the group applied an entry of a later
// term without it, or an entry of the same proposer after it) is
// proposed again, and every replica applies it once: a Propose carries
// its proposer, the proposer's incarnation (it grows with each opening
// of the database) and a sequence per group, and every replica's applier
// applies a proposer's entries in that sequence, skipping a copy and one
// ahead of a missing one (its proposer then proposes again what it has
// not seen applied, in order) — RabbitMQ's rabbit_fifo keeps the same
// rule per enqueuer. The table of next sequences, one row per proposer,
// is committed with the applied record and carried in snapshots, so
// every replica decides alike. Only a configuration change a leader
// change loses fails with ErrLeaderChanged; one neither applied nor
// known lost within Config.ProposalTimeout fails with ErrProposalLost
// (both: outcome unknown), so no proposal waits forever or is reported
// committed when it was not; what waits to apply is bounded per applier
// (Config.MaxApplyBytes); a frame that does not decode, or carries a
// message raftlink.CheckMessage refuses or one not from the connection's
// member, is dropped (TCP closes the connection) and the engine runs on;
// an engine stops its goroutines in Close. Groups may have learners from
// their creation (CreateGroupWithLearners). It knows nothing of queues:
// internal/qgroup maps queues onto groups.
package multiraft
