package qgroup

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
)

// policyLocator is the queue-leader-locator of the policy that applies to
// new queue q of type typ (quorum or stream), "" when none does or it
// sets none. Operator policies cannot set the key (RabbitMQ's operator
// policy validator does not take it), so only policies are read; a policy
// that no longer compiles is skipped, as the vhost skips it.
func (m *Manager) policyLocator(ctx context.Context, q meta.Queue, typ string) (string, error) {
	ps, err := m.cfg.Meta.ListPolicies(ctx, q.VHost, false)
	if err != nil {
		return "", fmt.Errorf("qgroup: policies of vhost %q: %w", q.VHost, err)
	}
	if len(ps) == 0 {
		return "", nil
	}
	cs := make([]*policy.Compiled, 0, len(ps))
	for _, p := range ps {
		if c, err := policy.Compile(p, false); err == nil {
			cs = append(cs, c)
		}
	}
	target := policy.QuorumQueue
	if typ == "stream" {
		target = policy.Stream
	}
	mt := policy.NewSet(cs).Match(target, q.Name)
	if mt.Policy == nil {
		return "", nil
	}
	s, _ := mt.Policy.Definition["queue-leader-locator"].(string)
	return s, nil
}
