package vhost

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/dedup"
	"github.com/warrenmq/broker/internal/delayed"
	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// QueueStarter starts the actor of a declared queue; the broker chooses its
// stores (in memory for non-durable queues, persistent for durable ones).
// features are the queue's parsed arguments and its hooks into the vhost
// (dead-letter routing, x-expires); the broker puts them in queue.Config.
type QueueStarter func(ctx context.Context, def meta.Queue, features queue.Features) (*queue.Queue, error)

// QueueStopper deletes what the broker keeps for a queue beyond its actor's
// stores (nothing, by default). It runs after the queue's actor deleted its
// messages.
type QueueStopper func(ctx context.Context, def meta.Queue)

// Config describes one vhost.
type Config struct {
	Name       string
	Store      meta.Topology
	StartQueue QueueStarter
	Logger     *slog.Logger
	// MaxQueues bounds the vhost's queues (RabbitMQ's max-queues vhost
	// limit): declaring a new one beyond it is 406. Zero means no limit.
	MaxQueues int
	// MaxArgumentsSize bounds the encoded argument table of a declared
	// exchange or queue, or of a binding (limits.go); 0 means
	// DefaultMaxArgumentsSize. The broker sets what its frame_max allows.
	MaxArgumentsSize int
	// Shared says that other brokers write to Store too (shared mode, see
	// the package documentation and shared.go): Open deletes nothing, and
	// Sync follows what the others declare and delete.
	Shared bool
	// Profile is the RabbitMQ release whose declare and binding rules
	// the vhost copies where versions differ (profile.go); the zero
	// Profile is the default.
	Profile compat.Profile
	// Delayed holds the messages of x-delayed-message exchanges until
	// they are due (plugins.go); nil routes them at once.
	Delayed *delayed.Service
	// Dedup opens the caches of x-message-deduplication exchanges
	// (dedup.go); nil keeps them in memory.
	Dedup DedupOpener
	// VolatileHolds says the stores cannot persist what durable delayed
	// and deduplicating exchanges hold (the broker has no Pebble
	// database of its own and the given meta store no meta.Records):
	// DeclareExchange refuses such an exchange with 406 rather than
	// confirm messages a restart would lose.
	VolatileHolds bool
	// Policies are the vhost's policies when it opens (policy.go); nil
	// is none. SetPolicies replaces them.
	Policies *policy.Set
	// ReplyTag names this node in the direct reply-to names it generates
	// and Replies carries replies to the names of other nodes
	// (replyto.go); "" and nil keep every reply on this node.
	ReplyTag string
	Replies  ReplyForwarder
	// Bindings, when set, is told of each binding added to or removed
	// from the routing table after Open, once the change is there
	// (binding_events.go); it runs under the vhost's topology lock and
	// must not block.
	Bindings func(b routing.Binding, created bool)
}

// Queue is a declared queue: its definition, arguments and actor.
type Queue struct {
	*queue.Queue
	Def  meta.Queue
	Args amqp.Table

	// tracked remembers the consumers of a shared queue (nil otherwise),
	// so that Sync can cancel them when another broker deletes the queue
	// (shared.go).
	tracked *consumerSet

	pol queuePolicy // the policies that apply (policy.go)

	// synced says a declaration's sync covered the definition's write
	// (DeclareQueue); until then a redeclaration syncs too before it
	// answers, so nobody hears of a durable queue that is not on disk.
	synced atomic.Bool
}

type exchange struct {
	def  meta.Exchange
	args amqp.Table
	// delayed: an x-delayed-message exchange; dedup: the cache of an
	// x-message-deduplication one (plugins.go).
	delayed bool
	dedup   *dedup.Cache
}

// VHost holds one virtual host's topology: exchanges, queues, bindings and
// the routing table built from them. Its methods are safe for concurrent
// use (see the package documentation for the locking contract).
type VHost struct {
	cfg Config

	// topo serializes topology changes. It is held across the metadata
	// store's writes and the calls into queue actors that a change makes
	// (start, stats, delete), so each change is one step, persistence
	// included, to every other change: a deletion cannot finish its store
	// work after a redeclaration of the same name started. Route and the
	// lookups never take it, and a queue actor must never wait for it.
	// Methods ending in Locked need it. Its holder may read the fields
	// below without mu, because only topo holders change them.
	topo sync.Mutex

	// mu guards the fields below. It is held for in-memory reads and
	// writes only, never across I/O or a queue call, so routing waits for
	// a map update at most, never for an fsync. Order: topo, then mu.
	mu        sync.RWMutex
	routes    *routing.Table
	exchanges map[string]*exchange
	queues    map[string]*Queue
	// queuesPeak rebuilds queues once deletes left it a quarter of its
	// largest size (shrink.Map): a burst of queues declared and deleted
	// would otherwise keep the map's table for good.
	queuesPeak shrink.Peak
	// headersX names the exchanges of kind headers, so routing decodes a
	// message's headers only while one of them has bindings (the
	// predeclared amq.headers and amq.match alone cost nothing).
	headersX map[string]struct{}

	// group holds every queue of the vhost: dead-lettering connects them,
	// and Close stops them together (queue.StopAll).
	group *queue.Group

	// replies maps direct reply-to names to their requesters
	// (replyto.go); a sync.Map because publishes read it on every reply.
	replies sync.Map

	// plugins counts the delayed and deduplicating exchanges, so that a
	// publish looks for one only while there is one (plugins.go).
	plugins atomic.Int32
	// settings are the operator's changeable settings (settings.go).
	settings settings
	// policies are the vhost's policies (policy.go); only topo holders
	// store it.
	policies atomic.Pointer[policy.Set]

	// deadLetter and holdDeadLetter are the method values every queue's
	// Features carry (features.go), made once: a method value taken per
	// declare is an allocation each.
	deadLetter     queue.DeadLetterRouter
	holdDeadLetter queue.DeadLetterHolder
}

