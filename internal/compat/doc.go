// Package compat holds the RabbitMQ version profiles: which release
// series' AMQP 0-9-1 behaviour the broker copies where 3.13 and the 4.x
// series differ (Options.RabbitMQVersion, the server's -rabbitmq-version
// flag).
//
// A Profile is a plain value: one named field per difference, read by the
// package that implements the behaviour (session for connection and
// channel answers, vhost for declarations, queue through the arguments
// the vhost hands it). Nothing else compares version numbers, so the
// table in profile.go is the one place that says what differs, and
// docs/rabbitmq-versions.md says where each row comes from.
//
// Profiles are immutable and safe to copy and share between goroutines.
// The zero Profile means "not chosen"; OrDefault turns it into the
// default one (DefaultName).
package compat
