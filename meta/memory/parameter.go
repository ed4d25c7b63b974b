package memory

import (
	"bytes"
	"cmp"
	"context"
	"slices"

	"github.com/warrenmq/broker/meta"
)

var _ meta.Parameters = (*Store)(nil)

type paramKey struct{ component, vhost, name string }

// PutParameter stores p, replacing the parameter with its key.
func (s *Store) PutParameter(ctx context.Context, p meta.Parameter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Value = bytes.Clone(p.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.params == nil {
		s.mu.params = make(map[paramKey]meta.Parameter)
	}
	s.mu.params[paramKey{p.Component, p.VHost, p.Name}] = p
	return nil
}

// DeleteParameter removes a parameter; a missing one is not an error.
func (s *Store) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.params, paramKey{component, vhost, name})
	return nil
}

// ListParameters returns component's parameters in vhost ("" for any).
func (s *Store) ListParameters(ctx context.Context, component, vhost string) ([]meta.Parameter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	all := make([]meta.Parameter, 0, len(s.mu.params))
	for _, p := range s.mu.params {
		p.Value = bytes.Clone(p.Value)
		all = append(all, p)
	}
	s.mu.RUnlock()
	return meta.SelectParameters(all, component, vhost), nil
}

// PutGlobalParameter stores p, replacing the global parameter of its name.
func (s *Store) PutGlobalParameter(ctx context.Context, p meta.GlobalParameter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Value = bytes.Clone(p.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.globals == nil {
		s.mu.globals = make(map[string]meta.GlobalParameter)
	}
	s.mu.globals[p.Name] = p
	return nil
}

// DeleteGlobalParameter removes a global parameter; a missing one is not
// an error.
func (s *Store) DeleteGlobalParameter(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.globals, name)
	return nil
}

// ListGlobalParameters returns every global parameter sorted by name.
func (s *Store) ListGlobalParameters(ctx context.Context) ([]meta.GlobalParameter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.GlobalParameter, 0, len(s.mu.globals))
	for _, p := range s.mu.globals {
		p.Value = bytes.Clone(p.Value)
		out = append(out, p)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.GlobalParameter) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
