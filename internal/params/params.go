package params

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/warrenmq/broker/meta"
)

// Validator checks a parameter's value before Put stores it; its error is
// the refusal, in the component's own words.
type Validator func(vhost, name string, value json.RawMessage) error

// ErrUnknownComponent is what Put wraps for a component nobody
// registered; its text is RabbitMQ's ("component shovel not found").
var ErrUnknownComponent = errors.New("component not found")

// unknownComponent is Check's refusal of a component nobody registered:
// RabbitMQ's rabbit_runtime_parameters text, and ErrUnknownComponent for
// errors.Is.
type unknownComponent string

func (c unknownComponent) Error() string {
	return "Validation failed\n\ncomponent " + string(c) + " not found\n"
}

func (unknownComponent) Is(target error) bool { return target == ErrUnknownComponent }

// Registry is the broker's parameters. Set Store before first use; it is
// then safe for concurrent use.
type Registry struct {
	Store interface {
		meta.Parameters
		GetVHost(ctx context.Context, name string) (meta.VHost, error)
	}

	mu         sync.Mutex
	validators map[string]Validator
	watchers   map[*watcher]struct{}
}

type watcher struct {
	component string
	fn        func(vhost, name string)
}

// canonical maps "" to "/": both name the default vhost.
func canonical(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// Register makes component's parameters storable, each checked with
// validate first. Registering a component twice, or one of the components
// that have their own verbs ("policy", "operator_policy", "vhost-limits"),
// is an error.
func (r *Registry) Register(component string, validate Validator) error {
	switch component {
	case "", "policy", "operator_policy", "vhost-limits":
		return fmt.Errorf("broker: component %q cannot be registered", component)
	}
	if validate == nil {
		return fmt.Errorf("broker: component %q: nil validator", component)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.validators[component]; ok {
		return fmt.Errorf("broker: component %q is already registered", component)
	}
	if r.validators == nil {
		r.validators = make(map[string]Validator)
	}
	r.validators[component] = validate
	return nil
}

// Check reports why p could not be stored: an unknown component, a value
// that is not JSON, or the component's validator's refusal.
func (r *Registry) Check(p meta.Parameter) error {
	r.mu.Lock()
	validate := r.validators[p.Component]
	r.mu.Unlock()
	if validate == nil {
		return unknownComponent(p.Component)
	}
	if !json.Valid(p.Value) {
		return errors.New("Validation failed\n\nvalue is not JSON\n")
	}
	return validate(canonical(p.VHost), p.Name, p.Value)
}

// Watch calls fn(vhost, name) after each change of a parameter of
// component; cancel stops the calls.
func (r *Registry) Watch(component string, fn func(vhost, name string)) (cancel func()) {
	w := &watcher{component: component, fn: fn}
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = make(map[*watcher]struct{})
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watchers, w)
		r.mu.Unlock()
	}
}

// Notify tells the watchers of component of a change.
func (r *Registry) Notify(component, vhost, name string) {
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

// Put checks and stores p, replacing the parameter of that component,
// vhost and name; it reports whether there was none. The vhost must
// exist.
func (r *Registry) Put(ctx context.Context, p meta.Parameter) (created bool, err error) {
	p.VHost = canonical(p.VHost)
	if err := r.Check(p); err != nil {
		return false, err
	}
	if _, err := r.Store.GetVHost(ctx, p.VHost); err != nil {
		return false, fmt.Errorf("broker: vhost %q: %w", p.VHost, err)
	}
	_, err = r.Get(ctx, p.Component, p.VHost, p.Name)
	created = errors.Is(err, meta.ErrNotFound)
	if err != nil && !created {
		return false, err
	}
	if err := r.Store.PutParameter(ctx, p); err != nil {
		return false, err
	}
	r.Notify(p.Component, p.VHost, p.Name)
	return created, nil
}

// Get returns one parameter; a missing one is an error wrapping
// meta.ErrNotFound.
func (r *Registry) Get(ctx context.Context, component, vhost, name string) (meta.Parameter, error) {
	vhost = canonical(vhost)
	ps, err := r.Store.ListParameters(ctx, component, vhost)
	if err != nil {
		return meta.Parameter{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	return meta.Parameter{}, fmt.Errorf("broker: parameter %q of component %q in vhost %q: %w", name, component, vhost, meta.ErrNotFound)
}

// List returns the parameters of component ("" for every component) in
// vhost ("" for every vhost), sorted by component, vhost and name.
func (r *Registry) List(ctx context.Context, component, vhost string) ([]meta.Parameter, error) {
	if vhost != "" {
		vhost = canonical(vhost)
	}
	return r.Store.ListParameters(ctx, component, vhost)
}

// Delete removes one parameter; a missing one is an error wrapping
// meta.ErrNotFound.
func (r *Registry) Delete(ctx context.Context, component, vhost, name string) error {
	vhost = canonical(vhost)
	if _, err := r.Get(ctx, component, vhost, name); err != nil {
		return err
	}
	if err := r.Store.DeleteParameter(ctx, component, vhost, name); err != nil {
		return err
	}
	r.Notify(component, vhost, name)
	return nil
}

// PutGlobal stores p, replacing the global parameter of its name
// (RabbitMQ does not validate these); it reports whether there was none.
func (r *Registry) PutGlobal(ctx context.Context, p meta.GlobalParameter) (created bool, err error) {
	if p.Name == "" {
		return false, errors.New("broker: a global parameter needs a name")
	}
	if !json.Valid(p.Value) {
		return false, fmt.Errorf("broker: global parameter %q: value is not JSON", p.Name)
	}
	_, err = r.GetGlobal(ctx, p.Name)
	created = errors.Is(err, meta.ErrNotFound)
	if err != nil && !created {
		return false, err
	}
	return created, r.Store.PutGlobalParameter(ctx, p)
}

// GetGlobal returns one global parameter; a missing one is an error
// wrapping meta.ErrNotFound.
func (r *Registry) GetGlobal(ctx context.Context, name string) (meta.GlobalParameter, error) {
	gs, err := r.Store.ListGlobalParameters(ctx)
	if err != nil {
		return meta.GlobalParameter{}, err
	}
	for _, g := range gs {
		if g.Name == name {
			return g, nil
		}
	}
	return meta.GlobalParameter{}, fmt.Errorf("broker: global parameter %q: %w", name, meta.ErrNotFound)
}

// DeleteGlobal removes a global parameter; a missing one is an error
// wrapping meta.ErrNotFound.
func (r *Registry) DeleteGlobal(ctx context.Context, name string) error {
	if _, err := r.GetGlobal(ctx, name); err != nil {
		return err
	}
	return r.Store.DeleteGlobalParameter(ctx, name)
}
