package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// Version is the broker version advertised in connection.start.
const Version = "0.1.0-dev"

// RabbitMQ's defaults (4.x), used for zero Options fields.
//
// The connection-tuning values are defined once, in internal/session: the
// session applies them to every zero session.Config field (its own tests
// and the direct connections run on them) and cannot import this package,
// so this package names them instead of repeating the numbers. The rest
// concern only the root and are defined here or beside their feature
// (DefaultConsumerTimeout, DefaultLoginTimeout, DefaultNode, the alarm
// defaults).
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
	// Options.MaxMessageSize is zero: 128 MiB, RabbitMQ's
	// max_message_size.
	DefaultMaxMessageSize = 128 << 20
)

// ErrClosed is returned by Serve, Listen, ListenAndServe, Dial and Channel
// once Close or Shutdown has been called. Check it with errors.Is.
var ErrClosed = errors.New("broker: closed")

// User is an account clients authenticate as (PLAIN or AMQPLAIN).
type User struct {
	Name     string
	Password string
	// Tags are RabbitMQ's user tags ("administrator", "monitoring", ...).
	// They are stored for the management surface; no access rule reads them
	// yet.
	Tags []string
}

// Options configures a Broker. The zero value works; each field documents its
// default. New copies Options, so the caller may reuse or change the struct
// afterwards, and refuses (every problem at once) settings that could never
// work or would silently lose data.
//
// Limits follow one rule: zero means the default (RabbitMQ's where it has
// one, else no limit, as each field says), and a negative value, by
// convention -1, means no limit or turns the check off.
type Options struct {
	// DataDir is where persistent state lives: one Pebble database holding
	// metadata, durable queues' messages and the unacked index. "" keeps
	// everything in memory (nothing survives Close).
	DataDir string

	// Meta, Shards and Unacked replace the default stores (Pebble under
	// DataDir, else memory): the metadata store with the queues' cursors,
	// the message store of durable queues, and the persistent unacked
	// index. The broker does not close stores it was given. Non-durable
	// queues always keep their messages in memory. With DataDir set, New
	// refuses the in-memory stores (storage/memory, meta/memory,
	// unacked.MemoryIndex): they would lose at restart what DataDir is
	// there to keep, confirmed persistent messages included.
	//
	// A Meta that implements meta.ChangeFeed is a store other brokers
	// write too, such as a cluster's replicated store: the broker then runs
	// in shared mode (shared.go), serving the durable queues together with
	// the other brokers. Shards and Unacked must then be the stores those
	// brokers share as well, and Unacked must implement unacked.Claimer.
	//
	// A Shards store that keeps messages in memory should implement
	// storage.MemoryReporter, so that its message bytes count against
	// MemoryHighWatermark.
	Meta    meta.Store
	Shards  storage.ShardStore
	Unacked unacked.Index

	// Node names this broker in the unacked index entries of its
	// deliveries. "" means "warren@local". Brokers sharing stores (shared
	// mode) must have distinct names: each treats entries under its own
	// name from another run as its own to return.
	Node string
	// PeerAlive reports, in shared mode, whether the broker named node
	// (another one sharing the stores) is alive. The unacked scanner
	// returns a peer's deliveries to their queues once PeerAlive says it
	// is dead; nil never says so, and leaves them to their owner. It is
	// called from the scanner's goroutine and must not block for long.
	PeerAlive func(node string) bool

	// Product is the product name advertised in connection.start's
	// server-properties; "" means "Warren". Clients and test suites that
	// gate RabbitMQ-specific behaviour on the product (amqp091-go's
	// integration tests do) can be served "RabbitMQ".
	Product string

	// MaxMessageSize is the largest message body accepted; a larger publish
	// closes its channel with 406 PRECONDITION_FAILED. Zero means
	// DefaultMaxMessageSize (128 MiB, RabbitMQ's default); negative means no limit but the 512 MiB frame
	// sanity check.
	MaxMessageSize int

	// Users seeds the accounts in the meta store (accounts.go): at New each
	// user not stored yet is added, with a salted password hash and full
	// permissions on every vhost of VHosts; stored users are left as they
	// are. nil means one user guest/guest tagged administrator, as
	// RabbitMQ ships; guest may log in only from loopback unless
	// AllowRemoteGuest. An empty non-nil slice seeds nobody. Manage users
	// afterwards with AddUser, DeleteUser, SetPermissions and
	// ClearPermissions. A user needs a password (New refuses an empty
	// one: PLAIN and AMQPLAIN never accept it) unless AuthMechanisms
	// offers EXTERNAL, for users who log in by certificate.
	Users []User

	// VHosts are the virtual hosts clients may open. nil means ["/"].
	VHosts []string

	// AllowRemoteGuest lets the user "guest" log in from a non-loopback
	// address. By default guest may connect only via localhost (or Dial),
	// as RabbitMQ's loopback_users does; elsewhere its login is refused
	// with 403.
	AllowRemoteGuest bool

	// MaxConnections bounds the open connections of the whole broker
	// (RabbitMQ's connection_max); connection.open beyond it is refused
	// with 530 NOT_ALLOWED. Zero or negative means no limit.
	MaxConnections int
	// VHostMaxConnections bounds the open connections per vhost
	// (RabbitMQ's max-connections vhost limit; 0 refuses every
	// connection), 530 NOT_ALLOWED beyond it. A vhost not listed, or a
	// negative value (-1), has no limit. Every vhost named must exist
	// (Options.VHosts, or one AddVHost stored in DataDir): New refuses a
	// limit that would never apply.
	VHostMaxConnections map[string]int
	// MaxQueuesPerVHost bounds the queues of each vhost (RabbitMQ's
	// max-queues vhost limit): declaring a new queue beyond it closes the
	// channel with 406 PRECONDITION_FAILED. Zero or negative means no
	// limit.
	MaxQueuesPerVHost int

	// TLSConfig serves TLS in ListenTLS and ListenAndServeTLS (tls.go). To
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
	// checked (loginguard.go). Zero means DefaultLoginTimeout (5 s).
	LoginTimeout time.Duration

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

	// ChannelMax is the highest channel number a client may open. Zero means
	// DefaultChannelMax (2047).
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

	// MemoryHighWatermark is the memory alarm's limit in bytes of message
	// data held in memory: the Properties and Body bytes of every message
	// in the in-memory stores (non-durable queues' store, and the durable
	// one without DataDir), plus what a store given as Shards reports when
	// it implements storage.MemoryReporter. Above it, publishing
	// connections are blocked (alarms.go). Zero means 40% of the machine's
	// memory or of the cgroup's limit, RabbitMQ's default
	// vm_memory_high_watermark of 0.4; negative turns the alarm off
	// (RaiseAlarm still works).
	MemoryHighWatermark int64
	// DiskFreeLimit is the disk alarm's limit: when the file system holding
	// DataDir has fewer free bytes, publishing connections are blocked.
	// The alarm keeps more free besides, for what Pebble may write at once
	// (a preallocated WAL and a memtable flush, about twice the memtable,
	// which Open sizes to the file system) and its pending compactions; a
	// reserve file in DataDir (storage/pebble.DiskReserve) is spent, and
	// the alarm raised at once, if the disk fills up anyway (alarms.go).
	// Zero means 50 MB, RabbitMQ's disk_free_limit; negative turns the
	// free-space check off (a full disk still raises the alarm). Without
	// DataDir nothing is written to disk and the disk is not watched.
	DiskFreeLimit int64

	// alarmPolling lets tests sample faster and fake statfs (alarms.go).
	alarmPolling alarmPolling

	// Clock is the queue engine's time: enqueue timestamps, message TTLs
	// (x-message-ttl, expiration) and queue expiry (x-expires) follow it,
	// so tests drive them with a clock.Fake instead of sleeping.
	// Heartbeats and the consumer timeout stay on real time. nil means
	// clock.Real.
	Clock clock.Clock
}

