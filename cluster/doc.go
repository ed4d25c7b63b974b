// Package cluster runs Warren on a meta/raft group: every node keeps a
// full replica of metadata, durable queues, cursors and the unacked index,
// and every node serves AMQP for every durable queue.
//
// A Node runs one raft member (meta/raft) and a broker.Broker whose Meta,
// Shards and Unacked stores are the group's views. Because meta/raft
// implements meta.ChangeFeed and unacked.Claimer, that broker runs in
// shared mode (see package broker): it follows topology declared on other
// nodes from the replicated log, publishes append to the replicated shard
// from any node, and consumers and basic.get on any node claim messages
// from the shared per-queue cursor with one atomic raft command (index
// entries and cursor move together, so two nodes never deliver the same
// message). A requeue on one node is an index entry in state Returned,
// which every node sees and any node's consumer may take.
//
// What it promises:
//   - a publisher confirm means the message is committed by a quorum and
//     synced on each of its voters, so a confirmed message survives the
//     loss of any minority of nodes;
//   - a minority partition commits nothing: publishes there are not
//     confirmed, consumers there receive nothing new, and
//     the two sides never diverge. A node that has known no leader for
//     Config.PauseAfter closes its broker, so its clients get 320
//     CONNECTION_FORCED and reconnect to another node (RabbitMQ's
//     pause_minority); it serves again once it knows a leader;
//   - a node's unacknowledged deliveries outlive it: when the raft leader
//     has not heard from a member for Config.DeadAfter, the leader's unacked
//     scanner (broker.Options.PeerAlive) writes that member's deliveries
//     back as Returned and consumers on the other nodes get them with
//     redelivered=true; a member that restarts returns its own earlier
//     deliveries itself;
//   - a nack means not stored: a publish whose outcome became unknown
//     (the leader changed while it was in flight) is never nacked; its
//     connection is closed with 541 INTERNAL_ERROR and the publisher
//     republishes what it had not seen confirmed;
//   - a login waits at most broker.Options.LoginTimeout for the consistent
//     read of its user, then is answered 320 CONNECTION_FORCED (not 403):
//     a member without a leader or still catching up turns clients away
//     quickly, and they retry or try another member;
//   - each member's management API (/api/nodes, "raft") and metrics
//     (warren_raft_*) show its raft role, term, commit and applied indexes
//     and, on the leader, every member's replication progress;
//   - a confirmed delayed message of a durable x-delayed-message exchange
//     is replicated like a published one; the raft leader routes it when
//     due, once (it claims it first, with one conditional command), and
//     if the leader dies another node's broker takes over its claims
//     after DeadAfter;
//   - a durable x-message-deduplication exchange has one cache for the
//     whole cluster, and a queue's x-message-deduplication holds across
//     nodes (both are replicated records with conditional updates);
//   - delivery is at least once: a publish whose outcome a dying node never
//     reported may be stored, an ack a node had not committed is
//     redelivered, and a member declared dead that was only slow may have
//     its deliveries delivered twice.
//
// What it does not do: non-durable and exclusive queues live on the node
// that declared them (in memory, as RabbitMQ's classic non-durable queues
// live on their node), so a client must publish to and consume from them
// on that node; clients find a node by trying the addresses they know
// (Peer.AMQPAddr is stored but not announced); single-active-consumer and
// x-expires are enforced per node.
//
// Each Node starts one supervisor goroutine, stopped by Stop. It samples
// leadership every Config.PollInterval: it starts the broker once the
// member knows a leader (broker.New writes to the group), pauses it as
// above, and, on the leader, records which members it hears from.
package cluster
