package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/peer"
	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/stores"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// The defaults of zero Options fields: RabbitMQ's (4.x) where RabbitMQ
// has the setting (each constant says whose it is).
//
// The connection-tuning values are defined once, in internal/session: the
// session applies them to every zero session.Config field (its own tests
// and the direct connections run on them) and cannot import this package,
// so this package names them instead of repeating the numbers. Every other
// default of Options is defined here too, each beside the others.
const (
	// DefaultChannelMax is the highest channel number a client may open
	// when Options.ChannelMax is zero: 2047, RabbitMQ's channel_max.
	DefaultChannelMax = session.DefaultChannelMax
	// DefaultFrameMax is the largest frame accepted and proposed when
	// Options.FrameMax is zero: 131072 bytes, RabbitMQ's frame_max.
	DefaultFrameMax = session.DefaultFrameMax
	// DefaultHeartbeat is the heartbeat proposed when Options.Heartbeat is
	// zero: 60 s, RabbitMQ's heartbeat.
	DefaultHeartbeat = session.DefaultHeartbeat
	// DefaultMaxMessageSize is the largest message body accepted when
	// Options.MaxMessageSize is zero under the default RabbitMQVersion
	// (3.13): 128 MiB, RabbitMQ 3.13's max_message_size (4.x: 16 MiB).
	DefaultMaxMessageSize = 128 << 20
	// DefaultLoginTimeout is how long a login waits for the user store
	// when Options.LoginTimeout is zero: 5 s. RabbitMQ has no such
	// setting; it is Warren's bound for a cluster member without a
	// leader (internal/login).
	DefaultLoginTimeout = 5 * time.Second
)

// DefaultConsumerTimeout is how long a delivery may stay unacknowledged
// before its channel is closed: RabbitMQ's consumer_timeout default.
const DefaultConsumerTimeout = 30 * time.Minute

// DefaultNode is the broker's name in unacked index entries when
// Options.Node is "".
const DefaultNode = "warren@local"

// RabbitMQ's flow-control defaults, used for zero Options fields.
const (
	// DefaultMemoryHighWatermarkRatio is the share of the machine's memory
	// (or of the cgroup's limit, when lower) that message data may take
	// before the memory alarm is raised: RabbitMQ's
	// vm_memory_high_watermark.relative.
	DefaultMemoryHighWatermarkRatio = 0.4
	// DefaultDiskFreeLimit is RabbitMQ's disk_free_limit: 50 MB.
	DefaultDiskFreeLimit = 50_000_000
)

