// Package queueargs is the one table of queue arguments and queue policy
// keys (table.go): for each, its x-argument name, type and range,
// RabbitMQ's words when it refuses a value, the queue kinds that take it,
// whether a redeclare must repeat it, its policy key (and whether an
// operator policy may set it), how a policy value meets the argument, and
// the RabbitMQ version-profile rule that changes it.
//
// Everything that knows about a queue argument reads the table: Parse (the
// declare check, queue.ParseArgs), Compared (the redeclare equivalence
// check in internal/vhost), CheckPolicy, PolicyValues, MergePolicyValue
// and Effective (policy validation and the merge in internal/policy),
// RemovedPolicyKey (definitions.Import) and the management console's
// features column. Adding an argument or a policy key is adding a row
// (docs/queue-arguments.md).
//
// It imports only the amqp package: the queue runtime, the policy engine
// and the vhost import it, never the reverse. What it promises:
//
//   - Parse checks arguments in the table's order and refuses the first
//     bad one; a value a row does not check is kept but ignored, as
//     RabbitMQ ignores unknown arguments.
//   - The rows are fixed at init and never change, so readers share them
//     without locks.
package queueargs
