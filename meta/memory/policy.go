package memory

import (
	"bytes"
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

// PutPolicy stores p, replacing the policy of the same kind and name.
func (s *Store) PutPolicy(ctx context.Context, p meta.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Value = bytes.Clone(p.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	put(s.mu.policies, p.VHost, policyKey{p.Name, p.Operator}, p)
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

// ListPolicies returns the vhost's policies, then its operator policies,
// each sorted by name.
func (s *Store) ListPolicies(ctx context.Context, vhost string) ([]meta.Policy, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Policy, 0, len(s.mu.policies[vhost]))
	for _, p := range s.mu.policies[vhost] {
		p.Value = bytes.Clone(p.Value)
		out = append(out, p)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.Policy) int {
		if a.Operator != b.Operator {
			if b.Operator {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out, nil
}
