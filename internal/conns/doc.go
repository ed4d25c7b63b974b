// Package conns is the broker's set of open connections and listeners:
// the accept loops (transient accept errors backed off, as net/http does),
// each connection served on its own goroutine, the direct connections
// registered alongside, and the one WaitGroup that counts every goroutine
// the set started, so that Close can wait for all of them.
//
// Once Close has been called the set refuses every new listener,
// connection and goroutine with the error it was given, and the accept
// loops end with it. The map of connections is rebuilt once closes left
// it a quarter of its largest size, so a burst of connections does not
// keep its table for good.
package conns
