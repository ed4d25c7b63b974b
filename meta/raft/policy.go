package raft

import (
	"context"
	"slices"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Policies = (*Node)(nil)

// PutPolicy stores p; every node's watchers hear meta.ChangePolicy.
func (n *Node) PutPolicy(ctx context.Context, p meta.Policy) error {
	return n.put(ctx, metakey.Policy(p.VHost, p.Name, p.Operator), p)
}

// DeletePolicy removes a policy; a missing one is not an error.
func (n *Node) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	return n.del(ctx, metakey.Policy(vhost, name, operator))
}

// ListPolicies returns the vhost's policies, then its operator policies,
// each sorted by name.
func (n *Node) ListPolicies(ctx context.Context, vhost string) ([]meta.Policy, error) {
	ps, err := list[meta.Policy](ctx, n, metakey.VHostPrefix(metakey.KindPolicy, vhost))
	if err != nil {
		return nil, err
	}
	ops, err := list[meta.Policy](ctx, n, metakey.VHostPrefix(metakey.KindOpPolicy, vhost))
	if err != nil {
		return nil, err
	}
	return slices.Concat(ps, ops), nil
}
