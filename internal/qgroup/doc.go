// Package qgroup keeps each replicated queue of a cluster in a raft group
// of its own, on one internal/multiraft engine per member, beside the
// metadata group (meta/raft) that keeps everything else.
//
// A Manager is one member's half. When a durable quorum queue or stream
// is declared (Declare, called before its declaration is written), it
// allocates a group id and writes the queue's placement — group, voters
// and learners — to the metadata group's records with compare-and-swap,
// so two members declaring the same queue at once agree on one group.
// The voters are x-quorum-initial-group-size of the members
// (x-initial-cluster-size for a stream; qplace.DefaultSize, 3, when
// unset, capped at the member count), chosen by qplace.Place: the
// declaring member, then the members holding the fewest voter replicas.
// The declaring member campaigns at once; under the balanced locator
// (qplace.ResolveLocator: the applying policy's queue-leader-locator,
// else x-queue-leader-locator, else Config.Locator) it then hands the
// leadership to the voter leading the fewest groups, else it leads
// (client-local, RabbitMQ's default). Declare returns once the group is
// led by that member (at most a few seconds), so the queue's first
// traffic does not race its first election and hand-over, in which raft
// drops proposals forwarded to a leader handing over and their outcome
// becomes unknown. Every other member holds the group
// as a learner: it receives and applies the log but counts for no quorum,
// so any member serves any queue from its own copy. Every member follows
// the records (the metadata group's change feed, and a whole read every
// few seconds for deletions) and creates or removes its replicas.
//
// The group's state machine keeps the queue's records and unacked index
// on disk, in the group's range of the engine's Pebble database
// (multiraft.Data), and in memory only its counters (next offset, cursor,
// live records, lowest live offset) and its unacked entries, which the
// consumers' prefetch bounds: a backlog costs disk, not heap, and a
// checkpoint copies none of it. Reads (records from an offset, counts,
// the cursor, entries) see what this member applied; the change feed
// hears of an apply once its writes are readable.
// Manager.Shards, Manager.Index and the Manager's cursor methods are the
// storage.ShardStore, unacked.Index/unacked.Claimer and meta.Cursors a
// broker in shared mode uses: a queue with a group goes to it, every
// other queue (classic durable queues, and queues declared before groups
// were turned on) to the Fallback, the metadata group's own stores.
// Manager.Watch is the groups' half of the change feed.
//
// It promises what meta/raft promises for the queues it holds: a write
// returns once committed by a quorum of the queue's voters (each synced
// it) and applied on this member; an error after which it may still have
// committed (the leader changed, the proposal was lost, the engine
// closed) matches storage.ErrOutcomeUnknown; claims and cursor moves are
// conditional commands decided in the group's log order, so two members
// never claim the same message. A proposal made on a member that does not
// lead the group is forwarded to its leader by raft, over the engine's
// link; nothing of a queue's traffic goes through the metadata group.
package qgroup
