package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/dedup"
	"github.com/warrenmq/broker/internal/delayed"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/snapshot"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
)

// pluginState is what the built-in plugin exchanges keep broker-wide (see
// docs/exchange-types.md): the delayed-message service, with its timer
// goroutine, which the broker starts once its vhosts are open and stops
// once its connections are closed.
type pluginState struct {
	delayed *delayed.Service
}

// openPlugins creates the delayed-message service: held messages of
// durable exchanges in the broker's Pebble database when it has one (they
// survive restarts), in memory otherwise, as are those of other exchanges.
//
// In shared mode (a cluster) held messages of durable exchanges are in the
// shared store's records instead (delayed.Replicated): replicated before
// the publish is confirmed, and routed once, by the meta leader.
func (b *Broker) openPlugins() error {
	// The deduplication caches in memory may hold half the memory
	// watermark together, so that they alone never raise the alarm.
	b.held.Dedup = dedup.NewBudget(memoryWatermark(b.opts.MemoryHighWatermark)/2, b.log)
	if r, ok := b.opts.peers.Replies.(storage.MemoryReporter); ok {
		b.held.Forwarder = r
	}
	durable := delayed.Store(delayed.NewMemory(&b.held.Delayed))
	if rs, ok := b.stores.Meta.(meta.Records); ok && b.shared() {
		r, err := delayed.OpenReplicated(context.Background(), rs, delayed.Cluster{
			Node: b.nodeID, Leader: b.stores.Meta.IsLeader, Alive: b.opts.peers.Alive, Clock: b.clock(),
		})
		if err != nil {
			return fmt.Errorf("broker: delayed messages: %w", err)
		}
		durable = r
	} else if b.stores.DB != nil {
		p, err := delayed.OpenPebble(b.stores.DB)
		if err != nil {
			return fmt.Errorf("broker: delayed messages: %w", err)
		}
		durable = p
	}
	b.plugins.delayed = delayed.NewService(b.clock(), durable, delayed.NewMemory(&b.held.Delayed), b.routeDelayed, b.log)
	b.plugins.delayed.CountHolds(&b.held.Delayed)
	return nil
}

func (b *Broker) startPlugins() { b.plugins.delayed.Start() }

func (b *Broker) stopPlugins() {
	if b.plugins.delayed != nil {
		b.plugins.delayed.Close()
	}
}

// routeDelayed routes due messages in their vhosts and calls done once
// every vhost's queues answered. A vhost that is gone takes its messages
// with it.
func (b *Broker) routeDelayed(ctx context.Context, msgs []delayed.Message, done func(error)) {
	var groups [][]delayed.Message
	var vhs []*vhost.VHost
	for len(msgs) > 0 {
		n := 1
		for n < len(msgs) && msgs[n].VHost == msgs[0].VHost {
			n++
		}
		if vh, ok := b.lookupVHost(msgs[0].VHost); ok {
			groups, vhs = append(groups, msgs[:n]), append(vhs, vh)
		}
		msgs = msgs[n:]
	}
	if len(groups) == 0 {
		done(nil)
		return
	}
	var mu sync.Mutex
	left := len(groups)
	var first error
	for i, g := range groups {
		vhs[i].RouteDelayed(ctx, g, func(err error) {
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			left--
			last, e := left == 0, first
			mu.Unlock()
			if last {
				done(e)
			}
		})
	}
}

// openDedup opens an x-message-deduplication exchange's cache: in the
// broker's Pebble database for a durable exchange (it survives restarts),
// in the shared store's records in shared mode (one cache for the whole
// cluster, replicated), in memory otherwise.
func (b *Broker) openDedup(vh, exchange string, durable bool, size int64, ttl time.Duration) (*dedup.Cache, error) {
	if rs, ok := b.stores.Meta.(meta.Records); ok && durable && b.shared() {
		// Shared by every broker of the cluster, replicated.
		return dedup.OpenReplicated(rs, vh+"\x00"+exchange, b.clock(), size, ttl), nil
	}
	if durable && b.stores.DB != nil {
		return dedup.OpenPebble(b.stores.DB, vh+"\x00"+exchange, b.clock(), size, ttl)
	}
	return b.held.Dedup.NewCache(fmt.Sprintf("exchange '%s' in vhost '%s'", exchange, vh), b.clock(), size, ttl), nil
}

// clock is Options.Clock, or the real clock when it is nil (the queues
// default to it the same way).
func (b *Broker) clock() clock.Clock {
	if b.opts.Clock == nil {
		return clock.Real
	}
	return b.opts.Clock
}

var _ vhost.DedupOpener = (*Broker)(nil).openDedup

// DelayedMessage is a message an x-delayed-message exchange holds, as
// PeekDelayed shows it.
type DelayedMessage struct {
	Exchange, RoutingKey string
	// Due is when it will be routed, by Options.Clock; Delay is the
	// x-delay it was published with.
	Due   time.Time
	Delay time.Duration
	// Publishing holds the properties and body as published.
	Publishing amqp091.Publishing
}

// DelayedCount returns how many messages an x-delayed-message exchange
// holds (0 for any other exchange). vhost "" is the default vhost.
func (b *Broker) DelayedCount(vhostName, exchange string) (int64, error) {
	vh, ok := b.lookupVHost(vhostName)
	if !ok {
		return 0, fmt.Errorf("%w: vhost %q", ErrNotFound, vhostName)
	}
	return vh.DelayedCount(exchange), nil
}

// PeekDelayed returns up to n of the messages an x-delayed-message
// exchange holds, earliest due first, without routing them.
func (b *Broker) PeekDelayed(ctx context.Context, vhostName, exchange string, n int) ([]DelayedMessage, error) {
	vh, ok := b.lookupVHost(vhostName)
	if !ok {
		return nil, fmt.Errorf("%w: vhost %q", ErrNotFound, vhostName)
	}
	msgs, err := snapshot.PeekDelayed(ctx, vh, exchange, n)
	if err != nil {
		return nil, err
	}
	out := make([]DelayedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = DelayedMessage(m)
	}
	return out, nil
}

// dedupQueue gives a queue declared with x-message-deduplication: true
// (rabbitmq-message-deduplication's queue argument) a shard store that
// knows its messages' deduplication keys, and the Admit hook that refuses
// a message whose key is in the queue. In shared mode other brokers
// append to the queue too: the keys are then records of the shared store
// (dedup.SharedQueueStore).
func (b *Broker) dedupQueue(ctx context.Context, def meta.Queue, shared bool, st *queue.Stores, f *queue.Features) error {
	if len(def.Arguments) == 0 {
		return nil
	}
	args, _, err := amqp.DecodeTable(def.Arguments)
	if err != nil || args["x-message-deduplication"] != true {
		return nil
	}
	if shared {
		rs, ok := b.stores.Meta.(meta.Records)
		if !ok {
			return nil // a shared store without records: not enforced
		}
		keys, store := dedup.NewSharedQueueStore(st.Shards, rs, shardName(def.VHost, def.Name), b.clock(), &b.held.DedupKeys)
		st.Shards = store
		f.Admit = keys.Admit
		return nil
	}
	keys, store := dedup.NewQueueStore(st.Shards, &b.held.DedupKeys)
	if err := keys.Load(ctx, shardName(def.VHost, def.Name)); err != nil {
		return fmt.Errorf("broker: queue %q: deduplication keys: %w", def.Name, err)
	}
	st.Shards = store
	f.Admit = keys.Admit
	return nil
}
