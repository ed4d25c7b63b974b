package broker

import (
	"context"

	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/policy"
)

// The management API's policy routes (mgmt.Policies) over the broker's
// policy methods (policies.go).

var _ mgmt.Policies = mgmtView{}

func (v mgmtView) ListPolicies(ctx context.Context, vhost string, operator bool) ([]policy.Policy, error) {
	return v.b.policies.List(ctx, vhost, operator)
}

func (v mgmtView) PutPolicy(ctx context.Context, p policy.Policy, operator bool) (bool, error) {
	return v.b.policies.Put(ctx, p, operator)
}

func (v mgmtView) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	return v.b.policies.Delete(ctx, vhost, name, operator)
}

func (v mgmtView) ExchangePolicy(vhost, name string) policy.Match {
	vh, ok := v.b.lookupVHost(vhost)
	if !ok {
		return policy.Match{}
	}
	return vh.ExchangePolicy(name)
}
