package vhosts

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// Store is what the set reads and writes of the meta store.
type Store interface {
	ListVHosts(ctx context.Context) ([]meta.VHost, error)
	PutVHost(ctx context.Context, v meta.VHost) error
}

// Set is the open vhosts. Set its fields before first use; it is then
// safe for concurrent use.
type Set struct {
	Store Store
	// Open opens rec's vhost with rec's settings (the set stores it).
	Open func(ctx context.Context, rec meta.VHost) (*vhost.VHost, error)
	Log  *slog.Logger

	mu       sync.RWMutex
	m        map[string]*vhost.VHost
	deleting map[string]bool
}

// canonical maps "" to "/": both name the default vhost.
func canonical(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// OpenAll opens every configured vhost and every stored one, each with
// its durable topology; on an error the ones opened are closed.
func (s *Set) OpenAll(ctx context.Context, configured []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = make(map[string]*vhost.VHost, len(configured))
	names := make([]string, 0, len(configured))
	for _, name := range configured {
		names = append(names, canonical(name))
	}
	stored, err := s.Store.ListVHosts(ctx)
	if err != nil {
		return fmt.Errorf("broker: list vhosts: %w", err)
	}
	records := make(map[string]meta.VHost, len(stored))
	for _, v := range stored {
		name := canonical(v.Name)
		names = append(names, name)
		v.Name = name
		records[name] = v
	}
	for _, name := range names {
		if _, ok := s.m[name]; ok {
			continue
		}
		rec, ok := records[name]
		if !ok {
			rec = meta.VHost{Name: name}
		}
		if err := s.openLocked(ctx, rec, true); err != nil {
			s.closeLocked()
			return err
		}
	}
	return nil
}

// openLocked stores rec (when store is set) and opens its vhost; s.mu is
// held.
func (s *Set) openLocked(ctx context.Context, rec meta.VHost, store bool) error {
	if store {
		if err := s.Store.PutVHost(ctx, rec); err != nil {
			return err
		}
	}
	vh, err := s.Open(ctx, rec)
	if err != nil {
		return err
	}
	s.m[rec.Name] = vh
	return nil
}

// Close closes every open vhost.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *Set) closeLocked() {
	for _, vh := range s.m {
		vh.Close()
	}
}

// Lookup finds an open vhost by name ("" is "/"): connection.open and
// every other lookup by name.
func (s *Set) Lookup(name string) (*vhost.VHost, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	vh, ok := s.m[canonical(name)]
	return vh, ok
}

// List returns the open vhosts, sorted by name.
func (s *Set) List() []*vhost.VHost {
	s.mu.RLock()
	vs := make([]*vhost.VHost, 0, len(s.m))
	for _, v := range s.m {
		vs = append(vs, v)
	}
	s.mu.RUnlock()
	slices.SortFunc(vs, func(x, y *vhost.VHost) int { return strings.Compare(x.Name(), y.Name()) })
	return vs
}

// Names returns the open vhosts' names, sorted.
func (s *Set) Names() []string {
	vs := s.List()
	names := make([]string, len(vs))
	for i, vh := range vs {
		names[i] = vh.Name()
	}
	return names
}

// Put opens and stores rec's vhost when none of its name is open
// (created), else stores rec and gives the open vhost its default queue
// type.
func (s *Set) Put(ctx context.Context, rec meta.VHost) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vh, ok := s.m[rec.Name]
	if !ok {
		return true, s.openLocked(ctx, rec, true)
	}
	if err := s.Store.PutVHost(ctx, rec); err != nil {
		return false, fmt.Errorf("broker: vhost %q: %w", rec.Name, err)
	}
	vh.SetDefaultQueueType(rec.DefaultQueueType)
	return false, nil
}

// Remove takes a vhost off the open set; until done is called, Sync does
// not open it again from the store.
func (s *Set) Remove(name string) (*vhost.VHost, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vh, ok := s.m[name]
	if !ok {
		return nil, nil, false
	}
	delete(s.m, name)
	if s.deleting == nil {
		s.deleting = make(map[string]bool)
	}
	s.deleting[name] = true
	return vh, func() {
		s.mu.Lock()
		delete(s.deleting, name)
		s.mu.Unlock()
	}, true
}

// Sync brings the set in step with the store's vhost list, stored: it
// opens the stored vhosts not open (and not being removed here) without
// storing them again, and takes off the open ones the store no longer
// lists, which it returns for the caller to drop. ok is false when a
// vhost failed to open (logged).
func (s *Set) Sync(ctx context.Context, stored []meta.VHost) (gone []*vhost.VHost, ok bool) {
	ok = true
	names := make(map[string]bool, len(stored))
	records := make(map[string]meta.VHost, len(stored))
	for _, v := range stored {
		v.Name = canonical(v.Name)
		names[v.Name] = true
		records[v.Name] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range names {
		if _, open := s.m[name]; open || s.deleting[name] {
			continue
		}
		if err := s.openLocked(ctx, records[name], false); err != nil {
			s.Log.Warn("broker: opening vhost created elsewhere", "vhost", name, "err", err)
			ok = false
		}
	}
	for name, vh := range s.m {
		if !names[name] {
			gone = append(gone, vh)
			delete(s.m, name)
		}
	}
	return gone, ok
}
