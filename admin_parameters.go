package broker

import (
	"context"
	"encoding/json"

	"github.com/warrenmq/broker/internal/params"
	"github.com/warrenmq/broker/meta"
)

// Parameter is a runtime parameter (RabbitMQ's rabbit_runtime_parameters):
// the value of a component, such as "shovel", named Name in VHost.
// GlobalParameter has no vhost and no component.
type (
	Parameter       = meta.Parameter
	GlobalParameter = meta.GlobalParameter
)

// ParameterValidator checks a parameter's value before PutParameter
// stores it; its error is the refusal, in the component's own words.
type ParameterValidator func(vhost, name string, value json.RawMessage) error

// ErrUnknownComponent is what PutParameter wraps for a component nobody
// registered; its text is RabbitMQ's ("component shovel not found").
var ErrUnknownComponent = params.ErrUnknownComponent

// RegisterComponent makes component's parameters storable: PutParameter
// checks each with validate first. Registering a component twice, or one
// of the components that have their own verbs ("policy",
// "operator_policy", "vhost-limits"), is an error.
func (a *Admin) RegisterComponent(component string, validate ParameterValidator) error {
	return a.b.params.Register(component, params.Validator(validate))
}

// CheckParameter reports why p could not be stored: an unknown component
// (RabbitMQ's "Validation failed\n\ncomponent X not found\n") or the
// component's validator's refusal.
func (a *Admin) CheckParameter(p Parameter) error {
	return a.b.params.Check(p)
}

// WatchParameters calls fn(vhost, name) after each change of a parameter
// of component, made through this broker's Admin or, in shared mode, by
// another broker: fn re-reads it (GetParameter; ErrNotFound means it was
// deleted). A change may be told more than once. fn runs on the goroutine
// that made the change or on the broker's follower, so it must return
// soon; it may call Admin. cancel stops the calls. Watch first, then
// ListParameters, to miss nothing.
func (a *Admin) WatchParameters(component string, fn func(vhost, name string)) (cancel func()) {
	return a.b.params.Watch(component, fn)
}

// PutParameter checks p (CheckParameter) and stores it, replacing the
// parameter of that component, vhost and name; it reports whether there
// was none. The vhost must exist.
func (a *Admin) PutParameter(ctx context.Context, p Parameter) (created bool, err error) {
	return a.b.params.Put(ctx, p)
}

// GetParameter returns one parameter; a missing one is an error wrapping
// ErrNotFound.
func (a *Admin) GetParameter(ctx context.Context, component, vhost, name string) (Parameter, error) {
	return a.b.params.Get(ctx, component, vhost, name)
}

// ListParameters returns the parameters of component ("" for every
// component) in vhost ("" for every vhost), sorted by component, vhost
// and name.
func (a *Admin) ListParameters(ctx context.Context, component, vhost string) ([]Parameter, error) {
	return a.b.params.List(ctx, component, vhost)
}

// DeleteParameter removes one parameter; a missing one is an error
// wrapping ErrNotFound (the management API's 404).
func (a *Admin) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	return a.b.params.Delete(ctx, component, vhost, name)
}

// PutGlobalParameter stores p, replacing the global parameter of its
// name (RabbitMQ does not validate these); it reports whether there was
// none.
func (a *Admin) PutGlobalParameter(ctx context.Context, p GlobalParameter) (created bool, err error) {
	return a.b.params.PutGlobal(ctx, p)
}

// GetGlobalParameter returns one global parameter; a missing one is an
// error wrapping ErrNotFound.
func (a *Admin) GetGlobalParameter(ctx context.Context, name string) (GlobalParameter, error) {
	return a.b.params.GetGlobal(ctx, name)
}

// ListGlobalParameters returns every global parameter sorted by name.
func (a *Admin) ListGlobalParameters(ctx context.Context) ([]GlobalParameter, error) {
	return a.b.stores.Meta.ListGlobalParameters(ctx)
}

// DeleteGlobalParameter removes a global parameter; a missing one is an
// error wrapping ErrNotFound.
func (a *Admin) DeleteGlobalParameter(ctx context.Context, name string) error {
	return a.b.params.DeleteGlobal(ctx, name)
}
