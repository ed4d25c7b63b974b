package raft

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Parameters = (*Node)(nil)

// PutParameter stores p; every node's watchers hear meta.ChangeParameter.
func (n *Node) PutParameter(ctx context.Context, p meta.Parameter) error {
	return n.put(ctx, metakey.Param(p.Component, p.VHost, p.Name), p)
}

// DeleteParameter removes a parameter; a missing one is not an error.
func (n *Node) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	return n.del(ctx, metakey.Param(component, vhost, name))
}

// ListParameters returns component's parameters in vhost ("" for any).
func (n *Node) ListParameters(ctx context.Context, component, vhost string) ([]meta.Parameter, error) {
	ps, err := list[meta.Parameter](ctx, n, metakey.ParamPrefix(component, vhost))
	if err != nil {
		return nil, err
	}
	return meta.SelectParameters(ps, component, vhost), nil
}

// PutGlobalParameter stores p; watchers hear meta.ChangeParameter.
func (n *Node) PutGlobalParameter(ctx context.Context, p meta.GlobalParameter) error {
	return n.put(ctx, metakey.Global(p.Name), p)
}

// DeleteGlobalParameter removes a global parameter.
func (n *Node) DeleteGlobalParameter(ctx context.Context, name string) error {
	return n.del(ctx, metakey.Global(name))
}

// ListGlobalParameters returns every global parameter sorted by name.
func (n *Node) ListGlobalParameters(ctx context.Context) ([]meta.GlobalParameter, error) {
	return list[meta.GlobalParameter](ctx, n, metakey.KindPrefix(metakey.KindGlobal))
}
