package local

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Policies = (*Store)(nil)

// PutPolicy stores p, synced.
func (s *Store) PutPolicy(ctx context.Context, p meta.Policy, operator bool) error {
	rec, err := meta.EncodePolicyRecord(p, operator)
	if err != nil {
		return err
	}
	return s.putRecord(ctx, metakey.Policy(p.VHost, p.Name, operator), rec)
}

// DeletePolicy removes a policy, synced; a missing one is not an error.
func (s *Store) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Policy(vhost, name, operator), true)
}

// ListPolicies returns the vhost's policies of that kind sorted by name.
func (s *Store) ListPolicies(ctx context.Context, vhost string, operator bool) ([]meta.Policy, error) {
	return list[meta.Policy](ctx, s, metakey.VHostPrefix(metakey.PolicyKind(operator), vhost))
}