// clone returns a deep copy so New never aliases the caller's slices.
func (o Options) clone() Options {
	o.Users = slices.Clone(o.Users)
	for i := range o.Users {
		o.Users[i].Tags = slices.Clone(o.Users[i].Tags)
	}
	o.VHosts = slices.Clone(o.VHosts)
	o.VHostMaxConnections = maps.Clone(o.VHostMaxConnections)
	o.AuthMechanisms = slices.Clone(o.AuthMechanisms)
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
	}
	if o.VHostMaxConnections != nil {
		canon := make(map[string]int, len(o.VHostMaxConnections))
		for v, n := range o.VHostMaxConnections {
			canon[canonicalVHost(v)] = n
		}
		o.VHostMaxConnections = canon
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
		o.MaxMessageSize = DefaultMaxMessageSize
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
	if o.ScanInterval < 0 {
		errs = append(errs, fmt.Errorf("broker: Options.ScanInterval %v is negative", o.ScanInterval))
	}
	errs = append(errs, o.validateShared(), o.validateStores())
	if o.FrameMax < amqp.FrameMinSize {
		errs = append(errs, fmt.Errorf("broker: Options.FrameMax %d is below the minimum %d", o.FrameMax, amqp.FrameMinSize))
	}
	return errors.Join(errs...)
}

