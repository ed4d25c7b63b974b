package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/internal/authn"
	"github.com/warrenmq/broker/internal/conns"
	"github.com/warrenmq/broker/internal/control"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/federation"
	"github.com/warrenmq/broker/internal/follow"
	"github.com/warrenmq/broker/internal/limits"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/params"
	"github.com/warrenmq/broker/internal/policystore"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/scan"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/shovel"
	"github.com/warrenmq/broker/internal/stores"
	"github.com/warrenmq/broker/internal/transport"
	"github.com/warrenmq/broker/internal/vhosts"
)

// Version is the broker version advertised in connection.start.
const Version = "0.1.0-dev"

// ErrClosed is returned by Serve, Listen, ListenAndServe, Dial and Channel
// once Close or Shutdown has been called. Check it with errors.Is.
var ErrClosed = errors.New("broker: closed")

// counterState holds the counters the connections and queue actors add
// to, which Stats (and so the metrics and the management API) reads. Its
// zero value is ready.
type counterState struct {
	session session.Counters
	queues  queue.Counters
}

// Broker is an AMQP 0-9-1 server. Create it with New.
type Broker struct {
	opts   Options
	cfg    *session.Config
	log    *slog.Logger
	plane  control.Plane   // users, permissions, vhosts, limits (internal/control)
	params params.Registry // runtime and global parameters (internal/params)
	// shovels runs the stored shovels' links (shovel.go).
	shovels *shovel.Supervisor
	// federation runs the federated exchanges' and queues' links
	// (federation.go).
	federation *federation.Supervisor

	// conns is the open connections and listeners, and counts every
	// goroutine the broker started (internal/conns).
	conns *conns.Set

	stores      *stores.Set
	vhosts      vhosts.Set // the open vhosts (internal/vhosts)
	nodeID      string
	incarnation uint64

	held     alarm.Held         // caches and holding stores, for the memory alarm (alarms.go)
	acct     accountState       // login guard and access (accounts.go)
	logins   *authn.Logins      // who logs in, through every door (internal/authn)
	limits   limits.Limits      // connection and vhost limits (internal/limits)
	counters counterState       // what Stats and the metrics count (introspect.go)
	scan     *scan.Scanner      // the unacked scanner, once started (scanner.go)
	follow   *follow.Follower   // shared mode: follows the other brokers' changes (shared.go); nil otherwise
	alarm    *alarm.Monitor     // memory and disk alarms and their monitor (alarms.go)
	plugins  pluginState        // delayed messages (plugins.go)
	rates    rateState          // the management API's rate history (rates.go)
	policies policystore.Keeper // policies stored and applied (internal/policystore)

	closeOnce sync.Once
	quit      chan struct{} // closed when Close starts: wakes backoff sleeps
	closeDone chan struct{} // closed when Close has finished

	drain session.Drain // Shutdown's draining state (drain.go)

	events *events.Hub // Events' subscriptions (events.go)
	// bindingWatch pokes federation links on binding events
	// (federation_watch.go).
	bindingWatch bindingWatch
}

