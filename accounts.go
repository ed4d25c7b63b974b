package broker

import (
	"context"
	"slices"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/authn"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
)

// Accounts: users, their password hashes and tags, and per-vhost
// permissions live in the meta store (meta.Accounts), so with DataDir they
// survive restarts. Options.Users only seeds the store: at New, each listed
// user that is not stored yet is added (with full permissions on every
// configured vhost); a user already stored keeps its stored password, tags
// and permissions, so changes made through Admin.PutUser, Admin.PutPermission and
// friends win over Options. A seeded user deleted with DeleteUser comes back
// at the next New while Options still lists it.
//
// Connections look permissions up once, at connection.open, and keep a
// shared *session.Access per (user, vhost) that Admin.PutPermission,
// Admin.DeletePermission and DeleteUser update in place: open connections see a
// change at their next check.
//
// Password hashes are RabbitMQ's password_hash, made and checked by
// internal/passwd; every login goes through internal/login's Guard.

// accountState is the broker's in-memory side of accounts: the login
// guard, and the shared Access of every (user, vhost) a connection
// opened.
type accountState struct {
	logins login.Guard     // every login's throttle and user read (internal/login)
	access access.Registry // what open connections may do (internal/access)
}

// openAccess is session.Config.Open: connection limits, then the user's
// permissions on the vhost (RabbitMQ's order in handle_method0 for
// connection.open): the stored ones, or those the login's Authorizer
// decides (z, from Options.Auth).
func (b *Broker) openAccess(user, vhostName string, z *session.Authz) (*session.Access, func(), error) {
	vh := canonicalVHost(vhostName)
	release, aerr := b.limits.Admit(user, vh, true)
	if aerr != nil {
		return nil, nil, aerr
	}
	if z != nil {
		a, aerr := b.logins.VHostAccess(z, vh)
		if aerr != nil {
			release()
			return nil, nil, aerr
		}
		return a, release, nil
	}
	a, refusal, unavailable := b.acct.access.Stored(context.Background(), b.stores.Meta, b.opts.LoginTimeout, user, vh)
	switch {
	case unavailable != nil:
		release()
		return nil, nil, authn.Unavailable(unavailable, amqp.ClassConnection, amqp.MethodConnectionOpen)
	case refusal != nil:
		release()
		return nil, nil, refusal
	}
	return a, release, nil
}

// isImpersonator is session.Config.Impersonator: whether user has the
// impersonator tag, read from the store (only for a publish whose user_id
// names someone else, so the read costs nothing on the usual path).
func (b *Broker) isImpersonator(user string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.LoginTimeout)
	defer cancel()
	u, err := b.stores.Meta.GetUser(ctx, user)
	return err == nil && slices.Contains(u.Tags, "impersonator")
}

// closeConnectionsOf closes every open connection that match selects with
// 320 CONNECTION_FORCED and text (RabbitMQ's close_connections: network
// connections through rabbit_reader:shutdown, direct ones through
// amqp_direct_connection:server_close, both 320).
func (b *Broker) closeConnectionsOf(match func(session.ConnInfo) bool, text string) {
	for _, c := range b.conns.List() {
		if match(c.Info()) {
			c.Shutdown(amqp.ConnectionForced, text)
		}
	}
}
