// Package broker is Warren, an AMQP 0-9-1 broker (RabbitMQ-compatible) that a
// Go program embeds.
//
// New builds a broker from Options; the zero Options value works: one user
// guest/guest (tagged administrator), one virtual host "/", RabbitMQ's
// defaults for channel-max (2047), frame-max (131072) and heartbeat (60 s),
// no logging. New copies the Options, so the caller's struct is never changed
// and may be reused.
//
// A broker serves any number of listeners and in-memory connections:
//
//	b, err := broker.New(broker.Options{})
//	if err != nil { ... }
//	defer b.Close()
//	if _, err := b.Listen("127.0.0.1:0"); err != nil { ... }
//	conn, err := amqp091.Dial(b.URL())
//
// Serve and ListenAndServe block like their net/http namesakes; Listen binds
// and serves in the background, so Addr and URL are valid as soon as it
// returns. Dial hands out the client end of an in-memory connection
// (net.Pipe) that is served exactly like a TCP one; it fits
// amqp091.Config.Dial.
//
// # Close
//
// Close stops accepting, sends connection.close 320 CONNECTION_FORCED on every
// open connection, waits briefly for each close-ok, and returns only after
// every goroutine the broker started has exited. It is idempotent and safe to
// call from many goroutines at once; every caller returns once shutdown is
// complete.
//
// # What works today
//
// The connection half of the protocol: the handshake (PLAIN and AMQPLAIN
// against Options.Users, tune negotiation, virtual hosts from
// Options.VHosts), heartbeats, channel open/close/flow, connection close in
// both directions and the spec's error handling. Methods of the exchange,
// queue, basic, tx and confirm classes are answered with 540 NOT_IMPLEMENTED
// until the queue engine lands. Options.DataDir is stored but not yet used.
//
// # Concurrency
//
// All methods of *Broker are safe for concurrent use.
package broker
