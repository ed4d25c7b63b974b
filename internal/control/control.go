package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/limits"
	"github.com/warrenmq/broker/internal/policystore"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// QueueTypes are the values a vhost's default queue type may take.
var QueueTypes = []string{"classic", "quorum", "stream"}

// VHosts is the broker's set of open vhosts.
type VHosts interface {
	// Lookup finds an open vhost ("" is "/").
	Lookup(name string) (*vhost.VHost, bool)
	// List returns the open vhosts, sorted by name.
	List() []*vhost.VHost
	// Put opens and stores rec's vhost when none of its name is open
	// (created), else stores rec and gives the open vhost its default
	// queue type.
	Put(ctx context.Context, rec meta.VHost) (created bool, err error)
	// Remove takes a vhost off the open set; until done is called the
	// broker does not open it again from the store.
	Remove(name string) (vh *vhost.VHost, done func(), ok bool)
}

// Plane is the control plane. Set every field before first use.
type Plane struct {
	Meta     meta.Store
	Access   *access.Registry
	Limits   *limits.Limits
	Policies *policystore.Keeper
	VHosts   VHosts
	// CloseConns closes every open connection match selects with 320
	// CONNECTION_FORCED and text.
	CloseConns func(match func(session.ConnInfo) bool, text string)
}

