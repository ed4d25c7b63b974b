package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/warrenmq/broker/meta"
)

type limitKey struct{ vhost, name string }

type topicKey struct{ user, vhost, exchange string }

// PutVHostLimit stores l keyed by vhost and name.
func (s *Store) PutVHostLimit(ctx context.Context, l meta.VHostLimit) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.limits[limitKey{l.VHost, l.Name}] = l
	return nil
}

// DeleteVHostLimit removes the limit; a missing one is not an error.
func (s *Store) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.limits, limitKey{vhost, name})
	return nil
}

// ListVHostLimits returns every limit sorted by vhost, then name.
func (s *Store) ListVHostLimits(ctx context.Context) ([]meta.VHostLimit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.VHostLimit, 0, len(s.mu.limits))
	for _, l := range s.mu.limits {
		out = append(out, l)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.VHostLimit) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// PutTopicPermission stores p keyed by user, vhost and exchange. The user
// must not be empty.
func (s *Store) PutTopicPermission(ctx context.Context, p meta.TopicPermission) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.User == "" {
		return errEmptyUser
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.topics[topicKey{p.User, p.VHost, p.Exchange}] = p
	return nil
}

// DeleteTopicPermission removes the topic permission; a missing one is
// not an error.
func (s *Store) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.topics, topicKey{user, vhost, exchange})
	return nil
}

// ListTopicPermissions returns every topic permission sorted by user,
// vhost and exchange.
func (s *Store) ListTopicPermissions(ctx context.Context) ([]meta.TopicPermission, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]meta.TopicPermission, 0, len(s.mu.topics))
	for _, p := range s.mu.topics {
		out = append(out, p)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b meta.TopicPermission) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Exchange, b.Exchange))
	})
	return out, nil
}
