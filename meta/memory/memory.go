package memory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
)

var _ meta.Store = (*Store)(nil)

// Store is an in-memory meta.Store. The zero value is not usable; call New.
type Store struct {
	mu struct {
		sync.RWMutex
		vhosts      map[string]meta.VHost
		users       map[string]meta.User
		permissions map[permissionKey]meta.Permission
		limits      map[limitKey]meta.VHostLimit
		topics      map[topicKey]meta.TopicPermission
		// The topology maps are keyed by vhost first so List is one lookup.
		exchanges map[string]map[string]meta.Exchange
		queues    map[string]map[string]meta.Queue
		bindings  map[string]map[bindingKey]meta.Binding
		policies  map[string]map[policyKey][]byte // policy.go
		params    map[paramKey]meta.Parameter     // parameter.go
		globals   map[string]meta.GlobalParameter // parameter.go
	}
	cursors struct {
		sync.RWMutex
		// A cursor is created on first use and dropped by DeleteQueue. A
		// swap that loaded the pointer before the delete lands on the
		// dropped word: it is ordered before the delete, which is allowed
		// because the two calls overlapped.
		m map[meta.QueueKey]*atomic.Uint64
		// peak rebuilds m once deletes left it a quarter of its largest
		// size (shrink.Map).
		peak shrink.Peak
	}
}

type permissionKey struct{ user, vhost string }

// bindingKey is every field of a binding but Durable (the meta contract's
// binding identity). nil and empty Arguments are the same key.
type bindingKey struct {
	source, destination, kind, routingKey, arguments string
}

func keyOf(b meta.Binding) bindingKey {
	return bindingKey{b.Source, b.Destination, b.DestinationKind, b.RoutingKey, string(b.Arguments)}
}

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.mu.vhosts = make(map[string]meta.VHost)
	s.mu.users = make(map[string]meta.User)
	s.mu.permissions = make(map[permissionKey]meta.Permission)
	s.mu.limits = make(map[limitKey]meta.VHostLimit)
	s.mu.topics = make(map[topicKey]meta.TopicPermission)
	s.mu.exchanges = make(map[string]map[string]meta.Exchange)
	s.mu.queues = make(map[string]map[string]meta.Queue)
	s.mu.bindings = make(map[string]map[bindingKey]meta.Binding)
	s.mu.policies = make(map[string]map[policyKey][]byte)
	s.cursors.m = make(map[meta.QueueKey]*atomic.Uint64)
	return s
}

// IsLeader is always true: an in-memory store serves a single node.
func (s *Store) IsLeader() bool { return true }

// Offset returns the queue's cursor, 0 if it was never set.
func (s *Store) Offset(ctx context.Context, q meta.QueueKey) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.cursors.RLock()
	c := s.cursors.m[q]
	s.cursors.RUnlock()
	if c == nil {
		return 0, nil
	}
	return c.Load(), nil
}

// CompareAndSwapOffset sets the queue's cursor to new if it is old.
func (s *Store) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return s.cursor(q).CompareAndSwap(old, new), nil
}

// cursor returns q's cursor word, creating it at 0.
func (s *Store) cursor(q meta.QueueKey) *atomic.Uint64 {
	s.cursors.RLock()
	c := s.cursors.m[q]
	s.cursors.RUnlock()
	if c != nil {
		return c
	}
	s.cursors.Lock()
	defer s.cursors.Unlock()
	if c = s.cursors.m[q]; c == nil {
		c = new(atomic.Uint64)
		s.cursors.m[q] = c
	}
	return c
}

// PutExchange stores e, replacing any exchange with the same vhost and name.
func (s *Store) PutExchange(ctx context.Context, e meta.Exchange) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.Arguments = bytes.Clone(e.Arguments)
	s.mu.Lock()
	defer s.mu.Unlock()
	put(s.mu.exchanges, e.VHost, e.Name, e)
	return nil
}

// GetExchange returns the exchange or an error matching meta.ErrNotFound.
func (s *Store) GetExchange(ctx context.Context, vhost, name string) (meta.Exchange, error) {
	if err := ctx.Err(); err != nil {
		return meta.Exchange{}, err
	}
	s.mu.RLock()
	e, ok := s.mu.exchanges[vhost][name]
	s.mu.RUnlock()
	if !ok {
		return meta.Exchange{}, fmt.Errorf("%w: exchange %q in vhost %q", meta.ErrNotFound, name, vhost)
	}
	e.Arguments = bytes.Clone(e.Arguments)
	return e, nil
}