// Open builds the vhost from the durable topology in cfg.Store. Entities
// that are not durable, and exclusive queues, belonged to the broker's
// previous run and are deleted from the store, as RabbitMQ does at restart.
func Open(ctx context.Context, cfg Config) (*VHost, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := &VHost{
		cfg:       cfg,
		routes:    routing.NewTable(),
		exchanges: make(map[string]*exchange),
		headersX:  make(map[string]struct{}),
		queues:    make(map[string]*Queue),
		group:     queue.NewGroup(),
	}
	v.deadLetter, v.holdDeadLetter = v.routeDeadLetter, v.holdDeadLetterOf
	v.settings.queueLimit.Store(noLimitSet)
	v.policies.Store(cfg.Policies)
	// Nobody else can see v yet; topo is taken for the Locked helpers'
	// contract.
	v.topo.Lock()
	defer v.topo.Unlock()
	v.routes.DeclareDefaults()
	for _, e := range routing.Predeclared() {
		if e.Name == "" {
			continue
		}
		v.exchanges[e.Name] = &exchange{def: meta.Exchange{
			VHost: cfg.Name, Name: e.Name, Type: e.Kind.String(), Durable: true,
		}}
		if e.Kind == routing.Headers {
			v.headersX[e.Name] = struct{}{}
		}
	}
	if cfg.Shared {
		// Nothing in the store is known to be stale: the other brokers
		// own their non-durable entities and exclusive queues.
		if err := v.syncLocked(ctx); err != nil {
			v.Close()
			return nil, err
		}
		return v, nil
	}
	st := cfg.Store
	exchanges, err := st.ListExchanges(ctx, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("vhost: list exchanges: %w", err)
	}
	for _, e := range exchanges {
		if !e.Durable {
			if err := st.DeleteExchange(ctx, e.VHost, e.Name); err != nil {
				return nil, fmt.Errorf("vhost: delete non-durable exchange %q: %w", e.Name, err)
			}
			continue
		}
		args, _, err := decodeArgs(e.Arguments)
		if err != nil {
			return nil, fmt.Errorf("vhost: exchange %q: %w", e.Name, err)
		}
		if err := v.addExchangeLocked(e, args); err != nil {
			return nil, fmt.Errorf("vhost: exchange %q: %w", e.Name, err)
		}
	}
	queues, err := st.ListQueues(ctx, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("vhost: list queues: %w", err)
	}
	for _, q := range queues {
		if !q.Durable || q.Exclusive {
			if err := st.DeleteQueue(ctx, q.VHost, q.Name); err != nil {
				return nil, fmt.Errorf("vhost: delete non-durable queue %q: %w", q.Name, err)
			}
			continue
		}
		if _, err := v.startStoredLocked(ctx, q); err != nil {
			v.Close()
			return nil, err
		}
	}
	bindings, err := st.ListBindings(ctx, cfg.Name)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("vhost: list bindings: %w", err)
	}
	for _, b := range bindings {
		rb, err := v.routingBinding(b)
		if err == nil && b.Durable {
			_, err = v.routes.Bind(rb)
		}
		if err != nil || !b.Durable {
			// Not durable, or an end is gone (deleted by a crash between
			// a queue's and its bindings' deletion).
			if err := st.DeleteBinding(ctx, b); err != nil {
				v.Close()
				return nil, fmt.Errorf("vhost: delete stale binding: %w", err)
			}
		}
	}
	return v, nil
}