// canonical maps "" to "/": both name the default vhost.
func canonical(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// fullPermission grants everything: what seeded users get on every
// configured vhost.
var fullPermission = meta.Permission{Configure: ".*", Write: ".*", Read: ".*"}

// SeedUsers stores every user of users not stored yet, with full
// permissions on each of vhosts; a stored user is left as it is.
func (p *Plane) SeedUsers(ctx context.Context, users []meta.User, vhosts []string) error {
	for _, u := range users {
		_, err := p.Meta.GetUser(ctx, u.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, meta.ErrNotFound) {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		// Permissions first, the user last: another broker sharing the
		// store takes a stored user as seeded, and a client it lets in
		// must find the permissions already there (530 otherwise).
		for _, v := range vhosts {
			perm := fullPermission
			perm.User, perm.VHost = u.Name, canonical(v)
			if err := p.Meta.PutPermission(ctx, perm); err != nil {
				return fmt.Errorf("broker: seeding permissions of %q: %w", u.Name, err)
			}
		}
		hu, err := meta.HashedUser(meta.User{Name: u.Name, Password: u.Password, Tags: slices.Clone(u.Tags)})
		if err != nil {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		if err := p.Meta.PutUser(ctx, hu); err != nil {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
	}
	return nil
}

// PutUser is Admin.PutUser.
func (p *Plane) PutUser(ctx context.Context, u meta.User) error {
	if u.Name == "" || len(u.Name) > 255 {
		return meta.Invalid(fmt.Errorf("broker: user name must be 1 to 255 bytes, got %d", len(u.Name)))
	}
	hu, err := meta.HashedUser(u)
	if err != nil {
		return meta.Invalid(fmt.Errorf("broker: user %q: %w", u.Name, err))
	}
	return p.Meta.PutUser(ctx, hu)
}

// exported is a stored user as a definitions file carries it: with its
// (empty) limits object.
func exported(u meta.User) meta.User {
	if u.Limits == nil {
		u.Limits = map[string]any{}
	}
	return u
}

// GetUser is Admin.GetUser.
func (p *Plane) GetUser(ctx context.Context, name string) (meta.User, error) {
	u, err := p.Meta.GetUser(ctx, name)
	if err != nil {
		return meta.User{}, fmt.Errorf("broker: user %q: %w", name, err)
	}
	return exported(u), nil
}

// ListUsers is Admin.ListUsers.
func (p *Plane) ListUsers(ctx context.Context) ([]meta.User, error) {
	users, err := p.Meta.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]meta.User, 0, len(users))
	for _, u := range users {
		out = append(out, exported(u))
	}
	return out, nil
}

// DeleteUser is Admin.DeleteUser: the user and all its permissions, then
// its open connections closed (320 "user 'name' is deleted"). A
// connection racing the delete is refused every check until it is closed.
func (p *Plane) DeleteUser(ctx context.Context, name string) error {
	if _, err := p.Meta.GetUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	perms, err := p.Meta.ListPermissions(ctx)
	if err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	for _, perm := range perms {
		if perm.User == name {
			if err := p.Meta.DeletePermission(ctx, name, perm.VHost); err != nil {
				return fmt.Errorf("broker: delete user %q: %w", name, err)
			}
		}
	}
	tps, err := p.Meta.ListTopicPermissions(ctx)
	if err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	for _, tp := range tps {
		if tp.User == name {
			if err := p.Meta.DeleteTopicPermission(ctx, name, tp.VHost, tp.Exchange); err != nil {
				return fmt.Errorf("broker: delete user %q: %w", name, err)
			}
		}
	}
	if err := p.Meta.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	p.Access.Set(name, "", nil)
	p.CloseConns(func(in session.ConnInfo) bool { return in.User == name },
		fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// PutPermission is Admin.PutPermission (RabbitMQ's set_permissions): the
// user and the vhost must exist, each expression must compile, and open
// connections of the user on the vhost use it from their next check.
func (p *Plane) PutPermission(ctx context.Context, perm meta.Permission) error {
	if _, err := access.CompileGrant(perm); err != nil {
		return meta.Invalid(err)
	}
	user, vh := perm.User, canonical(perm.VHost)
	perm.VHost = vh
	g, err := access.CompileGrant(perm)
	if err != nil {
		return err
	}
	if _, err := p.Meta.GetUser(ctx, user); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	if _, ok := p.VHosts.Lookup(vh); !ok {
		return fmt.Errorf("broker: set permissions of %q: vhost %q: %w", user, vh, meta.ErrNotFound)
	}
	if err := p.Meta.PutPermission(ctx, perm); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	p.Access.Set(user, vh, g)
	return nil
}

// GetPermission is Admin.GetPermission.
func (p *Plane) GetPermission(ctx context.Context, user, vhost string) (meta.Permission, error) {
	perm, err := p.Meta.GetPermission(ctx, user, canonical(vhost))
	if err != nil {
		return meta.Permission{}, fmt.Errorf("broker: permissions of %q: %w", user, err)
	}
	return perm, nil
}

// DeletePermission is Admin.DeletePermission: new connections of the user
// to the vhost are refused (530) and open ones get 403 on every check.
func (p *Plane) DeletePermission(ctx context.Context, user, vhost string) error {
	vh := canonical(vhost)
	if err := p.Meta.DeletePermission(ctx, user, vh); err != nil {
		return fmt.Errorf("broker: clear permissions of %q: %w", user, err)
	}
	p.Access.Set(user, vh, nil)
	return nil
}

// CheckTopicPermission reports why tp's expressions could not be used.
func CheckTopicPermission(tp meta.TopicPermission) error {
	_, err := access.CompileTopicGrant(meta.TopicPermission{User: tp.User, VHost: canonical(tp.VHost), Write: tp.Write, Read: tp.Read})
	return err
}

// PutTopicPermission is Admin.PutTopicPermission; created reports that
// the user had none on that exchange.
func (p *Plane) PutTopicPermission(ctx context.Context, tp meta.TopicPermission) (created bool, err error) {
	if err := CheckTopicPermission(tp); err != nil {
		return false, meta.Invalid(err)
	}
	user, vh := tp.User, canonical(tp.VHost)
	tp = meta.TopicPermission{User: user, VHost: vh, Exchange: tp.Exchange, Write: tp.Write, Read: tp.Read}
	if _, err := access.CompileTopicGrant(tp); err != nil {
		return false, err
	}
	if _, err := p.Meta.GetUser(ctx, user); err != nil {
		return false, fmt.Errorf("broker: set topic permission of %q: %w", user, err)
	}
	if _, ok := p.VHosts.Lookup(vh); !ok {
		return false, fmt.Errorf("broker: set topic permission of %q: vhost %q: %w", user, vh, meta.ErrNotFound)
	}
	have, err := access.TopicPermissionsOf(ctx, p.Meta, user, vh)
	if err != nil {
		return false, err
	}
	created = !slices.ContainsFunc(have, func(x meta.TopicPermission) bool { return x.Exchange == tp.Exchange })
	if err := p.Meta.PutTopicPermission(ctx, tp); err != nil {
		return false, fmt.Errorf("broker: set topic permission of %q: %w", user, err)
	}
	return created, p.Access.RefreshTopics(ctx, p.Meta, user, vh)
}

// DeleteTopicPermission is Admin.DeleteTopicPermission ("" removes those
// on every exchange of the vhost).
func (p *Plane) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	vh := canonical(vhost)
	have, err := access.TopicPermissionsOf(ctx, p.Meta, user, vh)
	if err != nil {
		return err
	}
	for _, tp := range have {
		if exchange == "" || tp.Exchange == exchange {
			if err := p.Meta.DeleteTopicPermission(ctx, user, vh, tp.Exchange); err != nil {
				return fmt.Errorf("broker: clear topic permission of %q: %w", user, err)
			}
		}
	}
	return p.Access.RefreshTopics(ctx, p.Meta, user, vh)
}

// CheckVHost reports why v's default queue type or limits could not be
// used.
func CheckVHost(v definitions.VHost) error {
	if v.DefaultQueueType != "" && !slices.Contains(QueueTypes, v.DefaultQueueType) {
		return fmt.Errorf("unknown queue type '%s'", v.DefaultQueueType)
	}
	for name := range v.Limits {
		if err := limits.CheckName(name); err != nil {
			return fmt.Errorf("unknown limit %q (want %s or %s)", name, limits.MaxConnections, limits.MaxQueues)
		}
	}
	return nil
}
