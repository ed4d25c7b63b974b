package shovel

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// dialTimeout bounds a network dial and the AMQP handshake after it, as
// amqp091-go's DefaultDial does.
const dialTimeout = 30 * time.Second

// DialFunc opens an in-process connection to the local broker
// (Broker.Dial's shape).
type DialFunc func(network, addr string) (net.Conn, error)

// Local is how links reach the broker they run in, for an "amqp://" URI
// with no host; never a socket.
type Local struct {
	// Internal is the broker's trusted door for a local end that names
	// no user: its connections run as the broker's internal user, allowed
	// everything (RabbitMQ's direct connection as rabbit_auth_backend_dummy's
	// "none"). nil: such an end logs in through User as guest/guest, which
	// is what a program running the engine beside its own broker gets.
	Internal DialFunc
	// User is the door every client has (Broker.Dial): a local end that
	// names a user logs in as that user, password checked.
	User DialFunc
}

// door is the dial function and URL amqp091-go dials for the local URI
// uri: User with the URI's user and password when it names one, else
// Internal (whose login ignores the credentials), else User as guest. The
// host of the URL is never contacted.
func (l Local) door(uri string) (DialFunc, string) {
	u, err := url.Parse(uri)
	if err == nil && u.User != nil {
		return l.User, (&url.URL{Scheme: "amqp", User: u.User, Host: "localhost", Path: "/"}).String()
	}
	if l.Internal != nil {
		return l.Internal, "amqp://localhost/"
	}
	return l.User, "amqp://localhost/"
}

// DialEndpoint opens an AMQP connection to e: through local for the
// local broker ("amqp://" with no host), else over the network with e's
// TLS settings. vhost, when not empty, replaces the URI's virtual host
// (federation links default to the local object's vhost, as
// amqp_uri:parse with a default does); props are the client properties
// (connection_name), nil for none. Ending ctx abandons a dial or
// handshake under way; the connection, once open, outlives ctx.
func DialEndpoint(ctx context.Context, e Endpoint, local Local, vhost string, props amqp091.Table) (*amqp091.Connection, error) {
	return dialEndpoint(ctx, e, local, vhost, props, false)
}

// dialEndpoint is DialEndpoint; with whole set, ending ctx also closes
// the connection once it is open (stopOnDone), as a Worker needs.
func dialEndpoint(ctx context.Context, e Endpoint, local Local, vhost string, props amqp091.Table, whole bool) (*amqp091.Connection, error) {
	cfg := amqp091.Config{TLSClientConfig: e.TLS, Properties: props, Vhost: vhost}
	url := e.URL
	dial := DialFunc(func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// amqp091-go clears the deadline once the handshake is done.
		if err := c.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	})
	if e.Local {
		if cfg.Vhost == "" {
			cfg.Vhost = e.VHost
		}
		dial, url = local.door(e.URL)
		if dial == nil {
			return nil, fmt.Errorf("%q names the local broker, which this link cannot reach", e.URL)
		}
	}
	var opened []*stoppingConn
	stopping := stopOnDone(ctx, dial)
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		c, err := stopping(network, addr)
		if sc, ok := c.(*stoppingConn); ok {
			opened = append(opened, sc)
		}
		return c, err
	}
	c, err := amqp091.DialConfig(url, cfg)
	if !whole {
		for _, sc := range opened {
			sc.release()
		}
	}
	return c, err
}
