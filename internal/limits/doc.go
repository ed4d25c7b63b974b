// Package limits holds the broker's connection and queue limits and what
// counts against them: the vhost limits stored in the meta store
// (RabbitMQ's max-connections and max-queues, rabbit_vhost_limit), kept in
// memory so that connection.open and queue.declare read them without a
// store call, and the open connections counted against them and against
// the broker-wide limit (RabbitMQ's connection_max).
//
// A stored vhost limit overrides the configured one for its vhost; a
// negative value is no limit. Connections are counted from
// connection.open-ok, as RabbitMQ counts them: a client still in the
// handshake holds no slot. Refusals are RabbitMQ's 530 NOT_ALLOWED texts.
package limits
