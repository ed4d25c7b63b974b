// Package control is the control plane behind broker.Admin: users,
// permissions, topic permissions, vhosts and vhost limits, each stored in
// the meta store and then applied to what runs: the Access of open
// connections (internal/access), the limits in memory (internal/limits),
// the open vhosts' default queue type and max-queues, and, for a deleted
// user or vhost, its connections closed with 320 CONNECTION_FORCED as
// RabbitMQ's connection tracking closes them.
//
// Topology is the topology side of definitions import and export: each
// vhost's exchanges, queues and bindings read for Export, and Import's
// declares and binds made as an operator.
//
// Refused input is an error matching meta.ErrInvalid (the management
// API's 400); a missing user, vhost or permission one wrapping
// meta.ErrNotFound (404). Policies (internal/policystore) and parameters
// (internal/params) have packages of their own; the broker's Admin
// forwards to all three.
package control
