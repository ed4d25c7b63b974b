package shovel

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Endpoint is one resolved shovel URI.
type Endpoint struct {
	// URL is what amqp091-go dials, without RabbitMQ's TLS query parameters.
	URL string
	// Local is set for "amqp://" with no host: the broker the shovel runs in,
	// reached through the Dialer its owner supplies (RabbitMQ's direct
	// connection), never a socket.
	Local bool
	// VHost is the virtual host named by the URI's path ("/" when empty).
	VHost string
	// TLS is set for amqps, from the cacertfile, certfile, keyfile, verify
	// and server_name_indication query parameters.
	TLS *tls.Config
}

// ParseURI resolves one shovel URI as RabbitMQ's amqp_uri does: amqp or
// amqps, an optional host (none means the local broker), the vhost in the
// path, and for amqps the TLS parameters in the query. It reads the
// certificate files named, so an unreadable file is refused at validation.
func ParseURI(s string) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") {
		return Endpoint{}, fmt.Errorf("%q not a valid URI: expected amqp:// or amqps://", s)
	}
	q := u.Query()
	vhost := "/"
	if p := strings.TrimPrefix(u.EscapedPath(), "/"); p != "" {
		if vhost, err = url.PathUnescape(p); err != nil {
			return Endpoint{}, fmt.Errorf("%q not a valid URI: %v", s, err)
		}
	}
	if u.Host == "" {
		if u.Scheme == "amqps" {
			return Endpoint{}, fmt.Errorf("%q not a valid URI: amqps needs a host", s)
		}
		return Endpoint{URL: s, Local: true, VHost: vhost}, nil
	}
	e := Endpoint{VHost: vhost}
	if u.Scheme == "amqps" {
		cfg := &tls.Config{ServerName: u.Hostname()}
		if f := q.Get("cacertfile"); f != "" {
			pem, err := os.ReadFile(f)
			if err != nil {
				return Endpoint{}, fmt.Errorf("%q not a valid URI: cacertfile: %v", s, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return Endpoint{}, fmt.Errorf("%q not a valid URI: cacertfile holds no certificate", s)
			}
			cfg.RootCAs = pool
		}
		cert, key := q.Get("certfile"), q.Get("keyfile")
		if (cert == "") != (key == "") {
			return Endpoint{}, fmt.Errorf("%q not a valid URI: certfile and keyfile go together", s)
		}
		if cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return Endpoint{}, fmt.Errorf("%q not a valid URI: %v", s, err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		switch v := q.Get("verify"); v {
		case "", "verify_peer":
		case "verify_none":
			cfg.InsecureSkipVerify = true
		default:
			return Endpoint{}, fmt.Errorf("%q not a valid URI: verify must be verify_peer or verify_none, got %q", s, v)
		}
		if sni := q.Get("server_name_indication"); sni != "" && sni != "disable" {
			cfg.ServerName = sni
		}
		e.TLS = cfg
	}
	for _, k := range []string{"cacertfile", "certfile", "keyfile", "verify", "server_name_indication", "fail_if_no_peer_cert"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	e.URL = u.String()
	return e, nil
}