// validateStores refuses in-memory stores given together with DataDir:
// they would silently lose what DataDir promises to keep (a confirmed
// persistent message in a durable queue, the topology) at the next start.
// Without DataDir they are just the defaults.
func (o *Options) validateStores() error {
	if o.DataDir == "" {
		return nil
	}
	var errs []error
	lost := func(field, what string) {
		errs = append(errs, fmt.Errorf("broker: Options.%s is an in-memory store but DataDir is set: %s would be lost at restart (leave %s nil to keep them in DataDir, or leave DataDir empty for a broker that keeps nothing)", field, what, field))
	}
	if _, ok := o.Shards.(*memory.Store); ok {
		lost("Shards", "durable queues' messages, confirmed persistent ones included,")
	}
	if _, ok := o.Meta.(*metamemory.Store); ok {
		lost("Meta", "queues, exchanges, bindings, users and cursors")
	}
	if _, ok := o.Unacked.(*unacked.MemoryIndex); ok {
		lost("Unacked", "unacknowledged deliveries (redelivered=true after a restart)")
	}
	return errors.Join(errs...)
}

// checkVHostLimits refuses a VHostMaxConnections entry for a vhost that
// neither Options.VHosts nor the meta store has: it would never apply.
// It runs in New once the vhosts are open.
func (b *Broker) checkVHostLimits() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(b.opts.VHostMaxConnections)) {
		if _, ok := b.lookupVHost(name); !ok {
			errs = append(errs, fmt.Errorf("broker: Options.VHostMaxConnections[%q]: no such vhost (add it to Options.VHosts)", name))
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

// Broker is an AMQP 0-9-1 server. Create it with New.
type Broker struct {
	opts   Options
	cfg    *session.Config
	log    *slog.Logger
	nextID atomic.Uint64

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*session.Conn]struct{}
		addr      net.Addr // first listener's address, for Addr and URL
	}
	// wg counts every goroutine the broker started: connection servers and
	// the accept loops started by Listen. Add happens under mu with closed
	// false, so no Add can race with the Wait in Close.
	wg sync.WaitGroup

	stores   *stores
	vhostsMu sync.RWMutex            // guards vhosts: AddVHost and DeleteVHost change it
	vhosts   map[string]*vhost.VHost // by canonical name
	// deleting names the vhosts DeleteVHost is deleting (vhostsMu), so
	// that shared mode does not open them again from the store meanwhile.
	deleting    map[string]bool
	nodeID      string
	incarnation uint64

	acct   accountState // access and connection counts (accounts.go, limits.go)
	ops    opsState     // counters for Stats, the management API and metrics (introspect.go)
	scan   scanState    // the unacked scanner's goroutine (scanner.go)
	follow followState  // shared mode: follows the other brokers' changes (shared.go)
	alarm  alarmState   // memory and disk alarms and their monitor (alarms.go)

	closeOnce sync.Once
	quit      chan struct{} // closed when Close starts: wakes backoff sleeps
	closeDone chan struct{} // closed when Close has finished

	drain session.Drain // Shutdown's draining state (drain.go)

	events *events.Hub // Events' subscriptions (events.go)
}

