package broker

import (
	"context"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/policy"
)

// The management API's policy routes (mgmt.Policies) over the broker's
// policy methods (policies.go).

var _ mgmt.Policies = mgmtView{}

func (v mgmtView) ListPolicies(ctx context.Context, vhost string, operator bool) ([]policy.Policy, error) {
	return v.b.storedPolicies(ctx, vhost, operator)
}

func (v mgmtView) PutPolicy(ctx context.Context, p policy.Policy, operator bool) (bool, error) {
	return v.b.putPolicy(ctx, publicPolicy(p), operator)
}

func (v mgmtView) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	return v.b.deletePolicy(ctx, vhost, name, operator)
}

func (v mgmtView) ExchangePolicy(vhost, name string) policy.Match {
	vh, ok := v.b.lookupVHost(vhost)
	if !ok {
		return policy.Match{}
	}
	return vh.ExchangePolicy(name)
}

// The definitions file's policies (definitions.Broker).

// ListPolicies is Admin.ListPolicies, except that a store that keeps no
// policies exports none rather than failing the export.
func (v definitionsView) ListPolicies(ctx context.Context, vhost string) ([]definitions.Policy, error) {
	return v.storedPolicies(ctx, vhost, false)
}

// ListOperatorPolicies is ListPolicies for operator policies.
func (v definitionsView) ListOperatorPolicies(ctx context.Context, vhost string) ([]definitions.Policy, error) {
	return v.storedPolicies(ctx, vhost, true)
}

func (v definitionsView) storedPolicies(ctx context.Context, vhost string, operator bool) ([]definitions.Policy, error) {
	if _, err := v.b.policyStore(); err != nil {
		return nil, nil // nothing stored: nothing to export
	}
	ps, err := v.b.storedPolicies(ctx, vhost, operator)
	if err != nil {
		return nil, err
	}
	out := make([]definitions.Policy, len(ps))
	for i, p := range ps {
		out[i] = definitions.Policy{VHost: p.VHost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Definition: p.Definition, Priority: p.Priority}
	}
	return out, nil
}

func (v definitionsView) CheckPolicy(p definitions.Policy, operator bool) error {
	if _, err := v.b.policyStore(); err != nil {
		return err
	}
	_, err := policy.Check(internalPolicy(p), operator)
	return err
}

func internalPolicy(p definitions.Policy) policy.Policy {
	return policy.Policy{VHost: canonicalVHost(p.VHost), Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: p.Definition}
}
