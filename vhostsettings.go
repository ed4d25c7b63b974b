package broker

import (
	"github.com/warrenmq/broker/internal/control"
	"github.com/warrenmq/broker/internal/limits"
)

// Vhost settings an operator changes at run time, as RabbitMQ keeps them:
// a vhost's metadata (description, tags, default queue type), its limits
// (max-connections, max-queues) and users' topic permissions. All live in
// the meta store; the broker keeps the limits in memory too (internal/limits;
// connection.open and every queue.declare read them), reloaded from the store whenever a
// shared store reports a change of the vhost list (shared.go).

// The vhost limits RabbitMQ knows (rabbit_vhost_limit's validation).
const (
	LimitMaxConnections = limits.MaxConnections
	LimitMaxQueues      = limits.MaxQueues
)

// QueueTypes are the values a vhost's default queue type may take.
var QueueTypes = control.QueueTypes
