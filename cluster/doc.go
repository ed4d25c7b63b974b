// Package cluster runs Warren on raft: a metadata group (meta/raft) that
// every node keeps a full replica of — metadata, classic durable queues,
// their cursors and unacked index — and, with Config.QueueGroups, one raft
// group per durable quorum queue and stream (internal/qgroup, on one
// internal/multiraft engine per member) carrying that queue's records,
// cursor, claims and acks. Every node serves AMQP for every durable queue.
//
// A Node runs one raft member (meta/raft), its queue groups, and a
// broker.Broker whose Meta, Shards and Unacked stores are the groups'
// views: a queue with a group of its own goes to it, every other durable
// queue to the metadata group. Because those views implement
// meta.ChangeFeed and unacked.Claimer, that broker runs in shared mode
// (see package broker): it follows topology declared on other nodes from
// the replicated log, publishes append to the queue's replicated shard
// from any node, and consumers and basic.get on any node claim messages
// from the shared per-queue cursor with one atomic command in the queue's
// group (index entries and cursor move together, so two nodes never
// deliver the same message). A requeue on one node is an index entry in
// state Returned, which every node sees and any node's consumer may take.
//
// # Queue groups
//
// With Config.QueueGroups, a new durable quorum queue or stream gets its
// group at declaration: its
// group id and replica set are written to the metadata group's records
// with compare-and-swap before its declaration, so every member knows the
// group before the queue. Its voters are x-quorum-initial-group-size
// members (x-initial-cluster-size for a stream; 3 when unset, capped at
// the member count): the declaring member, which campaigns and leads
// (RabbitMQ's client-local locator; under the balanced locator it hands
// the leadership to the voter leading the fewest; the policy's
// queue-leader-locator wins over x-queue-leader-locator, and that over
// Config.QueueLeaderLocator; queue.declare-ok comes once that member
// leads, at most a few seconds after), and the
// members with the fewest voter replicas (internal/qplace places them,
// and each member's qplace rebalancer spreads leaderships again after a
// member comes back); every other member holds it as a learner, so any member
// serves any queue from its own copy and its commands are forwarded to
// the queue's leader by raft (no AMQP connection is proxied: one
// connection touches queues led on different members). The groups' frames
// travel as member messages of Config.Raft.Transport (raft.Messenger),
// beside direct reply-to's. When a member dies only the queues it led
// pause, for about an election timeout. Classic durable queues stay in the
// metadata group (RabbitMQ 4.x keeps them on one node; Warren keeps
// replicating them). Queue groups are opt-in (Config.QueueGroups); without them every durable
// queue stays in the metadata group. Turned on over a directory written
// without them, a member refuses to start (ErrGroupsMigration) unless
// Config.QueueGroupsOverExisting says what to do.
// Node.QueueGroup shows a queue's group as a member sees it.
// Node.AddQueueReplica and DeleteQueueReplica (and the management API's
// RabbitMQ 4.x replica routes, groupops.go) grow and shrink a quorum
// queue's voters at run time: the change is written as a target in the
// metadata group and made by the group's leader, a new voter catching up
// as a learner before its promotion, a removed leader handing over
// first; /api/nodes lists every member with the groups it votes in,
// learns and leads. Costs: a group keeps its queue's records in the
// member's Pebble database, not in memory, but every member (voter or
// learner) stores and applies its whole log; so a member added holds
// every queue's traffic too, and adds no write capacity
// (docs/cluster-design.md).
//
// What it promises:
//   - a publisher confirm means the message is committed by a quorum of
//     its queue's group (or of the metadata group, for a queue without one)
//     and synced on each of its voters, so a confirmed message survives the
//     loss of any minority of those voters;
//   - a minority partition commits nothing: publishes there are not
//     confirmed, consumers there receive nothing new, and
//     the two sides never diverge (each group, the metadata group and
//     every queue's, commits only with a majority of its own voters: with
//     three voters per queue on more than three members, a side holding
//     two of a queue's voters may still commit to that queue, and the
//     other side cannot). A node whose metadata group has known no
//     leader for Config.PauseAfter closes its broker, so its clients get 320
//     CONNECTION_FORCED and reconnect to another node (RabbitMQ's
//     pause_minority); it serves again once it knows a leader;
//   - a node's unacknowledged deliveries outlive it: when the raft leader
//     has not heard from a member for Config.DeadAfter, the leader's unacked
//     scanner (peer.Peers.Alive, attached to the broker's Options) writes that member's deliveries
//     back as Returned and consumers on the other nodes get them with
//     redelivered=true; a member that restarts returns its own earlier
//     deliveries itself;
//   - a nack means not stored: a publish whose outcome became unknown
//     (the leader changed while it was in flight, in the metadata group or
//     the queue's: internal/multiraft fails such a proposal as soon as its
//     group applies an entry of a later term, never leaving it waiting) is
//     never nacked; its
//     connection is closed with 541 INTERNAL_ERROR and the publisher
//     republishes what it had not seen confirmed;
//   - a login waits at most broker.Options.LoginTimeout for the consistent
//     read of its user, then is answered 320 CONNECTION_FORCED (not 403):
//     a member without a leader or still catching up turns clients away
//     quickly, and they retry or try another member;
//   - each member's management API (/api/nodes, "raft") and metrics
//     (warren_raft_*) show its metadata group's raft role, term, commit
//     and applied indexes and, on the leader, every member's replication
//     progress; a queue group's leader, members and the members online
//     are Node.QueueGroup's and /api/queues' (RabbitMQ's leader, members
//     and online, by node name), its term, commit index and whether this
//     member leads it are in /metrics (rabbitmq_raft_term_total,
//     rabbitmq_raft_log_commit_index, warren_raft_queue_leader; per queue
//     with per-object metrics);
//   - a confirmed delayed message of a durable x-delayed-message exchange
//     is replicated like a published one; the raft leader routes it when
//     due, once (it claims it first, with one conditional command), and
//     if the leader dies another node's broker takes over its claims
//     after DeadAfter;
//   - a durable x-message-deduplication exchange has one cache for the
//     whole cluster, and a queue's x-message-deduplication holds across
//     nodes (both are replicated records with conditional updates);
//   - a direct reply-to reply published on any member reaches its
//     requester's member (see Direct reply-to below);
//   - each stored shovel (and federation link) runs on exactly one
//     member at a time, the holder of its lease in the replicated
//     records (internal/placement, TTL Config.DeadAfter): the holder
//     stops the link a third of a TTL after its last renewal began,
//     another member takes it only after a whole TTL without a renewal,
//     so when the holder dies the link moves, and it never runs on two
//     members at once. A lease rather than "the leader runs the links",
//     because raft leadership is not fenced in time (a deposed leader
//     learns it only at its next CheckQuorum round);
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
// # Members authenticate each other
//
// The members' raft transport (Config.Raft.Transport, a
// raft.TCPTransport across machines) carries everything the cluster
// shares, so it takes only members that prove themselves (package raft,
// "Members authenticate each other"): with the cluster secret
// (raft.TCPConfig.Secret), the same on every member as RabbitMQ's Erlang
// cookie, each side of a connection proves it holds it, without sending
// it, before anything is read, and every frame after is sealed; or with
// mutual TLS; or with neither, only through raft.TCPConfig.Insecure, which
// logs a warning. Where the secret lives is the caller's choice:
// raft.LoadSecret keeps it in the member's raft directory
// (raft.SecretFile, owner only) and generates it on a founding member's
// first start; every other member, and a member that joins later, must be
// given the same one (copy the file into its directory before its first
// start, or pass it as raft.TCPConfig.Secret), and a joining member
// without one gets raft.ErrNoSecret rather than a secret of its own that
// would shut it out. examples/server does this with -cluster-secret-file
// and -raft-insecure. Every raft message is checked before raft steps it
// (sender, bounds, type), so a forged packet cannot stop the cluster.
//
// # Direct reply-to
//
// A requester's reply name says which member holds it:
// amq.rabbitmq.reply-to.<raft id>.<token>, the token 128 random bits, so a
// name cannot be guessed (RabbitMQ 3.13 and 4.x encode the requester's
// channel pid, whose node part is a hash of the node name, and a random
// key, in the same place). A member that gets a reply to another member's
// name forwards it (replyRouter, the broker's peer.Forwarder) as a
// raft.Message: the members' own traffic, which the raft transport carries
// beside raft's (TCP: over a connection of its own per peer, authenticated
// like raft's), so forwarding needs no second listener, secret or
// certificate and never delays raft's appends or heartbeats. A member
// takes such a message only from a member it knows, as the transport
// authenticated it. The raft log was the alternative
// and is not used: a reply would cost a quorum round trip and an fsync on
// every member, and would be replicated to members that have nothing to
// do with it, for a message RabbitMQ keeps in memory only.
//
// Each member has a bounded queue to every other member (4096 replies, 16
// MiB; one larger reply goes alone) drained by a sender goroutine, so a
// publisher only queues; past the bound a reply is dropped, and a
// mandatory one returned, rather than held. The owner hands a reply to the
// requester's channel under the channel's own bound for local replies
// (dropped when its connection's outbox is full), so a flood of replies to
// a slow requester holds no more memory than local ones do.
//
// Semantics: a reply is not replicated or persisted (as in RabbitMQ), so a
// reply whose owner is down is lost. A non-mandatory reply, and every reply
// under the 4.2 and 4.3 profiles (which route a mandatory reply without
// checking the requester), is confirmed at once: RabbitMQ 3.13's
// rabbit_exchange:route hands a reply to the requester's channel process
// without waiting (delegate, no result), so its confirm does not wait
// either. A mandatory reply under 3.13 to 4.1, whose basic.return depends
// on the outcome, waits for the owner's answer, at most
// Config.ReplyTimeout: no answer (the owner is down, cut off, or late)
// counts as unroutable, and it is returned 312 NO_ROUTE before its
// confirm. queue.declare of another member's reply name asks the owner the
// same way. A transport that does not implement raft.Messenger carries no
// replies: then only a reply published on the requester's member reaches
// it.
//
// Each Node starts one supervisor goroutine, stopped by Stop. It samples
// leadership every Config.PollInterval: it starts the broker once the
// member knows a leader (broker.New writes to the group), pauses it as
// above, and, on the leader, records which members it hears from. Its
// reply router runs a receiver, a membership refresher and one sender per
// member it forwards to, stopped by Stop after the broker closed.
package cluster