// DeleteExchange removes the exchange; a missing one is not an error.
func (s *Store) DeleteExchange(ctx context.Context, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	remove(s.mu.exchanges, vhost, name)
	return nil
}

// ListExchanges returns the vhost's exchanges sorted by name.
func (s *Store) ListExchanges(ctx context.Context, vhost string) ([]meta.Exchange, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Exchange, 0, len(s.mu.exchanges[vhost]))
	for _, e := range s.mu.exchanges[vhost] {
		e.Arguments = bytes.Clone(e.Arguments)
		out = append(out, e)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.Exchange) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// PutQueue stores q, replacing any queue with the same vhost and name. The
// cursor is left alone: redeclaring a queue does not rewind it.
func (s *Store) PutQueue(ctx context.Context, q meta.Queue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.Arguments = bytes.Clone(q.Arguments)
	s.mu.Lock()
	defer s.mu.Unlock()
	put(s.mu.queues, q.VHost, q.Name, q)
	return nil
}

// GetQueue returns the queue or an error matching meta.ErrNotFound.
func (s *Store) GetQueue(ctx context.Context, vhost, name string) (meta.Queue, error) {
	if err := ctx.Err(); err != nil {
		return meta.Queue{}, err
	}
	s.mu.RLock()
	q, ok := s.mu.queues[vhost][name]
	s.mu.RUnlock()
	if !ok {
		return meta.Queue{}, fmt.Errorf("%w: queue %q in vhost %q", meta.ErrNotFound, name, vhost)
	}
	q.Arguments = bytes.Clone(q.Arguments)
	return q, nil
}

// DeleteQueue removes the queue and its cursor; a missing one is not an error.
func (s *Store) DeleteQueue(ctx context.Context, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	remove(s.mu.queues, vhost, name)
	// Under s.mu too, so nobody sees the queue gone but its cursor still set.
	s.cursors.Lock()
	delete(s.cursors.m, meta.QueueKey{VHost: vhost, Name: name})
	s.cursors.m = shrink.Map(s.cursors.m, &s.cursors.peak)
	s.cursors.Unlock()
	return nil
}

// ListQueues returns the vhost's queues sorted by name.
func (s *Store) ListQueues(ctx context.Context, vhost string) ([]meta.Queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Queue, 0, len(s.mu.queues[vhost]))
	for _, q := range s.mu.queues[vhost] {
		q.Arguments = bytes.Clone(q.Arguments)
		out = append(out, q)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.Queue) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// PutBinding stores b, replacing the binding with the same key (all fields
// but Durable).
func (s *Store) PutBinding(ctx context.Context, b meta.Binding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBinding(b); err != nil {
		return err
	}
	b.Arguments = bytes.Clone(b.Arguments)
	s.mu.Lock()
	defer s.mu.Unlock()
	put(s.mu.bindings, b.VHost, keyOf(b), b)
	return nil
}

// DeleteBinding removes the binding with b's key; a missing one is not an
// error.
func (s *Store) DeleteBinding(ctx context.Context, b meta.Binding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBinding(b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	remove(s.mu.bindings, b.VHost, keyOf(b))
	return nil
}

// ListBindings returns the vhost's bindings sorted by source, destination
// kind, destination, routing key and arguments.
func (s *Store) ListBindings(ctx context.Context, vhost string) ([]meta.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Binding, 0, len(s.mu.bindings[vhost]))
	for _, b := range s.mu.bindings[vhost] {
		b.Arguments = bytes.Clone(b.Arguments)
		out = append(out, b)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.Binding) int {
		return cmp.Or(
			cmp.Compare(a.Source, b.Source),
			cmp.Compare(a.DestinationKind, b.DestinationKind),
			cmp.Compare(a.Destination, b.Destination),
			cmp.Compare(a.RoutingKey, b.RoutingKey),
			bytes.Compare(a.Arguments, b.Arguments),
		)
	})
	return out, nil
}

// PutVHost stores v.
func (s *Store) PutVHost(ctx context.Context, v meta.VHost) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.Tags = slices.Clone(v.Tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.vhosts[v.Name] = v
	return nil
}

// GetVHost returns the vhost or an error matching meta.ErrNotFound.
func (s *Store) GetVHost(ctx context.Context, name string) (meta.VHost, error) {
	if err := ctx.Err(); err != nil {
		return meta.VHost{}, err
	}
	s.mu.RLock()
	v, ok := s.mu.vhosts[name]
	s.mu.RUnlock()
	if !ok {
		return meta.VHost{}, fmt.Errorf("%w: vhost %q", meta.ErrNotFound, name)
	}
	v.Tags = slices.Clone(v.Tags)
	return v, nil
}

