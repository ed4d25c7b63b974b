// Package qplace decides where a replicated queue's raft group lives and
// who leads it, the way RabbitMQ 4.x places quorum queues: a new group's
// replica set and first leader (Place, with the leader locators
// client-local and balanced), the leadership moves that keep leaders
// spread over the members (Rebalancer, PlanMoves) and the membership
// changes of `rabbitmq-queues grow` and `shrink` (PlanGrow, PlanShrink,
// Grow, Shrink).
//
// It works over an Engine, the few operations of a member's raft engine
// it needs (internal/multiraft's Engine has them), and decides on a View
// of the cluster: every group's leader and replicas and the members up.
// It holds no state of its own but the Rebalancer's timers, and writes
// nothing: the caller records a placement where every member reads it
// (the metadata group) and creates the groups.
package qplace
