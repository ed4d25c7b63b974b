package shovel

import (
	"context"
	"net"
	"sync"
)

// stopOnDone wraps dial so that every connection it opens is closed when
// ctx ends, wherever the worker is: in the AMQP handshake (a broker
// without a raft leader may hold a login for seconds), declaring, or
// moving messages. Worker.Run must return soon after its context ends:
// in a cluster another member may start the same link a bounded time
// later (internal/placement), and a worker still connecting would start
// consuming after that.
func stopOnDone(ctx context.Context, dial DialFunc) DialFunc {
	return func(network, addr string) (net.Conn, error) {
		c, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			_ = c.Close()
			return nil, ctx.Err()
		}
		sc := &stoppingConn{Conn: c}
		sc.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
		return sc, nil
	}
}

// stoppingConn releases its AfterFunc when closed, so reconnects do not
// pile them up on a long-lived context.
type stoppingConn struct {
	net.Conn
	once sync.Once
	stop func() bool
}

func (c *stoppingConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// release lets the connection outlive the context: ending it no longer
// closes the connection.
func (c *stoppingConn) release() { c.once.Do(func() { c.stop() }) }