// DeleteVHost removes the vhost record. Its exchanges, queues and
// permissions are the broker's to delete first.
func (s *Store) DeleteVHost(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.vhosts, name)
	return nil
}

// ListVHosts returns every vhost sorted by name.
func (s *Store) ListVHosts(ctx context.Context) ([]meta.VHost, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.VHost, 0, len(s.mu.vhosts))
	for _, v := range s.mu.vhosts {
		v.Tags = slices.Clone(v.Tags)
		out = append(out, v)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.VHost) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// PutUser stores u. The name must not be empty.
func (s *Store) PutUser(ctx context.Context, u meta.User) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.Name == "" {
		return errEmptyUser
	}
	u, err := storedUser(u)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.users[u.Name] = u
	return nil
}

// GetUser returns the user or an error matching meta.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, name string) (meta.User, error) {
	if err := ctx.Err(); err != nil {
		return meta.User{}, err
	}
	s.mu.RLock()
	u, ok := s.mu.users[name]
	s.mu.RUnlock()
	if !ok {
		return meta.User{}, fmt.Errorf("%w: user %q", meta.ErrNotFound, name)
	}
	u.Tags = slices.Clone(u.Tags)
	return u, nil
}

// DeleteUser removes the user; its permissions are the broker's to delete.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.users, name)
	return nil
}

// ListUsers returns every user sorted by name.
func (s *Store) ListUsers(ctx context.Context) ([]meta.User, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.User, 0, len(s.mu.users))
	for _, u := range s.mu.users {
		u.Tags = slices.Clone(u.Tags)
		out = append(out, u)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.User) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// PutPermission stores p, keyed by user and vhost. The user must not be
// empty.
func (s *Store) PutPermission(ctx context.Context, p meta.Permission) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.User == "" {
		return errEmptyUser
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.permissions[permissionKey{p.User, p.VHost}] = p
	return nil
}

// GetPermission returns the user's permission on the vhost or an error
// matching meta.ErrNotFound.
func (s *Store) GetPermission(ctx context.Context, user, vhost string) (meta.Permission, error) {
	if err := ctx.Err(); err != nil {
		return meta.Permission{}, err
	}
	s.mu.RLock()
	p, ok := s.mu.permissions[permissionKey{user, vhost}]
	s.mu.RUnlock()
	if !ok {
		return meta.Permission{}, fmt.Errorf("%w: permission of user %q on vhost %q", meta.ErrNotFound, user, vhost)
	}
	return p, nil
}

// DeletePermission removes the permission; a missing one is not an error.
func (s *Store) DeletePermission(ctx context.Context, user, vhost string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.permissions, permissionKey{user, vhost})
	return nil
}

// ListPermissions returns every permission sorted by user, then vhost.
func (s *Store) ListPermissions(ctx context.Context) ([]meta.Permission, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.Permission, 0, len(s.mu.permissions))
	for _, p := range s.mu.permissions {
		out = append(out, p)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.Permission) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost))
	})
	return out, nil
}

var errEmptyUser = errors.New("memory: empty user name")

// checkBinding rejects a destination kind the router would not understand,
// so a bad binding fails at declare time rather than when routing.
func checkBinding(b meta.Binding) error {
	switch b.DestinationKind {
	case meta.DestinationQueue, meta.DestinationExchange:
		return nil
	}
	return fmt.Errorf("memory: binding destination kind %q is neither %q nor %q",
		b.DestinationKind, meta.DestinationQueue, meta.DestinationExchange)
}

// storedUser is u as the other stores read it back: through its record
// form (meta.EncodeRecord), so a user reads the same from every store,
// and a copy.
func storedUser(u meta.User) (meta.User, error) {
	b, err := meta.EncodeRecord(u)
	if err != nil {
		return meta.User{}, err
	}
	var out meta.User
	return out, meta.DecodeRecord(b, &out)
}

// put stores v under m[vhost][k], creating the vhost's map.
func put[K comparable, V any](m map[string]map[K]V, vhost string, k K, v V) {
	inner := m[vhost]
	if inner == nil {
		inner = make(map[K]V)
		m[vhost] = inner
	}
	inner[k] = v
}

// remove deletes m[vhost][k] and drops the vhost's map once empty, so
// deleted vhosts leave nothing behind.
func remove[K comparable, V any](m map[string]map[K]V, vhost string, k K) {
	inner := m[vhost]
	delete(inner, k)
	if len(inner) == 0 {
		delete(m, vhost)
	}
}
