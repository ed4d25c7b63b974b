package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// TLS: ListenTLS serves AMQP over TLS (AMQPS) with
// Options.TLSConfig. The TLS handshake runs on the connection's own reader
// goroutine (on its first read), so a slow or silent client never holds up
// the accept loop, and the handshake timeout covers it. To use client
// certificates set TLSConfig.ClientAuth (e.g. tls.VerifyClientCertIfGiven)
// and ClientCAs; with "EXTERNAL" in Options.AuthMechanisms a client whose
// verified certificate has subject CN=name may log in as the existing user
// name without a password (RabbitMQ's rabbitmq_auth_mechanism_ssl with
// ssl_cert_login_from = common_name).

// errNoTLSConfig is returned by the TLS listeners without Options.TLSConfig.
var errNoTLSConfig = errors.New("broker: Options.TLSConfig is nil")

// ListenTLS binds addr ("host:port"; port 0 picks a free one) and serves
// AMQP over TLS on it in the background until Close. It returns the bound
// address. To serve TLS on a listener of one's own, and until Close, give
// Serve tls.NewListener(l, Options.TLSConfig).
func (b *Broker) ListenTLS(addr string) (net.Addr, error) {
	l, err := b.listenTLS(addr)
	if err != nil {
		return nil, err
	}
	return b.conns.ServeInBackground(l, "broker: TLS listener stopped")
}

func (b *Broker) listenTLS(addr string) (net.Listener, error) {
	if b.opts.TLSConfig == nil {
		return nil, errNoTLSConfig
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	return tls.NewListener(l, b.opts.TLSConfig), nil
}
