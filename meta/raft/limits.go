package raft

import (
	"context"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

// PutVHostLimit stores l keyed by vhost and name.
func (n *Node) PutVHostLimit(ctx context.Context, l meta.VHostLimit) error {
	return n.put(ctx, metakey.Limit(l.VHost, l.Name), l)
}

// DeleteVHostLimit removes the limit; a missing one is not an
// error.
func (n *Node) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	return n.del(ctx, metakey.Limit(vhost, name))
}

// ListVHostLimits returns every limit, grouped by vhost.
func (n *Node) ListVHostLimits(ctx context.Context) ([]meta.VHostLimit, error) {
	return list[meta.VHostLimit](ctx, n, metakey.KindPrefix(metakey.KindLimit))
}

// PutTopicPermission stores p keyed by user, vhost and exchange.
// The user must not be empty.
func (n *Node) PutTopicPermission(ctx context.Context, p meta.TopicPermission) error {
	if p.User == "" {
		return errEmptyUser
	}
	return n.put(ctx, metakey.Topic(p.User, p.VHost, p.Exchange), p)
}

// DeleteTopicPermission removes the topic permission; a missing
// one is not an error.
func (n *Node) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	return n.del(ctx, metakey.Topic(user, vhost, exchange))
}

// ListTopicPermissions returns every topic permission, grouped by user.
func (n *Node) ListTopicPermissions(ctx context.Context) ([]meta.TopicPermission, error) {
	return list[meta.TopicPermission](ctx, n, metakey.KindPrefix(metakey.KindTopic))
}
