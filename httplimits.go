package broker

import (
	"net"
	"net/http"
	"time"

	"github.com/warrenmq/broker/internal/mgmt"
)

// HTTPLimits bound what HTTP clients of the management API and metrics
// may hold: how many connections at once and how long each may take.
// Without them (http.Server's zero value) an idle keep-alive connection or
// a request whose body never finishes stays open for ever, and a flood of
// them runs the process out of file descriptors, which stops the AMQP
// listeners' accept too. The zero value means the defaults; serve the
// handlers with both the server and the listener:
//
//	var lim broker.HTTPLimits
//	srv := lim.Server(mux)
//	go srv.Serve(lim.Listener(l))
//
// The defaults follow RabbitMQ's management listener (Cowboy), whose
// documented long-request settings are 120 s: the write timeout bounds a
// whole answer, so a get of many large messages to a slow client may need
// more.
type HTTPLimits struct {
	// MaxConnections is how many connections the listener keeps open at
	// once (default 256). Keep it well under the process's file
	// descriptor limit (ulimit -n), which AMQP connections need too. When
	// all are open, a new connection takes the place of an idle one: a
	// keep-alive connection between requests, or one silent for a second
	// since it was accepted. The first chosen is the oldest idle
	// connection that never logged in, of the source holding the most of
	// those; then the logged-in connection idle longest. Only when none
	// is idle is the new connection closed as soon as it is accepted.
	MaxConnections int
	// MaxUnauthenticatedPerSource is how many connections one source (an
	// IPv4 address, an IPv6 /64) may hold that have not yet carried a
	// request with valid credentials (default an eighth of
	// MaxConnections, at least 8 or MaxConnections if that is fewer).
	// Beyond it the source's own oldest idle such connection makes room,
	// or, when it has none, the new connection is closed: one client
	// holding sockets without logging in cannot take the slots other
	// sources' administrators need. A connection stops counting here once
	// a request on it logs in. Behind a reverse proxy every connection
	// comes from the proxy's address; raise this to MaxConnections there.
	MaxUnauthenticatedPerSource int
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (default
	// 60 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, from the end of the
	// request's headers (default 120 s).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no request
	// for this long (default 60 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
}

// Server returns an http.Server for h with the limits' timeouts and
// header bound set. Serve it on Listener's listener for the connection
// limits: the server tells the listener which connections are idle and
// which have logged in, which the share per source and the reclaiming
// of idle connections need.
func (l HTTPLimits) Server(h http.Handler) *http.Server { return mgmt.HTTPLimits(l).Server(h) }

// Listener wraps ln so that at most MaxConnections of its connections are
// open at once, and at most MaxUnauthenticatedPerSource of one source's
// before they log in: a connection beyond either takes an idle one's
// place, or Accept closes it at once and waits for the next. A
// connection counts until it is closed. Served by an http.Server other
// than Server's, the listener cannot tell idle connections from busy
// ones and keeps to MaxConnections alone.
func (l HTTPLimits) Listener(ln net.Listener) net.Listener { return mgmt.HTTPLimits(l).Listener(ln) }
