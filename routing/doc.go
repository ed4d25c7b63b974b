// Package routing holds one vhost's exchanges, bindings and queue names and
// decides which queues a published message reaches. It is pure: no I/O, no
// goroutines, no clock, stdlib only. The broker persists topology through
// meta.Store and rebuilds a Table from it; the Table itself is memory.
//
// # Concurrency
//
// A Table is not locked internally. The broker wraps each vhost's Table in a
// sync.RWMutex: mutations (DeclareDefaults, DeclareExchange,
// DeleteExchange, AddQueue, RemoveQueue, Bind, Unbind) under the write lock;
// Route and the queries (Exchange, Exchanges, HasQueue, Bindings,
// SourceBindings, EmptiedSources) under the read lock, from any number of
// goroutines at once. Route writes nothing shared (no lazy caches, no shared
// scratch): its scratch space is on its own stack.
//
// # Usage
//
//	t := routing.NewTable()
//	t.DeclareDefaults()                        // "" and amq.*
//	t.AddQueue("q")
//	_, err := t.Bind(routing.Binding{Source: "amq.topic",
//		Destination: routing.Destination{Name: "q"}, Key: "stock.#"})
//	queues := t.Route("amq.topic", "stock.nyse.ibm", nil, buf[:0])
//
// # Semantics (RabbitMQ's)
//
// The default exchange "" is a direct exchange with an implicit binding
// from every known queue (AddQueue) by the queue's name. It cannot be
// declared, deleted, bound or unbound (ErrDefaultExchange, 403 in the
// broker); DeclareDefaults creates it with amq.direct, amq.fanout,
// amq.topic, amq.headers and amq.match. Names starting "amq." are reserved
// (IsReserved); enforcing that is the broker's job.
//
// direct routes to the bindings whose key equals the routing key; fanout to
// every binding.
//
// topic splits keys into '.'-separated words. "*" in a binding key matches
// exactly one word, "#" zero or more. Empty words are words: "a..b" is
// three words, "a." two. As in RabbitMQ (rabbit_db_topic_exchange), the
// empty key "" is zero words, not one empty word, so binding "" matches
// only routing key "", "#" matches "" and "*" does not. The bindings form a
// trie over words with separate '*' and '#' edges; routing visits each
// (node, word) state at most once, so its cost depends on what matches, not
// on the number of bindings, and cannot go exponential on "#.#.#".
//
// headers matches the binding arguments against the message headers. The
// x-match argument picks the mode: all (default), any, all-with-x or
// any-with-x (RabbitMQ 3.10+); Bind refuses anything else
// (ErrInvalidBinding, 406). x-match itself is never compared; other
// arguments starting "x-" are compared only in the -with-x modes. An
// argument with a void (nil) value matches when the header is present,
// whatever its value. all with nothing left to compare matches every
// message; any with nothing left matches none. Values compare the way
// RabbitMQ's Erlang == does: numbers by value across types (int32 1 equals
// int64 1, and 1.0), AMQP timestamps as integer seconds, string and []byte
// by bytes; inside arrays and tables the AMQP type must match too (see
// headerValueEqual and strictEqual). Headers come in as map[string]any: an
// amqp.Table converts to it at no cost, and nested tables of any
// string-keyed map type are understood.
//
// x-consistent-hash (RabbitMQ's bundled plugin, 3.8+) reads binding keys
// as weights (integers from 1) and sends each message to one destination:
// every binding holds weight consecutive buckets in the order bindings
// were added, and jump consistent hashing of the routing key (or of the
// header or property Exchange.HashOn names) picks a bucket. Adding a
// binding moves keys only to it. At a restart the broker binds again in
// the order its metadata store lists the bindings (sorted), as RabbitMQ
// rebuilds its ring from a sorted list: keys may then move if bindings
// were added out of that order. x-modulus-hash
// (RabbitMQ 4.3's core) ignores binding keys and sends each message to
// binding hash(routing keys) mod n, the bindings sorted by destination,
// so the same bindings always route a key the same way. See hash.go.
//
// x-local-random (RabbitMQ 4.0's core) ignores routing keys and sends each
// message to one bound queue picked at random (math/rand/v2's global
// source, so Route still writes nothing shared). Bind refuses a non-empty
// key and an exchange destination (ErrInvalidBinding, RabbitMQ's texts);
// that the queue is a classic one, and local to the publisher's node, is
// the broker's to know: a Table is one node's. See local_random.go.
//
// Bindings are identified by (source, destination, key, args), args
// compared by type and value, so the same queue may be bound twice with
// different arguments; binding an identical binding again is a no-op
// (Bind reports added=false). Removing a queue removes the bindings to it;
// deleting an exchange removes the bindings from and to it.
//
// Exchange-to-exchange bindings: Route follows them, reaching each exchange
// at most once per message (cycles end) and each queue at most once however
// many paths lead to it. Internal exchanges route normally; the broker
// refuses to publish to one directly (Exchange(name).Internal).
//
// Alternate exchanges follow rabbit_exchange:route1: every exchange reached
// whose own bindings match nothing (neither a queue nor an exchange) hands
// the message to its alternate exchange, which is routed like any other
// exchange reached, alternates of alternates included, each exchange still
// at most once. An exchange that routes only to another exchange, even one
// that then matches nothing, does not use its own alternate. A missing
// alternate is ignored.
//
// Auto-delete bookkeeping: SourceBindings counts an exchange's bindings as
// source, and EmptiedSources tells which exchanges a removal left with
// none, so the broker can delete the auto-delete ones (and repeat, since
// that removes more bindings).
package routing
