package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrRefused is wrapped by every refusal: wrong credentials, no such user,
// access not granted. Check it with errors.Is.
var ErrRefused = errors.New("auth: refused")

// Refuse returns a refusal (wrapping ErrRefused) whose text is the reason
// the broker logs; clients are told only RabbitMQ's generic text.
func Refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Request is one login.
type Request struct {
	// Mechanism is the SASL mechanism: PLAIN, AMQPLAIN, EXTERNAL,
	// "HTTP" for the management API's and metrics handler's basic auth,
	// or MechanismDirect.
	Mechanism string
	// User is the user name; for EXTERNAL the client certificate's
	// subject common name.
	User string
	// Secret is the password (or a token used as one); empty for EXTERNAL.
	Secret string
	// Cert is the client's verified certificate, nil when there is none.
	Cert *x509.Certificate
	// Peer is the client's address; nil or a pipe address in process.
	Peer net.Addr
}

// MechanismDirect is Request.Mechanism for a direct Channel the embedding
// program opens AsUser: the program vouches for the user name and there
// is no secret (RabbitMQ's direct connections ask their backends by user
// name alone). A backend that needs proof refuses it.
const MechanismDirect = "DIRECT"

// Identity is an authenticated user.
type Identity struct {
	User string
	// Tags are RabbitMQ's user tags (administrator, monitoring, ...).
	Tags []string
	// Expires, when not zero, is when the credential stops being valid
	// (an OAuth 2 token's exp; RabbitMQ's expiry_timestamp): the
	// backend's Authorizer allows nothing after it.
	Expires time.Time
	// Impl is the authenticating backend's own state, which its
	// Authorizer reads (RabbitMQ's auth_user impl: an OAuth 2 token's
	// scopes). The broker carries it untouched with the Identity.
	Impl any
}

// Permission is one of RabbitMQ's three permission kinds.
type Permission uint8

const (
	Configure Permission = iota
	Write
	Read
)

// String is RabbitMQ's name of the permission.
func (p Permission) String() string {
	switch p {
	case Configure:
		return "configure"
	case Write:
		return "write"
	case Read:
		return "read"
	}
	return fmt.Sprintf("Permission(%d)", uint8(p))
}

// Resource names an exchange or queue ("exchange", "queue") in a vhost,
// or for topic checks the topic exchange.
type Resource struct {
	VHost, Kind, Name string
}

// Authenticator is RabbitMQ's rabbit_authn_backend.
type Authenticator interface {
	Authenticate(ctx context.Context, req Request) (Identity, error)
}

// Authorizer is RabbitMQ's rabbit_authz_backend. Each method reports
// whether the Identity is allowed; a non-nil error means it could not
// decide.
type Authorizer interface {
	VHostAccess(ctx context.Context, id Identity, vhost string) (bool, error)
	ResourceAccess(ctx context.Context, id Identity, r Resource, p Permission) (bool, error)
	// TopicAccess decides a publish's routing key (Write) or a binding's
	// key (Read) on topic exchange r.
	TopicAccess(ctx context.Context, id Identity, r Resource, p Permission, routingKey string) (bool, error)
}

// Backend is one entry of a Chain: authentication from Authn,
// authorisation from Authz (RabbitMQ's auth_backends.N.authn and .authz;
// auth_backends.N = x sets both to x). A nil Authn never authenticates;
// a nil Authz allows everything to the identities Authn authenticates.
type Backend struct {
	Name  string // for log lines: "internal", "http", "hook", ...
	Authn Authenticator
	Authz Authorizer
}

// Chain is RabbitMQ's auth_backends: entries tried in order.
type Chain []Backend

// Login is a Chain's answer to a Request: the Identity and the Authorizer
// of the Backend that authenticated it (RabbitMQ keeps the authz backends
// of the entry that let the user in).
type Login struct {
	Identity Identity
	Authz    Authorizer // nil: allow everything
	Backend  string
}

// Authenticate tries each Backend in order (rabbit_access_control:
// check_user_login): the first whose Authn accepts the Request wins. A refusal moves on to the next entry, and so does
// a backend error, so one backend that is down does not refuse logins
// another would accept. When no entry accepts, the answer is a refusal,
// unless an entry failed with an error and none refused, in which case
// that error (the broker answers it as "try again").
func (c Chain) Authenticate(ctx context.Context, req Request) (Login, error) {
	if len(c) == 0 {
		return Login{}, Refuse("no authentication backend")
	}
	var refusals, failures []error
	for _, b := range c {
		if b.Authn == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			failures = append(failures, err)
			break
		}
		id, err := b.Authn.Authenticate(ctx, req)
		switch {
		case err == nil:
			if id.User == "" {
				id.User = req.User
			}
			return Login{Identity: id, Authz: b.Authz, Backend: b.Name}, nil
		case errors.Is(err, ErrRefused):
			refusals = append(refusals, fmt.Errorf("%s: %w", b.Name, err))
		default:
			failures = append(failures, fmt.Errorf("%s: %w", b.Name, err))
		}
	}
	if len(refusals) == 0 && len(failures) > 0 {
		return Login{}, errors.Join(failures...)
	}
	if len(refusals) == 0 {
		return Login{}, Refuse("no backend authenticates")
	}
	return Login{}, errors.Join(append(refusals, failures...)...)
}

// InternalName names the broker's own user database in a Chain.
const InternalName = "internal"

// Internal is the broker's own user database (RabbitMQ's
// rabbit_auth_backend_internal) as a Chain entry: the broker supplies its
// Authn when it is in Options.Auth. Outside a broker it authenticates
// nobody.
var Internal = Backend{Name: InternalName}
