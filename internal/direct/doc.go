// Package direct is the implementation of broker.Channel, the in-process
// AMQP channel: each Channel is its own direct connection
// (session.NewDirect) with one channel, and each method hands the session
// the method a client's frame would carry, so the broker runs exactly the
// code a TCP client's frame runs, and waits for the reply the wire would
// carry.
//
// It promises amqp091-go's method set and types (broker.Channel forwards
// to it and documents it), replies and errors as the wire would give them,
// notifications delivered in order by one goroutine per Channel that
// never holds up the broker, and that Close returns once every goroutine
// of the Channel has exited. What it needs from the broker (registration
// with the broker's connections, the memory counter of held replies) it
// is given in Config; it imports nothing of the root.
package direct
