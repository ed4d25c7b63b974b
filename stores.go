package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/stores"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// shardName names a queue's shard: vhost and queue, NUL-separated (neither
// may contain NUL on the wire's short strings in practice, and the split is
// only for humans reading keys).
func shardName(vh, name string) string { return vh + "\x00" + name }

// startQueue starts the actor of a declared queue on the stores its
// durability calls for. In shared mode a durable queue is shared with the
// other brokers, and its transient messages are not dropped at start: a
// restart of this broker is not a restart of the queue.
func (b *Broker) startQueue(ctx context.Context, def meta.Queue, features queue.Features) (*queue.Queue, error) {
	st := b.stores.Transient
	if def.Durable {
		st = b.stores.Durable
	}
	shared := b.shared() && def.Durable
	if err := b.dedupQueue(ctx, def, shared, &st, &features); err != nil {
		return nil, err
	}
	return queue.Start(ctx, queue.Config{
		VHost:         def.VHost,
		Name:          def.Name,
		Shard:         shardName(def.VHost, def.Name),
		Stores:        st,
		Shared:        shared,
		DropTransient: def.Durable && !shared,
		OwnCursor:     !def.Durable,
		Broker:        b.nodeID,
		Incarnation:   b.incarnation,
		Clock:         b.opts.Clock,
		Features:      features,
		Logger:        b.log,
		Totals:        &b.counters.queues,
		Events:        b.events,
	})
}

// openVHosts loads the stored vhost limits, then opens every configured
// vhost and every stored one (internal/vhosts), each with its durable
// topology.
func (b *Broker) openVHosts(ctx context.Context) error {
	if err := b.limits.Load(ctx); err != nil {
		return err
	}
	return b.vhosts.OpenAll(ctx, b.opts.VHosts)
}

// checkStoredNames refuses the Options fields that name a vhost neither
// Options.VHosts nor the meta store has: a VHostMaxConnections entry
// would never apply, a policy could not be stored. stored lists the
// store's vhosts (nil: it holds none). New runs it with the static checks
// (Options.validate), so every bad field comes back in one error.
func (o *Options) checkStoredNames(stored []meta.VHost) error {
	known := make(map[string]bool, len(o.VHosts)+len(stored))
	for _, v := range o.VHosts {
		known[canonicalVHost(v)] = true
	}
	for _, v := range stored {
		known[canonicalVHost(v.Name)] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(o.Limits.VHostMaxConnections)) {
		if !known[name] {
			errs = append(errs, fmt.Errorf("broker: Options.Limits.VHostMaxConnections[%q]: no such vhost (add it to Options.VHosts)", name))
		}
	}
	for _, set := range []struct {
		ps    []Policy
		field string
	}{{o.Policies, "Policies"}, {o.OperatorPolicies, "OperatorPolicies"}} {
		for i, p := range set.ps {
			if vh := canonicalVHost(p.VHost); !known[vh] {
				errs = append(errs, fmt.Errorf("broker: Options.%s[%d] (%q): no such vhost %q (add it to Options.VHosts)", set.field, i, p.Name, vh))
			}
		}
	}
	return errors.Join(errs...)
}

// storeConfig is what internal/stores reads of o.
func (o *Options) storeConfig() *stores.Config {
	return &stores.Config{DataDir: o.DataDir, StoreMemory: o.Storage.Memory, Logger: o.Logger, Meta: o.Storage.Meta, Shards: o.Storage.Shards, Unacked: o.Storage.Unacked}
}

// checkStores runs, once the stores are open, the checks of Options
// against what the meta store holds (checkStoredNames), and logs each
// optional interface a store given in Options lacks (stores.LogLacks).
func (b *Broker) checkStores() error {
	vs, err := b.stores.Meta.ListVHosts(context.Background())
	if err != nil {
		return fmt.Errorf("broker: list vhosts: %w", err)
	}
	if err := b.opts.checkStoredNames(vs); err != nil {
		return err
	}
	stores.LogLacks(b.log, b.opts.storeConfig())
	return nil
}

// openVHost opens rec's vhost with rec's settings, its policies and its
// stored max-queues: internal/vhosts' Open.
func (b *Broker) openVHost(ctx context.Context, rec meta.VHost) (*vhost.VHost, error) {
	name := rec.Name
	policies, err := b.policies.Set(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("broker: open vhost %q: policies: %w", name, err)
	}
	vh, err := vhost.Open(ctx, vhost.Config{
		Policies:         policies,
		Name:             name,
		Store:            b.stores.Meta,
		StartQueue:       b.startQueue,
		MaxQueues:        b.opts.Limits.MaxQueuesPerVHost,
		MaxArgumentsSize: vhost.ArgumentsSizeFor(b.opts.FrameMax),
		Logger:           b.log,
		Shared:           b.shared(),
		Profile:          b.opts.profile(),
		Delayed:          b.plugins.delayed,
		Dedup:            b.openDedup,
		VolatileHolds:    b.stores.VolatileHolds(),
		ReplyTag:         b.replyTag(),
		Replies:          b.opts.peers.Replies,
		Bindings:         b.bindingEvents(name),
	})
	if err != nil {
		return nil, fmt.Errorf("broker: open vhost %q: %w", name, err)
	}
	vh.SetDefaultQueueType(rec.DefaultQueueType)
	b.plane.ApplyQueueLimit(vh)
	return vh, nil
}

// lookupVHost serves connection.open and every other lookup by name.
func (b *Broker) lookupVHost(name string) (*vhost.VHost, bool) {
	return b.vhosts.Lookup(name)
}

// shared reports whether the broker runs in shared mode (shared.go).
func (b *Broker) shared() bool { return b.stores.Shared }
