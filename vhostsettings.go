package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/limits"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// Vhost settings an operator changes at run time, as RabbitMQ keeps them:
// a vhost's metadata (description, tags, default queue type), its limits
// (max-connections, max-queues) and users' topic permissions. All live in
// the meta store; the broker keeps the limits in memory too (internal/limits;
// connection.open and every queue.declare read them), reloaded from the store whenever a
// shared store reports a change of the vhost list (shared.go).

// The vhost limits RabbitMQ knows (rabbit_vhost_limit's validation).
const (
	LimitMaxConnections = limits.MaxConnections
	LimitMaxQueues      = limits.MaxQueues
)

// QueueTypes are the values a vhost's default queue type may take.
var QueueTypes = []string{"classic", "quorum", "stream"}

// loadVHostLimits replaces the in-memory limits with the stored ones and
// gives every open vhost its max-queues. b.vhostsMu must not be held.
func (b *Broker) loadVHostLimits(ctx context.Context) error {
	if err := b.limits.Load(ctx); err != nil {
		return err
	}
	for _, vh := range b.openVHostList() {
		b.applyQueueLimit(vh)
	}
	return nil
}

// applyQueueLimit gives vh its stored max-queues limit, if any.
func (b *Broker) applyQueueLimit(vh *vhost.VHost) {
	n, ok := b.limits.Get(vh.Name(), LimitMaxQueues)
	vh.SetQueueLimit(n, ok)
}

// setVHostLimit is Admin.PutVHostLimit.
func (b *Broker) setVHostLimit(ctx context.Context, vhostName, name string, value int64) error {
	vh := canonicalVHost(vhostName)
	if err := limits.CheckName(name); err != nil {
		return err
	}
	v, ok := b.lookupVHost(vh)
	if !ok {
		return fmt.Errorf("broker: set limit of vhost %q: %w", vh, meta.ErrNotFound)
	}
	if err := b.limits.Put(ctx, vh, name, value); err != nil {
		return err
	}
	b.applyQueueLimit(v)
	return nil
}

// clearVHostLimit is Admin.DeleteVHostLimit.
func (b *Broker) clearVHostLimit(ctx context.Context, vhostName, name string) error {
	vh := canonicalVHost(vhostName)
	if err := b.limits.Delete(ctx, vh, name); err != nil {
		return err
	}
	if v, ok := b.lookupVHost(vh); ok {
		b.applyQueueLimit(v)
	}
	return nil
}

// vhostInfo returns a vhost's metadata; an error wrapping
// meta.ErrNotFound when there is no such vhost.
func (b *Broker) vhostInfo(ctx context.Context, vhostName string) (VHost, error) {
	vh := canonicalVHost(vhostName)
	if _, ok := b.lookupVHost(vh); !ok {
		return VHost{}, fmt.Errorf("broker: vhost %q: %w", vh, meta.ErrNotFound)
	}
	v, err := b.stores.Meta.GetVHost(ctx, vh)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		// Open but not stored: created by another broker in shared
		// mode a moment ago, or deleted meanwhile.
		return VHost{Name: vh}, nil
	case err != nil:
		return VHost{}, fmt.Errorf("broker: vhost %q: %w", vh, err)
	}
	return VHost{Name: vh, Description: v.Description, Tags: slices.Clone(v.Tags), DefaultQueueType: v.DefaultQueueType}, nil
}

// putVHost creates the vhost with info's metadata, or replaces the
// metadata of an existing one (RabbitMQ's PUT /api/vhosts/{vhost}); it
// reports whether it created the vhost. A default queue type other than
// "", "classic", "quorum" and "stream" is refused. A new default applies
// to queues declared from then on.
func (b *Broker) putVHost(ctx context.Context, info VHost) (created bool, err error) {
	name := canonicalVHost(info.Name)
	if len(name) > 255 {
		return false, fmt.Errorf("broker: vhost name longer than 255 bytes")
	}
	if info.DefaultQueueType != "" && !slices.Contains(QueueTypes, info.DefaultQueueType) {
		return false, fmt.Errorf("broker: unknown queue type '%s'", info.DefaultQueueType)
	}
	rec := meta.VHost{Name: name, Description: info.Description, Tags: slices.Clone(info.Tags), DefaultQueueType: info.DefaultQueueType}
	b.vhostsMu.Lock()
	defer b.vhostsMu.Unlock()
	vh, ok := b.vhosts[name]
	if !ok {
		return true, b.openVHostLocked(ctx, rec, true)
	}
	if err := b.stores.Meta.PutVHost(ctx, rec); err != nil {
		return false, fmt.Errorf("broker: vhost %q: %w", name, err)
	}
	vh.SetDefaultQueueType(rec.DefaultQueueType)
	return false, nil
}

