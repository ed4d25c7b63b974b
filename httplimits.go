package broker

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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

// withDefaults fills the zero fields.
func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = 256
	}
	def(&l.ReadHeaderTimeout, 10*time.Second)
	def(&l.ReadTimeout, 60*time.Second)
	def(&l.WriteTimeout, 120*time.Second)
	def(&l.IdleTimeout, 60*time.Second)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	return l
}

// Server returns an http.Server for h with the limits' timeouts and
// header bound set. Serve it on Listener's listener for the connection
// limit.
func (l HTTPLimits) Server(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Listener wraps ln so that at most MaxConnections of its connections are
// open at once: Accept closes any connection beyond that at once and
// waits for the next. A connection counts until it is closed.
func (l HTTPLimits) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, max: int64(l.withDefaults().MaxConnections)}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

// Accept returns the next connection while fewer than max are open. A
// connection over the limit is closed unserved rather than left waiting:
// waiting ones would sit in the kernel's backlog, and the client would
// hang instead of being told.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			continue
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

// limitConn gives its slot back when it is first closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// CloseWrite half-closes a TCP connection, which http.Server uses to let
// the client read a last response before the close.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
