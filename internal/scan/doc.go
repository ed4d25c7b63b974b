// Package scan is the broker's unacked scanner: one goroutine, started by
// Start and stopped by Stop, that runs a pass of unacked.Scanner over each
// unacked index (the persistent one of durable queues and the in-memory
// one of the others) every interval, while the meta store says this node
// leads (in shared mode on every broker).
//
// A pass requeues the deliveries whose owner is gone (Orphaned: another
// broker or an earlier run of this one delivered them, or their connection
// is not live) through the broker's requeue, and hands every delivery held
// longer than its consumer timeout to Config.TimedOut. Timeouts is the
// broker's pair of those: a delivery's timeout with RabbitMQ's precedence
// (the consumer's argument, else the lesser of the queue's argument and
// its policy's, else the broker-wide one), and the verdict: the channel
// closed with 406 PRECONDITION_FAILED in RabbitMQ's words, or under the
// 4.3 profile a quorum queue's consumer cancelled.
// Passes never overlap: one is held under the Scanner's lock, which also
// guards its snapshot of the live connections.
package scan
