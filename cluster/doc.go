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
//     scanner (peer.Peers.Alive, attached to the broker's Options) writes that member's deliveries
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
//   - a direct reply-to reply published on any member reaches its
//     requester's member (see Direct reply-to below);
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
