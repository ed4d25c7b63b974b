// Package scan is the broker's unacked scanner: one goroutine, started by
// Start and stopped by Stop, that runs a pass of unacked.Scanner over each
// unacked index (the persistent one of durable queues and the in-memory
// one of the others) every interval, while the meta store says this node
// leads (in shared mode on every broker).
//
// A pass requeues the deliveries whose owner is gone (Orphaned: another
// broker or an earlier run of this one delivered them, or their connection
// is not live) through the broker's requeue, and hands every delivery held
// longer than its consumer timeout to the broker, which closes its channel
// with 406 PRECONDITION_FAILED as RabbitMQ's consumer timeout does.
// Passes never overlap: one is held under the Scanner's lock, which also
// guards its snapshot of the live connections.
package scan
