// Package ledger is the at-least-once consumer contract, end to end: a
// publisher that counts a message as handed over only on basic.ack and
// sends every unconfirmed one again after a connection loss, and a
// consumer that applies each event to a PostgreSQL ledger exactly once
// (a dedup table keyed by message id, in the same transaction as the side
// effect), acks only after the commit, keeps its unacked deliveries under
// its prefetch, and lets the work queue's delivery limit move poison
// events to a quarantine queue. Its tests (ledger_test.go) run it against
// a real PostgreSQL while brokertest's Lab crashes, restarts and cuts off
// the broker; README.md states the invariants and a run's counts.
package ledger