// refreshVHostSettings gives every open vhost its stored default queue
// type and limits: what shared mode runs when another broker changed the
// vhost list or a vhost's settings.
func (b *Broker) refreshVHostSettings(ctx context.Context, stored []meta.VHost) bool {
	for _, v := range stored {
		if vh, ok := b.lookupVHost(v.Name); ok {
			vh.SetDefaultQueueType(v.DefaultQueueType)
		}
	}
	if err := b.loadVHostLimits(ctx); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhost limits", "err", err)
		}
		return false
	}
	return true
}

// deleteVHostSettings deletes what the store keeps for vhost vh besides
// its topology and permissions: its limits and every topic permission on
// it. DeleteVHost runs it.
func (b *Broker) deleteVHostSettings(ctx context.Context, vh string) error {
	st := b.stores.Meta
	var errs []error
	if tps, err := st.ListTopicPermissions(ctx); err == nil {
		for _, p := range tps {
			if p.VHost == vh {
				errs = append(errs, st.DeleteTopicPermission(ctx, p.User, vh, p.Exchange))
			}
		}
	} else {
		errs = append(errs, err)
	}
	errs = append(errs, b.limits.DropVHost(ctx, vh))
	return errors.Join(errs...)
}

// topicPermissions returns every stored topic permission.
func (b *Broker) topicPermissions(ctx context.Context) ([]meta.TopicPermission, error) {
	return b.stores.Meta.ListTopicPermissions(ctx)
}

// setTopicPermission grants user p on vhost, replacing the user's topic
// permission on that exchange; it reports whether there was none. The
// user and the vhost must exist (an error wrapping meta.ErrNotFound) and
// each expression must compile. Open connections of the user on the
// vhost use it from their next check.
func (b *Broker) setTopicPermission(ctx context.Context, user, vhostName string, p TopicPermission) (created bool, err error) {
	vh := canonicalVHost(vhostName)
	tp := meta.TopicPermission{User: user, VHost: vh, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
	if _, err := access.CompileTopicGrant(tp); err != nil {
		return false, err
	}
	if _, err := b.stores.Meta.GetUser(ctx, user); err != nil {
		return false, fmt.Errorf("broker: set topic permission of %q: %w", user, err)
	}
	if _, ok := b.lookupVHost(vh); !ok {
		return false, fmt.Errorf("broker: set topic permission of %q: vhost %q: %w", user, vh, meta.ErrNotFound)
	}
	have, err := access.TopicPermissionsOf(ctx, b.stores.Meta, user, vh)
	if err != nil {
		return false, err
	}
	created = !slices.ContainsFunc(have, func(x meta.TopicPermission) bool { return x.Exchange == p.Exchange })
	if err := b.stores.Meta.PutTopicPermission(ctx, tp); err != nil {
		return false, fmt.Errorf("broker: set topic permission of %q: %w", user, err)
	}
	return created, b.acct.access.RefreshTopics(ctx, b.stores.Meta, user, vh)
}

// clearTopicPermission removes user's topic permission on exchange of
// vhost ("" removes those on every exchange of the vhost).
func (b *Broker) clearTopicPermission(ctx context.Context, user, vhostName, exchange string) error {
	vh := canonicalVHost(vhostName)
	have, err := access.TopicPermissionsOf(ctx, b.stores.Meta, user, vh)
	if err != nil {
		return err
	}
	for _, p := range have {
		if exchange == "" || p.Exchange == exchange {
			if err := b.stores.Meta.DeleteTopicPermission(ctx, user, vh, p.Exchange); err != nil {
				return fmt.Errorf("broker: clear topic permission of %q: %w", user, err)
			}
		}
	}
	return b.acct.access.RefreshTopics(ctx, b.stores.Meta, user, vh)
}