// New returns a broker configured by opts, or every problem with opts joined
// into one error. It starts nothing: call Serve, Listen, ListenAndServe or
// Dial.
func New(opts Options) (*Broker, error) {
	o := opts.clone()
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := &Broker{opts: o, log: o.Logger, quit: make(chan struct{}), closeDone: make(chan struct{})}
	b.events = events.NewHub(o.Clock)
	b.acct.throttle = newLoginThrottle(clock.Real)
	b.mu.listeners = make(map[net.Listener]struct{})
	b.mu.conns = make(map[*session.Conn]struct{})

	vhosts := make(map[string]bool, len(o.VHosts))
	for _, v := range o.VHosts {
		vhosts[canonicalVHost(v)] = true
	}
	heartbeat := o.Heartbeat
	b.cfg = &session.Config{
		Login:          b.login,
		External:       slices.Contains(o.AuthMechanisms, "EXTERNAL"),
		Open:           b.openAccess,
		VHostExists:    func(vhost string) bool { return vhosts[canonicalVHost(vhost)] },
		VHost:          b.lookupVHost,
		MaxMessageSize: max(o.MaxMessageSize, 0),
		Logger:         o.Logger,
		ChannelMax:     o.ChannelMax,
		FrameMax:       o.FrameMax,
		Heartbeat:      heartbeat,
		Product:        o.Product,
		Version:        Version,
		Counters:       &b.ops.session,
		Alarms:         &b.alarm.gate,
		Drain:          &b.drain,
		Events:         b.events,
	}
	b.nodeID = o.Node
	b.incarnation = uint64(time.Now().UnixNano())
	st, err := openStores(&o, b.diskFull)
	if err != nil {
		return nil, err
	}
	b.stores = st
	// In shared mode the feed is watched before anything is read, so no
	// change made by another broker after that read goes unseen.
	b.watchChanges()
	if err := b.openVHosts(context.Background()); err != nil {
		b.stopFollowing()
		st.close()
		return nil, err
	}
	if err := b.checkVHostLimits(); err != nil {
		b.stopFollowing()
		b.closeVHosts()
		st.close()
		return nil, err
	}
	if err := b.seedUsers(context.Background()); err != nil {
		b.stopFollowing()
		b.closeVHosts()
		st.close()
		return nil, err
	}
	if err := b.startScanner(); err != nil {
		b.stopFollowing()
		b.closeVHosts()
		st.close()
		return nil, err
	}
	b.startFollowing()
	b.setupAlarms()
	b.startAlarms() // last: nothing after it can fail
	return b, nil
}

// Serve accepts connections on l and serves each on its own goroutines until
// l fails or Close is called. It takes ownership of l and closes it. After
// Close it returns ErrClosed; otherwise the accept error.
func (b *Broker) Serve(l net.Listener) error {
	if !b.addListener(l) {
		l.Close()
		return ErrClosed
	}
	return b.serve(l)
}

// serve is the accept loop for a registered listener.
func (b *Broker) serve(l net.Listener) error {
	defer b.removeListener(l)
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if b.isClosed() {
				return ErrClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Transient (EMFILE, ECONNABORTED, ...): back off like
				// net/http instead of spinning or giving up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				b.log.Warn("broker: accept failed, retrying", "err", err, "backoff", backoff)
				if !b.sleep(backoff) {
					return ErrClosed
				}
				continue
			}
			l.Close()
			return fmt.Errorf("broker: accept: %w", err)
		}
		backoff = 0
		id := fmt.Sprintf("%s -> %s#%d", nc.RemoteAddr(), nc.LocalAddr(), b.nextID.Add(1))
		b.serveConn(nc, id)
	}
}

// sleep waits d or until Close; it reports false when the broker closed.
func (b *Broker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !b.isClosed()
	case <-b.quit:
		return false
	}
}

// Listen binds addr ("host:port"; port 0 picks a free one) and serves it in
// the background until Close. It returns the bound address; Addr and URL are
// valid as soon as it returns.
func (b *Broker) Listen(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	return b.serveInBackground(l, "broker: listener stopped")
}

// serveInBackground serves l on a goroutine the broker owns until Close;
// Listen and ListenTLS share it.
func (b *Broker) serveInBackground(l net.Listener, stopped string) (net.Addr, error) {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		l.Close()
		return nil, ErrClosed
	}
	b.addListenerLocked(l)
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		err := b.serve(l)
		if err != nil && !errors.Is(err, ErrClosed) {
			b.log.Error(stopped, "addr", l.Addr().String(), "err", err)
		}
	}()
	return l.Addr(), nil
}