// Options configures a Broker. The zero value works; each field documents its
// default. New copies Options, so the caller may reuse or change the struct
// afterwards, and refuses (every problem at once) settings that could never
// work or would silently lose data.
//
// The settings most programs touch are fields of Options itself; the
// rare ones are grouped, as Pebble groups its own: Storage (the stores
// and the memory of the one under DataDir), Limits (connection and queue
// limits) and Management (the management API).
//
// Limits follow one rule: zero means the default (RabbitMQ's where it has
// one, else no limit, as each field says), and a negative value, by
// convention -1, means no limit or turns the check off.
type Options struct {
	// DataDir is where persistent state lives: one Pebble database holding
	// metadata, durable queues' messages and the unacked index. "" keeps
	// everything in memory (nothing survives Close).
	DataDir string
	// Storage replaces the default stores or bounds the memory of the
	// one under DataDir; few programs set it (the zero value is Pebble
	// under DataDir, else memory).
	Storage StorageOptions

	// Node names this broker in the unacked index entries of its
	// deliveries. "" means "warren@local". Brokers sharing stores (shared
	// mode) must have distinct names: each treats entries under its own
	// name from another run as its own to return.
	Node string
	// LinkLease is, in shared mode, the time to live of the lease that
	// runs each shovel and federation link on exactly one of the brokers
	// sharing the store (internal/placement): a dead holder's links run
	// elsewhere about this long after it died. 0 means 6 s.
	LinkLease time.Duration
	// peers are the other brokers sharing the stores (their liveness,
	// the direct reply-to forwarder), which package cluster attaches
	// through internal/peer's Attach hook.
	peers peer.Peers

	// Product is the product name advertised in connection.start's
	// server-properties; "" means "Warren". Clients and test suites that
	// gate RabbitMQ-specific behaviour on the product (amqp091-go's
	// integration tests do) can be served "RabbitMQ".
	Product string

	// MaxMessageSize is the largest message body accepted; a larger publish
	// closes its channel with 406 PRECONDITION_FAILED. Zero means the
	// RabbitMQVersion profile's default: DefaultMaxMessageSize (128 MiB)
	// for 3.13, 16 MiB from 4.0; negative means no limit but the 512 MiB
	// frame sanity check.
	MaxMessageSize int

	// RabbitMQVersion selects the RabbitMQ release whose AMQP 0-9-1
	// behaviour the broker copies where 3.13 and 4.x differ: a series,
	// "3.13", "4.0", "4.1", "4.2", "4.3" or "4.4", which copies the
	// newest release of it that Warren knows (4.2.9, 4.3.5, 4.4.1), or a
	// release such as "4.3.2", which copies the answers of that patch
	// release where the patches of its series differ. "" means "3.13",
	// the most permissive: existing client code runs unchanged. The
	// release is reported in connection.start's server properties and
	// /api/overview. README's "RabbitMQ versions" lists what each one
	// changes.
	RabbitMQVersion string

	// Users seeds the accounts in the meta store (accounts.go): at New each
	// user not stored yet is added, with a salted password hash and full
	// permissions on every vhost of VHosts; stored users are left as they
	// are. nil means one user guest/guest tagged administrator, as
	// RabbitMQ ships; guest may log in only from loopback unless
	// AllowRemoteGuest. An empty non-nil slice seeds nobody. Manage users
	// afterwards through Broker.Admin (PutUser, DeleteUser, PutPermission,
	// DeletePermission). A user needs a password (New refuses an empty
	// one: PLAIN and AMQPLAIN never accept it) unless AuthMechanisms
	// offers EXTERNAL, for users who log in by certificate.
	Users []User

	// VHosts are the virtual hosts clients may open. nil means ["/"].
	VHosts []string

	// Policies and OperatorPolicies are stored (Admin.PutPolicy,
	// Admin.PutOperatorPolicy) when New has opened the vhosts, replacing stored
	// ones of the same name: a test suite reproduces production's
	// policies in one line. A policy that is invalid or names a vhost not
	// in VHosts (nor stored) makes New fail.
	Policies         []Policy
	OperatorPolicies []Policy

	// AllowRemoteGuest lets the user "guest" log in from a non-loopback
	// address. By default guest may connect only via localhost (or Dial),
	// as RabbitMQ's loopback_users does; elsewhere its login is refused
	// with 403.
	AllowRemoteGuest bool

	// Limits bound connections and queues (RabbitMQ's connection_max and
	// the vhost limits); the zero value limits nothing.
	Limits LimitOptions

	// TLSConfig serves TLS in ListenTLS (tls.go). To
	// accept client certificates set ClientAuth and ClientCAs as usual.
	TLSConfig *tls.Config
	// AuthMechanisms are the SASL mechanisms offered besides PLAIN and
	// AMQPLAIN, which are always offered. "EXTERNAL" offers EXTERNAL to TLS
	// clients that presented a verified certificate: the user is the
	// certificate's subject CN and must exist.
	AuthMechanisms []string

	// LoginTimeout bounds how long a login (AMQP or the management API's
	// basic auth) waits for the metadata store to read the user and its
	// permissions; a cluster member without a raft leader, or catching up,
	// cannot answer at once. Past it the login is answered 320
	// CONNECTION_FORCED (HTTP 503), not 403: the credentials were not
	// checked (internal/login). Zero means DefaultLoginTimeout (5 s).
	LoginTimeout time.Duration
	// Auth, when not empty, decides who logs in: its backends are tried in
	// order (RabbitMQ's auth_backends.N), through every door that takes a
	// password or certificate (AMQP over TCP and Dial, the management API
	// and console, the metrics handler), each login under the throttle and
	// within LoginTimeout. auth.Internal is the user database; without it
	// in the chain the database logs nobody in. The entry that let a user
	// in decides the user's vhost access, permissions and topic access
	// (its Authz; auth.InternalAuthz and auth.Internal: those stored with
	// Admin.PutPermission) on every door, the direct Channel opened AsUser and
	// the management API included (docs/authentication.md). Empty: the
	// database alone, as before.
	Auth auth.Chain

	// Logger receives connection events. nil discards them.
	Logger *slog.Logger

	// Heartbeat is the interval the server proposes in connection.tune; the
	// client's tune-ok has the last word (AMQP 0-9-1 §4.2.7). Zero means
	// DefaultHeartbeat (60 s); negative proposes no heartbeat. It is sent
	// in whole seconds, so it must be a whole number of seconds no larger
	// than 65535 s.
	Heartbeat time.Duration

	// FrameMax is the largest frame (header and end octet included) the
	// server accepts and proposes. Zero means DefaultFrameMax (131072);
	// values below 4096 (the spec's frame-min-size) are rejected.
	FrameMax uint32

	// ChannelMax is the highest channel number a client may open
	// (RabbitMQ's max_channels_per_connection, called channel_max before
	// 4.3.1). Zero means DefaultChannelMax (2047).
	ChannelMax uint16

	// ConsumerTimeout is how long a delivery may stay unacknowledged before
	// the broker closes its channel with 406 PRECONDITION_FAILED (which
	// requeues it), RabbitMQ's consumer_timeout. Zero means
	// DefaultConsumerTimeout (30 minutes, RabbitMQ's default); negative disables the check. It is enforced by
	// the unacked scanner (scanner.go), at most half the timeout late.
	ConsumerTimeout time.Duration

	// ScanInterval is how often the unacked scanner runs a pass (on the
	// meta leader only): it returns orphaned deliveries, a dead peer's in
	// shared mode among them, and enforces ConsumerTimeout. Zero means
	// 5 s, or half the consumer timeout when that is shorter; a shorter
	// consumer timeout still shortens a longer ScanInterval, so a timeout
	// is enforced at most half a timeout late. Negative is refused.
	ScanInterval time.Duration

	// Management configures ManagementHandler: its rate history and the
	// web origins it lets change things.
	Management ManagementOptions

	// MemoryHighWatermark is the memory alarm's limit in bytes of message
	// data held in memory: the Properties and Body bytes of every message
	// in the in-memory stores (non-durable queues' store, and the durable
	// one without DataDir), plus what a store given as Shards reports when
	// it implements storage.MemoryReporter, plus what the caches and
	// holding stores keep in memory (deduplication caches and keys,
	// delayed messages, reply-to replies, the rate history; README, "Flow
	// control"). Above it, publishing connections are blocked
	// (alarms.go). The deduplication caches in memory hold half of it at
	// most together. Zero means 40% of the machine's memory or of the
	// cgroup's limit, RabbitMQ's default vm_memory_high_watermark of 0.4;
	// negative turns the alarm off (RaiseAlarm still works; the caches
	// keep half of that default as their bound).
	MemoryHighWatermark int64
	// DiskFreeLimit is the disk alarm's limit: when the file system holding
	// DataDir has fewer free bytes, publishing connections are blocked.
	// The alarm keeps more free besides, for what Pebble may write at once
	// (a WAL and a memtable flush, about twice the memtable, which Open
	// sizes to the file system) and its pending compactions; a
	// reserve file in DataDir (storage/pebble.DiskReserve) is spent, and
	// the alarm raised at once, if the disk fills up anyway (alarms.go).
	// Zero means 50 MB, RabbitMQ's disk_free_limit; negative turns the
	// free-space check off (a full disk still raises the alarm). Without
	// DataDir nothing is written to disk and the disk is not watched.
	DiskFreeLimit int64

	// alarmPolling lets tests sample faster and fake statfs (alarms.go).
	alarmPolling alarm.Polling

	// Clock is the queue engine's time: enqueue timestamps, message TTLs
	// (x-message-ttl, expiration), queue expiry (x-expires) and the age
	// of a delivery the consumer timeout measures follow it, so tests
	// drive them with a clock.Fake instead of sleeping. A publish is
	// dated when its bytes arrived (on Dial's pipe, when the client's
	// write began), so advancing the clock right after a publish returned
	// ages the message by that much. Heartbeats and
	// how often the scanner looks (ScanInterval) stay on real time. nil
	// means clock.Real.
	Clock clock.Clock
}

