package sharedtest

import (
	"context"

	"github.com/warrenmq/broker/meta"
)

var _ meta.Policies = (*Meta)(nil)

// PutPolicy emits ChangePolicy, as meta/raft does.
func (m *Meta) PutPolicy(ctx context.Context, p meta.Policy, operator bool) error {
	defer m.locked()()
	return m.policy(p.VHost, m.Store.PutPolicy(ctx, p, operator))
}

// DeletePolicy emits ChangePolicy, as meta/raft does.
func (m *Meta) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	defer m.locked()()
	return m.policy(vhost, m.Store.DeletePolicy(ctx, vhost, name, operator))
}

func (m *Meta) policy(vhost string, err error) error {
	if err == nil {
		m.s.emit(meta.Change{Kind: meta.ChangePolicy, VHost: vhost})
	}
	return err
}
