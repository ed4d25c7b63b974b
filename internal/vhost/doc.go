// Package vhost is one virtual host's topology: its exchanges, queues and
// bindings, the routing table built from them, their persistence in a
// meta.Topology, and the queue actors behind the queues. internal/session
// calls it to carry out the exchange and queue classes of AMQP 0-9-1 and to
// route each basic.publish; the broker opens one VHost per configured vhost
// and closes it at shutdown.
//
// # What it promises
//
// Every method that answers a client method returns nil or an *amqp.Error
// with RabbitMQ's reply code and reply text ("no queue 'q' in vhost '/'",
// "inequivalent arg 'durable' for queue ...") and class and method ids left
// 0 for the session to fill in. A declaration, binding or deletion is in
// the store before the method returns; the store makes durable entities
// durable (meta.Topology: a durable Put is on disk when it returns), so a
// declare-ok never precedes the disk. When the store refuses a declaration
// or a binding, the client gets 541 INTERNAL_ERROR and the vhost is as it
// was. A deletion whose store write fails is reported with 541 too, but
// the entity is already gone from the running vhost; a durable queue may
// then come back, empty, at the next start.
//
// Every door (AMQP, the direct Go channel, the management API,
// definitions) creates entities through this package, so it holds the
// limits they share (limits.go): a new exchange or queue name, or a
// binding key, is at most 255 bytes of valid UTF-8, and an argument table
// is no larger than Config.MaxArgumentsSize encoded; beyond either it is
// 406 PRECONDITION_FAILED and nothing is stored.
//
// Open rebuilds the vhost from the store: durable exchanges, durable queues
// (their actors started) and durable bindings come back; non-durable
// entities, exclusive queues and bindings that lost an end are deleted
// from the store, as RabbitMQ does at restart (but not in shared mode,
// below). A binding is durable when both its ends are.
//
// # Shared mode
//
// With Config.Shared the store is one that other brokers write too (a
// cluster's replicated store; the broker runs in shared mode when its
// meta store is a meta.ChangeFeed). Durable, non-exclusive queues are
// shared: every broker runs an actor for each, on the same stores.
// Non-durable and exclusive queues live on the broker that declared them
// (their messages are in its memory) and the others skip them; names are
// still one namespace in the store, so do not give a non-durable queue
// the name of another broker's queue. Exchanges are cluster-wide, as in
// RabbitMQ, whatever their durability. A binding is followed where both
// its ends are.
//
//   - Open deletes nothing: what looks stale may be a live broker's
//     (a non-durable exchange or queue, an exclusive queue, a binding to
//     a queue that is not here). It starts what Sync would.
//   - Sync(ctx) brings the vhost in line with the store; the broker calls
//     it on every topology change of the vhost. A shared queue that is
//     gone from the store (another broker deleted it) is stopped here
//     without touching the stores, and its consumers here are cancelled
//     (basic.cancel, as for a deleted queue). A queue deleted and declared
//     again with the same definition between two Syncs is not noticed:
//     its actor goes on with the cursor and tail it had seen.
//   - What another broker stored and Sync has not caught up with yet is
//     found all the same: a declare of a shared queue serves the stored
//     queue (and checks equivalence with it) rather than overwrite it, and
//     Queue (consume, get, purge, passive declare), DeleteQueue, Bind and
//     a passive exchange.declare look in the store before they answer
//     404. Publish routing sees only what Sync has applied.
//   - Per broker, from what this broker sees: auto-delete (the last
//     consumer here going deletes the queue for every broker), exclusive
//     consumers, and auto-delete exchanges (bindings to queues living on
//     other brokers do not keep them).
//
// # RabbitMQ's rules, as implemented
//
//   - passive declare: 404 NOT_FOUND when missing, other fields ignored;
//     405 for another connection's exclusive queue.
//   - redeclare: 406 PRECONDITION_FAILED naming the first difference, in
//     RabbitMQ's order (exchange: type, durable, auto_delete, internal,
//     alternate-exchange; queue: exclusive owner first, as 405, then durable,
//     auto_delete and the arguments RabbitMQ compares for the queue's
//     kind, in the order of internal/queueargs' table (queueargs.Compared;
//     classic and quorum: x-dead-letter-*, x-expires, x-max-length(-bytes),
//     x-max-priority, x-message-ttl, x-overflow, x-queue-mode,
//     x-queue-type, x-single-active-consumer, x-delivery-limit). Integers compare by value across widths, as
//     rabbit_misc:assert_args_equivalence does; other arguments are ignored.
//     No x-queue-type and x-queue-type "classic" are equivalent, either way
//     round (RabbitMQ 3.8 and later); quorum is equivalent to neither.
//     A vhost default queue type (SetDefaultQueueType, RabbitMQ 3.11+'s
//     default_queue_type) is written into the arguments of a durable,
//     non-exclusive, non-auto-delete queue declared without x-queue-type
//     before anything is compared or stored (settings.go), so the
//     equivalence rules see it as if the client had sent it.
//   - queue limit: a new queue beyond the vhost's max-queues limit
//     (SetQueueLimit, else Config.MaxQueues) is 406 PRECONDITION_FAILED
//     "cannot declare queue 'q': queue limit in vhost 'v' (N) is reached".
//   - unknown exchange type: 406 PRECONDITION_FAILED closing the channel,
//     checked before anything else (RabbitMQ 3.13.3 and later; 3.10 closed
//     the connection with 503 COMMAND_INVALID).
//   - version profiles (Config.Profile, profile.go): a quorum queue must
//     be durable, not exclusive, not auto-delete (406 in every version);
//     its default delivery limit (20 from 4.0), negative x-delivery-limit
//     (unlimited from 4.0), x-max-priority (refused before 4.3), and the
//     4.3 refusals (transient non-exclusive queues 541, x-queue-mode and
//     x-queue-version=1 406) come from the profile, and so do the
//     x-local-random type (4.0), the topic binding key's limit of two '#'
//     (4.3.5, 406) and where x-consumer-timeout is an argument (from 4.3
//     a quorum queue's consumer argument, from 4.3.2 its queue argument
//     too: 406 on other types, a non-negative integer, compared on
//     redeclare; CheckConsumeArgs for basic.consume).
//   - binding rules that need more than the routing table knows
//     (checkBindingLocked) are checked after both ends are found and
//     before an exclusive queue's owner, as RabbitMQ's validate_binding
//     runs: an x-local-random exchange binds classic queues only (406
//     "Queue type rabbit_quorum_queue not valid for this exchange type"),
//     with the empty key, and no exchange ("Destination not found").
//   - exchange types: besides AMQP's four and RabbitMQ 4.0's
//     x-local-random (one bound queue of this broker's, at random), the
//     types of RabbitMQ's common plugins are built in (plugins.go,
//     dedup.go, docs/exchange-types.md): x-consistent-hash, x-modulus-hash,
//     x-delayed-message (held by Config.Delayed until due, confirmed once
//     stored, never returned; dead letters with an x-delay are held too)
//     and x-message-deduplication (a fanout
//     exchange dropping messages whose x-deduplication-header it has
//     seen). Their arguments are checked on declare with the plugins'
//     406 texts, and their types compare by name on redeclare.
//   - the default exchange "" cannot be declared (not even passively),
//     deleted, bound or unbound: 403 ACCESS_REFUSED. It routes to every
//     queue by name.
//   - names starting "amq." are reserved: declaring a new such exchange, or
//     any such queue non-passively, is 403; deleting a predeclared exchange
//     is 403. Redeclaring amq.direct, amq.fanout, amq.topic, amq.headers or
//     amq.match as RabbitMQ declares them (durable) succeeds.
//   - server-named queues are "amq.gen-" and 22 random URL-safe characters.
//     ("" meaning the channel's last declared queue is the session's work.)
//   - exclusive queues belong to one connection (others get 405
//     RESOURCE_LOCKED for every operation) and are deleted by
//     ConnectionClosed; they are never durable, whatever the client asked.
//   - auto-delete queues go when their last consumer goes (ConsumerGone),
//     never before a first consumer came; auto-delete exchanges go when
//     their last binding as source goes, however it goes (unbind, queue or
//     exchange deletion, another auto-deletion), in a cascade.
//   - delete of a missing queue or exchange succeeds (RabbitMQ 3.x);
//     queue.delete if-empty refuses a queue with ready messages (406 "not
//     empty", checked first), if-unused one with consumers (406 "in use");
//     exchange.delete if-unused refuses an exchange that is the source of a
//     binding.
//   - binding to a missing exchange or queue is 404, the source reported
//     first; unbinding from or of a missing one succeeds (nothing to
//     remove); binding twice is binding once.
//   - alternate-exchange and x-dead-letter-exchange must be long strings
//     when an entity is created (406 "invalid type"); the exchange they
//     name need not exist.
//   - publishing to an internal exchange is 403; reaching it through an
//     exchange-to-exchange binding or as an alternate exchange is not.
//     Each queue gets a message once however many paths lead to it
//     (package routing).
//   - sender-selected distribution (SenderSelected, RouteCC): the CC and
//     BCC headers' long strings are further routing keys for the publish,
//     through the same exchange, whatever its type; BCC is removed before
//     delivery; a header that is not an array is 406 "invalid message"
//     (RabbitMQ 3.13's rabbit_basic:header_routes, kept by 4.x).
//   - Direct reply-to names (amq.rabbitmq.reply-to.<token>, or
//     amq.rabbitmq.reply-to.<tag>.<token> with Config.ReplyTag) are a
//     registry of their own (replyto.go), not queues: the session delivers
//     a reply to one without routing it, and nothing else sees them. A
//     name with another node's tag goes to Config.Replies.
//   - Policies (policy.go, internal/policy): the vhost keeps its policy
//     set; a queue starts with its declared arguments merged with the
//     policy and operator policy that match it, and SetPolicies hands
//     every queue whose settings change its new ones (queue.SetArgs) and
//     every exchange declared without alternate-exchange the policy's.
//     Nothing is looked up per message.
//
// # Deviations from RabbitMQ
//
//   - Queue arguments other than the two exchange names are stored and
//     compared but not validated (RabbitMQ refuses, say, a negative
//     x-message-ttl with 406); which of them take effect is up to the queue
//     runtime. x-queue-type stream makes a stream (package queue; a stream
//     must be durable and neither exclusive nor auto-delete, 406 otherwise,
//     stream.go); any other queue is a classic one, whatever x-queue-type
//     says.
//   - Unbinding another connection's exclusive queue is 405 even when the
//     binding does not exist (RabbitMQ checks only existing bindings).
//   - if-empty and if-unused are checked, then the queue is deleted: a
//     consumer that attaches in between is cancelled with the queue (the
//     client is told with basic.cancel when it asked for
//     consumer_cancel_notify). RabbitMQ checks and deletes inside the queue
//     process. Auto-delete re-checks the consumer count under the topology
//     lock, with the same residual window.
//
// # Locking
//
// Every method is safe for concurrent use. Two locks, taken in this order:
//
//   - topo serializes topology changes (declare, delete, bind, unbind,
//     auto-delete, exclusive-queue cleanup). It is held across the store's
//     writes and the queue actor calls a change makes (start, stats,
//     delete), so each change, persistence included, is atomic to the
//     others: a queue deleted and redeclared under the same name never has
//     the old deletion remove the new queue's shard or metadata. A queue
//     deletion writes the queue's record and its bindings' unsynced
//     (meta.DeferSync) and syncs once, when the store is a meta.Syncer.
//     A declaration writes its queue unsynced under topo and syncs after
//     releasing it, before it returns, so concurrent declarations share
//     fsyncs.
//   - mu (read-write) guards the maps and the routing table and is held for
//     memory operations only. Route, Queue, Queues, ExchangeExists and the
//     read-only calls in inspect.go take it shared, so publishing never
//     waits for a declaration's fsync, only for a map update. (In shared
//     mode, Queue takes topo when the queue is not here, to look in the
//     store.)
//
// Because topo holders wait for queue actors, a queue actor must never call
// a method that takes topo (DeclareExchange, DeleteExchange, Bind, Unbind,
// DeclareQueue, DeleteQueue, ConsumerGone, ConnectionClosed); it may Route
// (dead-lettering) and look things up. mu is never held while a queue
// actor is called.
//
// # Usage
//
//	v, err := vhost.Open(ctx, vhost.Config{Name: "/", Store: metaStore, StartQueue: start})
//	q, err := v.DeclareQueue(ctx, connID, &amqp.QueueDeclare{Queue: "jobs", Durable: true})
//	err = v.Bind(ctx, connID, routing.Binding{Source: "amq.topic",
//		Destination: routing.Destination{Name: "jobs"}, Key: "jobs.#"})
//	names, queues, err := v.Route("amq.topic", "jobs.new", props, names[:0], queues[:0])
//	v.ConnectionClosed(ctx, connID) // its exclusive queues go
//	v.Sync(ctx)                     // shared mode: follow the other brokers
//	v.Close()                       // stops the actors, deletes nothing
package vhost