// LimitOptions are Options.Limits: the connection and queue limits. Each
// follows Options' rule: zero is the default (no limit here), negative
// (-1) no limit.
type LimitOptions struct {
	// MaxConnections bounds the open connections of the whole broker
	// (RabbitMQ's max_connections, called connection_max before 4.3.1);
	// connection.open beyond it is refused
	// with 530 NOT_ALLOWED. Zero or negative means no limit.
	MaxConnections int
	// VHostMaxConnections bounds the open connections per vhost
	// (RabbitMQ's max-connections vhost limit; 0 refuses every
	// connection), 530 NOT_ALLOWED beyond it; direct Channels count too,
	// as RabbitMQ's direct connections do. A vhost not listed, or a
	// negative value (-1), has no limit; a limit stored with
	// Admin.PutVHostLimit (or the management API) overrides it. Every vhost named must exist
	// (Options.VHosts, or one Admin.PutVHost stored in DataDir): New refuses a
	// limit that would never apply.
	VHostMaxConnections map[string]int
	// MaxQueuesPerVHost bounds the queues of each vhost (RabbitMQ's
	// max-queues vhost limit): declaring a new queue beyond it closes the
	// channel with 406 PRECONDITION_FAILED. Zero or negative means no
	// limit. A max-queues limit stored with Admin.PutVHostLimit
	// overrides it for its vhost.
	MaxQueuesPerVHost int
}

