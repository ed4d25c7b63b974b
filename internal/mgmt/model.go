package mgmt

import (
	"context"
	"errors"
	"net"
	"regexp"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// Broker is what the management API reads and changes: the model the
// handler is fed by. The root package implements it with an adapter over
// its Broker; the API never reaches further. Vhost names are canonical
// ("/" for the default vhost) in everything it returns. Every method is
// called concurrently by the requests being served.
type Broker interface {
	Reader
	Accounts
	Admin
	Writer
}

// Reader takes snapshots. Each is exact when taken; a listing as a whole
// is not one instant while clients are active.
type Reader interface {
	// NodeName is this node's name, as every object's "node" shows it.
	NodeName() string
	// Overview counts the broker's objects and messages.
	Overview() Overview
	// Node reports the node's alarms and, on a cluster member, its raft
	// state.
	Node() Node
	// VHosts lists the vhosts' names, sorted.
	VHosts() []string
	// VHost returns the canonical name of the vhost name names ("" is
	// "/"), false when there is none.
	VHost(name string) (string, bool)
	// Exchanges lists a vhost's exchanges, the default one ("") included,
	// sorted by name; Exchange finds one.
	Exchanges(vhost string) []definitions.Exchange
	Exchange(vhost, name string) (definitions.Exchange, bool)
	// QueueNames lists a vhost's queues' names, sorted; HasQueue reports
	// whether one exists, whoever owns it. Neither asks the queues.
	QueueNames(vhost string) []string
	HasQueue(vhost, name string) bool
	// Queues lists a vhost's queues with their counts, sorted by name; a
	// queue deleted while it is asked is left out. Queue asks one.
	Queues(ctx context.Context, vhost string) []Queue
	Queue(ctx context.Context, vhost, name string) (Queue, bool)
	// Bindings lists a vhost's declared bindings (not the default
	// exchange's implicit ones).
	Bindings(vhost string) []routing.Binding
	// Connections lists the open connections, direct ones included,
	// sorted by ID, each with its channels and consumers.
	Connections() []Connection
}

// Accounts are the users, their permissions and logins: the same stored
// accounts AMQP uses.
type Accounts interface {
	// Authenticate checks a login as an AMQP login is checked (the same
	// throttle of failed attempts from one source) and returns the user:
	// ErrLoginFailed for a wrong name or password, ErrUnavailable when the
	// user store did not answer in time, ErrShuttingDown when the broker
	// closed while the login waited.
	Authenticate(ctx context.Context, name, password string, from net.Addr) (Caller, error)
	// Grant returns the user's permissions on the vhost compiled as AMQP
	// checks them, nil (and no error) when the user has none there.
	Grant(ctx context.Context, user, vhost string) (*Grant, error)
}

// Admin is the control plane the API's writes of users, permissions,
// vhosts, limits, topic permissions and definitions go through: the
// broker's own (the root package's *broker.Admin has exactly these
// verbs), so a write here is the write the Go API and a definitions
// import make. Errors wrap meta.ErrInvalid for bad input (400) and
// meta.ErrNotFound for a missing object (404).
type Admin interface {
	// ListUsers lists the stored users and GetUser reads one, with
	// salted hashes, never passwords. PutUser stores u as a definitions
	// file carries it (Password, or PasswordHash with HashingAlgorithm;
	// neither is a user who cannot log in with a password), replacing
	// the user of that name. DeleteUser deletes a user, its permissions
	// and its connections.
	ListUsers(ctx context.Context) ([]definitions.User, error)
	GetUser(ctx context.Context, name string) (definitions.User, error)
	PutUser(ctx context.Context, u definitions.User) error
	DeleteUser(ctx context.Context, name string) error
	// ListPermissions lists the stored permissions and GetPermission
	// reads one; PutPermission replaces the user's permissions on the
	// vhost (the user and vhost must exist), DeletePermission removes
	// them (open connections lose them at their next check).
	ListPermissions(ctx context.Context) ([]definitions.Permission, error)
	GetPermission(ctx context.Context, user, vhost string) (definitions.Permission, error)
	PutPermission(ctx context.Context, p definitions.Permission) error
	DeletePermission(ctx context.Context, user, vhost string) error
	// GetVHost returns a vhost's metadata and limits; PutVHost creates a
	// vhost with v's metadata or replaces an existing one's (created
	// reports which); DeleteVHost deletes one with everything in it and
	// closes its connections.
	GetVHost(ctx context.Context, name string) (definitions.VHost, error)
	PutVHost(ctx context.Context, v definitions.VHost) (created bool, err error)
	DeleteVHost(ctx context.Context, name string) error
	// ListVHostLimits returns every vhost's limits by vhost and name;
	// PutVHostLimit and DeleteVHostLimit change one.
	ListVHostLimits(ctx context.Context) (map[string]map[string]int64, error)
	PutVHostLimit(ctx context.Context, vhost, name string, value int64) error
	DeleteVHostLimit(ctx context.Context, vhost, name string) error
	// ListTopicPermissions lists the stored topic permissions;
	// PutTopicPermission replaces the user's on p's exchange,
	// DeleteTopicPermission removes the user's on exchange of the vhost
	// ("" for every exchange).
	ListTopicPermissions(ctx context.Context) ([]definitions.TopicPermission, error)
	PutTopicPermission(ctx context.Context, p definitions.TopicPermission) (created bool, err error)
	DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error
	// Export and Import are the broker's definitions (package
	// definitions).
	Export(ctx context.Context) (*definitions.File, error)
	Import(ctx context.Context, d *definitions.File) error
}

// Writer changes the broker. Declarations and deletions act as a
// connection of their own would over AMQP: the same validation and reply
// codes (*amqp.Error), and another connection's exclusive queue is 405
// RESOURCE_LOCKED. A vhost or queue that is gone is an error wrapping
// ErrNotFound.
type Writer interface {
	DeclareExchange(ctx context.Context, vhost string, m *amqp.ExchangeDeclare) error
	DeleteExchange(ctx context.Context, vhost, name string, ifUnused bool) error
	DeclareQueue(ctx context.Context, vhost string, m *amqp.QueueDeclare) error
	DeleteQueue(ctx context.Context, vhost, name string, ifUnused, ifEmpty bool) error
	Purge(ctx context.Context, vhost, name string) error
	Bind(ctx context.Context, vhost string, b routing.Binding) error
	Unbind(ctx context.Context, vhost string, b routing.Binding) error
	// CloseConnection closes the connection with that ID with code and
	// reason; one that is gone already is left alone.
	CloseConnection(id string, code uint16, reason string)
	// OpenChannel opens a direct channel as user on vhost, with that
	// user's permissions (amqp091 errors, as the client library's):
	// user.Authz's when set, else the stored ones.
	OpenChannel(ctx context.Context, user Caller, vhost string) (DirectChannel, error)
}

// DirectChannel is the part of the broker's direct channel that a get, a
// publish and the aliveness test use; each method is amqp091.Channel's.
type DirectChannel interface {
	Get(queue string, autoAck bool) (amqp091.Delivery, bool, error)
	Reject(tag uint64, requeue bool) error
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	Confirm(noWait bool) error
	NotifyPublish(c chan amqp091.Confirmation) chan amqp091.Confirmation
	NotifyReturn(c chan amqp091.Return) chan amqp091.Return
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	Close() error
}

// Errors a Broker returns.
var (
	ErrNotFound     = errors.New("mgmt: not found")
	ErrInvalid      = errors.New("mgmt: invalid")
	ErrLoginFailed  = errors.New("mgmt: login failed")
	ErrUnavailable  = errors.New("mgmt: the user store did not answer")
	ErrShuttingDown = errors.New("mgmt: broker shutting down")
)

// Caller is the user a request authenticated as (not a stored user:
// that is definitions.User).
type Caller struct {
	Name string
	Tags []string
	// Authz, when set, decides the user's vhost access and permissions in
	// place of the stored grants (Accounts.Grant): the Authorizer of the
	// Options.Auth backend that let the user in, asked about
	// auth.Identity{User: Name, Tags: Tags}. OpenChannel's channel then
	// decides through it too.
	Authz auth.Authorizer
}

// Grant is a user's permissions on one vhost: a name matches when the
// expression matches it (as rabbit_access_control checks it).
type Grant struct {
	Configure, Write, Read *regexp.Regexp
}

// Counters count message events since the broker (or a queue) started;
// the fields are the root package's MessageCounters'.
type Counters struct {
	Published, ReturnedUnroutable, DroppedUnroutable, Confirmed  uint64
	Enqueued                                                     uint64
	Delivered, DeliveredNoAck, Got, GotNoAck, Redelivered, Acked uint64
	DeadLettered                                                 uint64
}

// Overview is what /api/overview shows.
type Overview struct {
	ProductVersion string
	// RabbitMQVersion is the RabbitMQ release whose behaviour the broker
	// copies (its version profile), reported as rabbitmq_version.
	RabbitMQVersion string
	// LocalRandomExchange: that release has the x-local-random exchange
	// type (4.0 and later), listed among the exchange types.
	LocalRandomExchange bool
	// Listeners are the AMQP listeners' addresses.
	Listeners                                           []*net.TCPAddr
	Connections, Channels, Consumers, Exchanges, Queues int
	Ready, Unacked                                      uint64
	Totals                                              Counters
	ConnectionsOpened, ConnectionsClosed                uint64
	ChannelsOpened, ChannelsClosed                      uint64
}

// Node is what /api/nodes shows beyond the name: RabbitMQ's alarm fields
// (a limit of 0 is not monitored, DiskFree is -1 when unknown), the
// process's memory (MemUsed, as RabbitMQ's mem_used) and the message bytes
// the memory alarm compares with MemLimit, and the raft state of a
// replicated meta store (nil otherwise).
type Node struct {
	MemAlarm, DiskFreeAlarm bool
	MemUsed, MemLimit       int64
	MessageBytes            int64
	DiskFree, DiskFreeLimit int64
	Raft                    *meta.ReplicationStatus
}

// Queue is a queue with its counts.
type Queue struct {
	VHost, Name                    string
	Durable, AutoDelete, Exclusive bool
	Args                           amqp.Table
	Ready, Unacked                 uint64
	Consumers                      int
	Memory                         uint64
	Counters                       Counters
	// Policy is what applies to the queue (policies.go).
	Policy policy.Match
	// Stream describes a stream's log (x-queue-type stream); nil for
	// other queues.
	Stream *Stream
	// Replication is the queue's own raft group on a cluster member (a
	// quorum queue or stream); nil for other queues.
	Replication *meta.QueueReplication
}

// Stream is a stream's log and where its consumers read.
type Stream struct {
	FirstOffset, LastOffset, NextOffset uint64
	Bytes                               int64
	Segments                            int
	Readers                             []StreamReader
}

// StreamReader is one consumer of a stream: its tag, its channel and the
// next offset it will be sent.
type StreamReader struct {
	Tag        string
	Connection string
	Channel    uint16
	Offset     uint64
}

// Connection is an open connection. User, VHost, ClientProperties and the
// tuning are known once it is open.
type Connection struct {
	ID string
	// State is RabbitMQ's word for it ("running", "blocked", ...).
	State            string
	User, VHost      string
	ClientProperties amqp.Table
	ChannelMax       uint16
	FrameMax         uint32
	Heartbeat        time.Duration
	ConnectedAt      time.Time
	RecvOct, SendOct uint64
	// ChannelCount is the connection's own count of open channels;
	// Channels describes them.
	ChannelCount int
	Channels     []Channel
	// Peer and Local are the socket's ends; Direct is an in-process
	// connection, which has no socket.
	Peer, Local net.Addr
	Direct      bool
}

// Channel is an open channel.
type Channel struct {
	Number         uint16
	Consumers      []Consumer // sorted by tag
	Unacked        int
	Prefetch       uint16
	GlobalPrefetch uint16
	Confirm        bool
	Unconfirmed    int
	Transactional  bool
	Closing        bool
}

// Consumer is a channel's consumer of the queue VHost/Queue.
type Consumer struct {
	Tag, VHost, Queue string
	NoAck, Exclusive  bool
	Prefetch          uint16
}
