package raft

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Policies = (*Node)(nil)

// PutPolicy stores p; every node's watchers hear meta.ChangePolicy.
func (n *Node) PutPolicy(ctx context.Context, p meta.Policy, operator bool) error {
	rec, err := meta.EncodePolicyRecord(p, operator)
	if err != nil {
		return err
	}
	return n.putRecord(ctx, metakey.Policy(p.VHost, p.Name, operator), rec)
}

// DeletePolicy removes a policy; a missing one is not an error.
func (n *Node) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	return n.del(ctx, metakey.Policy(vhost, name, operator))
}

// ListPolicies returns the vhost's policies of that kind sorted by name.
func (n *Node) ListPolicies(ctx context.Context, vhost string, operator bool) ([]meta.Policy, error) {
	return list[meta.Policy](ctx, n, metakey.VHostPrefix(metakey.PolicyKind(operator), vhost))
}
