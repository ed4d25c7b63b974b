package vhost

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/delayed"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/routing"
	"github.com/warrenmq/broker/storage"
)

// The exchange types RabbitMQ adds through plugins, built in here (see
// docs/exchange-types.md): x-consistent-hash and x-modulus-hash are
// routing kinds; x-delayed-message routes by its x-delayed-type once a
// message's x-delay has passed (Config.Delayed holds it meanwhile); and
// x-message-deduplication is a fanout exchange that drops a message whose
// x-deduplication-header it has seen (dedup.go).

// knownType reports whether typ is an exchange type the vhost serves; any
// other is 503 COMMAND_INVALID before anything else is looked at.
func knownType(typ string) bool {
	if typ == routing.TypeDelayed || typ == routing.TypeDeduplication || typ == routing.TypeFederationUpstream {
		return true
	}
	_, err := routing.ParseKind(typ)
	return err == nil
}

// exchangeRouting validates a new exchange's arguments for its type and
// returns what the routing table needs: the kind it routes by and, for a
// consistent-hash exchange, what it hashes. A bad argument is 406, with
// RabbitMQ's text.
func exchangeRouting(typ string, args amqp.Table) (routing.Kind, routing.HashOn, error) {
	kind, err := routing.ResolveType(typ, args)
	if err != nil {
		return 0, routing.HashOn{}, amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s", strings.TrimPrefix(err.Error(), "routing: invalid exchange argument: "))
	}
	var on routing.HashOn
	if kind == routing.ConsistentHash {
		if on, err = routing.ParseHashArgs(args); err != nil {
			return 0, routing.HashOn{}, amqp.NewError(amqp.PreconditionFailed, 0, 0, "%s", strings.TrimPrefix(err.Error(), "routing: invalid exchange argument: "))
		}
	}
	if typ == routing.TypeDeduplication {
		if _, err := parseDedupArgs(args); err != nil {
			return 0, routing.HashOn{}, err
		}
	}
	return kind, on, nil
}

// readsProperties reports whether routing through an exchange of this
// kind reads the message's properties (headers exchanges, and
// consistent-hash exchanges that hash a header or property).
func readsProperties(kind routing.Kind, on routing.HashOn) bool {
	return kind == routing.Headers || on != routing.HashOn{}
}

