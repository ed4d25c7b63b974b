package broker

import (
	"context"

	"github.com/warrenmq/broker/definitions"
)

// The management API's runtime and global parameters (mgmt.Parameters)
// are the Admin's: mgmtView forwards each verb, so the API checks and
// stores exactly what PutParameter and definitions import do.

func (v mgmtView) CheckParameter(p definitions.Parameter) error { return v.b.Admin().CheckParameter(p) }

func (v mgmtView) PutParameter(ctx context.Context, p definitions.Parameter) (bool, error) {
	return v.b.Admin().PutParameter(ctx, p)
}

func (v mgmtView) GetParameter(ctx context.Context, component, vhost, name string) (definitions.Parameter, error) {
	return v.b.Admin().GetParameter(ctx, component, vhost, name)
}

func (v mgmtView) ListParameters(ctx context.Context, component, vhost string) ([]definitions.Parameter, error) {
	return v.b.Admin().ListParameters(ctx, component, vhost)
}

func (v mgmtView) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	return v.b.Admin().DeleteParameter(ctx, component, vhost, name)
}

func (v mgmtView) PutGlobalParameter(ctx context.Context, p definitions.GlobalParameter) (bool, error) {
	return v.b.Admin().PutGlobalParameter(ctx, p)
}

func (v mgmtView) GetGlobalParameter(ctx context.Context, name string) (definitions.GlobalParameter, error) {
	return v.b.Admin().GetGlobalParameter(ctx, name)
}

func (v mgmtView) ListGlobalParameters(ctx context.Context) ([]definitions.GlobalParameter, error) {
	return v.b.Admin().ListGlobalParameters(ctx)
}

func (v mgmtView) DeleteGlobalParameter(ctx context.Context, name string) error {
	return v.b.Admin().DeleteGlobalParameter(ctx, name)
}
