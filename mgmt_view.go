package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/metrics"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/authn"
	"github.com/warrenmq/broker/internal/console"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/internal/snapshot"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// ManagementHandler returns an http.Handler serving the web console at "/"
// (internal/console, docs/console.md: plain HTML, CSS and JavaScript
// embedded in the binary) and the commonly used part of RabbitMQ's
// management HTTP API under /api/, with the JSON shapes RabbitMQ 3.10
// returns (fields Warren has no value for, such as Erlang process
// details, are left out rather than invented). Mount it at the root, or
// under a prefix with http.StripPrefix:
//
//	http.Handle("/", b.ManagementHandler())
//	http.Handle("/warren/", http.StripPrefix("/warren", b.ManagementHandler()))
//
// Mounting it at "/api/" only, as before the console, still serves the
// API.
//
// Requests authenticate with HTTP basic auth against the stored users
// (Options.Users and those added since), as AMQP logins do. As in
// RabbitMQ, a user needs one of the tags administrator, monitoring,
// management or policymaker; users, permissions and definitions need
// administrator; management and policymaker users see only their own
// connections, channels and consumers, and only the vhosts they have
// permissions on. Writes to exchanges, queues and bindings, purge and get
// need the user's AMQP permissions on the vhost, whatever its tags (the
// rules are listed in internal/mgmt/access.go). Names and arguments meet
// the limits AMQP's do, and request bodies are bounded (1 MiB;
// definitions 64 MiB). Serve the handler with HTTPLimits. Vhost names in paths are URL-encoded
// ("%2F" for "/"); the default exchange is "amq.default". A change that a
// web page of another origin asks for is refused with 403 (unless
// Options.Management.AllowedOrigins lists it), and a change's body must be
// application/json (415 otherwise), so that another site cannot use the
// credentials a browser keeps for the API; clients that are not browsers
// send no Origin and are unaffected (docs/management.md).
//
// Served: /api/overview, /api/nodes (the one node, its resource alarms
// and, on a cluster member, its raft state), /api/whoami, /api/vhosts[/v], /api/users[/u]
// (DELETE closes the user's connections), /api/permissions[/v/u], /api/exchanges[/v[/x]] (PUT, DELETE),
// /api/queues[/v[/q]] (PUT, DELETE), /api/queues/v/q/bindings,
// DELETE /api/queues/v/q/contents (purge), POST /api/queues/v/q/get,
// /api/bindings[/v], /api/bindings/v/e/x/q/q and /e/x/e/y (GET, POST),
// with /props (GET, DELETE), /api/connections[/name] (DELETE closes with
// 320 CONNECTION_FORCED), /api/connections/name/channels,
// /api/channels[/name], /api/consumers[/v], /api/definitions (GET, POST),
// /api/vhost-limits[/v[/name]] (PUT, DELETE), /api/topic-permissions[/v/u]
// (PUT, DELETE), /api/users/u/topic-permissions,
// /api/vhosts/v/topic-permissions (docs/management.md).
//
// POST /api/queues/v/q/get delivers, as RabbitMQ's does: basic.get on an
// internal direct channel as the requesting user (so with that user's read
// permission), then per ackmode: ack_requeue_false gets with no-ack;
// reject_requeue_true and reject_requeue_false reject every message got
// (requeued, or dead-lettered/dropped); ack_requeue_true leaves them
// unacked and closing the channel requeues them. Requeued messages come
// back marked redelivered. The answer is streamed, one message at a time,
// and truncate cuts payloads as RabbitMQ's does. PeekQueue is the Go API's
// look without delivering.
//
// Queue lengths, consumer counts and memory are read as each queue's
// actor last published them, so listing idle queues wakes none of them
// (docs/management.md, "Queue counts are sampled").
func (b *Broker) ManagementHandler() http.Handler {
	b.rateHistory() // the API's rates start here
	return console.Handler(mgmt.New(mgmtView{Reader: snapshot.Reader{LookupVHost: b.lookupVHost, Conns: b.sortedConns, Groups: queueGroups(b.stores.Meta)}, Admin: b.Admin(), b: b}, mgmt.Config{AllowOrigins: b.opts.Management.AllowedOrigins}))
}

// mgmtView is the management model: the snapshot reader over the vhosts
// and connections, the broker's Admin (every write of a control-plane
// noun, mgmt.Admin and mgmt.Parameters, is the Admin's own method), and
// the logins and topology writes below.
type mgmtView struct {
	snapshot.Reader
	*Admin
	b *Broker
}

var (
	_ mgmt.Broker     = mgmtView{}
	_ mgmt.Parameters = mgmtView{}
	_ mgmt.Shovels    = mgmtView{}
	_ mgmt.Rater      = mgmtView{}
)

func (v mgmtView) NodeName() string { return v.b.nodeID }

func (v mgmtView) Rates() *rates.Recorder { return v.b.rateHistory() }

func (v mgmtView) Overview() mgmt.Overview {
	s := v.b.stats(context.Background(), noDetails) // totals: no actor asked
	o := mgmt.Overview{
		ProductVersion:      Version,
		RabbitMQVersion:     v.b.opts.profile().Version,
		LocalRandomExchange: v.b.opts.profile().LocalRandomExchange,
		Connections:         s.Connections, Channels: s.Channels, Consumers: s.Consumers,
		Exchanges: s.Exchanges, Queues: s.Queues, Ready: s.Ready, Unacked: s.Unacked,
		Totals:            mgmt.Counters(s.Totals),
		ConnectionsOpened: s.ConnectionsOpened, ConnectionsClosed: s.ConnectionsClosed,
		ChannelsOpened: s.ChannelsOpened, ChannelsClosed: s.ChannelsClosed,
	}
	o.Listeners = v.b.conns.TCPAddrs()
	return o
}

