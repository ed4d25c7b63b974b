package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

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

// paramRegistry is the broker's known components and the watchers of
// their parameters.
type paramRegistry struct {
	mu         sync.Mutex
	validators map[string]ParameterValidator
	watchers   map[*paramWatcher]struct{}
}

type paramWatcher struct {
	component string
	fn        func(vhost, name string)
}

// ErrUnknownComponent is what PutParameter wraps for a component nobody
// registered; its text is RabbitMQ's ("component shovel not found").
var ErrUnknownComponent = errors.New("component not found")

// unknownComponent is PutParameter's refusal of a component nobody
// registered: RabbitMQ's rabbit_runtime_parameters text, and
// ErrUnknownComponent for errors.Is.
type unknownComponent string

func (c unknownComponent) Error() string {
	return "Validation failed\n\ncomponent " + string(c) + " not found\n"
}

func (unknownComponent) Is(target error) bool { return target == ErrUnknownComponent }

// RegisterComponent makes component's parameters storable: PutParameter
// checks each with validate first. Registering a component twice, or one
// of the components that have their own verbs ("policy",
// "operator_policy", "vhost-limits"), is an error.
func (a *Admin) RegisterComponent(component string, validate ParameterValidator) error {
	switch component {
	case "", "policy", "operator_policy", "vhost-limits":
		return fmt.Errorf("broker: component %q cannot be registered", component)
	}
	if validate == nil {
		return fmt.Errorf("broker: component %q: nil validator", component)
	}
	r := &a.b.params
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.validators[component]; ok {
		return fmt.Errorf("broker: component %q is already registered", component)
	}
	if r.validators == nil {
		r.validators = make(map[string]ParameterValidator)
	}
	r.validators[component] = validate
	return nil
}

// CheckParameter reports why p could not be stored: an unknown component
// (RabbitMQ's "Validation failed\n\ncomponent X not found\n") or the
// component's validator's refusal.
func (a *Admin) CheckParameter(p Parameter) error {
	r := &a.b.params
	r.mu.Lock()
	validate := r.validators[p.Component]
	r.mu.Unlock()
	if validate == nil {
		return unknownComponent(p.Component)
	}
	if !json.Valid(p.Value) {
		return errors.New("Validation failed\n\nvalue is not JSON\n")
	}
	return validate(canonicalVHost(p.VHost), p.Name, p.Value)
}

// WatchParameters calls fn(vhost, name) after each change of a parameter
// of component, made through this broker's Admin or, in shared mode, by
// another broker: fn re-reads it (GetParameter; ErrNotFound means it was
// deleted). A change may be told more than once. fn runs on the goroutine
// that made the change or on the broker's follower, so it must return
// soon; it may call Admin. cancel stops the calls. Watch first, then
// ListParameters, to miss nothing.
func (a *Admin) WatchParameters(component string, fn func(vhost, name string)) (cancel func()) {
	r := &a.b.params
	w := &paramWatcher{component: component, fn: fn}
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = make(map[*paramWatcher]struct{})
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watchers, w)
		r.mu.Unlock()
	}
}

// notifyParameter tells the watchers of component of a change.
func (b *Broker) notifyParameter(component, vhost, name string) {
	r := &b.params
	r.mu.Lock()
	var fns []func(string, string)
	for w := range r.watchers {
		if w.component == component {
			fns = append(fns, w.fn)
		}
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn(vhost, name)
	}
}

// PutParameter checks p (CheckParameter) and stores it, replacing the
// parameter of that component, vhost and name; it reports whether there
// was none. The vhost must exist.
func (a *Admin) PutParameter(ctx context.Context, p Parameter) (created bool, err error) {
	p.VHost = canonicalVHost(p.VHost)
	if err := a.CheckParameter(p); err != nil {
		return false, err
	}
	if _, err := a.b.stores.Meta.GetVHost(ctx, p.VHost); err != nil {
		return false, fmt.Errorf("broker: vhost %q: %w", p.VHost, err)
	}
	_, err = a.GetParameter(ctx, p.Component, p.VHost, p.Name)
	created = errors.Is(err, meta.ErrNotFound)
	if err != nil && !created {
		return false, err
	}
	if err := a.b.stores.Meta.PutParameter(ctx, p); err != nil {
		return false, err
	}
	a.b.notifyParameter(p.Component, p.VHost, p.Name)
	return created, nil
}

// GetParameter returns one parameter; a missing one is an error wrapping
// ErrNotFound.
func (a *Admin) GetParameter(ctx context.Context, component, vhost, name string) (Parameter, error) {
	vhost = canonicalVHost(vhost)
	ps, err := a.b.stores.Meta.ListParameters(ctx, component, vhost)
	if err != nil {
		return Parameter{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	return Parameter{}, fmt.Errorf("broker: parameter %q of component %q in vhost %q: %w", name, component, vhost, meta.ErrNotFound)
}

// ListParameters returns the parameters of component ("" for every
// component) in vhost ("" for every vhost), sorted by component, vhost
// and name.
func (a *Admin) ListParameters(ctx context.Context, component, vhost string) ([]Parameter, error) {
	if vhost != "" {
		vhost = canonicalVHost(vhost)
	}
	return a.b.stores.Meta.ListParameters(ctx, component, vhost)
}

// DeleteParameter removes one parameter; a missing one is an error
// wrapping ErrNotFound (the management API's 404).
func (a *Admin) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	vhost = canonicalVHost(vhost)
	if _, err := a.GetParameter(ctx, component, vhost, name); err != nil {
		return err
	}
	if err := a.b.stores.Meta.DeleteParameter(ctx, component, vhost, name); err != nil {
		return err
	}
	a.b.notifyParameter(component, vhost, name)
	return nil
}

// PutGlobalParameter stores p, replacing the global parameter of its
// name (RabbitMQ does not validate these); it reports whether there was
// none.
func (a *Admin) PutGlobalParameter(ctx context.Context, p GlobalParameter) (created bool, err error) {
	if p.Name == "" {
		return false, errors.New("broker: a global parameter needs a name")
	}
	if !json.Valid(p.Value) {
		return false, fmt.Errorf("broker: global parameter %q: value is not JSON", p.Name)
	}
	_, err = a.GetGlobalParameter(ctx, p.Name)
	created = errors.Is(err, meta.ErrNotFound)
	if err != nil && !created {
		return false, err
	}
	return created, a.b.stores.Meta.PutGlobalParameter(ctx, p)
}

// GetGlobalParameter returns one global parameter; a missing one is an
// error wrapping ErrNotFound.
func (a *Admin) GetGlobalParameter(ctx context.Context, name string) (GlobalParameter, error) {
	gs, err := a.b.stores.Meta.ListGlobalParameters(ctx)
	if err != nil {
		return GlobalParameter{}, err
	}
	for _, g := range gs {
		if g.Name == name {
			return g, nil
		}
	}
	return GlobalParameter{}, fmt.Errorf("broker: global parameter %q: %w", name, meta.ErrNotFound)
}

// ListGlobalParameters returns every global parameter sorted by name.
func (a *Admin) ListGlobalParameters(ctx context.Context) ([]GlobalParameter, error) {
	return a.b.stores.Meta.ListGlobalParameters(ctx)
}

// DeleteGlobalParameter removes a global parameter; a missing one is an
// error wrapping ErrNotFound.
func (a *Admin) DeleteGlobalParameter(ctx context.Context, name string) error {
	if _, err := a.GetGlobalParameter(ctx, name); err != nil {
		return err
	}
	return a.b.stores.Meta.DeleteGlobalParameter(ctx, name)
}
