package meta

import "context"

// VHostLimit is one of a vhost's limits (RabbitMQ's vhost-limits runtime
// parameter): Name is "max-connections" or "max-queues" (the store does
// not check it); a negative Value means no limit.
type VHostLimit struct {
	VHost string
	Name  string
	Value int64
}

// VHostLimits stores vhost limits keyed by vhost and name. Put replaces
// the limit of that name; Delete of a missing one is not an error. Every
// Put and Delete is durable before it returns. Deleting a vhost's limits
// with the vhost is the broker's job.
type VHostLimits interface {
	PutVHostLimit(ctx context.Context, l VHostLimit) error
	DeleteVHostLimit(ctx context.Context, vhost, name string) error
	// ListVHostLimits returns every limit of every vhost.
	ListVHostLimits(ctx context.Context) ([]VHostLimit, error)
}

// TopicPermission is RabbitMQ's topic permission: on topic exchange
// Exchange of VHost, User may publish with routing keys Write matches and
// bind with keys Read matches (regular expressions; "" matches nothing
// but the empty key). It is the one TopicPermission type, aliased by
// package definitions and the root package; its JSON is the definitions
// file's.
type TopicPermission struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// TopicPermissions stores topic permissions keyed by user, vhost and
// exchange, with VHostLimits' rules. The user must not be empty.
type TopicPermissions interface {
	PutTopicPermission(ctx context.Context, p TopicPermission) error
	DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error
	// ListTopicPermissions returns every topic permission.
	ListTopicPermissions(ctx context.Context) ([]TopicPermission, error)
}