// ListenAndServe binds addr and serves it until Close (then it returns
// ErrClosed) or an accept error.
func (b *Broker) ListenAndServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("broker: listen: %w", err)
	}
	return b.Serve(l)
}

// Dial returns the client end of an in-memory connection served exactly like
// a TCP one. network and addr are ignored; the signature fits
// amqp091.Config.Dial:
//
//	amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
//
// URL needs no listener for this: without one it names 127.0.0.1:5672, which
// Dial never contacts.
func (b *Broker) Dial(network, addr string) (net.Conn, error) {
	server, client := session.TrackPipe(net.Pipe()) // lets WaitIdle see what the client wrote
	id := fmt.Sprintf("pipe#%d", b.nextID.Add(1))
	if !b.serveConn(server, id) {
		client.Close()
		return nil, ErrClosed
	}
	return client, nil
}

// serveConn registers rwc and serves it on a new goroutine; it reports false
// (after closing rwc) when the broker is closed.
func (b *Broker) serveConn(rwc io.ReadWriteCloser, id string) bool {
	c := session.NewConn(rwc, id, b.cfg)
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		rwc.Close()
		return false
	}
	b.mu.conns[c] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()

	go func() {
		defer b.wg.Done()
		if err := c.Serve(); err != nil {
			b.log.Debug("broker: connection ended", "conn", id, "err", err)
		}
		b.mu.Lock()
		delete(b.mu.conns, c)
		b.mu.Unlock()
	}()
	return true
}

func (b *Broker) addListener(l net.Listener) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return false
	}
	b.addListenerLocked(l)
	return true
}

func (b *Broker) addListenerLocked(l net.Listener) {
	b.mu.listeners[l] = struct{}{}
	if b.mu.addr == nil {
		b.mu.addr = l.Addr()
	}
}

func (b *Broker) removeListener(l net.Listener) {
	b.mu.Lock()
	delete(b.mu.listeners, l)
	b.mu.Unlock()
}

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.closed
}

// Addr returns the address of the first listener the broker served, or nil
// before any.
func (b *Broker) Addr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.addr
}

// URL returns an AMQP URI for the first listener with the first configured
// user's credentials and the default vhost, e.g.
// amqp://guest:guest@127.0.0.1:5672/. Without a listener the host is
// 127.0.0.1:5672 (useful with Dial, which ignores it).
func (b *Broker) URL() string {
	host := "127.0.0.1:5672"
	if a := b.Addr(); a != nil {
		host = a.String()
		if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			// A wildcard bind is reachable through loopback.
			host = net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
		}
	}
	u := url.URL{Scheme: "amqp", Host: host, Path: "/"}
	if len(b.opts.Users) > 0 {
		first := b.opts.Users[0]
		u.User = url.UserPassword(first.Name, first.Password)
	}
	return u.String()
}

// Close stops every listener, closes every connection with connection.close
// 320 CONNECTION_FORCED (waiting briefly for close-ok), and returns after
// every goroutine the broker started has exited. Safe to call many times from
// many goroutines, and during or after Shutdown; each call returns once
// shutdown is complete. Unacked deliveries go back to their queues (a
// durable queue's come back redelivered after a restart). Shutdown closes
// gracefully.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.mu.closed = true
		close(b.quit)
		listeners := make([]net.Listener, 0, len(b.mu.listeners))
		for l := range b.mu.listeners {
			listeners = append(listeners, l)
		}
		conns := make([]*session.Conn, 0, len(b.mu.conns))
		for c := range b.mu.conns {
			conns = append(conns, c)
		}
		b.mu.Unlock()

		// The scanner goes first: it calls into connections and queues.
		b.stopScanner()
		b.stopFollowing() // it opens vhosts and starts queues
		b.stopAlarms()
		for _, l := range listeners {
			l.Close()
		}
		for _, c := range conns {
			c.Shutdown(amqp.ConnectionForced, "broker shutdown")
		}
		b.wg.Wait()
		b.closeVHosts()
		if err := b.stores.close(); err != nil {
			b.log.Error("broker: closing stores", "err", err)
		}
		b.events.Close() // last: what closing reported has been delivered
		close(b.closeDone)
	})
	<-b.closeDone
	return nil
}