// New returns a broker configured by opts, or every problem with opts joined
// into one error. It starts nothing: call Serve, Listen, ListenAndServe or
// Dial.
func New(opts Options) (*Broker, error) {
	o := opts.clone()
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		// The fields checked against the stores' contents are reported
		// with the others, not after they are fixed.
		if sc := o.storeConfig(); stores.CheckShared(sc) == nil && stores.CheckDurable(sc) == nil {
			vs, serr := stores.StoredVHosts(o.storeConfig())
			if serr == nil {
				serr = o.checkStoredNames(vs)
			}
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	if stores.Fresh(o.storeConfig()) {
		// Nothing stored yet: refuse before DataDir is created.
		if err := o.checkStoredNames(nil); err != nil {
			return nil, err
		}
	}
	b := &Broker{opts: o, log: o.Logger, quit: make(chan struct{}), closeDone: make(chan struct{})}
	if err := b.registerFederation(); err != nil { // before anything starts: nothing to undo
		return nil, err
	}
	if err := b.registerShovel(); err != nil { // before anything starts: nothing to undo
		return nil, err
	}
	b.events = events.NewHub(o.Clock)
	b.alarm = alarm.NewMonitor(o.Logger, o.DataDir)
	b.acct.logins = login.Guard{Throttle: login.NewThrottle(clock.Real), Timeout: o.LoginTimeout, Quit: b.quit}
	b.logins = authn.New(&b.acct.logins, o.Auth, o.AllowRemoteGuest, o.LoginTimeout, o.Logger)

	vhosts := make(map[string]bool, len(o.VHosts))
	for _, v := range o.VHosts {
		vhosts[canonicalVHost(v)] = true
	}
	heartbeat := o.Heartbeat
	b.cfg = &session.Config{
		Login:          b.amqpLogin,
		UpdateSecret:   b.logins.UpdateSecret,
		External:       slices.Contains(o.AuthMechanisms, "EXTERNAL"),
		Open:           b.openAccess,
		Impersonator:   b.isImpersonator,
		VHostExists:    func(vhost string) bool { return vhosts[canonicalVHost(vhost)] },
		VHost:          b.lookupVHost,
		MaxMessageSize: max(o.MaxMessageSize, 0),
		Logger:         o.Logger,
		ChannelMax:     o.ChannelMax,
		FrameMax:       o.FrameMax,
		Heartbeat:      heartbeat,
		Product:        o.Product,
		Version:        o.profile().Version,
		Profile:        o.profile(),
		Counters:       &b.counters.session,
		Alarms:         b.alarm.Gate(),
		Drain:          &b.drain,
		Events:         b.events,
		Clock:          o.Clock,
	}
	b.conns = conns.New(b.cfg, o.Logger, b.quit, ErrClosed)
	b.nodeID = o.Node
	b.incarnation = uint64(time.Now().UnixNano())
	st, err := stores.Open(o.storeConfig(), b.alarm.DiskFull)
	if err != nil {
		return nil, err
	}
	b.stores = st
	b.params.Store = st.Meta
	b.vhosts.Store, b.vhosts.Open, b.vhosts.Log = st.Meta, b.openVHost, o.Logger
	b.plane = control.Plane{Meta: st.Meta, Access: &b.acct.access, Limits: &b.limits, Policies: &b.policies, VHosts: &b.vhosts, CloseConns: b.closeConnectionsOf}
	b.policies.Store, b.policies.Log = st.Meta, o.Logger
	b.policies.VHost = func(name string) (policystore.Target, bool) { return b.lookupVHost(name) }
	b.policies.VHosts = b.vhosts.Names
	b.limits.Store, b.limits.MaxConnections, b.limits.VHostMaxConnections = st.Meta, o.Limits.MaxConnections, o.Limits.VHostMaxConnections
	if err := b.checkStores(); err != nil {
		st.Close()
		return nil, err
	}
	b.acct.logins.Users = st.Meta
	// In shared mode the feed is watched before anything is read, so no
	// change made by another broker after that read goes unseen.
	b.watchChanges()
	ctx := context.Background()
	steps := []func() error{
		b.openPlugins,
		func() error { return b.openVHosts(ctx) },
		func() error { return b.plane.SeedUsers(ctx, o.Users, o.VHosts) },
		func() error { return b.applyOptionPolicies(ctx) },
		b.startScanner,
		b.startShovels,
	}
	for i, step := range steps {
		if err := step(); err != nil {
			b.stopFollowing()
			if i >= 2 { // the vhosts are open from the third step on
				b.vhosts.Close()
			}
			st.Close()
			return nil, err
		}
	}
	b.startFederation() // cannot fail: its links retry on their own
	b.startFollowing()
	b.startPlugins() // the vhosts can route what is due already
	b.setupAlarms()
	b.alarm.Start() // last: nothing after it can fail
	if b.opts.peers.Replies != nil {
		b.opts.peers.Replies.Attach(replyReceiver{b})
	}
	return b, nil
}

// Serve accepts connections on l and serves each on its own goroutines until
// l fails or Close is called. It takes ownership of l and closes it. After
// Close it returns ErrClosed; otherwise the accept error.
func (b *Broker) Serve(l net.Listener) error { return b.conns.Serve(l) }

// Listen binds addr ("host:port"; port 0 picks a free one) and serves it in
// the background until Close. It returns the bound address; Addr and URL are
// valid as soon as it returns.
func (b *Broker) Listen(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	return b.conns.ServeInBackground(l, "broker: listener stopped")
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
func (b *Broker) Dial(network, addr string) (net.Conn, error) { return b.dialPipe(false) }

// dialPipe is Dial; internal marks the connection as the broker's own
// (dialInternal in links.go).
func (b *Broker) dialPipe(internal bool) (net.Conn, error) {
	// The pipe lets WaitIdle see what the client wrote, and with a clock
	// dates a publish when the client's write began (transport.PipeClock).
	var now func() int64
	if clk := b.opts.Clock; clk != nil {
		now = func() int64 { return clk.Now().UnixNano() }
	}
	server, client := transport.PipeClock(now)
	id := fmt.Sprintf("pipe#%d", b.conns.NextID())
	if !b.conns.ServeConn(server, id, internal) {
		client.Close()
		return nil, ErrClosed
	}
	return client, nil
}

// Addr returns the address of the first listener the broker served, or nil
// before any.
func (b *Broker) Addr() net.Addr { return b.conns.Addr() }

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

// shutdownReason is the text of the connection.close a stopping broker
// sends, RabbitMQ's when its node stops (rabbit_networking closing every
// connection with reason shutdown), which clients' reconnect code and logs
// match on.
const shutdownReason = "broker forced connection closure with reason 'shutdown'"

// Close stops every listener, closes every connection with connection.close
// 320 CONNECTION_FORCED (waiting briefly for close-ok), and returns after
// every goroutine the broker started has exited. Safe to call many times from
// many goroutines, and during or after Shutdown; each call returns once
// shutdown is complete. Unacked deliveries go back to their queues (a
// durable queue's come back redelivered after a restart). Shutdown closes
// gracefully.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		// The shovels first, while the broker still serves the
		// connections they hold into it.
		b.shovels.Stop()
		b.federation.Stop()
		listeners, conns := b.conns.Close()
		close(b.quit)

		// The scanner goes first: it calls into connections and queues.
		b.stopScanner()
		b.stopFollowing() // it opens vhosts and starts queues
		b.alarm.Stop()
		for _, l := range listeners {
			l.Close()
		}
		for _, c := range conns {
			c.Shutdown(amqp.ConnectionForced, shutdownReason)
		}
		b.conns.Wait()
		if b.opts.peers.Replies != nil {
			b.opts.peers.Replies.Attach(nil) // no requester is left to take a reply
		}
		b.stopPlugins() // before the queues it routes to stop
		b.vhosts.Close()
		if err := b.stores.Close(); err != nil {
			b.log.Error("broker: closing stores", "err", err)
		}
		b.events.Close() // last: what closing reported has been delivered
		close(b.closeDone)
	})
	<-b.closeDone
	return nil
}