func (v mgmtView) Node() mgmt.Node {
	a := v.b.alarmStatus()
	n := mgmt.Node{
		MemAlarm: a.MemAlarm, DiskFreeAlarm: a.DiskFreeAlarm, MemUsed: processMemory(), MemLimit: a.MemLimit,
		MessageBytes: a.MemUsed, DiskFree: a.DiskFree, DiskFreeLimit: a.DiskFreeLimit,
	}
	if r, ok := v.b.stores.Meta.(meta.Replicated); ok {
		s := r.ReplicationStatus()
		n.Raft = &s
	}
	return n
}

// queueGroups is m's queue groups, nil when it has none.
func queueGroups(m meta.Store) meta.Replicated {
	g, _ := m.(meta.Replicated)
	return g
}

// processMemory is the memory the process holds from the OS for Go's
// runtime (heap, stacks, runtime structures), less the heap it has given
// back: runtime/metrics' nearest to the RSS that RabbitMQ's mem_used
// reports by default.
func processMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

func (v mgmtView) VHosts() []string { return v.b.definitions().VHosts() }

// Authenticate checks a login with the guards of AMQP logins
// (internal/authn): the source's throttle delay first, and a
// user store that does not answer in time is mgmt.ErrUnavailable, not a
// failed login.
func (v mgmtView) Authenticate(ctx context.Context, name, password string, from net.Addr) (mgmt.Caller, error) {
	u, z, err := v.b.logins.Password(ctx, from, name, password)
	switch {
	case err == nil:
		mu := mgmt.Caller{Name: u.Name, Tags: u.Tags}
		if z != nil {
			mu.Authz = authn.Asker{Z: z}
		}
		return mu, nil
	case errors.Is(err, login.ErrUnavailable):
		return mgmt.Caller{}, fmt.Errorf("%w: %w", mgmt.ErrUnavailable, err)
	case errors.Is(err, login.ErrClosed):
		return mgmt.Caller{}, mgmt.ErrShuttingDown
	default:
		return mgmt.Caller{}, mgmt.ErrLoginFailed
	}
}

func (v mgmtView) Grant(ctx context.Context, user, vhostName string) (*mgmt.Grant, error) {
	p, err := v.b.stores.Meta.GetPermission(ctx, user, vhostName)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	g, err := access.CompileGrant(p)
	if err != nil {
		return nil, err
	}
	return &mgmt.Grant{Configure: g.Configure, Write: g.Write, Read: g.Read}, nil
}

// onVHost runs write on the vhost a management write names.
func (v mgmtView) onVHost(name string, write func(*vhost.VHost) error) error {
	vh, ok := v.b.lookupVHost(name)
	if !ok {
		return fmt.Errorf("%w: vhost %q", mgmt.ErrNotFound, name)
	}
	return write(vh)
}

func (v mgmtView) DeclareExchange(ctx context.Context, vhostName string, m *amqp.ExchangeDeclare) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return vh.DeclareExchange(ctx, m) })
}

func (v mgmtView) DeleteExchange(ctx context.Context, vhostName, name string, ifUnused bool) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return vh.DeleteExchange(ctx, name, ifUnused) })
}

func (v mgmtView) DeclareQueue(ctx context.Context, vhostName string, m *amqp.QueueDeclare) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return discard(vh.DeclareQueue(ctx, "", m)) })
}

func (v mgmtView) DeleteQueue(ctx context.Context, vhostName, name string, ifUnused, ifEmpty bool) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return discard(vh.DeleteQueue(ctx, "", name, ifUnused, ifEmpty)) })
}

// discard is the error of a write whose other result the API does not show.
func discard[T any](_ T, err error) error { return err }

func (v mgmtView) Purge(ctx context.Context, vhostName, name string) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error {
		q, err := vh.Queue("", name) // another connection's exclusive queue is 405
		if err != nil {
			return err
		}
		if _, err := q.Purge(ctx); err != nil {
			return fmt.Errorf("%w: queue %q: %v", mgmt.ErrNotFound, name, err) // the queue went away meanwhile: 404
		}
		return nil
	})
}

func (v mgmtView) Bind(ctx context.Context, vhostName string, bd routing.Binding) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return vh.Bind(ctx, "", bd) })
}

func (v mgmtView) Unbind(ctx context.Context, vhostName string, bd routing.Binding) error {
	return v.onVHost(vhostName, func(vh *vhost.VHost) error { return vh.Unbind(ctx, "", bd) })
}

func (v mgmtView) OpenChannel(ctx context.Context, user mgmt.Caller, vhostName string) (mgmt.DirectChannel, error) {
	var ch *Channel
	var err error
	switch z, ok := user.Authz.(authn.Asker); {
	case ok:
		// Decided by the backend that let the user in, as its AMQP
		// connections are: no second login by name.
		ch, err = v.b.authzChannel(ctx, z.Z, vhostName)
	case v.b.logins.Chained():
		// Let in through Options.Auth by an entry whose authorisation is
		// the user database: its stored permissions, no second login.
		ch, err = v.b.storedChannel(ctx, user.Name, vhostName)
	default:
		ch, err = v.b.Channel(ctx, AsUser(user.Name), OnVHost(vhostName))
	}
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return ch, nil
}