// StorageOptions are Options.Storage: the stores the broker runs on and
// the memory of the one it opens under DataDir.
type StorageOptions struct {
	// Memory bounds the memory the Pebble database under DataDir
	// holds outside the Go heap: its block cache is Memory and each
	// memtable a quarter of it (Pebble keeps up to two, the active one and
	// one being flushed or kept for reuse, and counts them against the
	// cache), so Pebble holds about Memory. 0 keeps the defaults: a
	// 64 MiB cache and 4 MiB memtables, the memtables about 8 MiB
	// resident once enough has been written (docs/streams.md, "Cost").
	// Values below 4 MiB are raised to it. It has no effect on stores
	// given as Meta, Shards or Unacked, nor without DataDir.
	Memory int64

	// Meta, Shards and Unacked replace the default stores (Pebble under
	// Options.DataDir, else memory): the metadata store with the queues'
	// cursors, the message store of durable queues, and the persistent
	// unacked index. The broker does not close stores it was given.
	// Non-durable queues always keep their messages in memory. With
	// DataDir set, New refuses the in-memory stores (storage/memory,
	// meta/memory, unacked.MemoryIndex): they would lose at restart what
	// DataDir is there to keep, confirmed persistent messages included.
	//
	// A Meta that implements meta.ChangeFeed is a store other brokers
	// write too, such as a cluster's replicated store: the broker then runs
	// in shared mode (shared.go), serving the durable queues together with
	// the other brokers. Shards and Unacked must then be the stores those
	// brokers share as well, and Unacked must implement unacked.Claimer.
	//
	// A Shards store that keeps messages in memory should implement
	// storage.MemoryReporter, so that its message bytes count against
	// Options.MemoryHighWatermark.
	Meta    meta.Store
	Shards  storage.ShardStore
	Unacked unacked.Index
}

