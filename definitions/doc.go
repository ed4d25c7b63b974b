// Package definitions reads, writes, exports and imports RabbitMQ's
// definitions file (definitions.json, the format of RabbitMQ 3.10's
// rabbitmqctl export_definitions and GET /api/definitions, with 3.13's
// vhost metadata and limits): vhosts, users with salted password hashes,
// permissions, topic permissions, policies, operator policies (a
// "parameters" entry of component operator_policy, as RabbitMQ exports
// them), exchanges, queues and bindings. Messages are not part of it.
//
// File and its parts are the JSON format; Read parses a file strictly (one
// JSON value, whole numbers kept as int64). Export and Import move a File
// out of and into a broker through the small Broker interface, which the
// root package's Broker implements (its Admin's Export and
// Import methods call them), so the rules live here once:
//
//   - Export leaves out what RabbitMQ leaves out: exclusive queues, the
//     default and predeclared exchanges, and bindings to a queue left out
//     (but those to exclusive queues under the releases whose export
//     keeps them, Broker.Rules); and server-named (amq.*) queues, which
//     every import skips.
//   - Import skips, as RabbitMQ does with a warning (Broker.Skipped),
//     queues whose name begins with "amq." and, from RabbitMQ 4.4.1
//     (Rules.SkipReservedQueueBindings), the bindings to such queues;
//     before, such a binding is refused by the checks like any binding
//     to a missing queue.
//   - Import checks the whole file against the broker first and changes
//     nothing when a check fails; the error lists every problem. The
//     checks cover names, vhosts, users and their hashes, permission
//     and topic permission regexps, vhost default queue types and limits,
//     exchange types, argument tables, runtime parameters (each of a
//     component the broker knows, checked by its validator),
//     policies as RabbitMQ validates them, and whether every binding's
//     ends exist. RabbitMQ 3.x's classic mirroring keys (ha-mode and the
//     like, removed in 4.0) are dropped from imported policies: a Warren
//     cluster replicates every durable queue; a policy with nothing else
//     is not imported. They read the broker once, so a concurrent change
//     can still make the apply fail.
//   - The apply is not atomic: it declares the way the AMQP methods do,
//     in order (vhosts and their limits, users, permissions, topic
//     permissions, policies, operator policies, exchanges, queues,
//     bindings),
//     and an error there (an existing queue declared with other
//     properties, a store that fails) leaves what was applied before it in
//     place and carries on; all such errors are returned joined. This is
//     what RabbitMQ's import does.
//
// TableJSON and JSONTable convert argument tables to and from the JSON the
// file and the management API use, BindingOf a routing binding to the
// file's form; DecodeJSON is Read's strict decoder.
//
// Errors start with "broker: definitions:", as they did when this code was
// part of the root package, so callers matching the text keep working.
// Nothing here holds state: calls are safe concurrently as far as the
// Broker passed in is.
package definitions
