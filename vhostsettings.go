package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// Vhost settings an operator changes at run time, as RabbitMQ keeps them:
// a vhost's metadata (description, tags, default queue type), its limits
// (max-connections, max-queues) and users' topic permissions. All live in
// the meta store; the broker keeps the limits in memory too (limits.go
// and every queue.declare read them), reloaded from the store whenever a
// shared store reports a change of the vhost list (shared.go).

// The vhost limits RabbitMQ knows (rabbit_vhost_limit's validation).
const (
	LimitMaxConnections = "max-connections"
	LimitMaxQueues      = "max-queues"
)

// QueueTypes are the values a vhost's default queue type may take.
var QueueTypes = []string{"classic", "quorum", "stream"}

// vhostLimitState is the in-memory copy of the stored vhost limits.
type vhostLimitState struct {
	mu     sync.RWMutex
	limits map[string]map[string]int64 // vhost -> limit name -> value
}

// get returns vhost vh's limit called name, false when it has none.
func (s *vhostLimitState) get(vh, name string) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.limits[vh][name]
	return v, ok
}

// all returns a copy of every vhost's limits.
func (s *vhostLimitState) all() map[string]map[string]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]map[string]int64, len(s.limits))
	for vh, m := range s.limits {
		out[vh] = maps.Clone(m)
	}
	return out
}

// loadVHostLimits replaces the in-memory limits with the stored ones and
// gives every open vhost its max-queues. b.vhostsMu must not be held.
func (b *Broker) loadVHostLimits(ctx context.Context) error {
	if err := b.readVHostLimits(ctx); err != nil {
		return err
	}
	for _, vh := range b.openVHostList() {
		b.applyQueueLimit(vh)
	}
	return nil
}

// readVHostLimits replaces the in-memory limits with the stored ones.
func (b *Broker) readVHostLimits(ctx context.Context) error {
	stored, err := b.stores.Meta.ListVHostLimits(ctx)
	if err != nil {
		return fmt.Errorf("broker: list vhost limits: %w", err)
	}
	m := make(map[string]map[string]int64)
	for _, l := range stored {
		vh := canonicalVHost(l.VHost)
		if m[vh] == nil {
			m[vh] = make(map[string]int64)
		}
		m[vh][l.Name] = l.Value
	}
	b.vlimits.mu.Lock()
	b.vlimits.limits = m
	b.vlimits.mu.Unlock()
	return nil
}

// applyQueueLimit gives vh its stored max-queues limit, if any.
func (b *Broker) applyQueueLimit(vh *vhost.VHost) {
	n, ok := b.vlimits.get(vh.Name(), LimitMaxQueues)
	vh.SetQueueLimit(n, ok)
}

// connectionLimit is the max-connections limit of vhost vh: the stored
// one, else Options.VHostMaxConnections'; false when there is none. A
// negative limit is none.
func (b *Broker) connectionLimit(vh string) (int, bool) {
	if n, ok := b.vlimits.get(vh, LimitMaxConnections); ok {
		if n < 0 {
			return 0, false
		}
		return int(min(n, int64(^uint(0)>>1))), true
	}
	n, ok := b.opts.VHostMaxConnections[vh]
	return n, ok && n >= 0
}

// vhostLimits returns every vhost's stored limits, by vhost and limit
// name (LimitMaxConnections, LimitMaxQueues).
func (b *Broker) vhostLimits() map[string]map[string]int64 { return b.vlimits.all() }

// setVHostLimit sets one of a vhost's limits, as RabbitMQ's
// rabbitmqctl set_vhost_limits and PUT /api/vhost-limits do: name is
// LimitMaxConnections (connection.open beyond it is refused with 530
// NOT_ALLOWED; 0 refuses every connection) or LimitMaxQueues (declaring
// a new queue beyond it closes the channel with 406); a negative value
// is no limit. A stored limit overrides Options.VHostMaxConnections and
// Options.MaxQueuesPerVHost for its vhost. Open connections over a new
// connection limit stay open, as in RabbitMQ.
func (b *Broker) setVHostLimit(ctx context.Context, vhostName, name string, value int64) error {
	vh := canonicalVHost(vhostName)
	if name != LimitMaxConnections && name != LimitMaxQueues {
		return fmt.Errorf("broker: unknown vhost limit %q (want %s or %s)", name, LimitMaxConnections, LimitMaxQueues)
	}
	v, ok := b.lookupVHost(vh)
	if !ok {
		return fmt.Errorf("broker: set limit of vhost %q: %w", vh, meta.ErrNotFound)
	}
	if err := b.stores.Meta.PutVHostLimit(ctx, meta.VHostLimit{VHost: vh, Name: name, Value: value}); err != nil {
		return fmt.Errorf("broker: set limit of vhost %q: %w", vh, err)
	}
	b.vlimits.mu.Lock()
	if b.vlimits.limits == nil {
		b.vlimits.limits = make(map[string]map[string]int64)
	}
	if b.vlimits.limits[vh] == nil {
		b.vlimits.limits[vh] = make(map[string]int64)
	}
	b.vlimits.limits[vh][name] = value
	b.vlimits.mu.Unlock()
	b.applyQueueLimit(v)
	return nil
}

// clearVHostLimit removes one of a vhost's stored limits (rabbitmqctl
// clear_vhost_limits for one name); clearing one it does not have is not
// an error.
func (b *Broker) clearVHostLimit(ctx context.Context, vhostName, name string) error {
	vh := canonicalVHost(vhostName)
	if err := b.stores.Meta.DeleteVHostLimit(ctx, vh, name); err != nil {
		return fmt.Errorf("broker: clear limit of vhost %q: %w", vh, err)
	}
	b.vlimits.mu.Lock()
	delete(b.vlimits.limits[vh], name)
	if len(b.vlimits.limits[vh]) == 0 {
		delete(b.vlimits.limits, vh)
	}
	b.vlimits.mu.Unlock()
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
	if ls, err := st.ListVHostLimits(ctx); err == nil {
		for _, l := range ls {
			if l.VHost == vh {
				errs = append(errs, st.DeleteVHostLimit(ctx, vh, l.Name))
			}
		}
	} else {
		errs = append(errs, err)
	}
	if tps, err := st.ListTopicPermissions(ctx); err == nil {
		for _, p := range tps {
			if p.VHost == vh {
				errs = append(errs, st.DeleteTopicPermission(ctx, p.User, vh, p.Exchange))
			}
		}
	} else {
		errs = append(errs, err)
	}
	b.vlimits.mu.Lock()
	delete(b.vlimits.limits, vh)
	b.vlimits.mu.Unlock()
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