// PluginExchange reports whether a publish to exchange needs Intercept:
// a delayed or deduplicating exchange. It costs one atomic load while the
// vhost has none.
func (v *VHost) PluginExchange(exchange string) bool {
	if v.plugins.Load() == 0 {
		return false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[exchange]
	return ok && (x.delayed || x.dedup != nil)
}

// Verdict is what Intercept decided about a publish.
type Verdict int

const (
	// Route: route the message now, as any other.
	Route Verdict = iota
	// Held: the message is held by the delayed exchange; the publisher
	// is answered when the hold's done runs. It is never returned
	// (mandatory cannot be honoured for a message routed later, as the
	// plugin documents).
	Held
	// Duplicate: the deduplicating exchange has seen the message's key;
	// it is dropped, routed nowhere (and returned when mandatory), and
	// confirmed.
	Duplicate
)

// Intercept applies a plugin exchange's behaviour to a publish. For a
// delayed exchange and an x-delay in (0, MaxDelay] it returns Held and the
// Hold that, when started, hands the message to the delayed service; props
// are the message's properties after SenderSelected, cc its extra keys.
// For a deduplicating exchange it checks and records the key: Duplicate
// or Route. Anything else is Route.
func (v *VHost) Intercept(exchange, key string, cc []string, props, body []byte, persistent bool) (Verdict, *Hold) {
	v.mu.RLock()
	x, ok := v.exchanges[exchange]
	v.mu.RUnlock()
	if !ok || x.def.Internal {
		return Route, nil // RouteCC answers 404 or 403
	}
	switch {
	case x.delayed && v.cfg.Delayed != nil:
		p, err := amqp.DecodeProperties(props)
		if err != nil {
			return Route, nil
		}
		ms, ok := delayed.ParseDelay(p.Headers)
		if !ok {
			return Route, nil
		}
		return Held, &Hold{svc: v.cfg.Delayed, durable: x.def.Durable, msg: delayed.Message{
			VHost: v.cfg.Name, Exchange: exchange, RoutingKey: key, CC: cc,
			Properties: props, Body: body, Persistent: persistent, Delay: ms,
		}}
	case x.dedup != nil:
		return v.deduplicate(x, props), nil
	}
	return Route, nil
}

// Hold is a delayed message not yet handed to the delayed service (a
// transaction starts it at commit).
type Hold struct {
	svc     *delayed.Service
	durable bool
	msg     delayed.Message
}

// Start hands the message over; done is called, on another goroutine,
// once it is stored (synced when it is persistent and its exchange
// durable) or could not be. Its due time counts from now.
func (h *Hold) Start(done func(error)) {
	h.svc.Hold(h.msg, h.durable, h.durable && h.msg.Persistent, done)
}

// holdDeadLetterOf is the queues' queue.DeadLetterHolder: a dead-lettered
// copy sent to an x-delayed-message exchange with an x-delay in (0,
// MaxDelay] is held like a publish (the plugin's exchange type delays
// whatever it routes; RabbitMQ dead-letters through the exchange type's
// route callback, rabbitmq-delayed-message-exchange 4.0), its CC keys kept.
// A copy of a message a delayed exchange routed before carries the negated
// delay, so it is routed at once, as the plugin does. Anything else: nil,
// route now.
func (v *VHost) holdDeadLetterOf(rec storage.Record) func(queue.Confirmer) {
	if v.plugins.Load() == 0 || v.cfg.Delayed == nil {
		return nil
	}
	v.mu.RLock()
	x, ok := v.exchanges[rec.Exchange]
	v.mu.RUnlock()
	if !ok || !x.delayed {
		return nil
	}
	p, err := amqp.DecodeProperties(rec.Properties)
	if err != nil {
		return nil
	}
	ms, ok := delayed.ParseDelay(p.Headers)
	if !ok {
		return nil
	}
	cc, props, err := SenderSelected(rec.Properties)
	if err != nil {
		cc, props = nil, rec.Properties // a CC header that is not an array adds no key
	}
	h := &Hold{svc: v.cfg.Delayed, durable: x.def.Durable, msg: delayed.Message{
		VHost: v.cfg.Name, Exchange: rec.Exchange, RoutingKey: rec.RoutingKey, CC: cc,
		Properties: props, Body: rec.Body, Persistent: rec.Persistent, Delay: ms,
	}}
	return func(c queue.Confirmer) {
		h.Start(func(err error) { c.Confirm([]uint64{1}, err) })
	}
}

// DelayedCount returns how many messages a delayed exchange holds (0 for
// any other exchange).
func (v *VHost) DelayedCount(exchange string) int64 {
	if v.cfg.Delayed == nil {
		return 0
	}
	return v.cfg.Delayed.Count(v.cfg.Name, exchange)
}

// DelayedPeek returns up to max of a delayed exchange's held messages,
// earliest due first.
func (v *VHost) DelayedPeek(ctx context.Context, exchange string, max int) ([]delayed.Message, error) {
	if v.cfg.Delayed == nil {
		return nil, nil
	}
	return v.cfg.Delayed.Peek(ctx, v.cfg.Name, exchange, max)
}

// dropDelayedLocked forgets the held messages of a deleted exchange.
func (v *VHost) dropDelayedLocked(ctx context.Context, x *exchange) {
	if !x.delayed || v.cfg.Delayed == nil {
		return
	}
	if _, err := v.cfg.Delayed.DropExchange(ctx, v.cfg.Name, x.def.Name); err != nil {
		v.cfg.Logger.Error("drop delayed messages of a deleted exchange", "vhost", v.cfg.Name, "exchange", x.def.Name, "err", err)
	}
}

// RouteDelayed routes due messages of this vhost's delayed exchanges
// through the bindings they have now, with x-delay set to the negated
// delay as the plugin does, and calls done once every queue reached has
// stored its copy or refused it (on a queue's goroutine, or on this one
// when nothing was routed). A message whose exchange is gone (or is no
// longer a delayed exchange) is dropped. An error means a queue's store
// failed: the caller keeps the messages and routes them again later,
// which may duplicate them in the queues that did store them.
func (v *VHost) RouteDelayed(ctx context.Context, msgs []delayed.Message, done func(error)) {
	w := &delayWait{done: done}
	var names []string
	var qs []*Queue
	type target struct {
		q   *Queue
		rec queue.Record
		ttl queue.TTL
	}
	var targets []target
	for i := range msgs {
		m := &msgs[i]
		v.mu.RLock()
		x, ok := v.exchanges[m.Exchange]
		if !ok || !x.delayed {
			v.mu.RUnlock()
			continue
		}
		props := delayed.SwapDelayHeader(m.Properties, m.Delay)
		rm := routing.Message{}
		if p, err := amqp.DecodeProperties(props); err == nil {
			rm = routingMessage(&p)
		}
		names = v.routes.RouteMessage(m.Exchange, m.RoutingKey, m.CC, &rm, names[:0])
		qs = qs[:0]
		for _, n := range names {
			if q, ok := v.queues[n]; ok {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
		sum, _ := amqp.SummarizeProperties(props)
		rec := queue.Record{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Properties: props, Body: m.Body,
			Persistent: m.Persistent, Priority: sum.Priority, ClientHeaders: sum.HasHeaders}
		var ttl queue.TTL
		if sum.Expiration != "" {
			ttl.D, ttl.Set, _ = queue.ParseExpiration(sum.Expiration)
		}
		for _, q := range qs {
			targets = append(targets, target{q: q, rec: rec, ttl: ttl})
		}
	}
	w.left = len(targets)
	if w.left == 0 {
		done(nil)
		return
	}
	for _, t := range targets {
		if err := t.q.Publish(t.rec, t.ttl, w, 0); err != nil {
			w.Confirm([]uint64{0}, nil) // deleted meanwhile: gone with it
		}
	}
}

// routingMessage is what routing reads of decoded properties.
func routingMessage(p *amqp.Properties) routing.Message {
	m := routing.Message{Headers: p.Headers, MessageID: p.MessageID, CorrelationID: p.CorrelationID}
	if !p.Timestamp.IsZero() {
		m.Timestamp, m.HasTimestamp = p.Timestamp.Unix(), true
	}
	return m
}

// delayWait counts the stores RouteDelayed waits for and keeps the first
// store failure; a queue that refused the message (full, deleted) is not
// one: the message is dropped there, as a publish would be.
type delayWait struct {
	mu   sync.Mutex
	left int
	done func(error)
	err  error
}

func (w *delayWait) Confirm(seqs []uint64, err error) {
	w.mu.Lock()
	if err != nil && w.err == nil && !errors.Is(err, queue.ErrRejected) && !errors.Is(err, queue.ErrDeleted) {
		w.err = err
	}
	w.left -= len(seqs)
	last := w.left == 0
	w.mu.Unlock()
	if last {
		w.done(w.err)
	}
}

// setExchangeLocked puts x in the exchange map under name (nil removes
// it), keeping the plugin count and the property-reading set in step. An
// exchange leaving the map releases the memory its deduplication cache
// holds (deleteExchangeLocked drops the cache from its store too). The
// caller holds mu for writing.
func (v *VHost) setExchangeLocked(name string, x *exchange) {
	if old, ok := v.exchanges[name]; ok && (old.delayed || old.dedup != nil) {
		v.plugins.Add(-1)
		if old.dedup != nil && (x == nil || x.dedup != old.dedup) {
			old.dedup.Release()
		}
	}
	delete(v.headersX, name)
	if x == nil {
		delete(v.exchanges, name)
		return
	}
	v.exchanges[name] = x
	if x.delayed || x.dedup != nil {
		v.plugins.Add(1)
	}
}

// exchangeGoneLocked drops what a deleted exchange held: its delayed
// messages, its deduplication cache.
func (v *VHost) exchangeGoneLocked(ctx context.Context, x *exchange) {
	v.dropDelayedLocked(ctx, x)
	if x.dedup != nil {
		if err := x.dedup.Drop(); err != nil {
			v.cfg.Logger.Error("drop deduplication cache", "vhost", v.cfg.Name, "exchange", x.def.Name, "err", err)
		}
	}
}
