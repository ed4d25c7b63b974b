// Command connscale measures what idle AMQP connections cost a broker: it
// opens -conns connections (each through the handshake, accepting the
// broker's heartbeat, with one channel open), leaves them idle and reports
// the broker's resident memory per connection (from /proc/PID/status of
// -broker-pid), its CPU while they idle, and how fast they were opened.
// It speaks the protocol itself and reads nothing once a connection is
// open, so it needs no goroutine per connection; the broker's heartbeats
// wait in the socket buffers.
//
//	go run ./examples/connscale -url amqp://guest:guest@127.0.0.1:5672/ -broker-pid 1234 -conns 10000
//
// More than about 28,000 connections from one address run out of
// ephemeral ports: -sources 127.0.0.2,127.0.0.3 spreads the dials over
// several loopback source addresses. -heartbeat asks for a heartbeat
// interval of its own in tune-ok (the client's choice, as the spec lets
// it) instead of accepting the broker's; while the connections idle, one
// goroutine then sends a heartbeat frame on each every half interval, so
// the broker does not drop them, and the idle CPU includes reading those. Each connection is a descriptor on
// both sides: raise ulimit -n for the broker and for connscale.
package main
