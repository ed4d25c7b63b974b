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
	// once (default 256); one more is closed as soon as it is accepted.
	// Keep it well under the process's file descriptor limit
	// (ulimit -n), which AMQP connections need too.
	MaxConnections int
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
// limit.
func (l HTTPLimits) Server(h http.Handler) *http.Server { return mgmt.HTTPLimits(l).Server(h) }

// Listener wraps ln so that at most MaxConnections of its connections are
// open at once: Accept closes any connection beyond that at once and
// waits for the next. A connection counts until it is closed.
func (l HTTPLimits) Listener(ln net.Listener) net.Listener { return mgmt.HTTPLimits(l).Listener(ln) }