// ManagementOptions are Options.Management.
type ManagementOptions struct {
	// StatsInterval is how often the management API's rate history
	// samples every queue, vhost and connection (RabbitMQ's
	// collect_statistics_interval): the "*_details" rates and samples
	// come from it (internal/rates). The sampler starts with the first
	// ManagementHandler call. Zero means DefaultStatsInterval (5 s);
	// negative keeps no history, and the API then shows no details.
	StatsInterval time.Duration
	// AllowedOrigins lists the origins ("https://host[:port]")
	// whose web pages may change things through ManagementHandler's API
	// and read its answers (CORS), besides the pages it serves itself;
	// "*" allows every origin, which turns the check off. By default a
	// change that a page of another origin asks for is refused with 403,
	// so that a site a logged-in administrator visits cannot use the
	// browser's saved credentials (docs/management.md, "Requests from
	// browsers"). RabbitMQ's management.cors.allow_origins.
	AllowedOrigins []string
}

// clone returns a deep copy so New never aliases the caller's slices.
func (o Options) clone() Options {
	o.Users = slices.Clone(o.Users)
	for i := range o.Users {
		o.Users[i].Tags = slices.Clone(o.Users[i].Tags)
	}
	o.VHosts = slices.Clone(o.VHosts)
	o.Policies = slices.Clone(o.Policies)
	o.OperatorPolicies = slices.Clone(o.OperatorPolicies)
	o.Limits.VHostMaxConnections = maps.Clone(o.Limits.VHostMaxConnections)
	o.AuthMechanisms = slices.Clone(o.AuthMechanisms)
	o.Management.AllowedOrigins = slices.Clone(o.Management.AllowedOrigins)
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
	}
	if o.Limits.VHostMaxConnections != nil {
		canon := make(map[string]int, len(o.Limits.VHostMaxConnections))
		for v, n := range o.Limits.VHostMaxConnections {
			canon[canonicalVHost(v)] = n
		}
		o.Limits.VHostMaxConnections = canon
	}
	return o
}