// startStoredLocked starts the actor of a queue read from the store and
// adds it to the topology.
func (v *VHost) startStoredLocked(ctx context.Context, q meta.Queue) (*Queue, error) {
	args, _, err := decodeArgs(q.Arguments)
	if err != nil {
		return nil, fmt.Errorf("vhost: queue %q: %w", q.Name, err)
	}
	// Stored arguments passed ParseArgs at declare; a store written by an
	// older Warren may hold ones it now refuses: those features are off
	// rather than the vhost unopenable.
	parsed, perr := v.parseQueueArgs(args)
	if perr != nil {
		v.cfg.Logger.Warn("vhost: stored queue arguments refused", "queue", q.Name, "err", perr)
		parsed, _ = queue.ParseArgs(nil)
	}
	actor, err := v.cfg.StartQueue(ctx, q, v.features(q, parsed))
	if err != nil {
		return nil, fmt.Errorf("vhost: start queue %q: %w", q.Name, err)
	}
	vq := v.newQueue(actor, q, args)
	v.mu.Lock()
	v.queues[q.Name] = vq
	v.routes.AddQueue(q.Name)
	v.mu.Unlock()
	return vq, nil
}

// newQueue wraps a started actor; a shared queue tracks its consumers.
func (v *VHost) newQueue(actor *queue.Queue, def meta.Queue, args amqp.Table) *Queue {
	q := &Queue{Queue: actor, Def: def, Args: args}
	if v.cfg.Shared && sharedQueue(def) {
		q.tracked = &consumerSet{}
	}
	v.attachPolicyLocked(q)
	return q
}

// Name returns the vhost's name.
func (v *VHost) Name() string { return v.cfg.Name }

// Close stops every queue actor without deleting anything stored, and lets
// go of what the deduplication caches in memory hold. The queues stop
// together (queue.StopAll): a message being dead-lettered from one queue
// to another when Close begins is stored in the target and deleted from
// the source before either stops.
func (v *VHost) Close() {
	v.mu.Lock()
	qs := make([]*queue.Queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q.Queue)
	}
	for _, x := range v.exchanges {
		if x.dedup != nil {
			x.dedup.Release()
		}
	}
	v.mu.Unlock()
	queue.StopAll(qs)
}

func decodeArgs(raw []byte) (amqp.Table, []byte, error) {
	if len(raw) == 0 {
		return nil, nil, nil
	}
	t, _, err := amqp.DecodeTable(raw)
	return t, raw, err
}

func encodeArgs(t amqp.Table) ([]byte, error) {
	if len(t) == 0 {
		return nil, nil
	}
	return amqp.AppendTable(nil, t)
}

// addExchangeLocked adds a declared exchange to the maps and the routing
// table.
func (v *VHost) addExchangeLocked(def meta.Exchange, args amqp.Table) error {
	kind, err := routing.ResolveType(def.Type, args)
	if err != nil {
		return err
	}
	// Stored arguments passed validation at declare; a store written by
	// another version may hold ones refused now: hash on the key then.
	var on routing.HashOn
	if kind == routing.ConsistentHash {
		on, _ = routing.ParseHashArgs(args)
	}
	x := &exchange{def: def, args: args, delayed: def.Type == routing.TypeDelayed}
	if def.Type == routing.TypeDeduplication {
		if x.dedup, err = v.openDedupLocked(def.Name, def.Durable, args); err != nil {
			return err
		}
	}
	ae, _ := args["alternate-exchange"].(string)
	if _, given := args["alternate-exchange"]; !given {
		ae = v.exchangePolicyAE(def.Name) // the argument wins (policy.go)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.routes.DeclareExchange(routing.Exchange{
		Name: def.Name, Kind: kind, Internal: def.Internal, AlternateExchange: ae, HashOn: on,
	}); err != nil {
		if x.dedup != nil {
			x.dedup.Release()
		}
		return err
	}
	v.setExchangeLocked(def.Name, x)
	if readsProperties(kind, on) {
		v.headersX[def.Name] = struct{}{}
	}
	return nil
}

func (v *VHost) routingBinding(b meta.Binding) (routing.Binding, error) {
	args, _, err := decodeArgs(b.Arguments)
	if err != nil {
		return routing.Binding{}, err
	}
	return routing.Binding{
		Source:      b.Source,
		Destination: routing.Destination{Name: b.Destination, Exchange: b.DestinationKind == meta.DestinationExchange},
		Key:         b.RoutingKey,
		Args:        args,
	}, nil
}

// Errors in RabbitMQ's words. The session fills in class and method ids.

