package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/limits"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// PutVHost is Admin.PutVHost: it creates the vhost with v's metadata or
// replaces an open one's (RabbitMQ's PUT /api/vhosts/{vhost}), then sets
// the limits v names.
func (p *Plane) PutVHost(ctx context.Context, v definitions.VHost) (created bool, err error) {
	for name := range v.Limits {
		if limits.CheckName(name) != nil {
			return false, meta.Invalid(fmt.Errorf("broker: vhost %q: unknown limit %q (want %s or %s)", v.Name, name, limits.MaxConnections, limits.MaxQueues))
		}
	}
	if err := CheckVHost(v); err != nil {
		return false, meta.Invalid(fmt.Errorf("broker: %w", err))
	}
	name := canonical(v.Name)
	if len(name) > 255 {
		return false, meta.Invalid(errors.New("broker: vhost name longer than 255 bytes"))
	}
	rec := meta.VHost{Name: name, Description: v.Description, Tags: slices.Clone(v.Tags), DefaultQueueType: v.DefaultQueueType}
	if created, err = p.VHosts.Put(ctx, rec); err != nil {
		return created, err
	}
	for _, l := range slices.Sorted(maps.Keys(v.Limits)) {
		if err := p.PutVHostLimit(ctx, v.Name, l, v.Limits[l]); err != nil {
			return created, err
		}
	}
	return created, nil
}

// GetVHost is Admin.GetVHost: an open vhost's metadata and stored limits.
func (p *Plane) GetVHost(ctx context.Context, name string) (definitions.VHost, error) {
	vh := canonical(name)
	if _, ok := p.VHosts.Lookup(vh); !ok {
		return definitions.VHost{}, fmt.Errorf("broker: vhost %q: %w", vh, meta.ErrNotFound)
	}
	v := definitions.VHost{Name: vh}
	rec, err := p.Meta.GetVHost(ctx, vh)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		// Open but not stored: created by another broker in shared
		// mode a moment ago, or deleted meanwhile.
	case err != nil:
		return definitions.VHost{}, fmt.Errorf("broker: vhost %q: %w", vh, err)
	default:
		v = definitions.VHost{Name: vh, Description: rec.Description, Tags: slices.Clone(rec.Tags), DefaultQueueType: rec.DefaultQueueType}
	}
	if l := p.Limits.All()[v.Name]; len(l) > 0 {
		v.Limits = l
	}
	return v, nil
}

// ListVHosts is Admin.ListVHosts: every open vhost, sorted by name.
func (p *Plane) ListVHosts(ctx context.Context) ([]definitions.VHost, error) {
	var out []definitions.VHost
	for _, vh := range p.VHosts.List() {
		v, err := p.GetVHost(ctx, vh.Name())
		if err != nil {
			if errors.Is(err, meta.ErrNotFound) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteVHost is Admin.DeleteVHost: its open connections closed with 320,
// its queues (and their messages), exchanges and bindings deleted, and
// every permission, topic permission, limit and policy on it.
func (p *Plane) DeleteVHost(ctx context.Context, name string) error {
	name = canonical(name)
	vh, done, ok := p.VHosts.Remove(name)
	if !ok {
		return fmt.Errorf("broker: delete vhost %q: %w", name, meta.ErrNotFound)
	}
	defer done()
	p.CloseConns(func(in session.ConnInfo) bool { return canonical(in.VHost) == name },
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
	st := p.Meta
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
		for _, perm := range ps {
			if perm.VHost == name {
				errs = append(errs, st.DeletePermission(ctx, perm.User, name))
			}
		}
	} else {
		errs = append(errs, err)
	}
	if tps, err := st.ListTopicPermissions(ctx); err == nil {
		for _, tp := range tps {
			if tp.VHost == name {
				errs = append(errs, st.DeleteTopicPermission(ctx, tp.User, name, tp.Exchange))
			}
		}
	} else {
		errs = append(errs, err)
	}
	errs = append(errs, p.Limits.DropVHost(ctx, name))
	errs = append(errs, p.Policies.DropVHost(ctx, name)...)
	errs = append(errs, st.DeleteVHost(ctx, name))
	p.Access.Revoke(name)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: delete vhost %q: %w", name, err)
	}
	return nil
}

// ApplyQueueLimit gives vh its stored max-queues limit, if any.
func (p *Plane) ApplyQueueLimit(vh *vhost.VHost) {
	n, ok := p.Limits.Get(vh.Name(), limits.MaxQueues)
	vh.SetQueueLimit(n, ok)
}

// PutVHostLimit is Admin.PutVHostLimit.
func (p *Plane) PutVHostLimit(ctx context.Context, vhostName, name string, value int64) error {
	vh := canonical(vhostName)
	if err := limits.CheckName(name); err != nil {
		return err
	}
	v, ok := p.VHosts.Lookup(vh)
	if !ok {
		return fmt.Errorf("broker: set limit of vhost %q: %w", vh, meta.ErrNotFound)
	}
	if err := p.Limits.Put(ctx, vh, name, value); err != nil {
		return err
	}
	p.ApplyQueueLimit(v)
	return nil
}

// DeleteVHostLimit is Admin.DeleteVHostLimit.
func (p *Plane) DeleteVHostLimit(ctx context.Context, vhostName, name string) error {
	vh := canonical(vhostName)
	if err := p.Limits.Delete(ctx, vh, name); err != nil {
		return err
	}
	if v, ok := p.VHosts.Lookup(vh); ok {
		p.ApplyQueueLimit(v)
	}
	return nil
}

// RefreshVHosts gives every open vhost its stored default queue type and
// limits: what shared mode runs when another broker changed the vhost
// list or a vhost's settings. false means the store failed.
func (p *Plane) RefreshVHosts(ctx context.Context, stored []meta.VHost) error {
	for _, v := range stored {
		if vh, ok := p.VHosts.Lookup(v.Name); ok {
			vh.SetDefaultQueueType(v.DefaultQueueType)
		}
	}
	if err := p.Limits.Load(ctx); err != nil {
		return err
	}
	for _, vh := range p.VHosts.List() {
		p.ApplyQueueLimit(vh)
	}
	return nil
}
