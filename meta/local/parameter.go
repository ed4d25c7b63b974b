package local

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Parameters = (*Store)(nil)

// PutParameter stores p, synced.
func (s *Store) PutParameter(ctx context.Context, p meta.Parameter) error {
	return s.put(ctx, metakey.Param(p.Component, p.VHost, p.Name), p, true)
}

// DeleteParameter removes a parameter, synced; a missing one is not an
// error.
func (s *Store) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Param(component, vhost, name), true)
}

// ListParameters returns component's parameters in vhost ("" for any):
// one prefix scan when component is given.
func (s *Store) ListParameters(ctx context.Context, component, vhost string) ([]meta.Parameter, error) {
	ps, err := list[meta.Parameter](ctx, s, metakey.ParamPrefix(component, vhost))
	if err != nil {
		return nil, err
	}
	return meta.SelectParameters(ps, component, vhost), nil
}

// PutGlobalParameter stores p, synced.
func (s *Store) PutGlobalParameter(ctx context.Context, p meta.GlobalParameter) error {
	return s.put(ctx, metakey.Global(p.Name), p, true)
}

// DeleteGlobalParameter removes a global parameter, synced.
func (s *Store) DeleteGlobalParameter(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Global(name), true)
}

// ListGlobalParameters returns every global parameter sorted by name.
func (s *Store) ListGlobalParameters(ctx context.Context) ([]meta.GlobalParameter, error) {
	return list[meta.GlobalParameter](ctx, s, metakey.KindPrefix(metakey.KindGlobal))
}