// DeclareExchange implements exchange.declare.
func (v *VHost) DeclareExchange(ctx context.Context, m *amqp.ExchangeDeclare) error {
	name := m.Exchange
	if m.Passive {
		// RabbitMQ refuses even a passive declare of the default exchange.
		if name == "" {
			return defaultExchangeError()
		}
		v.mu.RLock()
		_, ok := v.exchanges[name]
		v.mu.RUnlock()
		if !ok && v.cfg.Shared {
			return v.adoptExchange(ctx, name)
		}
		if !ok {
			return notFound("exchange", name, v.cfg.Name)
		}
		return nil
	}
	if !v.exchangeTypeKnown(m.Type) {
		// 406 closing the channel, as RabbitMQ 3.13.3 and later answer
		// (rabbitmq-server#11215); 3.10 to 3.13.2 closed the connection
		// with 503 COMMAND_INVALID. Every supported profile answers 406.
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "unknown exchange type '%s'", m.Type)
	}
	if name == "" {
		return defaultExchangeError()
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	if x, ok := v.exchanges[name]; ok {
		return v.exchangeEquivalent(x, m)
	}
	if routing.IsReserved(name) {
		return amqp.NewError(amqp.AccessRefused, 0, 0, "exchange name '%s' contains reserved prefix 'amq.*'", name)
	}
	if err := v.checkName("exchange", name); err != nil {
		return err
	}
	if err := v.checkExchangeName(m.Arguments, "alternate-exchange", "exchange", name); err != nil {
		return err
	}
	if _, _, err := exchangeRouting(m.Type, m.Arguments); err != nil {
		return err
	}
	if m.Durable && v.cfg.VolatileHolds && (m.Type == routing.TypeDelayed || m.Type == routing.TypeDeduplication) {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0,
			"durable exchange '%s' of type '%s' in vhost '%s' needs stores that persist its held records: the broker has no Options.DataDir and Options.Storage.Meta has no meta.Records; declare it non-durable or set Options.DataDir",
			name, m.Type, v.cfg.Name)
	}
	raw, err := encodeArgs(m.Arguments)
	if err != nil {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arguments for exchange '%s': %v", name, err)
	}
	if err := v.checkArgsSize(raw, "exchange", name); err != nil {
		return err
	}
	def := meta.Exchange{
		VHost: v.cfg.Name, Name: name, Type: m.Type,
		Durable: m.Durable, AutoDelete: m.AutoDelete, Internal: m.Internal, Arguments: raw,
	}
	if err := v.cfg.Store.PutExchange(ctx, def); err != nil {
		return storeError(err)
	}
	if err := v.addExchangeLocked(def, m.Arguments); err != nil {
		_ = v.cfg.Store.DeleteExchange(ctx, v.cfg.Name, name)
		return amqp.NewError(amqp.InternalError, 0, 0, "declare exchange '%s': %v", name, err)
	}
	return nil
}

func (v *VHost) exchangeEquivalent(x *exchange, m *amqp.ExchangeDeclare) error {
	d := x.def
	switch {
	case d.Type != m.Type:
		return inequivalent("type", "exchange", d.Name, v.cfg.Name, m.Type, d.Type)
	case d.Durable != m.Durable:
		return inequivalent("durable", "exchange", d.Name, v.cfg.Name, m.Durable, d.Durable)
	case d.AutoDelete != m.AutoDelete:
		return inequivalent("auto_delete", "exchange", d.Name, v.cfg.Name, m.AutoDelete, d.AutoDelete)
	case d.Internal != m.Internal:
		return inequivalent("internal", "exchange", d.Name, v.cfg.Name, m.Internal, d.Internal)
	}
	// RabbitMQ compares only the arguments it knows; for exchanges that is
	// alternate-exchange.
	const ae = "alternate-exchange"
	a, aok := m.Arguments[ae]
	b, bok := x.args[ae]
	if aok != bok || !sameArg(a, b) {
		return inequivalentArg(ae, "exchange", d.Name, v.cfg.Name, a, aok, b, bok)
	}
	return nil
}

// checkExchangeName applies RabbitMQ's rule for arguments that name an
// exchange (alternate-exchange, x-dead-letter-exchange) when an entity is
// created: absent, or a long string. The exchange need not exist.
func (v *VHost) checkExchangeName(args amqp.Table, arg, kind, name string) error {
	val, ok := args[arg]
	if !ok {
		return nil
	}
	if _, isString := val.(string); isString {
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, 0, 0,
		"invalid type '%s' for arg '%s' in %s", fieldType(val), arg, v.resource(kind, name))
}

