package broker

import (
	"net"
	"time"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/shovel"
)

// internalUser is the user the broker's own connections run as: RabbitMQ
// 3.10's rabbit_auth_backend_dummy user, which rabbit_direct logs in for
// a direct connection that names no user (a federation link's local
// end, a shovel's "amqp://"). It is no account: nobody logs in as it
// over any door a client reaches, and a stored user of that name is
// another user.
const internalUser = "none"

// linkCallTimeout bounds a restart of a link another member runs, as
// RabbitMQ's ?SHOVEL_CALLS_TIMEOUT_MS (25 s) bounds its rpc to that node.
const linkCallTimeout = 25 * time.Second

// linkDoors are the two in-process doors of the broker's shovel and
// federation links: Internal for a local end that names no user, User
// (Broker.Dial, checked like any client) for one that does.
func (b *Broker) linkDoors() shovel.Local {
	return shovel.Local{Internal: b.dialInternal, User: b.Dial}
}

// dialInternal is Broker.Dial for the broker's own links: the
// connection is marked internal before it is served, so its login
// (internalLogin) runs as internalUser whatever credentials the client
// library sends. It is reachable only through linkDoors, never from a
// socket or a user's Broker.Dial.
func (b *Broker) dialInternal(_, _ string) (net.Conn, error) { return b.dialPipe(true) }

// internalLogin is the login of a connection dialInternal opened:
// internalUser, allowed everything in every vhost (no Authorizer), and
// allowed to publish any user_id, as RabbitMQ's channel lets its dummy
// user (check_user_id_header): a federation link with trust-user-id
// keeps the upstream's.
func internalLogin(at *session.LoginAttempt) (bool, string, error) {
	at.Authz = &session.Authz{Identity: auth.Identity{User: internalUser, Tags: []string{"impersonator"}}, Backend: "internal"}
	return true, "", nil
}

// amqpLogin is session.Config.Login: internalLogin for a connection
// dialInternal marked, every other door's login (internal/authn) for the
// rest.
func (b *Broker) amqpLogin(at *session.LoginAttempt) (bool, string, error) {
	if at.Internal {
		return internalLogin(at)
	}
	return b.logins.AMQP(at)
}
