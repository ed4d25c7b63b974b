// Package metrics serves a broker's metrics in the Prometheus text
// exposition format (version 0.0.4), written with the standard library.
// Names follow RabbitMQ's rabbitmq_prometheus plugin (RabbitMQ 4.x) where
// it has one; Handler lists them.
//
// The package reads the broker only through Source, which the root
// package implements: one Snapshot per scrape, and a password login for
// Options.Authenticate. It holds no state of its own, so handlers may be
// created and used from any goroutine.
package metrics