// DeleteExchange implements exchange.delete. Deleting a missing exchange
// succeeds, as in RabbitMQ 3.x.
func (v *VHost) DeleteExchange(ctx context.Context, name string, ifUnused bool) error {
	if name == "" {
		return defaultExchangeError()
	}
	if routing.IsReserved(name) {
		return amqp.NewError(amqp.AccessRefused, 0, 0, "deletion of system %s not allowed", v.resource("exchange", name))
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	x, ok := v.exchanges[name]
	if !ok {
		return nil
	}
	if ifUnused && v.routes.SourceBindings(name) > 0 {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s in use", v.resource("exchange", name))
	}
	return v.deleteExchangeLocked(ctx, x)
}

func (v *VHost) deleteExchangeLocked(ctx context.Context, x *exchange) error {
	if err := v.cfg.Store.DeleteExchange(ctx, v.cfg.Name, x.def.Name); err != nil {
		return storeError(err)
	}
	v.mu.Lock()
	removed, err := v.routes.DeleteExchange(x.def.Name)
	if err != nil {
		v.mu.Unlock()
		return amqp.NewError(amqp.AccessRefused, 0, 0, "%v", err)
	}
	v.setExchangeLocked(x.def.Name, nil)
	v.mu.Unlock()
	v.exchangeGoneLocked(ctx, x)
	return v.forgetBindingsLocked(ctx, removed)
}

// forgetBindingsLocked deletes removed bindings from the store and then
// auto-deletes exchanges that lost their last binding.
func (v *VHost) forgetBindingsLocked(ctx context.Context, removed []routing.Binding) error {
	var errs []error
	sources := make(map[string]bool)
	for _, b := range removed {
		v.told(b, false)
		if err := v.cfg.Store.DeleteBinding(ctx, v.metaBinding(b)); err != nil {
			errs = append(errs, err)
		}
		sources[b.Source] = true
	}
	for name := range sources {
		x, ok := v.exchanges[name]
		if ok && x.def.AutoDelete && v.routes.SourceBindings(name) == 0 {
			if err := v.deleteExchangeLocked(ctx, x); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return storeError(err)
	}
	return nil
}

func (v *VHost) metaBinding(b routing.Binding) meta.Binding {
	kind := meta.DestinationQueue
	if b.Destination.Exchange {
		kind = meta.DestinationExchange
	}
	raw, _ := encodeArgs(b.Args)
	return meta.Binding{
		VHost: v.cfg.Name, Source: b.Source, Destination: b.Destination.Name,
		DestinationKind: kind, RoutingKey: b.Key, Arguments: raw,
		Durable: v.durableLocked(b),
	}
}

func (v *VHost) durableLocked(b routing.Binding) bool {
	src, ok := v.exchanges[b.Source]
	if !ok || !src.def.Durable {
		return false
	}
	if b.Destination.Exchange {
		dst, ok := v.exchanges[b.Destination.Name]
		return ok && dst.def.Durable
	}
	q, ok := v.queues[b.Destination.Name]
	return ok && q.Def.Durable
}

// Bind implements exchange.bind (dest an exchange) and queue.bind.
func (v *VHost) Bind(ctx context.Context, connection string, b routing.Binding) error {
	return v.bindAction(ctx, connection, b, true)
}

// Unbind implements exchange.unbind and queue.unbind. Removing a binding
// that does not exist succeeds.
func (v *VHost) Unbind(ctx context.Context, connection string, b routing.Binding) error {
	return v.bindAction(ctx, connection, b, false)
}

func (v *VHost) bindAction(ctx context.Context, connection string, b routing.Binding, add bool) error {
	if b.Source == "" || (b.Destination.Exchange && b.Destination.Name == "") {
		return defaultExchangeError()
	}
	if add {
		if err := v.checkBinding(b); err != nil {
			return err
		}
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	if add && v.cfg.Shared {
		v.adoptEndsLocked(ctx, b)
	}
	// RabbitMQ reports a missing source before a missing destination, and
	// removing a binding whose end is missing succeeds (there is nothing to
	// remove).
	if _, ok := v.exchanges[b.Source]; !ok {
		if !add {
			return nil
		}
		return notFound("exchange", b.Source, v.cfg.Name)
	}
	if b.Destination.Exchange {
		if _, ok := v.exchanges[b.Destination.Name]; !ok {
			if !add {
				return nil
			}
			return notFound("exchange", b.Destination.Name, v.cfg.Name)
		}
		if add {
			if err := v.checkBindingLocked(b, nil); err != nil {
				return err
			}
		}
	} else {
		q, ok := v.queues[b.Destination.Name]
		if !ok {
			if !add {
				return nil
			}
			return notFound("queue", b.Destination.Name, v.cfg.Name)
		}
		if add {
			if err := v.checkBindingLocked(b, q); err != nil {
				return err
			}
		}
		if q.Def.Exclusive && q.Def.Owner != connection {
			return lockedError(q.Def.Name, v.cfg.Name)
		}
	}
	if !add {
		v.mu.Lock()
		removed, err := v.routes.Unbind(b)
		v.mu.Unlock()
		if err != nil || !removed {
			return nil
		}
		return v.forgetBindingsLocked(ctx, []routing.Binding{b})
	}
	// The routing table validates the binding (headers x-match) before
	// anything is written; a store failure takes a new binding back out.
	v.mu.Lock()
	added, err := v.routes.Bind(b)
	v.mu.Unlock()
	if err != nil {
		// The routing error reads "routing: invalid binding: ..."; the
		// client needs no package name.
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s", strings.TrimPrefix(err.Error(), "routing: "))
	}
	if !added {
		return nil // an identical binding exists and is stored
	}
	if err := v.cfg.Store.PutBinding(ctx, v.metaBinding(b)); err != nil {
		v.mu.Lock()
		_, _ = v.routes.Unbind(b)
		v.mu.Unlock()
		return storeError(err)
	}
	v.told(b, true)
	return nil
}

// DeclareQueue implements queue.declare for a connection. It returns the
// queue (with the server-generated name when name was empty).
func (v *VHost) DeclareQueue(ctx context.Context, connection string, m *amqp.QueueDeclare) (*Queue, error) {
	q, _, err := v.DeclareQueueCreated(ctx, connection, m)
	return q, err
}

// DeclareQueueCreated is DeclareQueue that also reports whether this call
// created the queue. A queue just created holds no message and has no
// consumer, so queue.declare-ok need not ask its actor: asking would start
// the actor's goroutine for its idle period, and a burst of declares would
// keep one goroutine per queue at once (the runtime keeps the records of
// that many goroutines after they exit, and the stacks until it scavenges).
func (v *VHost) DeclareQueueCreated(ctx context.Context, connection string, m *amqp.QueueDeclare) (_ *Queue, created bool, err error) {
	name := m.Queue
	if m.Passive {
		q, err := v.Queue(connection, name)
		if err != nil {
			return nil, false, err
		}
		return q, false, nil
	}
	if name == "" {
		name = GenerateName("amq.gen-")
	} else if routing.IsReserved(name) {
		return nil, false, amqp.NewError(amqp.AccessRefused, 0, 0, "queue name '%s' contains reserved prefix 'amq.*'", name)
	} else if err := v.checkName("queue", name); err != nil {
		return nil, false, err
	}
	def := meta.Queue{
		VHost:      v.cfg.Name,
		Name:       name,
		Durable:    m.Durable && !m.Exclusive, // exclusive queues never outlive their connection
		Exclusive:  m.Exclusive,
		AutoDelete: m.AutoDelete,
	}
	if m.Exclusive {
		def.Owner = connection
	}
	args := v.withDefaultType(m.Arguments, def.Durable, def.Exclusive, def.AutoDelete)
	// The definition is written unsynced under topo and synced once topo
	// is released, so declarations on other connections share fsyncs
	// instead of queueing for one each; the caller hears of the queue only
	// once it is on disk.
	written := ctx
	_, syncLater := v.cfg.Store.(meta.Syncer)
	if syncLater {
		written = meta.DeferSync(ctx)
	}
	var unsynced *Queue // a queue whose definition this call must sync
	v.topo.Lock()
	defer func() {
		v.topo.Unlock()
		if err == nil && unsynced != nil {
			if err = v.syncStore(ctx, unsynced.Def.Durable); err == nil {
				unsynced.synced.Store(true)
			}
		}
	}()
	if q, ok := v.queues[name]; ok {
		if err := v.queueEquivalent(q, def, args); err != nil {
			return nil, false, err
		}
		q.Touch() // a redeclaration is a use (x-expires)
		if syncLater && q.Def.Durable && !q.synced.Load() {
			unsynced = q
		}
		return q, false, nil
	}
	if v.cfg.Shared {
		// Another broker may have declared it a moment ago, before Sync
		// caught up: serve that queue rather than overwrite its definition.
		q, err := v.adoptLocked(ctx, name)
		if err != nil {
			return nil, false, err
		}
		if q != nil {
			if err := v.queueEquivalent(q, def, args); err != nil {
				return nil, false, err
			}
			return q, false, nil
		}
	}
	if err := v.queueLimitReachedLocked(name); err != nil {
		return nil, false, err
	}
	if err := v.checkExchangeName(args, "x-dead-letter-exchange", "queue", name); err != nil {
		return nil, false, err
	}
	parsed, err := v.parseQueueArgs(args)
	if err != nil {
		var ae *queue.ArgError
		if errors.As(err, &ae) && ae.Text != "" {
			return nil, false, amqp.NewError(ae.Code, 0, 0, "%s", strings.ReplaceAll(ae.Text, "{queue}", v.resource("queue", name)))
		}
		if errors.As(err, &ae) {
			return nil, false, amqp.NewError(ae.Code, 0, 0, "invalid arg '%s' for queue '%s' in vhost '%s': %s",
				ae.Arg, name, v.cfg.Name, ae.Reason)
		}
		return nil, false, amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arguments for queue '%s': %v", name, err)
	}
	if err := v.checkDeclare(def, m, parsed); err != nil {
		return nil, false, err
	}
	if parsed.Stream {
		if err := v.streamProperties(name, m); err != nil {
			return nil, false, err
		}
	}
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, false, amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arguments for queue '%s': %v", name, err)
	}
	if err := v.checkArgsSize(raw, "queue", name); err != nil {
		return nil, false, err
	}
	def.Arguments = raw
	if err := v.cfg.Store.PutQueue(written, def); err != nil {
		return nil, false, storeError(err)
	}
	actor, err := v.cfg.StartQueue(ctx, def, v.features(def, parsed))
	if err != nil {
		_ = v.cfg.Store.DeleteQueue(ctx, def.VHost, def.Name)
		return nil, false, amqp.NewError(amqp.InternalError, 0, 0, "start queue '%s': %v", name, err)
	}
	q := v.newQueue(actor, def, args)
	if syncLater {
		unsynced = q
	}
	v.mu.Lock()
	v.queues[name] = q
	v.routes.AddQueue(name)
	v.mu.Unlock()
	return q, true, nil
}

func (v *VHost) queueEquivalent(q *Queue, def meta.Queue, args amqp.Table) error {
	d := q.Def
	if d.Exclusive && d.Owner != def.Owner || def.Exclusive && !d.Exclusive {
		return lockedError(d.Name, v.cfg.Name)
	}
	switch {
	case d.Durable != def.Durable:
		return inequivalent("durable", "queue", d.Name, v.cfg.Name, def.Durable, d.Durable)
	case d.AutoDelete != def.AutoDelete:
		return inequivalent("auto_delete", "queue", d.Name, v.cfg.Name, def.AutoDelete, d.AutoDelete)
	}
	keys := v.comparedQueueArgs(q)
	for _, key := range keys {
		a, aok := args[key]
		b, bok := q.Args[key]
		if key == "x-queue-type" && aok != bok && (a == "classic" || b == "classic") {
			// No x-queue-type is a classic queue: RabbitMQ 3.8 and later
			// (rabbit_misc:assert_args_equivalence) accept the absent
			// argument and the long string "classic" as equivalent either
			// way round. A vhost default queue type was written into
			// the arguments of both sides before this (withDefaultType).
			continue
		}
		if aok != bok || !sameArg(a, b) {
			return inequivalentArg(key, "queue", d.Name, v.cfg.Name, a, aok, b, bok)
		}
	}
	return nil
}

// Queue looks a queue up for a connection: 404 when missing, 405 when it is
// another connection's exclusive queue. In shared mode a queue missing
// here is looked for in the store too (another broker may have declared it
// a moment ago, before Sync caught up): that miss takes topo.
func (v *VHost) Queue(connection, name string) (*Queue, error) {
	q, err := v.lookup(connection, name)
	if err != nil && v.cfg.Shared {
		return v.adoptMissing(context.Background(), connection, name, err)
	}
	return q, err
}

// lookup is Queue without the store: what runs here.
func (v *VHost) lookup(connection, name string) (*Queue, error) {
	v.mu.RLock()
	q, ok := v.queues[name]
	v.mu.RUnlock()
	if !ok {
		return nil, notFound("queue", name, v.cfg.Name)
	}
	if q.Def.Exclusive && q.Def.Owner != connection {
		return nil, lockedError(name, v.cfg.Name)
	}
	return q, nil
}

// DeleteQueue implements queue.delete; it returns the number of messages
// deleted. Deleting a missing queue succeeds with 0, as in RabbitMQ 3.x.
func (v *VHost) DeleteQueue(ctx context.Context, connection, name string, ifUnused, ifEmpty bool) (uint64, error) {
	v.topo.Lock()
	defer v.topo.Unlock()
	q, err := v.lookup(connection, name)
	var ae *amqp.Error
	if err != nil && v.cfg.Shared && errors.As(err, &ae) && ae.Code == amqp.NotFound {
		// Declared elsewhere and not synced here yet: it is deleted for
		// every broker all the same.
		if q, err = v.adoptLocked(ctx, name); err == nil && q == nil {
			return 0, nil
		}
	}
	if err != nil {
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return 0, nil
		}
		return 0, err
	}
	// A stream ignores both, as in RabbitMQ 3.13 and 4.x
	// (rabbit_stream_queue:delete drops them).
	if (ifUnused || ifEmpty) && !q.IsStream() {
		st, err := q.Stats(ctx)
		if err != nil {
			return 0, nil // its actor stopped: the broker is closing
		}
		// RabbitMQ's order and its notion of empty: no message ready
		// (unacknowledged deliveries do not count).
		if ifEmpty && st.Ready > 0 {
			return 0, amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s not empty", v.resource("queue", name))
		}
		if ifUnused && st.Consumers > 0 {
			return 0, amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s in use", v.resource("queue", name))
		}
	}
	return v.removeQueueLocked(ctx, q)
}

// removeQueueLocked takes q out of the topology, then deletes its messages
// and metadata. The queue's shard goes before its metadata so that a crash
// in between leaves an empty queue rather than a queue-less shard. Holding
// topo throughout keeps a redeclaration of the name from starting on the
// shard and metadata this deletion is about to remove.
func (v *VHost) removeQueueLocked(ctx context.Context, q *Queue) (uint64, error) {
	if v.queues[q.Def.Name] != q {
		return 0, nil // someone else deleted it
	}
	v.mu.Lock()
	delete(v.queues, q.Def.Name)
	v.queues = shrink.Map(v.queues, &v.queuesPeak)
	removed := v.routes.RemoveQueue(q.Def.Name)
	v.mu.Unlock()

	n, err := q.Delete(ctx)
	if err != nil && !errors.Is(err, queue.ErrDeleted) {
		v.cfg.Logger.Error("delete queue", "vhost", v.cfg.Name, "queue", q.Def.Name, "err", err)
	}
	// The queue's record and its bindings' go with one fsync at the end
	// rather than one each: the WAL keeps their order, and a crash before
	// the sync leaves a prefix of them, as a crash between the synced
	// writes did.
	deferred := ctx
	if _, ok := v.cfg.Store.(meta.Syncer); ok {
		deferred = meta.DeferSync(ctx)
	}
	if err := v.cfg.Store.DeleteQueue(deferred, v.cfg.Name, q.Def.Name); err != nil {
		return n, storeError(err)
	}
	ferr := v.forgetBindingsLocked(deferred, removed)
	if err := v.syncStore(ctx, q.Def.Durable); err != nil {
		return n, err
	}
	return n, ferr
}

// syncStore syncs the metadata store after writes made under
// meta.DeferSync when any of them must be durable, unless ctx defers the
// sync further (a definitions import syncs once at its end).
func (v *VHost) syncStore(ctx context.Context, durable bool) error {
	s, ok := v.cfg.Store.(meta.Syncer)
	if !ok || !durable || meta.SyncDeferred(ctx) {
		return nil
	}
	if err := s.Sync(ctx); err != nil {
		return storeError(err)
	}
	return nil
}

// ConsumerGone is told the number of consumers left on q after one was
// cancelled; an auto-delete queue goes when its last consumer does. The
// count is asked again under topo: a consumer that came meanwhile keeps
// the queue.
func (v *VHost) ConsumerGone(ctx context.Context, q *Queue, remaining int) {
	if !q.Def.AutoDelete || remaining != 0 {
		return
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	if st, err := q.Stats(ctx); err != nil || st.Consumers > 0 {
		return // stopped or deleted already, or in use again
	}
	if _, err := v.removeQueueLocked(ctx, q); err != nil {
		v.cfg.Logger.Error("auto-delete queue", "vhost", v.cfg.Name, "queue", q.Def.Name, "err", err)
	}
}

// ConnectionClosed deletes the exclusive queues the connection owned.
func (v *VHost) ConnectionClosed(ctx context.Context, connection string) {
	v.topo.Lock()
	defer v.topo.Unlock()
	var owned []*Queue
	for _, q := range v.queues {
		if q.Def.Exclusive && q.Def.Owner == connection {
			owned = append(owned, q)
		}
	}
	for _, q := range owned {
		if _, err := v.removeQueueLocked(ctx, q); err != nil {
			v.cfg.Logger.Error("delete exclusive queue", "vhost", v.cfg.Name, "queue", q.Def.Name, "err", err)
		}
	}
}

// Route finds the queues a message published to exchange with key reaches.
// props are the message's raw properties; their headers are decoded only
// while the vhost has a headers exchange. names and dst are the caller's
// scratch slices, reused across publishes; Route returns them extended.
func (v *VHost) Route(exchangeName, key string, props []byte, names []string, dst []*Queue) ([]string, []*Queue, error) {
	return v.RouteCC(exchangeName, key, nil, props, names, dst)
}

// RouteCC is Route for a publish with the extra routing keys cc (see
// SenderSelected): every exchange reached matches each key, and a queue
// is listed once however many keys reach it.
func (v *VHost) RouteCC(exchangeName, key string, cc []string, props []byte, names []string, dst []*Queue) ([]string, []*Queue, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[exchangeName]
	if exchangeName != "" {
		if !ok {
			return names, dst, notFound("exchange", exchangeName, v.cfg.Name)
		}
		if x.def.Internal {
			return names, dst, amqp.NewError(amqp.AccessRefused, 0, 0,
				"cannot publish to internal %s", v.resource("exchange", exchangeName))
		}
	}
	var rm routing.Message
	// The default exchange is never bound, so headers never route from it.
	if exchangeName != "" && v.headersBoundLocked() {
		if p, err := amqp.DecodeProperties(props); err == nil {
			rm = routingMessage(&p)
		}
	}
	names = v.routes.RouteMessage(exchangeName, key, cc, &rm, names[:0])
	for _, n := range names {
		if q, ok := v.queues[n]; ok {
			dst = append(dst, q)
		}
	}
	return names, dst, nil
}

// Queues returns the vhost's queues.
func (v *VHost) Queues() []*Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	qs := make([]*Queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	return qs
}

// ExchangeExists reports whether the named exchange exists ("" always does).
func (v *VHost) ExchangeExists(name string) bool {
	if name == "" {
		return true
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, ok := v.exchanges[name]
	return ok
}

// headersBoundLocked reports whether a headers exchange has bindings, that
// is whether a message's headers can affect where it goes.
func (v *VHost) headersBoundLocked() bool {
	for name := range v.headersX {
		if v.routes.SourceBindings(name) > 0 {
			return true
		}
	}
	return false
}

// GenerateName returns prefix followed by 22 random URL-safe characters,
// the shape of RabbitMQ's server-generated names (amq.gen-…, amq.ctag-…).
func GenerateName(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.TrimRight(base64.RawURLEncoding.EncodeToString(b[:]), "=")
}
