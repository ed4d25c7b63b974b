package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/authn"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
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

// seedUsers stores every Options.Users entry not stored yet.
func (b *Broker) seedUsers(ctx context.Context) error {
	for _, u := range b.opts.Users {
		_, err := b.stores.Meta.GetUser(ctx, u.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, meta.ErrNotFound) {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		// Permissions first, the user last: another broker sharing the
		// store takes a stored user as seeded, and a client it lets in
		// must find the permissions already there (530 otherwise).
		for _, v := range b.opts.VHosts {
			p := permissionOn(fullPermission, u.Name, canonicalVHost(v))
			if err := b.stores.Meta.PutPermission(ctx, p); err != nil {
				return fmt.Errorf("broker: seeding permissions of %q: %w", u.Name, err)
			}
		}
		hu, err := meta.HashedUser(User{Name: u.Name, Password: u.Password, Tags: slices.Clone(u.Tags)})
		if err != nil {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		if err := b.stores.Meta.PutUser(ctx, hu); err != nil {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
	}
	return nil
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

// deleteUser deletes a user and all its permissions, then closes the
// user's open connections (direct Channels included) with 320
// CONNECTION_FORCED "user 'name' is deleted", as RabbitMQ's connection
// tracking does on its user_deleted event. A connection racing the delete
// is still refused every permission check (403) until it is closed.
func (b *Broker) deleteUser(ctx context.Context, name string) error {
	if _, err := b.stores.Meta.GetUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	perms, err := b.stores.Meta.ListPermissions(ctx)
	if err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	for _, p := range perms {
		if p.User == name {
			if err := b.stores.Meta.DeletePermission(ctx, name, p.VHost); err != nil {
				return fmt.Errorf("broker: delete user %q: %w", name, err)
			}
		}
	}
	tps, err := b.stores.Meta.ListTopicPermissions(ctx)
	if err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	for _, p := range tps {
		if p.User == name {
			if err := b.stores.Meta.DeleteTopicPermission(ctx, name, p.VHost, p.Exchange); err != nil {
				return fmt.Errorf("broker: delete user %q: %w", name, err)
			}
		}
	}
	if err := b.stores.Meta.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	b.acct.access.Set(name, "", nil)
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return in.User == name },
		fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// closeConnectionsOf closes every open connection that match selects with
// 320 CONNECTION_FORCED and text (RabbitMQ's close_connections: network
// connections through rabbit_reader:shutdown, direct ones through
// amqp_direct_connection:server_close, both 320).
func (b *Broker) closeConnectionsOf(match func(session.ConnInfo) bool, text string) {
	b.mu.Lock()
	conns := make([]*session.Conn, 0, len(b.mu.conns))
	for c := range b.mu.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		if match(c.Info()) {
			c.Shutdown(amqp.ConnectionForced, text)
		}
	}
}

// fullPermission grants everything: what Options.Users get on every
// configured vhost.
var fullPermission = Permission{Configure: ".*", Write: ".*", Read: ".*"}

// permissionOn is p's expressions for user on vhost.
func permissionOn(p Permission, user, vhost string) Permission {
	p.User, p.VHost = user, vhost
	return p
}

// setPermissions grants user perm on vhost (RabbitMQ's set_permissions),
// replacing what the user had there. The user and the vhost must exist
// (else an error wrapping meta.ErrNotFound), and each expression must
// compile. Open connections of the user on the vhost, direct Channels
// included, use the new permissions from their next check.
func (b *Broker) setPermissions(ctx context.Context, user, vhostName string, perm Permission) error {
	vh := canonicalVHost(vhostName)
	p := permissionOn(perm, user, vh)
	g, err := access.CompileGrant(p)
	if err != nil {
		return err
	}
	if _, err := b.stores.Meta.GetUser(ctx, user); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	if _, ok := b.lookupVHost(vh); !ok {
		return fmt.Errorf("broker: set permissions of %q: vhost %q: %w", user, vh, meta.ErrNotFound)
	}
	if err := b.stores.Meta.PutPermission(ctx, p); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	b.acct.access.Set(user, vh, g)
	return nil
}

// clearPermissions removes user's permissions on vhost: new connections of
// the user to it are refused (530) and open ones get 403 on every check.
func (b *Broker) clearPermissions(ctx context.Context, user, vhostName string) error {
	vh := canonicalVHost(vhostName)
	if err := b.stores.Meta.DeletePermission(ctx, user, vh); err != nil {
		return fmt.Errorf("broker: clear permissions of %q: %w", user, err)
	}
	b.acct.access.Set(user, vh, nil)
	return nil
}

// permissions returns user's permissions on vhost, as Admin.PutPermission
// stored them; an error wrapping meta.ErrNotFound when there are none.
func (b *Broker) permissions(ctx context.Context, user, vhostName string) (Permission, error) {
	p, err := b.stores.Meta.GetPermission(ctx, user, canonicalVHost(vhostName))
	if err != nil {
		return Permission{}, fmt.Errorf("broker: permissions of %q: %w", user, err)
	}
	return p, nil
}

// addVHost creates and opens a virtual host (stored, so it is reopened at
// the next New). It grants nobody anything: call Admin.PutPermission.
func (b *Broker) addVHost(ctx context.Context, name string) error {
	name = canonicalVHost(name)
	if len(name) > 255 {
		return fmt.Errorf("broker: vhost name longer than 255 bytes")
	}
	b.vhostsMu.Lock()
	defer b.vhostsMu.Unlock()
	if _, ok := b.vhosts[name]; ok {
		return fmt.Errorf("broker: vhost %q already exists", name)
	}
	return b.openVHostLocked(ctx, meta.VHost{Name: name}, true)
}

// deleteVHost deletes a virtual host with everything in it: its open
// connections are closed with 320 CONNECTION_FORCED, its queues (and their
// messages), exchanges and bindings are deleted, and so are all
// permissions on it. A vhost listed in Options.VHosts comes back, empty,
// at the next New.
func (b *Broker) deleteVHost(ctx context.Context, name string) error {
	name = canonicalVHost(name)
	b.vhostsMu.Lock()
	vh, ok := b.vhosts[name]
	delete(b.vhosts, name)
	if ok {
		// Until the store has forgotten it, shared mode must not take the
		// vhost for one another broker created.
		if b.deleting == nil {
			b.deleting = make(map[string]bool)
		}
		b.deleting[name] = true
	}
	b.vhostsMu.Unlock()
	if !ok {
		return fmt.Errorf("broker: delete vhost %q: %w", name, meta.ErrNotFound)
	}
	defer func() {
		b.vhostsMu.Lock()
		delete(b.deleting, name)
		b.vhostsMu.Unlock()
	}()
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return canonicalVHost(in.VHost) == name },
		fmt.Sprintf("vhost '%s' is deleted", name))

	var errs []error
	for _, q := range vh.Queues() {
		// As the owner, so exclusive queues go too.
		if _, err := vh.DeleteQueue(ctx, q.Def.Owner, q.Def.Name, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	vh.Close()
	// What the vhost did not delete itself (exchanges, bindings, queues it
	// could not), straight from the store.
	st := b.stores.Meta
	if bs, err := st.ListBindings(ctx, name); err == nil {
		for _, bd := range bs {
			errs = append(errs, st.DeleteBinding(ctx, bd))
		}
	} else {
		errs = append(errs, err)
	}
	if xs, err := st.ListExchanges(ctx, name); err == nil {
		for _, x := range xs {
			errs = append(errs, st.DeleteExchange(ctx, name, x.Name))
		}
	} else {
		errs = append(errs, err)
	}
	if qs, err := st.ListQueues(ctx, name); err == nil {
		for _, q := range qs {
			errs = append(errs, st.DeleteQueue(ctx, name, q.Name))
		}
	} else {
		errs = append(errs, err)
	}
	if ps, err := st.ListPermissions(ctx); err == nil {
		for _, p := range ps {
			if p.VHost == name {
				errs = append(errs, st.DeletePermission(ctx, p.User, name))
			}
		}
	} else {
		errs = append(errs, err)
	}
	errs = append(errs, b.deleteVHostSettings(ctx, name))
	errs = append(errs, b.policies.DropVHost(ctx, name)...)
	errs = append(errs, st.DeleteVHost(ctx, name))
	b.acct.access.Revoke(name)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: delete vhost %q: %w", name, err)
	}
	return nil
}
