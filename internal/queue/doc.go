// Package queue is the queue runtime: one actor goroutine per queue that
// owns the queue's ready cursor, its consumers and its unsettled
// deliveries, and talks to the three stores (storage.ShardStore for the
// messages, meta.Cursors for the shared cursor, unacked.Index for claimed
// messages) in batches.
//
// # Concurrency and ownership
//
// Start recovers a queue; its actor's goroutine runs while the queue has
// work (see "Lifecycle"). Every exported method of Queue is safe from any
// goroutine: it posts an op to the actor's mailbox
// (a full mailbox, maxMailbox ops, blocks the caller: that is the
// publishers' back-pressure) and, for calls with a result, waits for the
// reply. The read-only inspections (inspect.go: Peek, Outstanding, Usage,
// Idle) give up on either wait when their context ends. The mailbox
// (mailbox.go) is a list of chunks from pools all queues share (a 2-op
// chunk first, 32-op ones after it), taken whole by the actor at each
// step, so an idle queue holds no mailbox memory and one sent a single op
// holds 2 ops' worth; a stopped actor lets go of everything it cached (a
// channel holding an unacked delivery of a deleted queue keeps only the
// Queue struct reachable). Other actors and timers post to a second,
// unbounded inbox instead (inbox.go), so an actor never waits on
// another; each step handles the mailbox, then the inbox, so an op that
// must keep its place among the publishes sent after it (SetArgs) goes
// to the mailbox, without waiting for room. Credit is shared between the actor (Acquire) and the channel
// that settles (Release) and is lock-free.
//
// The queue's state has one owner at a time: whoever holds its state
// token (owner.go). Start holds it while it recovers; the actor takes it
// for each step and gives it up when it sleeps or exits. Get and AckGot (the ack
// of a got message) may take it from the sleeping actor when nothing is
// queued ahead of them and no commit is in flight, and then run their op,
// and what follows every step (settles, commit, dispatch), on the
// caller's goroutine: a basic.get round trip then wakes no thread for the
// queue, which cut its broker CPU by a third on a 2-core machine
// (docs/performance.md). The token is a mutex, so every hand-off is a
// happens-before edge; each step's entry points panic when nobody holds
// it, and TestOwnershipHandOff runs the hand-off under -race. Shared
// queues never hand off. Receiver.Deliver, Receiver.Cancelled and
// Confirmer.Confirm run on the holder's goroutine, the actor's or a Get
// or AckGot caller's; they must not wait on the queue, and those callers
// must hold no lock a Deliver could take.
//
// # Lifecycle
//
// A queue is an actor, not a goroutine: its goroutine (run, actor.go)
// exists only while the queue has work, so 100,000 idle queues keep no
// goroutine and no stack (a step through the stores' read paths may grow
// one to tens of KiB, which a parked goroutine kept).
//
//   - Start starts none. The first Kick starts it: every send into an
//     empty mailbox, every post to the inbox (dead-lettered copies, their
//     answers, timer firings), a channel that freed credit or write room,
//     an observed change (shared mode), StopAll. Get and AckGot that run
//     in place start one too, to trim what they left once idle.
//   - It exits when a whole idle period (idleAfter, 500 ms) passed with no
//     step of its own or in place, no commit in flight (it waits for the
//     committer's outcome) and no retry armed (it waits for the retry
//     timer). A queue sent work more often than that keeps its goroutine,
//     so a busy queue pays no goroutine start per message. Before it
//     exits it trims what only traffic needed: empty maps, the record
//     cache ahead of the cursor (read again from the shard), the delivery
//     slab when nothing is out, the batch and scratch slices.
//   - The timers need no goroutine: TTL, x-expires, delayed retry and a
//     stream's x-max-age run on Config.Clock and post to the inbox, which
//     kicks. Consumers waiting for credit or room need none: whoever frees
//     it kicks.
//   - Exactly one goroutine at a time: running says one exists; Kick sends
//     its signal and then starts one unless running is set, and the
//     exiting goroutine clears running and then looks for a signal, taking
//     it back (or handing it to the goroutine a Kick just started), so no
//     wake-up is lost and no two actors run (enterActor panics if they
//     would; TestActorStartExitRace hammers it under -race). Whoever holds
//     the state token owns the state as before; the goroutine takes it per
//     step like any holder.
//   - A stopped or deleted queue's goroutine keeps the token and running
//     for good: later Kicks start nothing, and Done is closed.
//   - Reading a queue need not wake it: every step leaves its counts in
//     atomics, which Counts reads (the broker's rate sampler and
//     management overview do, every few seconds, for every queue), and
//     going idle leaves Usage's memory estimate, which Sampled adds (the
//     management API's queues and the Prometheus metrics). Stats, Usage
//     and Peek are ops: exact, and they start the actor.
//
// Shared (cluster) queues follow the same lifecycle: they wait on observed
// changes, and Observe kicks.
//
// # Claiming
//
// How messages are taken from the stores is the one thing a single-node
// queue and a shared (cluster) queue do differently, and Start chooses it
// once (claimer.go): localClaimer, whose cursor and returned set are this
// actor's alone (a claim is an index write, then a cursor CAS that cannot
// lose; the ready count from the cursor is a counter), or sharedClaimer
// for Config.Shared (a claim is one unacked.Claimer claim that another
// broker may win; the ready count is the tail minus the cursor; see
// "Shared mode"). Both implement one claimer interface: recovery, commit,
// catching up with other brokers, what a lost claim does, appends and
// recounts, holding messages being dead-lettered, returning a dead
// broker's deliveries, and purge. Dispatch, get, settling and the
// features are written once against it.
//
// # What it promises
//
//   - Claims follow the design's order of writes: index entries first
//     (Index.Put), then the cursor (CompareAndSwapOffset), then, for no-ack
//     deliveries, the deletes. A batch of consumer deliveries is one claim;
//     a basic.get is one. A crash anywhere leaves duplicates, never a loss.
//   - Settle (settle.go) takes an Outcome. Ack deletes the record, then
//     the index entry. Reject discards the same way, or dead-letters (see
//     Features).
//   - Requeue is in place and idempotent: the entry flips to Returned in one
//     write and the offset joins the returned set, which is served, in
//     offset order, before the cursor, with redelivered=true. A Ref names
//     one delivery; settling with a stale Ref (the message was requeued or
//     settled meanwhile) does nothing, so whoever settles first owns the
//     message. Every requeue path (nack, reject, recover, channel and
//     connection close, the scanner's RequeueEntries) goes through it. A
//     caller that requeues and then frees the delivery's prefetch credit
//     gets that credit spent on the requeued message: dispatch yields to a
//     requeue still in the mailbox.
//   - A publish is confirmed once its record is stored; one Confirm call
//     carries every sequence number of one store batch. A batch holding a
//     persistent record on a store that syncs (storage.Syncer) is appended
//     by a short-lived committer goroutine, one batch at a time, so the
//     actor goes on settling and delivering while the sync runs; the
//     batch becomes ready, and is confirmed, only when Append returns, so
//     nothing is delivered before it is durable. Every op other than a
//     publish or an ack waits for that commit first. Acks are gathered
//     over one mailbox drain and settled with one record delete and one
//     index delete, one write for both when the shard store offers it
//     (storage/pebble's Store with its Index on the same DB: the two
//     then go together or not at all). A failed Append
//     confirms with the error (basic.nack) and the ready count is taken
//     from the shard again, since the records may have been stored.
//   - Store errors never lose work: a failed claim is undone and retried;
//     an ack, an index delete or a requeue that failed stays with the
//     actor and is redone every retryAfter until it succeeds.
//   - Stop stops the actor without touching the stores, after applying the
//     publishes, acks, rejects and requeues already in its mailbox.
//     StopAll stops a vhost's queues together (broker shutdown): all
//     mailboxes are drained first, then the queues keep serving their
//     inboxes until every dead-lettering in flight among them (their
//     Group) has stored its copy and deleted its source, and only then do
//     they stop. A copy posted to a queue that stopped (not deleted) is
//     refused and the source keeps the message; a source stopped before
//     its target's answer keeps record and entry. So a graceful stop
//     leaves each dead-lettered message in exactly one queue, and the
//     write order holds even where stopGrace cuts it short (a duplicate,
//     the source's copy redelivered, never a loss). Delete removes the
//     queue's records, index entries and shard.
//   - Start returns what an earlier run left in place: every index entry
//     below the cursor becomes Returned (redelivered=true), entries at or
//     beyond it never committed and are dropped, records below the cursor
//     without an entry (no-ack deliveries whose delete was lost) are
//     deleted, and DropTransient removes non-persistent records (RabbitMQ's
//     durable queues drop transient messages at restart), through the
//     store's storage.TransientDropper when it has one, so a deep queue
//     starts without reading its backlog. Purge likewise deletes from the
//     cursor on through the store's storage.Purger when it has one, and
//     reads the records to learn their offsets only when it has not.
//
// # Features (RabbitMQ 3.13 semantics)
//
// Config.Features carries the queue's parsed x-arguments (ParseArgs, over
// internal/queueargs' table: wrong types and ranges are ArgErrors, 406,
// stream 540), with the vhost's
// policies applied (internal/policy), and hooks into the vhost: the
// dead-letter router (and holder: a delayed exchange holds a copy rather
// than route it; the source deletes its message once the copy is stored)
// and the x-expires deletion. SetArgs replaces the
// settings live when a policy changes (policy.go): an op like any other,
// so the features keep reading their settings from the actor's state.
//
//   - Time: every timestamp and timer reads Config.Clock (clock.Real, or a
//     clock.Fake in tests: TTLs are tested by advancing it).
//   - TTL: x-message-ttl and the expiration property (the lower wins) set
//     Record.ExpiresAt, counted from when the queue accepted the publish
//     (Publish stamps it on the publisher's goroutine). The expiration
//     property reaches the queue as Publish's TTL argument (NoTTL when the
//     message has none): there is one publish door, not one per feature. As in classic
//     queues, only the head is checked: when a message is taken for
//     delivery or basic.get, and by a Clock timer armed for the head's
//     expiry. A message expires once its age reaches its TTL (RabbitMQ:
//     Now >= Expiry); a TTL of 0 counts from the actor step that stores
//     it and expires strictly after it, so it reaches a consumer that can
//     take it in that step and expires otherwise. x-message-ttl,
//     x-expires and the expiration property are at most MaxExpiry
//     (2^32-1 ms, RabbitMQ's limit): larger ones are refused with 406 at
//     queue.declare or basic.publish, never clamped, so no deadline
//     overflows.
//   - x-expires: a timer armed while the queue has no consumer and
//     re-armed by consume, cancel, basic.get and redeclaration (Touch);
//     when it fires the vhost asks Unused and deletes the queue.
//   - Dead-lettering (reasons rejected, expired, maxlen, delivery_limit):
//     the copy gets DeadLetterProperties (x-death, x-first-/x-last-death-*,
//     expiration moved to original-expiration; with
//     Features.IgnoreClientDeaths, the 4.x profiles, a client-published
//     message's own x-death is replaced, not counted) and is routed through
//     x-dead-letter-exchange with x-dead-letter-routing-key or the original
//     key; target queues that would close an automatic cycle
//     (IsDeadLetterCycle) are skipped, and with no target (missing
//     exchange, no binding) the message is dropped. Order of writes: the
//     source owns the message (an index entry: messages taken from the
//     cursor are claimed with a Returned entry first) and keeps it in a
//     "leaving" state — neither ready nor out — until every target has
//     stored the copy; only then are its record and entry deleted. A crash
//     in between returns it at restart: a duplicate, never a loss. A
//     target that refuses the copy because it is full drops it (RabbitMQ's
//     at-most-once dead-lettering); one that fails to store it puts the
//     message back to ready.
//   - Events: every message counted as dead-lettered (DeadLetterCounts,
//     so also those dropped without a dead-letter exchange) is one event
//     to Config.Events: MessageExpired for reason expired,
//     MessageDeadLettered for the others (emitDied, deadletter.go). One
//     atomic load while nobody subscribed.
//   - Actors never wait on each other: copies and the targets' answers
//     travel through each queue's unbounded inbox (a mutex-guarded slice
//     plus the kick channel), drained by the actor with its mailbox; timer
//     firings use it too.
//   - Length limits: x-max-length and x-max-length-bytes count ready
//     messages only (bodies for bytes). drop-head dead-letters the oldest
//     (maxlen) after the append; reject-publish confirms the refused
//     publishes with ErrRejected (basic.nack); reject-publish-dlx also
//     dead-letters them.
//   - Delivery limits: the quorum kind (quorum.go) keeps classic
//     semantics here but adds x-delivery-count (earlier deliveries) to
//     redeliveries, re-encoding properties only for such queues.
//     x-delivery-limit (any queue type): a message requeued after more
//     deliveries than the limit is dead-lettered with reason
//     delivery_limit, or dropped without a DLX. With
//     Features.CountFailedOnly (RabbitMQ 4.3 quorum queues) only failed
//     returns count (Requeue: reject, a lost channel; not Return: nack),
//     x-delivery-count says how many, and x-acquired-count how many
//     deliveries there were; the failed count is stored in the message's
//     index entry (unacked.Entry.Failed) and survives a restart, a
//     delivery out at the restart counting as failed.
//   - Delayed retry (Args.DelayedRetry, 4.3 quorum queues, delayed.go): a
//     return of the chosen kind is held, neither ready nor out, for
//     min(min × failed count, max), then joins the returned set; the
//     hold's end is stored in its Returned entry (HeldUntil), so a restart
//     holds it until the same time.
//   - Consumers: x-priority on basic.consume (the highest priority with
//     credit is served, round-robin within a level); x-single-active-consumer
//     serves only the first registered consumer until it goes. They are
//     kept in a ring per priority plus a map by owner and tag
//     (consumers.go), so basic.consume and basic.cancel cost the same with
//     fifty thousand consumers as with one.
//   - Message priorities (x-max-priority, priority.go): the queue claims
//     each published record at once into the returned set (an index entry
//     in state Returned, never delivered) and serves that set by priority,
//     highest first, FIFO within a priority, priorities above the maximum
//     capped at it. The log, the shared cursor and recovery stay as they
//     are; only priority queues pay the extra index write per message.
//     Features.QuorumPriorities gives quorum queues RabbitMQ 4.0-4.2's two
//     levels (2 high : 1 normal) or 4.3's 32 strict levels, messages
//     returned by consumers served first. The kind orders the returned
//     set (cmpReturned, nextReturned); priority.go keeps the claims.
//
// # Streams
//
// A queue whose Args say Stream (x-queue-type stream) is a log its
// consumers read, each at its own offset, without taking anything
// (stream.go, stream_consume.go, stream_track.go; docs/streams.md). The
// queue's kind (kind.go) is chosen once at Start, as its claimer is:
// classic (classic.go) or quorum (quorum.go) for a message queue, the
// streamState for a stream (stream_kind.go), and the actor asks it
// wherever they differ (dispatch, the ops a stream runs its own way,
// peek, counts, live settings, observed changes, trim, drain and
// release; for the message kinds, how deliveries are counted, what a
// redelivery carries and the priority order) rather than testing which
// it has or the profile's flags. Start gives a stream a streamClaimer, which
// claims nothing: no cursor moves and no index entry is written, so
// recovery, the scanner and the shared cursor never see it. Publishes take the ordinary path (gathered, committed,
// confirmed once stored), stored persistent whatever their delivery mode.
// dispatch hands each consumer (a streamReader: an offset, a read-ahead
// buffer of at most readAhead records, its filter) the records from its
// offset up to the stream's tail, a bounded round per consumer in turn,
// with the x-stream-offset header spliced into the properties; settles
// only give credit back (the channel does), and an ack moves a tracked
// consumer's saved offset. Retention removes whole segments (runs of
// offsets up to the segment size the stream was created with, stored as
// a config record beside its tracked offsets, rebuilt at Start by reading
// the log) from the head, by size after appends and by age on a Clock timer;
// a reader behind the head resumes at it; SetArgs changes the retention
// limits live (policies, stream_policy.go). In shared mode every broker's
// actor serves its own readers: Observe's ChangeAppended moves its tail,
// and each broker applies retention itself (the deletes are idempotent).
// Get and Purge answer ErrNotSupported.
//
// # Shared mode
//
// With Config.Shared several brokers (one per cluster node) run an actor
// for the same queue on one replicated set of stores, and any of them
// serves it (a cluster). Stores.Index must implement unacked.Claimer (Start
// fails otherwise), and the broker passes every meta.Change its store's
// meta.ChangeFeed applies to Observe. Non-durable and exclusive queues are
// never shared. All of this is sharedClaimer (shared.go); the single-node
// queue calls none of it.
//
//   - Observe is safe from any goroutine and never blocks: appends and
//     cursor moves are kept as atomic maxima, requeues and takes as the
//     latest change per offset, and the actor is kicked. The actor applies
//     them before it dispatches and before it answers any call, so Stats,
//     Get and Purge see every change observed before the call.
//   - Ready from the cursor is tail - cursor: records at and beyond the
//     cursor are dense. tail grows with this broker's appends and
//     ChangeAppended, the cursor with its claims and ChangeCursor; both
//     keep the maximum seen. When another broker moves the cursor, the
//     records cached ahead of it are dropped and read again.
//   - The returned set is a pool all brokers share: ChangeReturned adds an
//     offset (with its delivery count; the record is read when it is
//     taken, and forgotten when it is gone), ChangeTaken removes it, unless
//     it is one of this broker's own deliveries.
//   - Every claim is one Claimer.Claim: the cursor move (From must still
//     be the cursor), the returned messages taken (Taken: they must still
//     be Returned) and the new entries, all or nothing. That covers
//     consumer batches, basic.get (no-ack ones included: taken with an
//     entry, then deleted as in single-node mode), the priority promote,
//     TTL and max-length head removal, and Purge. A claim that loses
//     (ok=false) writes nothing: the actor reads the cursor again, drops
//     its cache, rebuilds the returned set from the index's Returned
//     entries (less its own deliveries) when the claim took any, gives the
//     batch and its credit back, and tries again (at most maxLostClaims
//     times in a row, then the retry timer). So no message is delivered by
//     two brokers at once.
//   - Requeue stays in place: the entry is written Returned, which every
//     other broker sees as ChangeReturned and may serve (redelivered).
//     RequeueEntries of entries this actor does not hold (the scanner
//     returning a dead broker's deliveries) writes each one Returned with
//     its delivery count, if the index still holds exactly that delivery.
//   - Start reads the cursor and counts the tail (cursor plus the live
//     records at and beyond it). Entries of this broker from another
//     incarnation are written Returned; every Returned entry joins the
//     pool; other brokers' Delivered entries are theirs. Nothing is
//     deleted: no stale entries, no orphan records, no transient drop
//     (other brokers may be claiming at that very moment).
//   - Dead-lettering owns a message through an entry Delivered to this
//     broker (Connection ""), not Returned, which would let other brokers
//     take it; returned messages are taken by a claim first. A target that
//     fails to store the copy puts the message back in the pool (Returned).
//   - Purge takes, with one claim, everything this broker sees as ready
//     (the cursor moves to its tail, the pool is taken), then deletes the
//     records and entries. Other brokers catch up through ChangeCursor and
//     ChangeTaken; a message appended elsewhere that this broker had not
//     seen yet stays. Delete removes the queue's data for every broker;
//     the broker stops the other nodes' actors when the queue's topology
//     change reaches them.
//   - Stats.Ready is tail - cursor plus the pool, as this broker sees them
//     (a change in flight is counted once it is observed); Unacked and
//     Consumers are this broker's own.
//   - Per broker: consumers and their priorities, exclusive consumers and
//     x-single-active-consumer (each broker has its own active consumer),
//     the x-expires timer and Unused (a broker sees only its own
//     consumers: the vhost must not delete a shared queue on one broker's
//     word), the TTL timer (any broker may expire the head; the claim
//     makes it happen once), and the delivery-limit check (the count
//     travels in the entries, so it holds across brokers).
//   - Shared view: x-max-length counts tail - cursor plus the pool;
//     x-max-length-bytes sums the bodies of those messages, read again
//     from the shard after each batch of observed changes (a cost only
//     such queues pay); reject-publish and drop-head act on that view. A
//     priority queue promotes the records at the cursor into the pool
//     with Returned entries, so every broker serves them by priority (it
//     reads the record of each message it learns of, for its priority).
//
// # Cost
//
// The steady state allocates nothing per message in the actor: deliveries
// come from slabs with a free list, claims and settles use scratch slices,
// and Settle of one Ref sends it without a slice. A queue that uses no
// feature pays a few predictable branches per step, an atomic load of the
// inbox length, and one interface call to its claimer per claim and per
// stored batch.
package queue
