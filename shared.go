package broker

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/internal/follow"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// Shared mode: Options.Storage.Meta implements meta.ChangeFeed, so other brokers
// (a cluster's other nodes) write the same stores, and every one of them
// serves the durable queues. What this broker does about it:
//
//   - New watches the feed before it reads anything, and one goroutine
//     (internal/follow's; started by New, stopped by Close) applies the
//     changes in order:
//     a topology change of a vhost makes the vhost Sync with the store
//     (vhost.VHost.Sync: exchanges, durable non-exclusive queues and the
//     bindings between what is here follow the store; a queue another
//     broker deleted is stopped here and its consumers get basic.cancel);
//     a change of the vhost list opens the vhosts created elsewhere and
//     closes the ones deleted elsewhere (their connections here are
//     closed with 320, as DeleteVHost does); appends, cursor moves,
//     requeues and claims go to the queue's actor (queue.Queue.Observe);
//     a reset (the replica was replaced) syncs every vhost and passes the
//     reset to every queue. A Sync reads the vhost's whole topology, so
//     changes are taken in batches and a vhost is synced once per batch:
//     under a burst of declarations the follower syncs as often as it can,
//     not once per change. A Sync that fails (a store error) is retried a
//     second later.
//   - Durable queues run with queue.Config.Shared: they claim through
//     unacked.Claimer and keep transient messages at start (another
//     broker may be delivering them).
//   - At start nothing is deleted as "left by an earlier run": non-durable
//     exchanges, non-durable and exclusive queues and bindings with an
//     end missing here may belong to a live broker (vhost.Config.Shared).
//     Non-durable and exclusive queues stay on the broker that declared
//     them, with their messages in its memory; the others do not see them.
//   - The unacked scanner runs on every broker: each enforces the consumer
//     timeout on its own deliveries and returns its own whose connection or
//     run is gone; only the meta leader returns another broker's, and only
//     once the peers attached by package cluster (internal/peer) report
//     that broker dead.

// watchChanges subscribes to the feed of a shared store; New calls it
// before it reads the store.
func (b *Broker) watchChanges() {
	if feed, ok := b.opts.Storage.Meta.(meta.ChangeFeed); ok {
		b.follow = follow.Watch(feed)
	}
}

// startFollowing starts the follower goroutine; New calls it once nothing
// can fail any more.
func (b *Broker) startFollowing() {
	if b.follow != nil {
		b.follow.Start(followTarget{b})
	}
}

// stopFollowing stops watching and waits for the follower to exit. Safe
// when not shared or not started.
func (b *Broker) stopFollowing() { b.follow.Stop() }

// followTarget is the broker as the follower changes it.
type followTarget struct{ b *Broker }

func (t followTarget) SyncVHosts(ctx context.Context) bool { return t.b.syncVHosts(ctx) }
func (t followTarget) SyncVHost(ctx context.Context, name string) bool {
	return t.b.syncVHost(ctx, name)
}
func (t followTarget) ReloadPolicies(ctx context.Context, vhost string) bool {
	return t.b.policies.Reload(ctx, vhost)
}
func (t followTarget) Parameter(component, vhost, name string) {
	t.b.params.Notify(component, vhost, name)
}

func (t followTarget) VHosts() []string {
	vs := t.b.vhosts.List()
	names := make([]string, len(vs))
	for i, vh := range vs {
		names[i] = vh.Name()
	}
	return names
}

// Observe hands c to the actor of the shared queue vh/name, if it runs
// here; name "" (a reset) to every queue of vh.
func (t followTarget) Observe(vh, name string, c meta.Change) {
	v, ok := t.b.lookupVHost(vh)
	if !ok {
		return
	}
	if name == "" {
		for _, q := range v.Queues() {
			q.Observe(c)
		}
		return
	}
	if q, ok := v.LookupQueue(name); ok && q.Def.Durable {
		q.Observe(c)
	}
}

// syncVHost syncs one vhost with the store; false means it failed.
func (b *Broker) syncVHost(ctx context.Context, name string) bool {
	vh, ok := b.lookupVHost(name)
	if !ok {
		return true
	}
	if err := vh.Sync(ctx); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhost topology", "vhost", name, "err", err)
		}
		return false
	}
	return true
}

// syncVHosts opens the vhosts another broker created and drops the ones
// another broker deleted; false means something failed.
func (b *Broker) syncVHosts(ctx context.Context) bool {
	stored, err := b.stores.Meta.ListVHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhosts", "err", err)
		}
		return false
	}
	gone, ok := b.vhosts.Sync(ctx, stored)
	for _, vh := range gone {
		b.dropVHost(ctx, vh)
	}
	// Another broker may have changed a vhost's metadata or limits.
	if err := b.plane.RefreshVHosts(ctx, stored); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhost limits", "err", err)
		}
		return false
	}
	return ok
}

// dropVHost closes a vhost another broker deleted (with everything of it
// in the store): its connections here are closed with 320, as DeleteVHost
// does, the queues that lived here only are deleted with their messages,
// and the shared ones are stopped.
func (b *Broker) dropVHost(ctx context.Context, vh *vhost.VHost) {
	name := vh.Name()
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return canonicalVHost(in.VHost) == name },
		fmt.Sprintf("vhost '%s' is deleted", name))
	for _, q := range vh.Queues() {
		if q.Def.Durable {
			continue // the deleting broker deleted its messages
		}
		if _, err := vh.DeleteQueue(ctx, q.Def.Owner, q.Def.Name, false, false); err != nil {
			b.log.Warn("broker: deleting a queue of a deleted vhost", "vhost", name, "queue", q.Def.Name, "err", err)
		}
	}
	vh.Close()
	b.acct.access.Revoke(name)
	b.log.Info("broker: vhost deleted by another broker", "vhost", name)
}
