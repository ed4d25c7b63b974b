package local

import (
	"context"
	"slices"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Policies = (*Store)(nil)

// PutPolicy stores p, synced.
func (s *Store) PutPolicy(ctx context.Context, p meta.Policy) error {
	return s.put(ctx, metakey.Policy(p.VHost, p.Name, p.Operator), p, true)
}

// DeletePolicy removes a policy, synced; a missing one is not an error.
func (s *Store) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Policy(vhost, name, operator), true)
}

// ListPolicies returns the vhost's policies, then its operator policies,
// each sorted by name.
func (s *Store) ListPolicies(ctx context.Context, vhost string) ([]meta.Policy, error) {
	ps, err := list[meta.Policy](ctx, s, metakey.VHostPrefix(metakey.KindPolicy, vhost))
	if err != nil {
		return nil, err
	}
	ops, err := list[meta.Policy](ctx, s, metakey.VHostPrefix(metakey.KindOpPolicy, vhost))
	if err != nil {
		return nil, err
	}
	return slices.Concat(ps, ops), nil
}
