package local

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

// PutVHostLimit stores l keyed by vhost and name, synced.
func (s *Store) PutVHostLimit(ctx context.Context, l meta.VHostLimit) error {
	return s.put(ctx, metakey.Limit(l.VHost, l.Name), l, true)
}

// DeleteVHostLimit removes the limit, synced; a missing one is not an
// error.
func (s *Store) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Limit(vhost, name), true)
}

// ListVHostLimits returns every limit, grouped by vhost.
func (s *Store) ListVHostLimits(ctx context.Context) ([]meta.VHostLimit, error) {
	return list[meta.VHostLimit](ctx, s, metakey.KindPrefix(metakey.KindLimit))
}

// PutTopicPermission stores p keyed by user, vhost and exchange, synced.
// The user must not be empty.
func (s *Store) PutTopicPermission(ctx context.Context, p meta.TopicPermission) error {
	if p.User == "" {
		return errEmptyUser
	}
	return s.put(ctx, metakey.Topic(p.User, p.VHost, p.Exchange), p, true)
}

// DeleteTopicPermission removes the topic permission, synced; a missing
// one is not an error.
func (s *Store) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Topic(user, vhost, exchange), true)
}

// ListTopicPermissions returns every topic permission, grouped by user.
func (s *Store) ListTopicPermissions(ctx context.Context) ([]meta.TopicPermission, error) {
	return list[meta.TopicPermission](ctx, s, metakey.KindPrefix(metakey.KindTopic))
}
