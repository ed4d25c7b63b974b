package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
)

// putPolicy checks, stores and applies p; created reports that no policy
// of that kind and name existed.
func (b *Broker) putPolicy(ctx context.Context, p Policy, operator bool) (created bool, err error) {
	p.VHost = canonicalVHost(p.VHost)
	if _, ok := b.lookupVHost(p.VHost); !ok {
		return false, fmt.Errorf("broker: policy %q: vhost %q: %w", p.Name, p.VHost, meta.ErrNotFound)
	}
	if p.Name == "" {
		return false, &policy.ValidationError{Problems: []string{"policy name must not be empty"}}
	}
	checked, err := policy.Check(internalPolicy(p), operator)
	if err != nil {
		return false, err
	}
	return b.storePolicy(ctx, b.stores.Meta, checked, operator)
}

// storePolicy stores a checked policy and applies the vhost's policies.
func (b *Broker) storePolicy(ctx context.Context, st meta.Policies, p policy.Policy, operator bool) (created bool, err error) {
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	stored, err := st.ListPolicies(ctx, p.VHost, operator)
	if err != nil {
		return false, err
	}
	created = !slices.ContainsFunc(stored, func(s meta.Policy) bool { return s.Name == p.Name })
	if err := st.PutPolicy(ctx, p, operator); err != nil {
		return false, err
	}
	return created, b.reloadPoliciesLocked(ctx, p.VHost)
}

func (b *Broker) deletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	st := b.stores.Meta
	vhost = canonicalVHost(vhost)
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	stored, err := st.ListPolicies(ctx, vhost, operator)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(stored, func(s meta.Policy) bool { return s.Name == name }) {
		return fmt.Errorf("broker: policy %q in vhost %q: %w", name, vhost, meta.ErrNotFound)
	}
	if err := st.DeletePolicy(ctx, vhost, name, operator); err != nil {
		return err
	}
	return b.reloadPoliciesLocked(ctx, vhost)
}

func (b *Broker) listPolicies(ctx context.Context, vhost string, operator bool) ([]Policy, error) {
	return b.storedPolicies(ctx, vhost, operator)
}

// storedPolicies reads the policies (or operator policies) of a vhost,
// every vhost for "", as stored.
func (b *Broker) storedPolicies(ctx context.Context, vhost string, operator bool) ([]policy.Policy, error) {
	st := b.stores.Meta
	vhosts := []string{canonicalVHost(vhost)}
	if vhost == "" {
		vhosts = vhosts[:0]
		for _, vh := range b.sortedVHosts() {
			vhosts = append(vhosts, vh.Name())
		}
	}
	var out []policy.Policy
	for _, vh := range vhosts {
		stored, err := st.ListPolicies(ctx, vh, operator)
		if err != nil {
			return nil, err
		}
		for _, s := range stored {
			p, err := policy.Check(s, operator)
			if err != nil {
				b.log.Warn("broker: stored policy refused", "vhost", s.VHost, "name", s.Name, "err", err)
				continue
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// policySet builds a vhost's policy set from the store; nil when the
// vhost has none.
func (b *Broker) policySet(ctx context.Context, vhost string) (*policy.Set, error) {
	var cs []*policy.Compiled
	for _, operator := range []bool{false, true} {
		ps, err := b.storedPolicies(ctx, vhost, operator)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			c, err := policy.Compile(p, operator)
			if err != nil {
				b.log.Warn("broker: stored policy refused", "vhost", vhost, "name", p.Name, "err", err)
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

// reloadPoliciesLocked reads a vhost's policies from the store and
// applies them to its queues and exchanges; b.policyMu is held, so two
// reloads never apply out of order.
func (b *Broker) reloadPoliciesLocked(ctx context.Context, vhost string) error {
	vh, ok := b.lookupVHost(vhost)
	if !ok {
		return nil
	}
	s, err := b.policySet(ctx, vhost)
	if err != nil {
		return err
	}
	vh.SetPolicies(s)
	return nil
}

// reloadPolicies is reloadPoliciesLocked for the shared-mode follower: a
// policy changed on another broker. false means the store failed.
func (b *Broker) reloadPolicies(ctx context.Context, vhost string) bool {
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	if err := b.reloadPoliciesLocked(ctx, vhost); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following policies", "vhost", vhost, "err", err)
		}
		return false
	}
	return true
}

// applyOptionPolicies stores Options.Policies and Options.OperatorPolicies
// (New calls it once the vhosts are open).
func (b *Broker) applyOptionPolicies(ctx context.Context) error {
	var errs []error
	for _, set := range []struct {
		ps       []Policy
		operator bool
		field    string
	}{{b.opts.Policies, false, "Policies"}, {b.opts.OperatorPolicies, true, "OperatorPolicies"}} {
		for _, p := range set.ps {
			if _, err := b.putPolicy(ctx, p, set.operator); err != nil {
				errs = append(errs, fmt.Errorf("broker: Options.%s %q in vhost %q: %w", set.field, p.Name, p.VHost, err))
			}
		}
	}
	return errors.Join(errs...)
}

// deletePoliciesOf removes a deleted vhost's policies from the store.
func (b *Broker) deletePoliciesOf(ctx context.Context, vhost string) []error {
	st := b.stores.Meta
	var errs []error
	for _, operator := range []bool{false, true} {
		stored, err := st.ListPolicies(ctx, vhost, operator)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range stored {
			errs = append(errs, st.DeletePolicy(ctx, vhost, s.Name, operator))
		}
	}
	return errs
}

// policyRetry prefixes, in the follower's list of failed syncs, a vhost
// whose policies failed to reload (a vhost name cannot start with NUL).
const policyRetry = "\x00policy:"

// internalPolicy is p with its vhost canonical, as policy.Check takes it.
func internalPolicy(p Policy) policy.Policy {
	p.VHost = canonicalVHost(p.VHost)
	return p
}
