package mgmt

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPLimits bound what HTTP clients of the management API and metrics
// may hold. The root package's HTTPLimits, which embedders use, documents
// each field and converts to this type; the two must keep the same
// fields (the conversion does not compile otherwise).
type HTTPLimits struct {
	MaxConnections    int
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// Defaults, after RabbitMQ's management listener (Cowboy), whose
// documented long-request settings are 120 s.
const (
	defaultMaxConnections    = 256
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 60 * time.Second
	defaultWriteTimeout      = 120 * time.Second
	defaultIdleTimeout       = 60 * time.Second
	defaultMaxHeaderBytes    = 64 << 10
)

// withDefaults fills the zero fields.
func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = defaultMaxConnections
	}
	def(&l.ReadHeaderTimeout, defaultReadHeaderTimeout)
	def(&l.ReadTimeout, defaultReadTimeout)
	def(&l.WriteTimeout, defaultWriteTimeout)
	def(&l.IdleTimeout, defaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = defaultMaxHeaderBytes
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
