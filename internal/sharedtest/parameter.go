package sharedtest

import (
	"context"

	"github.com/warrenmq/broker/meta"
)

var _ meta.Parameters = (*Meta)(nil)

// PutParameter emits ChangeParameter, as meta/raft does.
func (m *Meta) PutParameter(ctx context.Context, p meta.Parameter) error {
	defer m.locked()()
	return m.param(p.Component, p.VHost, p.Name, m.Store.PutParameter(ctx, p))
}

// DeleteParameter emits ChangeParameter, as meta/raft does.
func (m *Meta) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	defer m.locked()()
	return m.param(component, vhost, name, m.Store.DeleteParameter(ctx, component, vhost, name))
}

// PutGlobalParameter emits ChangeParameter, as meta/raft does.
func (m *Meta) PutGlobalParameter(ctx context.Context, p meta.GlobalParameter) error {
	defer m.locked()()
	return m.param("", "", p.Name, m.Store.PutGlobalParameter(ctx, p))
}

// DeleteGlobalParameter emits ChangeParameter, as meta/raft does.
func (m *Meta) DeleteGlobalParameter(ctx context.Context, name string) error {
	defer m.locked()()
	return m.param("", "", name, m.Store.DeleteGlobalParameter(ctx, name))
}

func (m *Meta) param(component, vhost, name string, err error) error {
	if err == nil {
		m.s.emit(meta.Change{Kind: meta.ChangeParameter, Component: component, VHost: vhost, Name: name})
	}
	return err
}
