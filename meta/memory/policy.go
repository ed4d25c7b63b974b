package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/warrenmq/broker/meta"
)

var _ meta.Policies = (*Store)(nil)

type policyKey struct {
	name     string
	operator bool
}

// PutPolicy stores p, replacing the policy of the same kind and name. It
// keeps p's record form (meta.EncodePolicyRecord), so a policy reads the
// same from every store, and nothing the caller holds.
func (s *Store) PutPolicy(ctx context.Context, p meta.Policy, operator bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec, err := meta.EncodePolicyRecord(p, operator)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	put(s.mu.policies, p.VHost, policyKey{p.Name, operator}, rec)
	return nil
}

// DeletePolicy removes a policy; a missing one is not an error.
func (s *Store) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	remove(s.mu.policies, vhost, policyKey{name, operator})
	return nil
}

// ListPolicies returns the vhost's policies of that kind sorted by name.
func (s *Store) ListPolicies(ctx context.Context, vhost string, operator bool) ([]meta.Policy, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Policy, 0, len(s.mu.policies[vhost]))
	var err error
	for k, rec := range s.mu.policies[vhost] {
		if k.operator != operator {
			continue
		}
		var p meta.Policy
		if err = meta.DecodeRecord(rec, &p); err != nil {
			break
		}
		out = append(out, p)
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b meta.Policy) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
