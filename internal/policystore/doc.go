// Package policystore keeps each vhost's policies and operator policies
// stored and applied: a put is checked (internal/policy's RabbitMQ
// validation texts), stored in the meta store, and the vhost's whole
// policy set rebuilt from the store and handed to the vhost, under one
// lock, so that two changes, or a change and a reload that another
// broker's change set off, never apply out of order.
//
// A stored policy that no longer passes the checks (written by another
// version) is logged and skipped, never applied half.
package policystore
