// Package delayed holds the messages of x-delayed-message exchanges until
// they are due, and routes them then. It is Warren's built-in replacement
// for rabbitmq-delayed-message-exchange (compatible with its 4.0 release:
// the x-delayed-type argument, the x-delay header, see ParseDelay).
//
// # Storage
//
// A Store keeps held messages keyed by (due time, sequence number), so
// the earliest is found by one seek however many are held. Pebble keeps
// them in the broker's database under their own first byte ('d'), with a
// second key per message by exchange for counting, peeking and deleting
// an exchange's messages; in memory it keeps only per-exchange counts and
// a low-water key, so a million held messages cost disk, not heap.
// Memory is the store of non-durable exchanges and of brokers without a
// data directory. Replicated is the store of durable exchanges in shared
// mode (a cluster): records in the shared store (meta.Records), written
// through its consensus before the publish is confirmed; the meta leader
// claims due messages with a conditional update, so one broker routes
// each (see Replicated for who routes and what a failure does), and
// Service follows the store's change feed to hear of messages other
// brokers hold.
//
// # Service and Scheduler
//
// Service.Hold queues a message to a writer goroutine, which stores
// batches with one Put (synced when any message of the batch must be:
// persistent, in a durable exchange) and then calls each hold's done: the
// broker confirms the publish there, so a confirmed delayed message
// survives a crash. The Scheduler is the broker's one timer: a goroutine
// that reads the due messages by Options.Clock (tests move a clock.Fake
// and see messages routed without sleeping), hands them to the Router,
// and deletes them once every queue they reached stored them. It routes
// the next batch while up to maxInflight earlier ones wait for their
// queues, so a slow fsync delays deletions, not the next messages. Write
// order: a message reaches its queues before it is deleted here, so a
// crash in between routes it again (a duplicate, never a loss).
//
// A message is routed when due against the bindings of that moment
// (vhost.RouteDelayed); one whose exchange is gone, or that matches no
// binding, is dropped, as the plugin's single attempt is. Hold wakes the
// scheduler when its message is due before the scheduler's timer.
//
// # Concurrency
//
// Stores are safe for concurrent use. Service.Hold may be called from any
// goroutine; done runs on the writer's. Start once; Close stops both
// goroutines and waits for them (the scheduler gives the batches in
// flight a few seconds to be stored, then leaves them to be routed again
// after a restart).
package delayed
