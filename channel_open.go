package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/authn"
	"github.com/warrenmq/broker/internal/direct"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
)

// ChannelOption chooses who a Channel opened by Broker.Channel acts as and
// where: AsUser and OnVHost.
type ChannelOption func(*channelOptions)

// channelOptions is what the ChannelOptions chose; zero fields keep
// Channel's defaults.
type channelOptions struct {
	user    string
	asUser  bool
	vhost   string
	onVHost bool
}

// AsUser makes Broker.Channel open the Channel as the user named name, with
// that user's permissions on the vhost enforced on every method, as over
// AMQP: the user must exist and have permissions on the vhost (set with
// Admin.PutPermission, or Options.Users' full grant), and a refused operation
// fails with 403 ACCESS_REFUSED. Admin.PutPermission, Admin.DeletePermission and
// deleteUser apply to the open Channel at once, as to the user's AMQP
// connections. Without AsUser the Channel is unrestricted: it is the
// embedding program's own, acting as the first of Options.Users.
func AsUser(name string) ChannelOption {
	return func(o *channelOptions) { o.user, o.asUser = name, true }
}

// OnVHost makes Broker.Channel open the Channel on the virtual host named
// name ("" is "/") instead of the default one.
func OnVHost(name string) ChannelOption {
	return func(o *channelOptions) { o.vhost, o.onVHost = canonicalVHost(name), true }
}

// Channel opens an in-process channel. By default it opens on the broker's
// default virtual host ("/", or the first of Options.VHosts when "/" is not
// among them) as the first configured user, with no permission checks;
// OnVHost chooses another vhost and AsUser another user, whose permissions
// are then enforced. ctx bounds the wait for the channel to open.
//
// Opening fails, with the *amqp091.Error an AMQP client would get at
// connection.open, when the vhost does not exist (530 NOT_ALLOWED "vhost
// ... not found") and, with AsUser, when the user does not exist (403
// ACCESS_REFUSED) or has no permissions on the vhost (530 NOT_ALLOWED
// "access to vhost '...' refused for user '...'"): the codes an AMQP
// client gets for the same user and vhost, here as in RabbitMQ 4.x, whose
// direct connections (rabbit_direct:connect) run the same user and vhost
// checks. It returns ErrClosed once Close has been called.
func (b *Broker) Channel(ctx context.Context, opts ...ChannelOption) (*Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o channelOptions
	for _, opt := range opts {
		opt(&o)
	}
	var vh *vhost.VHost
	if o.onVHost {
		var ok bool
		if vh, ok = b.lookupVHost(o.vhost); !ok {
			return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", o.vhost))
		}
	} else {
		var err error
		if vh, err = b.directVHost(); err != nil {
			return nil, err
		}
	}
	if !o.asUser {
		user := ""
		if len(b.opts.Users) > 0 {
			user = b.opts.Users[0].Name
		}
		return b.openChannel(ctx, vh, user, nil)
	}
	access, err := b.directAccess(ctx, o.user, vh.Name())
	if err != nil {
		return nil, err
	}
	return b.openChannel(ctx, vh, o.user, access)
}

// directAccess is the Access of a Channel opened AsUser(user) on the vhost
// named vh, or the *amqp091.Error an AMQP client would get at
// connection.open (internal/authn's DirectAccess: the user database, or
// Options.Auth's chain). The Access is shared with the user's connections
// there (accounts.go), so permission changes reach the Channel.
func (b *Broker) directAccess(ctx context.Context, user, vh string) (*session.Access, error) {
	return directError(b.logins.DirectAccess(ctx, user, vh, b.storedGrants))
}

// storedAccess is the shared Access of user on vh from the stored
// permissions (the user database's authorisation), or the error an AMQP
// client would get at connection.open.
func (b *Broker) storedAccess(ctx context.Context, user, vh string) (*session.Access, error) {
	return directError(authn.StoredAccess(ctx, b.storedGrants, user, vh))
}

// storedGrants is authn.Stored over the broker's store and Access registry.
func (b *Broker) storedGrants(ctx context.Context, user, vh string) (*session.Access, *amqp.Error, error) {
	return b.acct.access.Stored(ctx, b.stores.Meta, b.opts.LoginTimeout, user, vh)
}

// directError gives an *amqp.Error as the *amqp091.Error a client gets.
func directError(a *session.Access, err error) (*session.Access, error) {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return nil, toError(ae)
	}
	return a, err
}

// openChannel opens a direct Channel on vh as user, checking access (nil:
// unrestricted): the work of Channel, which the management API's internal
// channel uses too, AsUser the requesting user (RabbitMQ's
// rabbit_mgmt_util:with_channel opens a direct connection as that user,
// with that user's permissions).
func (b *Broker) openChannel(ctx context.Context, vh *vhost.VHost, user string, access *session.Access) (*Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A direct connection counts against its vhost's connection limit, as
	// RabbitMQ's rabbit_direct:connect checks it; the node-wide
	// Options.Limits.MaxConnections bounds network connections only, as
	// RabbitMQ's connection_max bounds its listeners.
	admitted, aerr := b.limits.Admit(user, vh.Name(), false)
	if aerr != nil {
		return nil, toError(aerr)
	}
	c, err := direct.Open(ctx, direct.Config{
		Session:     b.cfg,
		ID:          fmt.Sprintf("direct#%d", b.conns.NextID()),
		VHost:       vh,
		User:        user,
		Access:      access,
		HeldReplies: &b.held.Replies,
		// Registered like a served connection: Close shuts it down with
		// 320 and waits for it (the wg count is dropped by Release).
		Register: func(conn *session.Conn) error {
			if !b.conns.Register(conn) {
				admitted()
				return ErrClosed
			}
			return nil
		},
		Forget: b.conns.Forget,
		Release: func() {
			admitted()
			b.conns.Done()
		},
	})
	if err != nil {
		return nil, err
	}
	return &Channel{c: c}, nil
}

// directVHost is the vhost Channel opens.
func (b *Broker) directVHost() (*vhost.VHost, error) {
	if vh, ok := b.lookupVHost("/"); ok {
		return vh, nil
	}
	if len(b.opts.VHosts) == 0 {
		return nil, errors.New("broker: no virtual host configured (Options.VHosts is empty)")
	}
	if vh, ok := b.lookupVHost(b.opts.VHosts[0]); ok {
		return vh, nil
	}
	return nil, fmt.Errorf("broker: virtual host %q was deleted", b.opts.VHosts[0])
}

// authzChannel opens a direct Channel on the vhost named vhostName whose
// permissions z decides (the management API's channel for a user an
// Options.Auth backend let in).
func (b *Broker) authzChannel(ctx context.Context, z *session.Authz, vhostName string) (*Channel, error) {
	vh, ok := b.lookupVHost(canonicalVHost(vhostName))
	if !ok {
		return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", vhostName))
	}
	a, aerr := b.logins.VHostAccess(z, vh.Name())
	if aerr != nil {
		return nil, toError(aerr)
	}
	return b.openChannel(ctx, vh, z.Identity.User, a)
}

// storedChannel opens a direct Channel on the vhost named vhostName with
// user's stored permissions, for a user the chain already let in.
func (b *Broker) storedChannel(ctx context.Context, user, vhostName string) (*Channel, error) {
	vh, ok := b.lookupVHost(canonicalVHost(vhostName))
	if !ok {
		return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", vhostName))
	}
	a, err := b.storedAccess(ctx, user, vh.Name())
	if err != nil {
		return nil, err
	}
	return b.openChannel(ctx, vh, user, a)
}