func (o *Options) ensureDefaults() {
	if o.Users == nil {
		o.Users = []User{{Name: "guest", Password: "guest", Tags: []string{"administrator"}}}
	}
	if o.VHosts == nil {
		o.VHosts = []string{"/"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.FrameMax == 0 {
		o.FrameMax = DefaultFrameMax
	}
	if o.ChannelMax == 0 {
		o.ChannelMax = DefaultChannelMax
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = o.profile().MaxMessageSize
	}
	if o.ConsumerTimeout == 0 {
		o.ConsumerTimeout = DefaultConsumerTimeout
	}
	if o.Node == "" {
		o.Node = DefaultNode
	}
	if o.LoginTimeout <= 0 {
		o.LoginTimeout = DefaultLoginTimeout
	}
}

// validate reports every bad field at once.
func (o *Options) validate() error {
	var errs []error
	seen := make(map[string]bool, len(o.Users))
	for i, u := range o.Users {
		switch {
		case u.Name == "":
			errs = append(errs, fmt.Errorf("broker: Options.Users[%d]: empty name", i))
		case seen[u.Name]:
			errs = append(errs, fmt.Errorf("broker: Options.Users[%d]: duplicate user %q", i, u.Name))
		}
		seen[u.Name] = true
		if len(u.Name) > 255 {
			errs = append(errs, fmt.Errorf("broker: Options.Users[%d]: name longer than 255 bytes", i))
		}
		// PLAIN and AMQPLAIN never accept an empty password; with
		// EXTERNAL a user without one logs in by certificate, as
		// RabbitMQ's passwordless users do.
		if u.Password == "" && !slices.Contains(o.AuthMechanisms, "EXTERNAL") {
			errs = append(errs, fmt.Errorf("broker: Options.Users[%d] (%q): empty password: the user could never log in (give a password, or offer EXTERNAL in AuthMechanisms for certificate logins)", i, u.Name))
		}
	}
	seenVHost := make(map[string]bool, len(o.VHosts))
	for i, v := range o.VHosts {
		name := canonicalVHost(v)
		if seenVHost[name] {
			errs = append(errs, fmt.Errorf("broker: Options.VHosts[%d]: duplicate vhost %q", i, v))
		}
		seenVHost[name] = true
		// connection.open carries the vhost as a shortstr.
		if len(v) > 255 {
			errs = append(errs, fmt.Errorf("broker: Options.VHosts[%d]: longer than 255 bytes", i))
		}
	}
	if o.Heartbeat > 0 {
		if o.Heartbeat%time.Second != 0 {
			errs = append(errs, fmt.Errorf("broker: Options.Heartbeat %v is not a whole number of seconds", o.Heartbeat))
		}
		if o.Heartbeat > 65535*time.Second {
			errs = append(errs, fmt.Errorf("broker: Options.Heartbeat %v exceeds 65535s", o.Heartbeat))
		}
	}
	for _, mech := range o.AuthMechanisms {
		switch mech {
		case "EXTERNAL", "PLAIN", "AMQPLAIN":
		default:
			errs = append(errs, fmt.Errorf("broker: Options.AuthMechanisms: unknown mechanism %q (supported: EXTERNAL, PLAIN, AMQPLAIN)", mech))
		}
	}
	if o.peers.Replies != nil {
		if tag := o.peers.Replies.ReplyTag(); !validReplyTag(tag) {
			errs = append(errs, fmt.Errorf("broker: peer replies: reply tag %q must be 1 to 32 letters, digits, '-' or '_'", tag))
		}
	}
	if o.ScanInterval < 0 {
		errs = append(errs, fmt.Errorf("broker: Options.ScanInterval %v is negative", o.ScanInterval))
	}
	sc := o.storeConfig()
	errs = append(errs, stores.CheckShared(sc), stores.CheckDurable(sc), stores.CheckWrapped(sc), o.validatePolicies(),
		mgmt.CheckOrigins("broker: Options.Management.AllowedOrigins", o.Management.AllowedOrigins))
	if _, err := compat.Parse(o.RabbitMQVersion); err != nil {
		errs = append(errs, fmt.Errorf("broker: Options.RabbitMQVersion: %w", err))
	}
	if o.FrameMax < amqp.FrameMinSize {
		errs = append(errs, fmt.Errorf("broker: Options.FrameMax %d is below the minimum %d", o.FrameMax, amqp.FrameMinSize))
	}
	return errors.Join(errs...)
}

// validatePolicies checks Options.Policies and OperatorPolicies as
// SetPolicy would (their vhosts are checkStoredNames' job): New reports
// a bad one with every other bad field.
func (o *Options) validatePolicies() error {
	var errs []error
	for _, set := range []struct {
		ps       []Policy
		operator bool
		field    string
	}{{o.Policies, false, "Policies"}, {o.OperatorPolicies, true, "OperatorPolicies"}} {
		for i, p := range set.ps {
			if p.Name == "" {
				errs = append(errs, fmt.Errorf("broker: Options.%s[%d]: policy name must not be empty", set.field, i))
				continue
			}
			if _, err := policy.Check(internalPolicy(p), set.operator); err != nil {
				errs = append(errs, fmt.Errorf("broker: Options.%s[%d] (%q): %w", set.field, i, p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// canonicalVHost maps "" to "/": both name the default vhost (DESIGN.md).
func canonicalVHost(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// internalPolicy is p with its vhost canonical, as policy.Check takes it.
func internalPolicy(p Policy) policy.Policy {
	p.VHost = canonicalVHost(p.VHost)
	return p
}
