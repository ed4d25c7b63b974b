// Package dedup is the deduplication cache behind x-message-deduplication
// exchanges, compatible with rabbitmq-message-deduplication (0.6, for
// RabbitMQ 3.13): a bounded set of x-deduplication-header values, each
// with an optional expiry, checked and recorded in one step.
//
// What it promises:
//
//   - Seen(key, ttl) reports whether key is in the cache and not expired;
//     if not, it records it (expiring ttl after now by the broker's clock,
//     or never when ttl is 0) in the same step, under the cache's lock, so
//     two concurrent publishes of one key let exactly one through.
//   - A cache holds at most Size entries: recording one more evicts the
//     entry recorded first (the plugin evicts an unspecified one; its
//     author calls FIFO "preferable"). Expired entries are dropped when
//     looked up and evicted like any other.
//   - A cache on Pebble (durable exchanges of a broker with a data
//     directory) survives restarts. Its writes are not synced one by one:
//     they precede, in the database's one write-ahead log, the message
//     the publish stores next, so once a persistent message is confirmed
//     its key is on disk too. A key whose message was routed nowhere, or
//     only to non-durable queues, may be lost by a crash, like the
//     message.
//
// In shared mode (a cluster) a durable exchange's cache is records of the
// shared store (OpenReplicated, meta.Records): every broker checks and
// records a key with one conditional update of the replicated records, so
// the cache is one for the whole cluster, survives any node, and two
// publishes of one key on two nodes at once let exactly one through. Size
// eviction there is by insertion time (each broker's clock, made
// increasing per broker), and the count may pass Size by the number of
// brokers recording at the same instant until the next record evicts.
//
// SharedQueueStore is QueueStore in shared mode: the keys in the queue
// are records of the shared store, reserved by a conditional update at
// Admit and deleted with their message by whichever broker deletes it.
//
// QueueStore is the queue argument's half (x-message-deduplication: true):
// a queue's shard store that knows the key of every message in the queue,
// from its Append to its delete, and Admit, which the queue's actor asks
// just before appending a batch.
//
// Caches and QueueStores are safe for concurrent use.
package dedup
