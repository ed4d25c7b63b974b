// Package compat holds the RabbitMQ version profiles: which release's
// AMQP 0-9-1 behaviour the broker copies where 3.13, the 4.x series and
// their patch releases differ (Options.RabbitMQVersion, the server's
// -rabbitmq-version flag).
//
// A Profile is a plain value: one named field per difference, read by the
// package that implements the behaviour (session for connection and
// channel answers, vhost for declarations and bindings, queue through the
// arguments the vhost hands it, definitions through the root). Nothing
// else compares version numbers, so the tables in profile.go are the one
// place that says what differs: series, each series' first release in
// full, and patches, what a patch release changed in its series. Parse
// gives a series' newest release, or a named release's answers.
// docs/rabbitmq-versions.md says where each row comes from.
//
// Profiles are immutable and safe to copy and share between goroutines.
// The zero Profile means "not chosen"; OrDefault turns it into the
// default one (DefaultName).
package compat
