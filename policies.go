package broker

import (
	"context"
	"errors"
	"fmt"
)

// Policies are stored and applied by internal/policystore (b.policies);
// the management API and Admin call it.

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
			if _, err := b.policies.Put(ctx, p, set.operator); err != nil {
				errs = append(errs, fmt.Errorf("broker: Options.%s %q in vhost %q: %w", set.field, p.Name, p.VHost, err))
			}
		}
	}
	return errors.Join(errs...)
}
