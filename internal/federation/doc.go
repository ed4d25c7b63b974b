// Package federation is RabbitMQ's federation plugin's configuration:
// the federation-upstream and federation-upstream-set runtime
// parameters, checked with RabbitMQ's texts, and the resolution of a
// policy's federation-upstream or federation-upstream-set key into the
// upstreams a federated exchange or queue links to, with each upstream's
// settings and RabbitMQ's defaults.
//
// What was copied, from RabbitMQ 3.10.8 (rabbit_federation_parameters,
// rabbit_federation_upstream, rabbit_parameter_validation; 4.x keeps the
// same keys, texts and defaults):
//
//   - A federation-upstream value is an object with a mandatory uri (a
//     string or a list of strings, each an amqp:// or amqps:// URI) and
//     the optional keys exchange, queue, consumer-tag, ha-policy (strings;
//     ha-policy is accepted and ignored), prefetch-count, reconnect-delay,
//     max-hops, expires, message-ttl (numbers), trust-user-id,
//     bind-nowait (booleans), ack-mode (on-confirm, on-publish, no-ack),
//     resource-cleanup-mode (default, never) and channel-use-mode
//     (multiple, single). Any other key is "Unrecognised terms".
//   - A federation-upstream-set value is a list of objects, each naming
//     an upstream (mandatory) and overriding any of the keys above.
//   - Problems are listed as rabbit_parameter_validation:proplist lists
//     them: the last key's first, unrecognised keys before all.
//   - Defaults (from_upstream_or_set): prefetch-count 1000,
//     reconnect-delay 5 s, max-hops 1, ack-mode on-confirm, trust-user-id
//     false, exchange and queue the local object's name, consumer-tag
//     "federation-link-" and the upstream's name, no expires and no
//     message-ttl. The set "all" is every upstream of the vhost.
//
// Parse functions take JSON's types (a value decoded with UseNumber, or
// plain float64 numbers) and never panic on any input (FuzzParseUpstream).
//
// The links (link.go, exchange.go, queue.go) copy RabbitMQ 3.10.8's
// rabbit_federation_exchange_link and rabbit_federation_queue_link: the
// upstream queue and internal exchange, the bindings kept in step with
// the local exchange's, x-received-from and x-bound-from with max-hops
// (headers.go), and a queue link that consumes only while the local
// queue has demand. The links follow the host's events (Host.Watch:
// binding changes, the queue's demand notices) and re-read every
// Config.Reread as a safety net. A Supervisor (one goroutine) owns them: it starts,
// restarts and stops links as policies and upstreams change, runs each
// on one broker of a cluster through a Placer, and reports their Status.
// docs/federation.md says what runs and what does not yet.
package federation
