package shovel

import (
	"context"
	"fmt"
	"net"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// dialTimeout bounds a network dial and the AMQP handshake after it, as
// amqp091-go's DefaultDial does.
const dialTimeout = 30 * time.Second

// DialEndpoint opens an AMQP connection to e: through local for the
// local broker ("amqp://" with no host), else over the network with e's
// TLS settings. vhost, when not empty, replaces the URI's virtual host
// (federation links default to the local object's vhost, as
// amqp_uri:parse with a default does); props are the client properties
// (connection_name), nil for none. Ending ctx abandons a dial or
// handshake under way; the connection, once open, outlives ctx.
func DialEndpoint(ctx context.Context, e Endpoint, local DialFunc, vhost string, props amqp091.Table) (*amqp091.Connection, error) {
	cfg := amqp091.Config{TLSClientConfig: e.TLS, Properties: props, Vhost: vhost}
	url := e.URL
	var stops []func() bool
	if e.Local {
		if local == nil {
			return nil, fmt.Errorf("%q names the local broker, which this link cannot reach", e.URL)
		}
		if cfg.Vhost == "" {
			cfg.Vhost = e.VHost
		}
		cfg.Dial, url = local, "amqp://localhost/"
	} else {
		cfg.Dial = func(network, addr string) (net.Conn, error) {
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
			stops = append(stops, context.AfterFunc(ctx, func() { c.Close() }))
			return c, nil
		}
	}
	c, err := amqp091.DialConfig(url, cfg)
	for _, stop := range stops {
		stop()
	}
	return c, err
}
