package vhost

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// This file is shared mode (Config.Shared): several brokers write the
// same store, each runs the actors of the shared queues on its own, and
// Sync brings one vhost in line with what the others declared and deleted.

// sharedQueue reports whether a queue is served by every broker sharing
// the store: durable and not exclusive. The others live on the broker
// that declared them, with their messages in its memory.
func sharedQueue(q meta.Queue) bool { return q.Durable && !q.Exclusive }

// Sync brings the vhost in line with its store, which other brokers write
// too (Config.Shared; without it Sync does nothing). Exchanges follow the
// store, every one of them: as in a RabbitMQ cluster they are cluster-wide
// whatever their durability. Durable, non-exclusive queues declared
// elsewhere get their actors started here; queues of that kind gone from
// the store (deleted by another broker) are stopped without touching the
// stores, and their consumers here are cancelled as a deletion cancels
// them (basic.cancel to clients that asked for consumer_cancel_notify).
// Bindings are added when both their ends are here and removed when they
// are gone from the store. Queues that live here only (non-durable or
// exclusive) are left alone, and the other brokers' ones are skipped.
//
// Sync changes nothing in the store except the stale bindings of this
// broker's own queues to an exchange another broker deleted. It holds the
// topology lock, so it runs between two declarations, never in the middle
// of one, and is idempotent: the caller may run it for any change, late or
// twice.
func (v *VHost) Sync(ctx context.Context) error {
	if !v.cfg.Shared {
		return nil
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	return v.syncLocked(ctx)
}

func (v *VHost) syncLocked(ctx context.Context) error {
	st := v.cfg.Store
	exchanges, err := st.ListExchanges(ctx, v.cfg.Name)
	if err != nil {
		return fmt.Errorf("vhost: list exchanges: %w", err)
	}
	queues, err := st.ListQueues(ctx, v.cfg.Name)
	if err != nil {
		return fmt.Errorf("vhost: list queues: %w", err)
	}
	bindings, err := st.ListBindings(ctx, v.cfg.Name)
	if err != nil {
		return fmt.Errorf("vhost: list bindings: %w", err)
	}
	var errs []error
	errs = append(errs, v.syncExchangesLocked(ctx, exchanges))
	errs = append(errs, v.syncQueuesLocked(ctx, queues)...)
	v.syncBindingsLocked(bindings)
	return errors.Join(errs...)
}

func (v *VHost) syncExchangesLocked(ctx context.Context, stored []meta.Exchange) error {
	var stale []routing.Binding
	names := make(map[string]bool, len(stored))
	for _, e := range stored {
		names[e.Name] = true
		if x, ok := v.exchanges[e.Name]; ok {
			if sameExchange(x.def, e) {
				continue
			}
			// Deleted and declared again elsewhere, differently: its
			// bindings come back from the store below.
			stale = append(stale, v.dropExchangeLocked(e.Name)...)
		}
		args, _, err := decodeArgs(e.Arguments)
		if err == nil {
			err = v.addExchangeLocked(e, args)
		}
		if err != nil {
			v.cfg.Logger.Warn("vhost: stored exchange refused", "vhost", v.cfg.Name, "exchange", e.Name, "err", err)
		}
	}
	for name := range v.exchanges {
		// The predeclared amq.* exchanges are not stored; every broker has
		// its own.
		if !names[name] && !routing.IsReserved(name) {
			stale = append(stale, v.dropExchangeLocked(name)...)
		}
	}
	// The deleting broker removed the bindings it knew of; those to queues
	// that live here only are this broker's to remove.
	var errs []error
	for _, b := range stale {
		if b.Destination.Exchange {
			continue
		}
		if q, ok := v.queues[b.Destination.Name]; ok && !sharedQueue(q.Def) {
			mb := v.metaBinding(b)
			if err := v.cfg.Store.DeleteBinding(ctx, mb); err != nil {
				errs = append(errs, fmt.Errorf("vhost: delete stale binding: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// dropExchangeLocked forgets an exchange and its bindings here, without
// touching the store, and returns the bindings.
func (v *VHost) dropExchangeLocked(name string) []routing.Binding {
	v.mu.Lock()
	defer v.mu.Unlock()
	removed, _ := v.routes.DeleteExchange(name)
	v.setExchangeLocked(name, nil)
	for _, b := range removed {
		v.told(b, false)
	}
	return removed
}

func sameExchange(a, b meta.Exchange) bool {
	return a.Type == b.Type && a.Durable == b.Durable && a.AutoDelete == b.AutoDelete &&
		a.Internal == b.Internal && string(a.Arguments) == string(b.Arguments)
}

func sameQueue(a, b meta.Queue) bool {
	return a.Durable == b.Durable && a.Exclusive == b.Exclusive && a.AutoDelete == b.AutoDelete &&
		a.Owner == b.Owner && string(a.Arguments) == string(b.Arguments)
}

func (v *VHost) syncQueuesLocked(ctx context.Context, stored []meta.Queue) []error {
	var errs []error
	names := make(map[string]meta.Queue, len(stored))
	for _, def := range stored {
		names[def.Name] = def
		if !sharedQueue(def) {
			continue // it lives on the broker that declared it
		}
		if q, ok := v.queues[def.Name]; ok {
			if !sharedQueue(q.Def) || sameQueue(q.Def, def) {
				continue // ours only, or already running
			}
			// Deleted and declared again elsewhere with other arguments.
			v.detachLocked(q)
		}
		if _, err := v.startStoredLocked(ctx, def); err != nil {
			errs = append(errs, err)
		}
	}
	var gone []*Queue
	for name, q := range v.queues {
		if !sharedQueue(q.Def) {
			continue
		}
		if def, ok := names[name]; !ok || !sharedQueue(def) {
			gone = append(gone, q)
		}
	}
	for _, q := range gone {
		v.detachLocked(q)
	}
	return errs
}

// detachLocked takes a shared queue that another broker deleted out of the
// topology, stops its actor without touching the stores (the deleter
// removed its messages, entries and cursor, and a queue declared again
// under the name may already use them), and cancels its consumers here.
func (v *VHost) detachLocked(q *Queue) {
	v.mu.Lock()
	if v.queues[q.Def.Name] == q {
		delete(v.queues, q.Def.Name)
		v.queues = shrink.Map(v.queues, &v.queuesPeak)
		for _, b := range v.routes.RemoveQueue(q.Def.Name) {
			v.told(b, false)
		}
	}
	v.mu.Unlock()
	q.Stop()
	if q.tracked != nil {
		// The actor is stopped: nothing else calls the receivers now.
		for _, c := range q.tracked.take() {
			c.Receiver.Cancelled(c)
		}
	}
}

// syncBindingsLocked adds the stored bindings whose ends are both here and
// removes the ones gone from the store. Every binding made here is in the
// store (bindAction writes it under topo), so a binding here and not in
// the store was removed by another broker.
func (v *VHost) syncBindingsLocked(stored []meta.Binding) {
	keys := make(map[string]bool, len(stored))
	for _, b := range stored {
		rb, err := v.routingBinding(b)
		if err != nil {
			continue
		}
		keys[bindingKey(v.metaBinding(rb))] = true
		if !v.endsHereLocked(rb) {
			continue // a binding of a queue that lives on another broker
		}
		v.mu.Lock()
		added, err := v.routes.Bind(rb)
		v.mu.Unlock()
		if err != nil {
			v.cfg.Logger.Warn("vhost: stored binding refused", "vhost", v.cfg.Name, "source", b.Source, "destination", b.Destination, "err", err)
		} else if added {
			v.told(rb, true)
		}
	}
	for _, rb := range v.routes.Bindings() {
		if keys[bindingKey(v.metaBinding(rb))] {
			continue
		}
		v.mu.Lock()
		removed, _ := v.routes.Unbind(rb)
		v.mu.Unlock()
		if removed {
			v.told(rb, false)
		}
	}
}

func (v *VHost) endsHereLocked(b routing.Binding) bool {
	if _, ok := v.exchanges[b.Source]; !ok {
		return false
	}
	if b.Destination.Exchange {
		_, ok := v.exchanges[b.Destination.Name]
		return ok
	}
	_, ok := v.queues[b.Destination.Name]
	return ok
}

// bindingKey is a binding's identity in the store: every field but
// Durable, arguments in their canonical encoding.
func bindingKey(b meta.Binding) string {
	return fmt.Sprintf("%q %q %q %q %q", b.Source, b.Destination, b.DestinationKind, b.RoutingKey, b.Arguments)
}

// adoptLocked starts the shared queue name if the store has it and Sync
// has not caught up with it yet; it returns nil when there is none.
func (v *VHost) adoptLocked(ctx context.Context, name string) (*Queue, error) {
	def, err := v.cfg.Store.GetQueue(ctx, v.cfg.Name, name)
	if errors.Is(err, meta.ErrNotFound) || err == nil && !sharedQueue(def) {
		return nil, nil
	}
	if err != nil {
		return nil, storeError(err)
	}
	q, err := v.startStoredLocked(ctx, def)
	if err != nil {
		return nil, amqp.NewError(amqp.InternalError, 0, 0, "start queue '%s': %v", name, err)
	}
	return q, nil
}

// adoptMissing answers a lookup that found nothing here (err): the queue
// may be a shared one another broker declared a moment ago, before Sync
// caught up with it.
func (v *VHost) adoptMissing(ctx context.Context, connection, name string, err error) (*Queue, error) {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return nil, err
	}
	v.topo.Lock()
	defer v.topo.Unlock()
	if q, lerr := v.lookup(connection, name); lerr == nil || !errors.As(lerr, &ae) || ae.Code != amqp.NotFound {
		return q, lerr // a Sync or a declaration got there first
	}
	q, aerr := v.adoptLocked(ctx, name)
	if aerr != nil {
		return nil, aerr
	}
	if q == nil {
		return nil, err
	}
	return q, nil
}

// adoptExchange answers a passive exchange.declare that found nothing
// here, as adoptMissing does for queues.
func (v *VHost) adoptExchange(ctx context.Context, name string) error {
	v.topo.Lock()
	defer v.topo.Unlock()
	return v.adoptExchangeLocked(ctx, name)
}

// adoptEndsLocked adopts the ends of a binding about to be made that are
// not here yet but in the store; the binding then finds them (or reports
// them missing as usual).
func (v *VHost) adoptEndsLocked(ctx context.Context, b routing.Binding) {
	_ = v.adoptExchangeLocked(ctx, b.Source)
	if b.Destination.Exchange {
		_ = v.adoptExchangeLocked(ctx, b.Destination.Name)
	} else if _, ok := v.queues[b.Destination.Name]; !ok {
		_, _ = v.adoptLocked(ctx, b.Destination.Name)
	}
}

func (v *VHost) adoptExchangeLocked(ctx context.Context, name string) error {
	if _, ok := v.exchanges[name]; ok {
		return nil
	}
	def, err := v.cfg.Store.GetExchange(ctx, v.cfg.Name, name)
	if errors.Is(err, meta.ErrNotFound) {
		return notFound("exchange", name, v.cfg.Name)
	}
	if err != nil {
		return storeError(err)
	}
	args, _, err := decodeArgs(def.Arguments)
	if err == nil {
		err = v.addExchangeLocked(def, args)
	}
	if err != nil {
		return amqp.NewError(amqp.InternalError, 0, 0, "declare exchange '%s': %v", name, err)
	}
	return nil
}

// consumerSet is a shared queue's consumers on this broker, by owner and
// tag.
type consumerSet struct {
	mu sync.Mutex
	m  map[consumerKey]*queue.Consumer
}

type consumerKey struct {
	owner queue.Owner
	tag   string
}

func (s *consumerSet) add(c *queue.Consumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[consumerKey]*queue.Consumer)
	}
	s.m[consumerKey{c.Owner, c.Tag}] = c
}

// remove forgets the consumer of owner and tag; c, when not nil, must be
// the one remembered (a failed Consume must not forget a newer one).
func (s *consumerSet) remove(owner queue.Owner, tag string, c *queue.Consumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := consumerKey{owner, tag}
	if c == nil || s.m[k] == c {
		delete(s.m, k)
	}
}

func (s *consumerSet) take() []*queue.Consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*queue.Consumer, 0, len(s.m))
	for _, c := range s.m {
		out = append(out, c)
	}
	s.m = nil
	return out
}

// Consume registers c with the queue's actor (queue.Queue.Consume). A
// shared queue remembers c too, for Sync to cancel should another broker
// delete the queue.
func (q *Queue) Consume(ctx context.Context, c *queue.Consumer) error {
	if q.tracked == nil {
		return q.Queue.Consume(ctx, c)
	}
	// Remembered first: a Sync that stops the actor right after the
	// consume was taken must find it.
	q.tracked.add(c)
	err := q.Queue.Consume(ctx, c)
	if err != nil {
		q.tracked.remove(c.Owner, c.Tag, c)
	}
	return err
}

// Cancel cancels a consumer (queue.Queue.Cancel) and returns how many are
// left.
func (q *Queue) Cancel(ctx context.Context, owner queue.Owner, tag string) (int, error) {
	n, err := q.Queue.Cancel(ctx, owner, tag)
	if q.tracked != nil {
		q.tracked.remove(owner, tag, nil)
	}
	return n, err
}
