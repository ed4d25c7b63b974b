// Package raft replicates Warren's metadata, queue shards and unacked index
// on one etcd-raft group (go.etcd.io/raft/v3), so that every node of a
// cluster holds the same state and any majority of the nodes keeps it
// available.
//
// A Node is one member. It implements meta.Store itself; Node.Shards is
// the storage.ShardStore and Node.Unacked the unacked.Index of the same
// group. Start a Node with Start(Config) and stop it with Node.Stop; the
// caller that started it stops it, and closes the Transport afterwards.
//
// # What is replicated
//
// Everything the three contracts store: vhosts, users, permissions,
// exchanges, queues, bindings, queue cursors, the records of every shard
// and every unacked entry, plus the cluster membership (Peer: raft id,
// raft address and an opaque AMQP address per node). The state machine is
// a Pebble DB; a committed raft entry carries a batch of low-level
// commands (set, delete, compare-and-swap a cursor, append records, delete
// offsets) that every node applies in log order, so applying depends only
// on the log. Records and unacked entries, in the commands and in the state
// machine, are internal/codec's versioned encodings under the same keys a
// single node's storage/pebble uses; the command framing is this
// package's.
//
// # Guarantees
//
//   - A write returns once its entry is committed by a quorum and applied on
//     the node that was called. Each voter fsyncs the entry to its raft log
//     before acknowledging it, so a returned write (a publisher confirm) is
//     on the disks of a majority and survives the loss of a minority.
//   - Append assigns offsets when the command is applied, from a per-shard
//     counter in the replicated state: every node assigns the same offsets
//     and none is reused. CompareAndSwapOffset is decided at apply time, in
//     log order, so exactly one of two racing claims wins on every node.
//   - Reads (Offset, Get*, List*, Read, Count, FirstOffset, the index's Get,
//     Queue and Scan, Peers) are linearizable: they go through raft's
//     ReadIndex and wait until this node applied that index, so a read
//     sees every write acknowledged anywhere before it began. Concurrent
//     reads share one ReadIndex round.
//   - A minority partition is unavailable: with CheckQuorum a leader cut
//     off from the majority steps down, so nodes in a minority have no
//     leader; their writes and reads wait until the caller's context ends
//     (or fail with ErrLeaderChanged), and nothing they did not commit is
//     ever applied on the majority. After the partition heals they catch
//     up from the leader.
//   - A write that returns an error (context done, ErrLeaderChanged,
//     ErrStateReplaced, ErrStopped) has an unknown outcome: it may still be
//     committed. Callers retry as after a lost confirm (at-least-once).
//     Shards.Append marks such errors with storage.ErrOutcomeUnknown, so
//     the broker withholds the publisher confirm instead of nacking.
//
// # Shared mode: Watch and Claim
//
// A Node implements meta.ChangeFeed and its Index implements
// unacked.Claimer, so brokers on different nodes can serve the same
// queues.
//
// Watch(fn) calls fn on every node, followers included, with the changes
// each applied batch of entries made, in apply order, on the Ready loop,
// once the batch is committed to the state DB and before the writes it
// completes return (so a writer's own node has delivered its changes when
// the write returns) and before reads waiting for it proceed. The changes:
// ChangeTopology{VHost} for an exchange, queue or binding put or deleted
// (VHost "" for a vhost or a vhost limit), once per vhost per batch; ChangeAppended with the
// shard's new tail, once per shard per batch (at the first append's place,
// with the last tail, so a cursor change never overtakes the tail it
// needs); ChangeCursor for every cursor write (a swap that swapped, a claim
// that moved it; deleting a queue's cursor tells only ChangeTopology);
// ChangeReturned for an index entry written in state Returned; ChangeTaken
// for a Returned entry overwritten in state Delivered or deleted by key
// (Index.DeleteQueue tells nothing per entry); ChangeReset when a snapshot
// from the leader replaced the state. With no watcher, applying computes
// and reads nothing extra. Watch waits for a batch in progress to commit,
// so everything fn will not hear of is in the state when Watch returns.
// cancel returns once fn is not running, and fn is never called again.
// fn must not block, call the node or call a cancel func.
//
// Records (meta.Records, under first byte 'r') keep what the broker's
// plugins share: UpdateRecords is one command whose conditions (keys
// present, values equal or keys absent) are checked at apply time on every
// node, so of two exclusive updates exactly one applies; ScanRecords reads
// the local replica; every record set is told as ChangeRecord.
//
// Index.Claim is one command decided at apply time on every node: it
// writes nothing and reports false unless the cursor is at From (when
// Move; an unset cursor is 0, as Offset says) and every Taken key is an
// entry in state Returned; otherwise it writes the entries and moves the
// cursor to To, together. Of racing claims for the same offsets or returned
// entries, made on any nodes, exactly one wins.
//
// # Durability on each node
//
// Under Config.Dir a node keeps two Pebble DBs: "log" holds the raft
// HardState, entries and the latest snapshot, synced (when raft requires
// it: new entries, term or vote, a snapshot) before the Ready loop sends
// any message or advances; "state" is the state
// machine, written unsynced in one batch per Ready together with the
// applied index and ConfState, so after a crash the state and its index
// agree and raft replays the rest from the log. Every SnapshotEvery
// applied entries the node snapshots the state machine into the log DB and
// drops older entries (keeping a short tail); a follower that falls behind
// the compacted log receives the snapshot. A restarted node rebuilds its
// state from its directory (falling back to the snapshot when the state DB
// lost writes past it) and catches up from the leader. A crash can also
// keep the state DB's applied index and lose the log DB's unsynced commit
// index behind it; the node then raises the commit index to the applied
// index at start (those entries were committed), so it restarts after a
// crash at any instant.
//
// The log DB holds the directory's data format (dataFormat), written when
// the directory is new. Start refuses, with ErrDataFormat and without
// changing anything, a directory of another format: one written before the
// marker existed (format 1, records and entries in encodings of their own)
// or by a later version.
//
// # Flow control
//
// Each peer has its own bounded outgoing queue and goroutine: the Ready
// loop only queues, and the transport encodes and writes on the peer's
// goroutine, so one slow or paused peer never stalls the loop or the
// other peers. Raft sends a follower at most 64 unacknowledged append
// messages of at most 256 KiB and 4 MiB in all; a queue holds at most
// 1024 messages and 8 MiB of entries, past which appends are dropped and
// raft is told the peer is unreachable (it then probes the peer with one
// append per heartbeat until it answers), and only one snapshot at a time.
// A Ready applies at most 4 MiB of committed entries, so a member catching
// up keeps ticking between batches. A member that fell behind the
// compacted log gets the latest snapshot.
//
// Raft does not report a proposal lost on its way to the leader. A write
// whose proposal this node could not forward fails with ErrNotProposed
// (not stored); one not applied within Config.ProposalTimeout fails with
// ErrProposalLost (outcome unknown), so no write waits forever. Proposals
// forwarded by other members are stepped on a goroutine of their own: raft
// takes one only once it knows a leader, and must keep hearing the other
// messages meanwhile.
//
// # Concurrency
//
// A Node is safe for concurrent use. Five goroutines run per node, plus
// one per peer: the Ready loop (the only writer of both DBs, ticks raft,
// persists, queues messages, applies, snapshots), a proposer that packs
// whatever writes are waiting into one entry (many concurrent Appends cost
// one proposal and one fsync per node), a read loop serving ReadIndex, a
// receiver that steps incoming messages into raft, one that steps the
// proposals other members forward, and a sender per peer. Writes wait for
// their result by request id.
//
// # Transports
//
// Transport is the package's interface to the network; the Node calls its
// Send from each peer's sender goroutine. NewTCPTransport sends
// length-prefixed protobuf messages over one connection per peer,
// reconnecting as needed. Both also carry Messages (Messenger): the
// members' own traffic, not raft's (package cluster forwards direct
// reply-to replies with them), over separate connections and queues so
// that neither delays the other. Network connects nodes in one process for
// tests and can drop, delay and partition messages, and pause a node's
// traffic as a stopped process's.
//
// # Members authenticate each other
//
// A TCPTransport takes a connection for a member's only once the member
// proved it, and reads nothing from it before. It needs one of:
//
//   - TCPConfig.Secret, the cluster secret, the same on every member (as
//     RabbitMQ's Erlang cookie). Every connection starts with a handshake
//     in which both sides prove they hold it without sending it: an
//     HMAC-SHA256 keyed with it over a transcript that carries a fresh
//     random nonce from each side, so a recorded handshake replayed to
//     either side fails. Every frame after is sealed (AES-256-GCM under a
//     key derived from the secret and that transcript, with the record's
//     sequence number as nonce): nothing can be injected into a session,
//     changed, replayed or moved to another connection, and the traffic is
//     encrypted. LoadSecret keeps the secret in the member's directory
//     (SecretFile, owner-only): a founding member's first start generates
//     one, and the others must be given the same (copy the file, or read it
//     with ReadSecretFile from where it is kept); a member that joins, or a
//     directory holding raft state but no secret, gets ErrNoSecret rather
//     than a secret of its own that would shut it out.
//   - mutual TLS (ServerTLS requiring and verifying client certificates,
//     ClientTLS presenting one); any holder of a certificate the CAs accept
//     is taken for the member whose id it names. With a Secret as well,
//     both apply.
//   - TCPConfig.Insecure, the opt-out: no authentication, logged as a
//     warning at start. Whoever reaches the listener can then forge raft
//     messages; only for a network nobody else reaches.
//
// In every mode the handshake names the dialer and the member it wants
// (a wrong address is told apart from a wrong secret), and the acceptor
// takes only a member it knows (TCPConfig.Peers and SetPeer, which the
// Node calls as membership commits: a removed member is refused and its
// connections closed). Every raft message on a connection must be from
// that connection's member and to this one, else the connection is closed;
// Messages carry the connection's member as their From.
//
// Before raft's Step, the Node checks every incoming message (any
// transport): a type peers send (none of raft's local ones), terms of at
// most 2^48 and indexes of at most 2^62 (etcd raft adds to both without
// checking; a forged heartbeat with term 2^64-1 made the next campaign's
// term wrap to 0 and raft panic on every member, again at every restart,
// the term being persisted), a term on everything but proposals and
// forwarded reads, entries of an append that follow its index with terms
// that never decrease nor pass the message's, a snapshot only on MsgSnap.
// Refused messages and connections are logged, at most once every 10
// seconds each. Start refuses, with ErrTermOutOfRange and without changing
// anything, a directory whose raft state already holds a term or index
// past those bounds (left by such a packet on an earlier version): raft's
// safety rests on a member remembering the highest term it took part in,
// which is lost, so the member cannot safely vote again. Start it on an
// empty directory and let it catch up from the others (RemoveNode, AddNode
// and Config.Join, or the founding Peers); if every member holds such a
// term, no leader can be elected safely and the cluster must be started
// anew.
//
// Memory follows what arrived, not what a peer announces: a frame is at
// most TCPConfig.MaxMessageBytes (1 GiB; a snapshot is one frame) and its
// buffer grows with its bytes; a sealed record is at most 16 KiB. At most
// TCPConfig.MaxHandshakes (64) accepted connections wait to authenticate,
// each at most HandshakeTimeout (5 s); past the count the oldest waiting
// is closed, so sockets that never speak delay a member's connection by
// at most the time its handshake takes.
//
// The handshake is versioned; this version's members refuse connections
// of earlier ones, which spoke raft on the bare connection.
//
// # Who uses it
//
// This package is the replicated store only; package cluster runs a broker
// on it on every node (shared mode, through Watch and Claim). LiveNodes,
// on the leader, lists the members heard from within the last election
// timeout (raft's RecentActive under CheckQuorum): the liveness the
// leader-only unacked scanner needs. Snapshots are built in memory, which
// bounds the practical state size by RAM.
package raft
