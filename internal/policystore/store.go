package policystore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
)

// Target is an open vhost, which takes its policy set.
type Target interface {
	SetPolicies(*policy.Set)
}

// Keeper stores and applies policies. Set its fields before first use; it
// is then safe for concurrent use.
type Keeper struct {
	Store meta.Policies
	Log   *slog.Logger
	// VHost finds an open vhost by canonical name.
	VHost func(name string) (Target, bool)
	// VHosts lists the open vhosts' names, sorted.
	VHosts func() []string

	mu sync.Mutex // orders changes and reloads
}

// canonical maps "" to "/": both name the default vhost.
func canonical(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// Put checks, stores and applies p; created reports that no policy of
// that kind and name existed. A vhost that is not open is an error
// wrapping meta.ErrNotFound.
func (k *Keeper) Put(ctx context.Context, p meta.Policy, operator bool) (created bool, err error) {
	p.VHost = canonical(p.VHost)
	if _, ok := k.VHost(p.VHost); !ok {
		return false, fmt.Errorf("broker: policy %q: vhost %q: %w", p.Name, p.VHost, meta.ErrNotFound)
	}
	if p.Name == "" {
		return false, &policy.ValidationError{Problems: []string{"policy name must not be empty"}}
	}
	checked, err := policy.Check(p, operator)
	if err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	stored, err := k.Store.ListPolicies(ctx, checked.VHost, operator)
	if err != nil {
		return false, err
	}
	created = !slices.ContainsFunc(stored, func(s meta.Policy) bool { return s.Name == checked.Name })
	if err := k.Store.PutPolicy(ctx, checked, operator); err != nil {
		return false, err
	}
	return created, k.reloadLocked(ctx, checked.VHost)
}

// Delete deletes a policy; a missing one is an error wrapping
// meta.ErrNotFound.
func (k *Keeper) Delete(ctx context.Context, vhost, name string, operator bool) error {
	vhost = canonical(vhost)
	k.mu.Lock()
	defer k.mu.Unlock()
	stored, err := k.Store.ListPolicies(ctx, vhost, operator)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(stored, func(s meta.Policy) bool { return s.Name == name }) {
		return fmt.Errorf("broker: policy %q in vhost %q: %w", name, vhost, meta.ErrNotFound)
	}
	if err := k.Store.DeletePolicy(ctx, vhost, name, operator); err != nil {
		return err
	}
	return k.reloadLocked(ctx, vhost)
}

// List reads the policies (or operator policies) of a vhost, every open
// vhost's for "", as stored and checked.
func (k *Keeper) List(ctx context.Context, vhost string, operator bool) ([]policy.Policy, error) {
	vhosts := []string{canonical(vhost)}
	if vhost == "" {
		vhosts = k.VHosts()
	}
	var out []policy.Policy
	for _, vh := range vhosts {
		stored, err := k.Store.ListPolicies(ctx, vh, operator)
		if err != nil {
			return nil, err
		}
		for _, s := range stored {
			p, err := policy.Check(s, operator)
			if err != nil {
				k.Log.Warn("broker: stored policy refused", "vhost", s.VHost, "name", s.Name, "err", err)
				continue
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// Set builds a vhost's policy set from the store; nil when the vhost has
// none.
func (k *Keeper) Set(ctx context.Context, vhost string) (*policy.Set, error) {
	var cs []*policy.Compiled
	for _, operator := range []bool{false, true} {
		ps, err := k.List(ctx, vhost, operator)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			c, err := policy.Compile(p, operator)
			if err != nil {
				k.Log.Warn("broker: stored policy refused", "vhost", vhost, "name", p.Name, "err", err)
				continue
			}
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, nil
	}
	return policy.NewSet(cs), nil
}

// reloadLocked reads a vhost's policies from the store and applies them;
// k.mu is held.
func (k *Keeper) reloadLocked(ctx context.Context, vhost string) error {
	vh, ok := k.VHost(vhost)
	if !ok {
		return nil
	}
	s, err := k.Set(ctx, vhost)
	if err != nil {
		return err
	}
	vh.SetPolicies(s)
	return nil
}

// Reload applies a vhost's stored policies again (a policy changed on
// another broker). false means the store failed.
func (k *Keeper) Reload(ctx context.Context, vhost string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.reloadLocked(ctx, vhost); err != nil {
		if ctx.Err() == nil {
			k.Log.Warn("broker: following policies", "vhost", vhost, "err", err)
		}
		return false
	}
	return true
}

// DropVHost removes a deleted vhost's policies and operator policies from
// the store.
func (k *Keeper) DropVHost(ctx context.Context, vhost string) []error {
	var errs []error
	for _, operator := range []bool{false, true} {
		stored, err := k.Store.ListPolicies(ctx, vhost, operator)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range stored {
			errs = append(errs, k.Store.DeletePolicy(ctx, vhost, s.Name, operator))
		}
	}
	return errs
}
