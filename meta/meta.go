package meta

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// ErrNotFound is returned by the Get methods when the entity does not exist.
var ErrNotFound = errors.New("meta: not found")

// Binding destination kinds.
const (
	DestinationQueue    = "queue"
	DestinationExchange = "exchange"
)

// QueueKey names a queue: vhost (tenant) and queue name.
type QueueKey struct {
	VHost string
	Name  string
}

// VHost is a virtual host and its metadata (RabbitMQ's vhost metadata:
// description, tags and default queue type). A record stored before the
// metadata existed reads with the metadata fields empty.
type VHost struct {
	Name string
	// Description and Tags are free text for operators.
	Description string   `json:",omitempty"`
	Tags        []string `json:",omitempty"`
	// DefaultQueueType is the type ("classic", "quorum", "stream") a
	// durable, non-exclusive, non-auto-delete queue declared without
	// x-queue-type gets; "" for none.
	DefaultQueueType string `json:",omitempty"`
}

// Permission grants a user configure/write/read regular expressions on a
// vhost. It is the one Permission type: package definitions and the root
// package alias it, and its JSON is the definitions file's (stored records
// written before it had tags read the same, as encoding/json matches keys
// without regard to case).
type Permission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// Compile compiles p's expressions the way RabbitMQ uses them
// (rabbit_auth_backend_internal:check_resource_access): unanchored, so a
// name matches when the expression matches any part of it ("orders"
// matches "my-orders"; anchor with ^ and $ to mean the whole name), and ""
// stands for "^$", matching nothing but the empty name. Go's RE2 syntax
// is PCRE's minus backreferences and lookaround, which are refused. It is
// the one check of a permission, for the broker and a definitions import.
func (p Permission) Compile() (configure, write, read *regexp.Regexp, err error) {
	out := [3]*regexp.Regexp{}
	for i, f := range []struct{ what, expr string }{{"configure", p.Configure}, {"write", p.Write}, {"read", p.Read}} {
		expr := f.expr
		if expr == "" {
			expr = "^$"
		}
		if out[i], err = regexp.Compile(expr); err != nil {
			return nil, nil, nil, fmt.Errorf("broker: %s permission %q: %w", f.what, f.expr, err)
		}
	}
	return out[0], out[1], out[2], nil
}

// Exchange is an exchange declaration. Arguments is the AMQP field table as
// encoded on the wire (opaque to the store), nil for none.
type Exchange struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  []byte
}

// Queue is a queue declaration. Owner is the exclusive owner's connection id
// ("" when not exclusive).
type Queue struct {
	VHost      string
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Owner      string
	Arguments  []byte
}

// Key returns the queue's key.
func (q Queue) Key() QueueKey { return QueueKey{VHost: q.VHost, Name: q.Name} }

// Binding routes messages from the Source exchange to a queue or exchange.
// Durable is true when both ends are durable.
type Binding struct {
	VHost           string
	Source          string
	Destination     string
	DestinationKind string // DestinationQueue or DestinationExchange
	RoutingKey      string
	Arguments       []byte
	Durable         bool
}

// Cursors is the per-queue shared read cursor: the next offset to claim.
// It is all the queue runtime needs from the store. A cursor that was never
// set reads as 0.
type Cursors interface {
	Offset(ctx context.Context, q QueueKey) (uint64, error)
	// CompareAndSwapOffset sets the cursor to new only if it is old. On a
	// mismatch it returns false and no error: the caller re-reads and retries.
	CompareAndSwapOffset(ctx context.Context, q QueueKey, old, new uint64) (swapped bool, err error)
}

// Topology stores exchanges, queues and bindings. Put replaces an existing
// entity with the same key; Delete of a missing entity is not an error.
// A Put of a Durable entity is on disk before it returns.
type Topology interface {
	PutExchange(ctx context.Context, e Exchange) error
	GetExchange(ctx context.Context, vhost, name string) (Exchange, error)
	DeleteExchange(ctx context.Context, vhost, name string) error
	ListExchanges(ctx context.Context, vhost string) ([]Exchange, error)

	// PutQueue stores q. DeleteQueue also deletes the queue's cursor.
	PutQueue(ctx context.Context, q Queue) error
	GetQueue(ctx context.Context, vhost, name string) (Queue, error)
	DeleteQueue(ctx context.Context, vhost, name string) error
	ListQueues(ctx context.Context, vhost string) ([]Queue, error)

	// A binding's key is all its fields but Durable.
	PutBinding(ctx context.Context, b Binding) error
	DeleteBinding(ctx context.Context, b Binding) error
	ListBindings(ctx context.Context, vhost string) ([]Binding, error)
}

// Accounts stores vhosts, users and permissions.
type Accounts interface {
	PutVHost(ctx context.Context, v VHost) error
	GetVHost(ctx context.Context, name string) (VHost, error)
	DeleteVHost(ctx context.Context, name string) error
	ListVHosts(ctx context.Context) ([]VHost, error)

	PutUser(ctx context.Context, u User) error
	GetUser(ctx context.Context, name string) (User, error)
	DeleteUser(ctx context.Context, name string) error
	ListUsers(ctx context.Context) ([]User, error)

	PutPermission(ctx context.Context, p Permission) error
	GetPermission(ctx context.Context, user, vhost string) (Permission, error)
	DeletePermission(ctx context.Context, user, vhost string) error
	ListPermissions(ctx context.Context) ([]Permission, error)

	VHostLimits
	TopicPermissions
}

// Store is the design card's MetaStore. Implementations are safe for
// concurrent use.
type Store interface {
	Cursors
	Topology
	Accounts
	Policies
	Parameters
	// IsLeader reports whether this node runs the leader-only work (the
	// unacked scanner). A single node is always the leader.
	IsLeader() bool
}

// ErrInvalid is matched (errors.Is) by the errors of a control-plane
// write refused for its input: a bad name, hash, regular expression or
// setting. Invalid marks an error so.
var ErrInvalid = errors.New("meta: invalid")

// Invalid returns err, its text unchanged, marked as matching ErrInvalid;
// nil for nil.
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return invalidError{err}
}

type invalidError struct{ err error }

func (e invalidError) Error() string        { return e.err.Error() }
func (e invalidError) Unwrap() error        { return e.err }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }
