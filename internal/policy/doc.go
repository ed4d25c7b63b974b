// Package policy is RabbitMQ's policies and operator policies: their
// validation (with RabbitMQ's messages), matching (which policy applies to
// a queue or an exchange) and the merge that turns a queue's declared
// arguments, its policy and its operator policy into the settings its
// actor runs with.
//
// What was copied, from RabbitMQ 4.x (rabbit_policy, rabbit_policies,
// rabbit_amqqueue_process:process_args_policy and
// rabbit_quorum_queue:gather_policy_config):
//
//   - A policy has a name, a pattern (a regular expression matched
//     unanchored against the object's name), apply-to (queues,
//     classic_queues, quorum_queues, streams, exchanges or all; default
//     all), a priority (default 0) and a definition. At most one policy
//     and one operator policy apply to an object: the matching one with
//     the highest priority. RabbitMQ leaves equal priorities undefined;
//     here the name that sorts first wins, so every node picks the same.
//   - Check validates a policy and returns RabbitMQ's "Validation failed"
//     text. Unknown keys (max-priority among them: it is fixed at
//     declare) are "not recognised policy settings". Operator policies
//     accept only the keys RabbitMQ's operator_policy_validator does.
//   - Effective merges: policy and operator policy first (the lesser value
//     for message-ttl, expires, max-length, max-length-bytes and
//     delivery-limit; the operator's for the rest), then with the declared
//     arguments: the lesser value for those same limits, the argument for
//     dead-letter-exchange, dead-letter-routing-key and (classic queues)
//     overflow, the policy for a quorum queue's overflow. delivery-limit
//     follows RabbitMQ 4.x: the smaller wins, a negative value is
//     unlimited and loses to any limit. A stream takes only
//     max-length-bytes, max-age and stream-max-segment-size-bytes, the
//     policy's value winning over the argument (rabbit_stream_queue's
//     update_stream_conf, RabbitMQ 3.9 to 4.x); its other keys are the
//     stream type's unsupported policies.
//
// The definition keys, their ranges and RabbitMQ's words for a bad value,
// who may set them and how each meets a queue's argument are rows of
// internal/queueargs' table; this package holds no list of its own.
//
// Go's regexp is RE2 and has no lookahead; the one PCRE form RabbitMQ
// users write in nearly every HA-era policy, a leading negative lookahead
// such as "^(?!amq\.).*", is supported by rewriting (see compilePattern).
//
// Set is immutable once built: readers share it without locks, and a
// change builds a new one.
package policy
